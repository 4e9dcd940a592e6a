"""run-aotdispatch on a fixture checkout and a fixture tests folder: selection, classification, declared
expectation changes, and its refusals.

The fixture's test_aotdispatch.py needs no torch: its tests pass or fail depending on which side
runs them. The two "interpreters" are wrapper scripts around this interpreter that say which side
they are (so CI needs only one venv).
"""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from viewreplay import ViewReplayError
from viewreplay.aotdispatch import (
    EXPECTATIONS_FILE,
    SUBSET_FILE,
    DefinedTest,
    check_checkout,
    defined_tests,
    load_expectations,
    load_subset,
)
from viewreplay.pin import load_repo
from viewreplay_testlib import REAL_REPO, REPO_ROOT, run_cli, snapshot, TOOLS_PIN

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
        # stock's expectation
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
    rows = {line.split("|")[0].strip(): [c.strip() for c in line.split("|")[1:]] for line in out.splitlines() if " | " in line and "::" in line}
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
    assert ("passed on both: 3, fixed: 2, regressed: 1, declared: 0, declared but not regressed: 0, "
            "failing on both: 1, skipped: 1") in out


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
    assert methods["TestAOTAutogradWithCache"]["test_inherited"] == DefinedTest("AOTTestCase", ())
    assert methods["TestAOTAutograd"]["test_param"] == DefinedTest("TestAOTAutograd", ("which",))


# --tests-dir: a transcription of the file beside a shim module it imports, as
# ../shared/upstream-tests/test_aotdispatch holds; a queue with test patches and declarations.
TESTS_DIR_FILE = FIXTURE_TESTS.replace(
    'PATCHED = os.environ["FIXTURE_SIDE"] == "patched"', "from common_utils import PATCHED"
)
REL = "test/functorch/test_aotdispatch.py"


def make_test_patch(before: str, after: str) -> str:
    """A test patch (git's form, as upstream/test_patches/ holds) turning ``before`` into ``after``."""
    diff = difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{REL}", f"b/{REL}")
    return f"diff --git a/{REL} b/{REL}\n" + "".join(diff)


@pytest.fixture
def tests_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "shared" / "test_aotdispatch"
    folder.mkdir(parents=True)
    (folder / "test_aotdispatch.py").write_text(TESTS_DIR_FILE)
    (folder / "common_utils.py").write_text('import os\n\nPATCHED = os.environ["FIXTURE_SIDE"] == "patched"\n')
    return folder


@pytest.fixture
def queue(tmp_path: Path) -> Path:
    """A patch queue's upstream/: one PR's test patch, changing test_regressed's expectation and test_never."""
    root = tmp_path / "queue"
    (root / "upstream" / "test_patches").mkdir(parents=True)
    after = TESTS_DIR_FILE.replace("self.assertFalse(PATCHED)", "self.assertTrue(PATCHED)").replace(
        'self.fail("fails everywhere")', 'self.fail("fails everywhere, still")')
    (root / "upstream" / "test_patches" / "the-pr.patch").write_text(make_test_patch(TESTS_DIR_FILE, after))
    declare(root)
    return root


def declare(queue: Path, *entries: tuple[str, str]) -> None:
    """Write the queue's declarations: (test, pr) each."""
    (queue / EXPECTATIONS_FILE).write_text("".join(
        f'[[test]]\ntest = "{test}"\npr = "{pr}"\nwhy = "the PR changes it"\n' for test, pr in entries
    ))


def run_dir(tests_dir: Path, queue: Path, pythons: tuple[Path, Path], *extra: str) -> int:
    return run_cli(
        "run-aotdispatch", "--repo", queue, "--tests-dir", tests_dir,
        "--stock-python", pythons[0], "--patched-python", pythons[1], *extra,
    )


def table(out: str) -> dict[str, list[str]]:
    """The report's rows: test id -> [stock, patched, result]."""
    rows = [[cell.strip() for cell in line.split(" | ")] for line in out.splitlines() if " | " in line]
    return {row[0]: row[1:] for row in rows if "::" in row[0]}


def test_tests_dir_runs_every_test_and_lists_all_but_passing_and_skipped(
    tests_dir: Path, queue: Path, pythons: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every class runs; an undeclared regression fails the run; failing on both is listed by name; the folder is
    left as it was (no bytecode, no pytest cache)."""
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    tests_dir.chmod(0o555)  # as ../shared holds it (root may write all the same: the snapshot checks)
    before = snapshot(tests_dir)
    assert run_dir(tests_dir, queue, pythons) == 1
    out = capsys.readouterr().out
    assert f"{tests_dir / 'test_aotdispatch.py'}: a transcription, not checked against the tag" in out
    assert "classes: all; 0 declared in" in out
    assert table(out) == {
        f"{cls}::{name}": outcomes
        for cls in ("TestAOTAutograd", "TestAOTAutogradWithCache")
        for name, outcomes in {
            "test_fixed": ["failed", "passed", "fixed"],
            "test_never": ["failed", "failed", "failing on both"],
            "test_param_lookalike": ["failed", "failed", "failing on both"],
            "test_param_which_b": ["failed", "passed", "fixed"],
            "test_regressed": ["passed", "failed", "regressed"],
            "test_unlisted": ["failed", "failed", "failing on both"],
        }.items()
    }
    assert ("passed on both: 7, fixed: 4, regressed: 2, declared: 0, declared but not regressed: 0, "
            "failing on both: 6, skipped: 2") in out
    assert snapshot(tests_dir) == before


def test_declared_regression_passes_in_every_class_inheriting_it(
    tests_dir: Path, queue: Path, pythons: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    declare(queue, ("TestAOTAutograd::test_regressed", "the-pr"))
    assert run_dir(tests_dir, queue, pythons) == 0
    rows = table(capsys.readouterr().out)
    assert rows["TestAOTAutograd::test_regressed"] == ["passed", "failed", "declared"]
    assert rows["TestAOTAutogradWithCache::test_regressed"] == ["passed", "failed", "declared"]


def test_declaration_that_does_not_regress_is_listed_and_does_not_fail(
    tests_dir: Path, queue: Path, pythons: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A stale declaration, or a test that fails on stock too on this pin."""
    declare(queue, ("TestAOTAutograd::test_regressed", "the-pr"), ("TestAOTAutograd::test_never", "the-pr"))
    assert run_dir(tests_dir, queue, pythons, "--classes", "TestAOTAutogradWithCache", "--jobs", "2") == 0
    out = capsys.readouterr().out
    assert "classes: TestAOTAutogradWithCache; 2 declared in" in out
    assert {key.partition("::")[0] for key in table(out)} == {"TestAOTAutogradWithCache"}
    assert table(out)["TestAOTAutogradWithCache::test_never"] == ["failed", "failed", "declared but not regressed"]
    assert ("1 declared test(s) did not regress (a stale declaration, or failing on stock too): "
            "TestAOTAutogradWithCache::test_never") in out


@pytest.mark.parametrize(
    "declared, patch, message",
    [
        ("TestAOTAutograd::test_regressed", "another-pr",
         "pr = 'another-pr' has no test patch"),
        ("TestAOTAutograd::test_fixed", "the-pr",
         "the-pr.patch does not change TestAOTAutograd.test_fixed in"),
        ("TestAOTAutogradWithCache::test_regressed", "the-pr",
         "TestAOTAutogradWithCache inherits test_regressed from TestAOTAutograd; "
         "declare TestAOTAutograd::test_regressed"),
        ("TestAOTAutograd::test_gone", "the-pr", "defines no such test"),
        ("TestAOTAutograd::test_regressed", "comment-only",
         "comment-only.patch does not change TestAOTAutograd.test_regressed in"),
        ("TestAOTAutograd::test_regressed", "stale-context", "stale-context.patch: does not apply to"),
    ],
)
def test_declaration_refusals(
    tests_dir: Path, queue: Path, pythons: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
    declared: str, patch: str, message: str,
) -> None:
    """Refused before anything runs, with one line: a test patch must exist and change the declared method."""
    patches = queue / "upstream" / "test_patches"
    comment = TESTS_DIR_FILE.replace("# stock's expectation", "# the PR changes only this comment")
    (patches / "comment-only.patch").write_text(make_test_patch(TESTS_DIR_FILE, comment))
    stale = TESTS_DIR_FILE.replace("self.assertFalse(PATCHED)", "self.assertTrue(PATCHED)")
    (patches / "stale-context.patch").write_text(make_test_patch(stale.replace("# stock", "# an older"), stale))
    declare(queue, (declared, patch))
    assert run_dir(tests_dir, queue, pythons) == 1
    captured = capsys.readouterr()
    assert message in captured.err
    assert captured.err.count("\n") == 1 and captured.out == ""


@pytest.mark.parametrize(
    "breakage, message",
    [
        ("missing", "nowhere: no such directory (pass a folder holding test_aotdispatch.py)"),
        ("no-file", "test_aotdispatch.py: file not found"),
        ("subset", "--subset goes with --pytorch-src"),
    ],
)
def test_tests_dir_refusals(
    tests_dir: Path, queue: Path, pythons: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
    breakage: str, message: str,
) -> None:
    extra = []
    if breakage == "missing":
        tests_dir = tests_dir.parent / "nowhere"
    elif breakage == "no-file":
        (tests_dir / "test_aotdispatch.py").unlink()
    else:
        extra = ["--subset", str(queue / "subset.toml")]
    assert run_dir(tests_dir, queue, pythons, *extra) == 1
    captured = capsys.readouterr()
    assert message in captured.err and captured.err.count("\n") == 1 and captured.out == ""


def test_classes_and_expectations_go_with_tests_dir(
    checkout: Path, subset: Path, pythons: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(
        "run-aotdispatch", *REAL_REPO, "--pytorch-src", checkout, "--subset", subset, "--classes", "TestAOTAutograd",
        "--stock-python", pythons[0], "--patched-python", pythons[1],
    ) == 1
    assert "--expectations and --classes go with --tests-dir" in capsys.readouterr().err


def test_repo_expectations_are_well_formed() -> None:
    """Every declaration of the repository names a PR with a test patch and says why."""
    expectations = load_expectations(REPO_ROOT / EXPECTATIONS_FILE)
    assert expectations.declarations
    for declaration in expectations.declarations:
        assert (REPO_ROOT / "upstream" / "test_patches" / f"{declaration.pr}.patch").is_file(), declaration
        assert declaration.cls.startswith("Test") and declaration.name.startswith("test_"), declaration
        assert len(declaration.why) > 20, declaration
