"""run-aotdispatch on a fixture checkout: selection, classification, and its refusals.

The fixture's test_aotdispatch.py needs no torch: its tests pass or fail depending on which side
runs them. The two "interpreters" are wrapper scripts around this interpreter that say which side
they are (so CI needs only one venv).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from viewreplay import ViewReplayError
from viewreplay.aotdispatch import SUBSET_FILE, check_checkout, defined_tests, load_subset
from viewreplay.pin import load_repo
from viewreplay_testlib import REAL_REPO, REPO_ROOT, run_cli, TOOLS_PIN

FIXTURE_TESTS = '''
import os
import unittest

PATCHED = os.environ["FIXTURE_SIDE"] == "patched"


class AOTTestCase(unittest.TestCase):
    def test_inherited(self):
        pass


class TestAOTAutograd(AOTTestCase):
    def test_both(self):
        pass

    def test_fixed(self):
        self.assertTrue(PATCHED)

    def test_regressed(self):
        self.assertFalse(PATCHED)

    def test_never(self):
        self.fail("fails everywhere")

    def test_skipped(self):
        self.skipTest("not here")

    def test_param(self, which):
        self.assertTrue(PATCHED or which == "a")

    def test_param_lookalike(self):
        self.fail("must not be selected by the parametrized entry")

    def test_unlisted(self):
        self.fail("must not run")


_param = TestAOTAutograd.test_param
for _which in ("a", "b"):
    setattr(TestAOTAutograd, f"test_param_which_{_which}", lambda self, w=_which: _param(self, w))
del TestAOTAutograd.test_param  # as instantiate_parametrized_tests does


class TestAOTAutogradWithCache(TestAOTAutograd):
    pass
'''

SUBSET = '''
file = "test/functorch/test_aotdispatch.py"
[[test]]
class = "TestAOTAutograd"
name = "test_both"
why = "passes on both"
[[test]]
class = "TestAOTAutograd"
name = "test_fixed"
why = "fixed by the series"
[[test]]
class = "TestAOTAutograd"
name = "test_regressed"
why = "regressed by the series"
[[test]]
class = "TestAOTAutograd"
name = "test_never"
why = "fails on both"
[[test]]
class = "TestAOTAutograd"
name = "test_skipped"
why = "skipped"
[[test]]
class = "TestAOTAutograd"
name = "test_param"
why = "expanded by instantiate_parametrized_tests"
parametrized = true
[[test]]
class = "TestAOTAutogradWithCache"
name = "test_inherited"
why = "inherited from a base class of the same file"
'''


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "pytorch"
    (root / "test" / "functorch").mkdir(parents=True)
    (root / "version.txt").write_text("2.13.0a0\n")
    (root / "test" / "functorch" / "test_aotdispatch.py").write_text(FIXTURE_TESTS)
    return root


@pytest.fixture
def subset(tmp_path: Path) -> Path:
    path = tmp_path / "subset.toml"
    path.write_text(SUBSET)
    return path


@pytest.fixture
def pythons(tmp_path: Path) -> tuple[Path, Path]:
    wrappers = []
    for side in ("stock", "patched"):
        wrapper = tmp_path / f"{side}-python"
        wrapper.write_text(f'#!/bin/sh\nFIXTURE_SIDE={side} exec "{sys.executable}" "$@"\n')
        wrapper.chmod(0o755)
        wrappers.append(wrapper)
    return wrappers[0], wrappers[1]


def run(checkout: Path, subset: Path, pythons: tuple[Path, Path]) -> int:
    return run_cli(
        "run-aotdispatch", *REAL_REPO, "--pytorch-src", checkout, "--subset", subset,
        "--stock-python", pythons[0], "--patched-python", pythons[1],
    )


def test_table_classifies_each_listed_test(
    checkout: Path, subset: Path, pythons: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(checkout, subset, pythons) == 1  # a regression makes it fail
    out = capsys.readouterr().out
    rows = {line.split("|")[0].strip(): [c.strip() for c in line.split("|")[1:]] for line in out.splitlines() if "::" in line}
    assert rows == {
        "TestAOTAutograd::test_both": ["passed", "passed", "passed on both"],
        "TestAOTAutograd::test_fixed": ["failed", "passed", "fixed"],
        "TestAOTAutograd::test_regressed": ["passed", "failed", "regressed"],
        "TestAOTAutograd::test_never": ["failed", "failed", "failing on both"],
        "TestAOTAutograd::test_skipped": ["skipped", "skipped", "skipped"],
        "TestAOTAutograd::test_param_which_a": ["passed", "passed", "passed on both"],
        "TestAOTAutograd::test_param_which_b": ["failed", "passed", "fixed"],
        "TestAOTAutogradWithCache::test_inherited": ["passed", "passed", "passed on both"],
    }
    assert "passed on both: 3, fixed: 2, regressed: 1, failing on both: 1, skipped: 1" in out


def test_relative_interpreter_paths(
    checkout: Path, subset: Path, pythons: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """make passes .venv-stock-VERSION/bin/python: relative to the caller's directory, not the checkout's."""
    monkeypatch.chdir(pythons[0].parent)
    assert run_cli(
        "run-aotdispatch", *REAL_REPO, "--pytorch-src", checkout, "--subset", subset,
        "--stock-python", f"./{pythons[0].name}", "--patched-python", f"./{pythons[1].name}",
    ) == 1
    assert "passed on both: 3, fixed: 2, regressed: 1" in capsys.readouterr().out


def test_no_regression_exits_0(
    checkout: Path, subset: Path, pythons: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    subset.write_text(SUBSET.split('[[test]]\nclass = "TestAOTAutograd"\nname = "test_regressed"')[0])
    assert run(checkout, subset, pythons) == 0
    assert "regressed: 0" in capsys.readouterr().out


@pytest.mark.parametrize(
    "breakage, message",
    [
        ("missing", "no such directory"),
        ("no-version", "no version.txt"),
        ("version", "torch version 2.12.0, but the subset is for 2.13.0"),
        ("renamed", "no longer defines 1 test(s) listed in"),
        ("no-file", "test_aotdispatch.py: file not found"),
    ],
)
def test_refusals(
    checkout: Path, subset: Path, pythons: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
    breakage: str, message: str,
) -> None:
    test_file = checkout / "test" / "functorch" / "test_aotdispatch.py"
    if breakage == "missing":
        checkout = checkout.parent / "nowhere"
    elif breakage == "no-version":
        (checkout / "version.txt").unlink()
    elif breakage == "version":
        (checkout / "version.txt").write_text("2.12.0\n")
    elif breakage == "renamed":
        test_file.write_text(FIXTURE_TESTS.replace("def test_fixed(", "def test_fixed_renamed("))
    elif breakage == "no-file":
        test_file.unlink()
    assert run(checkout, subset, pythons) == 1
    captured = capsys.readouterr()
    assert message in captured.err
    assert captured.out == ""  # refused before running anything
    if breakage == "renamed":
        assert "TestAOTAutograd::test_fixed" in captured.err


def test_git_checkout_must_have_the_tag_version_of_the_file(
    checkout: Path, subset: Path, pythons: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "x"], ["tag", "v2.13.0"]):
        subprocess.run(["git", *args], cwd=checkout, env=env, check=True)
    test_file = checkout / "test" / "functorch" / "test_aotdispatch.py"
    test_file.write_text(test_file.read_text() + "\n# local edit\n")
    assert run(checkout, subset, pythons) == 1
    assert "not the v2.13.0 version" in capsys.readouterr().err


def test_git_checkout_may_hold_the_file_with_the_stacks_test_patches(
    checkout: Path, subset: Path, tmp_path: Path
) -> None:
    """The tag's file with the stack's test patches applied is accepted, and said so; any other edit is refused."""
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "x"], ["tag", "v2.13.0"]):
        subprocess.run(["git", *args], cwd=checkout, env=env, check=True)
    rel = "test/functorch/test_aotdispatch.py"
    (checkout / rel).write_text(FIXTURE_TESTS.replace("self.assertTrue(PATCHED)\n", "self.assertTrue(True)\n", 1))
    patch = tmp_path / "fixed.patch"
    patch.write_text(subprocess.run(["git", "diff", "-U2"], cwd=checkout, env=env, check=True,
                                    capture_output=True, text=True).stdout)
    pin = load_repo(REPO_ROOT, TOOLS_PIN).pin
    methods, version = check_checkout(checkout, pin, load_subset(subset), [patch])
    assert version == "v2.13.0's with the stack's 1 test patch(es)"
    assert "test_fixed" in methods["TestAOTAutograd"]
    with pytest.raises(ViewReplayError, match="not the v2.13.0 version"):
        check_checkout(checkout, pin, load_subset(subset))  # without the patch: a local edit
    (checkout / rel).write_text((checkout / rel).read_text() + "\n# local edit\n")
    with pytest.raises(ViewReplayError, match="and from v2.13.0's with the stack's 1 test patch"):
        check_checkout(checkout, pin, load_subset(subset), [patch])


def test_repo_subset_is_well_formed() -> None:
    """The real subset parses, every entry says why, and the list is of a useful size."""
    subset = load_subset(REPO_ROOT / SUBSET_FILE)
    assert subset.test_file == "test/functorch/test_aotdispatch.py"
    assert 20 <= len(subset.tests) <= 40
    assert all(len(t.why) > 10 for t in subset.tests)


def test_defined_tests_resolves_inheritance_and_parameters(tmp_path: Path) -> None:
    path = tmp_path / "t.py"
    path.write_text(textwrap.dedent(FIXTURE_TESTS))
    methods = defined_tests(path)
    assert "test_inherited" in methods["TestAOTAutogradWithCache"]
    assert methods["TestAOTAutograd"]["test_param"] == ["which"]
