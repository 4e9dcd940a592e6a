# The two commands of the README:
#   make        builds the patched wheel of the newest pin, installs it, prints the stock-vs-patched report
#   make test   runs the whole test suite: on every pin the AOT tests on stock and on patched torch, the
#               upstream-form tests, and upstream's own test_aotdispatch.py on stock and on patched torch
#               (UPSTREAM_TESTS); the tools' tests (against TOOLS_PIN); every prefix of the staged upstream
#               stack (it applies with git am and its tests pass) on the newest pin
# PIN=VERSION (one of pins/*/) selects another pin: `make PIN=2.13.0`; `make test PIN=2.13.0` tests that pin only.
# Everything is created here: .venv-stock-VERSION (the pin's stock torch) and .venv-VERSION (the custom wheel).

PYTHON ?= python3
PINS := $(shell ls pins | sort -V)
NEWEST := $(lastword $(PINS))
PIN ?= $(NEWEST)
# `make test` tests every pin unless PIN was given.
TEST_PINS := $(if $(filter command line environment,$(origin PIN)),$(PIN),$(PINS))
TOOLS_PIN := $(shell sed -n 's/^TOOLS_PIN = "\(.*\)"/\1/p' test/tools/viewreplay_testlib.py)
ifeq ($(filter $(PIN),$(PINS)),)
$(error PIN=$(PIN) is not one of the pins: $(PINS))
endif

STOCK := .venv-stock-$(PIN)
PATCHED := .venv-$(PIN)
DIST := dist/$(PIN)
TORCH_REQUIREMENT := $(shell sed -n 's/^wheel_requirement = "\(.*\)"/\1/p' pins/$(PIN)/pin.toml)
TEST_DEPS := pytest pytest-xdist expecttest numpy wheel hypothesis
# The AOT tests compile on every core (pytest-xdist; each worker process has its own caches).
JOBS := $(shell nproc)
XDIST := -n $(JOBS)
# A transcription of upstream's test/functorch/test_aotdispatch.py (outside the repository; test-upstream
# says so and skips where it is missing). Its classes TestAOTAutograd and TestAOTAutogradWithCache run (about
# 1 to 2 minutes per interpreter on 2 cores): the latter reruns every TestAOTAutograd test through dynamo and
# the AOTAutograd cache, so it covers TestAOTAutogradWithDynamo's paths too. The whole file (adding
# TestAOTAutogradWithDynamo and TestPythonKey's make_fx tests) takes 1.3 to 1.6 times as long: too long for
# the four runs (stock and patched, two pins) in CI.
UPSTREAM_TESTS ?= ../shared/upstream-tests/test_aotdispatch
UPSTREAM_CLASSES ?= TestAOTAutograd,TestAOTAutogradWithCache
SOURCES := setup.py $(shell find pins patches torch_overlay tools -type f -not -path '*/__pycache__/*' -not -path '*.egg-info/*')

.PHONY: all report test test-pin test-upstream test-tools test-prefixes sweep bench aotdispatch clean

all: report

$(STOCK)/.installed: setup.py pins/$(PIN)/pin.toml
	rm -rf $(STOCK)
	$(PYTHON) -m venv $(STOCK)
	$(STOCK)/bin/python -m pip install -q $(TORCH_REQUIREMENT) $(TEST_DEPS)
	$(STOCK)/bin/python -m pip install -q -e .
	touch $@

$(DIST)/.built: $(STOCK)/.installed $(SOURCES)
	rm -rf $(DIST)
	$(STOCK)/bin/viewreplay build-wheel --pin $(PIN) --out $(DIST)
	touch $@

$(PATCHED)/.installed: $(DIST)/.built
	rm -rf $(PATCHED)
	$(PYTHON) -m venv $(PATCHED)
	$(PATCHED)/bin/python -m pip install -q $(DIST)/torch-*.whl $(TEST_DEPS)
	$(PATCHED)/bin/python -m pip install -q -e .
	$(PATCHED)/bin/viewreplay status --pin $(PIN) $$($(PATCHED)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
	touch $@

report: $(STOCK)/.installed $(PATCHED)/.installed
	$(STOCK)/bin/viewreplay report --stock-python $(STOCK)/bin/python --patched-python $(PATCHED)/bin/python

sweep: $(STOCK)/.installed $(PATCHED)/.installed
	$(STOCK)/bin/viewreplay sweep --stock-python $(STOCK)/bin/python --patched-python $(PATCHED)/bin/python

test:
	set -e; for pin in $(TEST_PINS); do $(MAKE) --no-print-directory test-pin PIN=$$pin; done
	$(MAKE) --no-print-directory test-tools PIN=$(TOOLS_PIN)
	$(MAKE) --no-print-directory test-prefixes PIN=$(lastword $(TEST_PINS))

# One pin: the AOT tests on stock and on patched torch, the upstream-form tests, then upstream's own tests.
test-pin: $(STOCK)/.installed $(PATCHED)/.installed
	@echo "== torch $(PIN): test/aot on stock, on patched; upstream/test/functorch on patched"
	$(STOCK)/bin/python -m pytest -q $(XDIST) test/aot
	$(PATCHED)/bin/python -m pytest -q $(XDIST) test/aot
	$(PATCHED)/bin/python -m pytest -q upstream/test/functorch
	$(MAKE) --no-print-directory test-upstream PIN=$(PIN)

# Upstream's test_aotdispatch.py (UPSTREAM_TESTS) on stock and on patched torch, compared test by test: fails on a
# test that passes on stock and fails on patched unless upstream/test_expectations.toml declares it.
test-upstream: $(STOCK)/.installed $(PATCHED)/.installed
	@if [ -d "$(UPSTREAM_TESTS)" ]; then \
		echo "== torch $(PIN): upstream tests ($(UPSTREAM_TESTS), $(UPSTREAM_CLASSES)) on stock, on patched"; \
		$(STOCK)/bin/viewreplay run-aotdispatch --pin $(PIN) --tests-dir "$(UPSTREAM_TESTS)" \
			--classes $(UPSTREAM_CLASSES) --jobs $(JOBS) \
			--stock-python $(STOCK)/bin/python --patched-python $(PATCHED)/bin/python; \
	else \
		echo "== upstream tests: skipped, no folder at $(UPSTREAM_TESTS)"; \
	fi

# The tools' tests, in the stock venv of the pin they run against (TOOLS_PIN in test/tools/viewreplay_testlib.py).
test-tools: $(STOCK)/.installed
	@echo "== test/tools (against the $(PIN) pin)"
	$(STOCK)/bin/python -m pytest -q test/tools

# Every prefix of the staged stack applies with git am, and its PR's tests fail before it and pass with it; every
# PR's tests pass together on the whole stack; one pytest process per core at once (`make test`: on the newest pin,
# what stage-upstream targets).
test-prefixes: $(STOCK)/.installed
	@echo "== torch $(PIN): check-prefixes"
	$(STOCK)/bin/viewreplay check-prefixes --pin $(PIN) --stock-python $(STOCK)/bin/python --jobs $(JOBS)

# Stock vs patched vs eager, interleaved; writes benchmarks/results/PIN/latest.{md,png,json}, and for the newest pin
# the README's bench section.
bench: $(STOCK)/.installed $(PATCHED)/.installed
	$(STOCK)/bin/python -m pip install -q matplotlib
	$(STOCK)/bin/viewreplay bench --stock-python $(STOCK)/bin/python --patched-python $(PATCHED)/bin/python \
		--out benchmarks/results/$(PIN) $(if $(filter $(PIN),$(NEWEST)),--readme README.md)

# The curated test_aotdispatch subset; needs a PyTorch checkout at the pin's tag: make aotdispatch PYTORCH_SRC=...
aotdispatch: $(STOCK)/.installed $(PATCHED)/.installed
	$(STOCK)/bin/viewreplay run-aotdispatch --pin $(PIN) --pytorch-src $(PYTORCH_SRC) --stock-python $(STOCK)/bin/python --patched-python $(PATCHED)/bin/python

clean:
	rm -rf .venv-stock-* .venv-[0-9]* dist build .cache
