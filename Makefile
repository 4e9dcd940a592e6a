# The two commands of the README:
#   make        builds the patched wheel, installs it, prints the stock-vs-patched report
#   make test   runs the whole test suite (tools, then the AOT tests on stock and on patched torch, then every
#               prefix of the staged upstream stack: it applies with git am and its tests pass)
# Both create everything they need: .venv-stock (pinned stock torch) and .venv (the custom wheel).

PYTHON ?= python3
STOCK := .venv-stock
PATCHED := .venv
TORCH_REQUIREMENT := torch==2.13.0
WHEEL := dist/torch-2.13.0+viewreplay.cpu-cp311-cp311-manylinux_2_28_x86_64.whl
TEST_DEPS := pytest expecttest numpy wheel hypothesis
SOURCES := pin.toml setup.py $(shell find patches torch_overlay tools -type f -not -path '*/__pycache__/*' -not -path '*.egg-info/*')

.PHONY: all report test sweep bench aotdispatch clean

all: report

$(STOCK)/.installed: setup.py
	rm -rf $(STOCK)
	$(PYTHON) -m venv $(STOCK)
	$(STOCK)/bin/python -m pip install -q $(TORCH_REQUIREMENT) $(TEST_DEPS)
	$(STOCK)/bin/python -m pip install -q -e .
	touch $@

$(WHEEL): $(STOCK)/.installed $(SOURCES)
	$(STOCK)/bin/viewreplay build-wheel --out dist

$(PATCHED)/.installed: $(WHEEL)
	rm -rf $(PATCHED)
	$(PYTHON) -m venv $(PATCHED)
	$(PATCHED)/bin/python -m pip install -q $(WHEEL) $(TEST_DEPS)
	$(PATCHED)/bin/python -m pip install -q -e .
	$(PATCHED)/bin/viewreplay status $$($(PATCHED)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
	touch $@

report: $(STOCK)/.installed $(PATCHED)/.installed
	$(STOCK)/bin/viewreplay report --stock-python $(STOCK)/bin/python --patched-python $(PATCHED)/bin/python

sweep: $(STOCK)/.installed $(PATCHED)/.installed
	$(STOCK)/bin/viewreplay sweep --stock-python $(STOCK)/bin/python --patched-python $(PATCHED)/bin/python

test: $(STOCK)/.installed $(PATCHED)/.installed
	$(STOCK)/bin/python -m pytest -q test/tools
	$(STOCK)/bin/python -m pytest -q test/aot
	$(PATCHED)/bin/python -m pytest -q test/aot
	$(PATCHED)/bin/python -m pytest -q upstream/test/functorch
	$(STOCK)/bin/viewreplay check-prefixes --stock-python $(STOCK)/bin/python

# Stock vs patched vs eager, interleaved; writes benchmarks/results/latest.{md,png,json} and the README's bench section.
bench: $(STOCK)/.installed $(PATCHED)/.installed
	$(STOCK)/bin/python -m pip install -q matplotlib
	$(STOCK)/bin/viewreplay bench --stock-python $(STOCK)/bin/python --patched-python $(PATCHED)/bin/python --out benchmarks/results --readme README.md

# The curated test_aotdispatch subset; needs a PyTorch checkout at v2.13.0: make aotdispatch PYTORCH_SRC=...
aotdispatch: $(STOCK)/.installed $(PATCHED)/.installed
	$(STOCK)/bin/viewreplay run-aotdispatch --pytorch-src $(PYTORCH_SRC) --stock-python $(STOCK)/bin/python --patched-python $(PATCHED)/bin/python

clean:
	rm -rf $(STOCK) $(PATCHED) dist build .cache
