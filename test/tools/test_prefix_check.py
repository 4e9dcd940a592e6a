"""check-prefixes: the scratch torch never writes into the stock venv, and the tests of a prefix are found.

The whole check (stage the stack, git am every prefix, run its tests on stock torch with that prefix's
torch/ files) runs in ``make test`` (``viewreplay check-prefixes``); these are its parts, on fixtures.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from viewreplay.prefixcheck import _changed_test_methods, ScratchTorch
from viewreplay_testlib import GIT_ENV, snapshot


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True).stdout


def stock_purelib(tmp_path: Path) -> Path:
    purelib = tmp_path / "stock" / "site-packages"
    (purelib / "torch" / "_functorch").mkdir(parents=True)
    (purelib / "torch" / "__init__.py").write_text("VERSION = 'stock'\n")
    (purelib / "torch" / "_functorch" / "aot.py").write_text("def f():\n    return 'stock'\n")
    (purelib / "torch" / "__pycache__").mkdir()
    (purelib / "torch" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"bytecode")
    return purelib


def test_scratch_torch_swaps_and_restores_files_without_touching_stock(tmp_path: Path) -> None:
    purelib = stock_purelib(tmp_path)
    before = snapshot(purelib)
    scratch = ScratchTorch(purelib, tmp_path / "scratch")
    aot = scratch.torch / "_functorch" / "aot.py"
    assert aot.stat().st_ino == (purelib / "torch" / "_functorch" / "aot.py").stat().st_ino  # linked, not copied
    # Prefix 1 changes a file and adds one; prefix 2 changes only the added one.
    scratch.use({"torch/_functorch/aot.py": b"def f():\n    return 'patched'\n", "torch/_functorch/new.py": b"X = 1\n"})
    assert aot.read_text().endswith("'patched'\n")
    assert (scratch.torch / "_functorch" / "new.py").is_file()
    scratch.use({"torch/_functorch/new.py": b"X = 2\n"})
    assert aot.read_text().endswith("'stock'\n")
    assert aot.stat().st_ino == (purelib / "torch" / "_functorch" / "aot.py").stat().st_ino
    assert (scratch.torch / "_functorch" / "new.py").read_text() == "X = 2\n"
    scratch.use({})
    assert not (scratch.torch / "_functorch" / "new.py").exists()
    assert snapshot(purelib) == before


def test_changed_test_methods_are_the_methods_a_commit_edits(tmp_path: Path) -> None:
    repo = tmp_path / "pytorch"
    (repo / "test" / "functorch").mkdir(parents=True)
    test_file = repo / "test" / "functorch" / "test_aotdispatch.py"
    test_file.write_text(
        "class TestAOTAutograd:\n"
        "    def test_a(self):\n        x = 'AsStridedBackward0'\n        return x\n\n"
        "    def test_b(self):\n        return 1\n\n"
        "    def helper(self):\n        return 2\n"
    )
    (repo / "test" / "functorch" / "test_new.py").write_text("def test_c():\n    pass\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    test_file.write_text(test_file.read_text().replace("'AsStridedBackward0'", "'ViewBackward0'").replace(
        "return 2", "return 3"))
    git(repo, "commit", "-q", "-a", "-m", "change test_a's expectation and a helper")
    assert _changed_test_methods(repo) == ["test/functorch/test_aotdispatch.py::TestAOTAutograd::test_a"]


# A miniature stack on a fake torch (no real torch: the fake package shadows nothing, it is all there is
# on PYTHONPATH under that name): the loop of check_prefixes, with staging and the checkout faked.
FAKE_BASE = {"torch/__init__.py": "", "torch/feature.py": "A = 0\nB = 0\n"}
FAKE_STACK = [
    # (subject, upstream files, test files)
    ("fix-a", {"torch/feature.py": "A = 1\nB = 0\n"},
     {"test/functorch/test_a.py": "from torch.feature import A\n\n\ndef test_a():\n    assert A == 1\n"}),
    ("add-b-module", {"torch/feature_b.py": "C = 2\n"},
     {"test/functorch/test_b.py": "from torch.feature_b import C\n\n\ndef test_c():\n    assert C == 2\n"}),
    ("fix-b", {"torch/feature.py": "A = 1\nB = 1\n"},
     {"test/functorch/test_fix_b.py": "from torch.feature import B\n\n\ndef test_b():\n    assert B == 1\n"}),
]


def fake_stack(tmp_path: Path, stack: list) -> tuple[Path, Path, list[Path]]:
    """The fake stock purelib, a checkout tagged v0 and the stack's format-patch files."""
    src = tmp_path / "src"
    for rel, text in FAKE_BASE.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    git(src, "init", "-q")
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "base")
    git(src, "tag", "v0")
    for subject, files, tests in stack:
        for rel, text in {**files, **tests}.items():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            (src / rel).write_text(text)
        git(src, "add", "-A")
        git(src, "commit", "-q", "-m", subject)
    staged = tmp_path / "staged"
    git(src, "format-patch", "-q", "-o", str(staged), "v0..HEAD")
    purelib = tmp_path / "stock" / "site-packages"
    for rel, text in FAKE_BASE.items():
        (purelib / rel).parent.mkdir(parents=True, exist_ok=True)
        (purelib / rel).write_text(text)
    return src, purelib, sorted(staged.glob("*.patch"))


def run_fake_check(tmp_path: Path, monkeypatch, stack: list, **kwargs):  # noqa: ANN001, ANN201
    from types import SimpleNamespace

    from viewreplay import prefixcheck

    src, purelib, staged = fake_stack(tmp_path, stack)

    def stage(repo, out, **_):  # noqa: ANN001, ANN202
        out.mkdir(parents=True)
        copies = []
        for patch in staged:
            copies.append(out / patch.name)
            copies[-1].write_bytes(patch.read_bytes())
        return copies, []

    def checkout(pin, wheel, dest, all_files):  # noqa: ANN001, ANN202
        git(tmp_path, "clone", "-q", str(src), str(dest))
        git(dest, "checkout", "-q", "--detach", "v0")
        git(dest, "config", "user.name", "fixture")
        git(dest, "config", "user.email", "fixture@localhost")

    monkeypatch.setattr(prefixcheck, "stage_upstream", stage)
    monkeypatch.setattr(prefixcheck, "make_checkout", checkout)
    monkeypatch.setattr(prefixcheck, "_stock_purelib", lambda python: purelib)
    for name, value in GIT_ENV.items():
        if name.startswith("GIT_"):
            monkeypatch.setenv(name, value)
    repo = SimpleNamespace(
        pin=SimpleNamespace(upstream_tag="v0"),
        patches=[Path(f"{i:04d}-{subject}.patch") for i, (subject, _, _) in enumerate(stack, 1)],
        root=tmp_path,
    )
    before = snapshot(purelib)
    progress: list[str] = []
    kwargs.setdefault("jobs", 1)
    results, whole = prefixcheck.check_prefixes(repo, tmp_path / "wheel.whl", sys.executable,
                                                progress=progress.append, **kwargs)
    assert snapshot(purelib) == before
    return results, whole, progress


@pytest.mark.parametrize("jobs", [1, 2])
def test_check_prefixes_own_tests_before_and_after_and_the_whole_stack(
    tmp_path: Path, monkeypatch, jobs: int  # noqa: ANN001
) -> None:
    results, whole, progress = run_fake_check(tmp_path, monkeypatch, FAKE_STACK, jobs=jobs)
    assert [r.ok for r in results] == [True, True, True]
    assert results[0].before == {"test/functorch/test_a.py": "failed"}  # assertion fails on stock
    assert results[1].before == {"test/functorch/test_b.py": "failed"}  # does not import before
    assert results[2].after == {"test/functorch/test_fix_b.py": "passed"}
    assert whole is not None and whole.ok
    assert whole.tests == ["test/functorch/test_a.py", "test/functorch/test_b.py", "test/functorch/test_fix_b.py"]
    assert [line.split()[0] for line in progress] == ["[1/3]", "[2/3]", "[3/3]"]


def test_check_prefixes_flags_a_test_that_cannot_fail_and_a_broken_earlier_test(
    tmp_path: Path, monkeypatch  # noqa: ANN001
) -> None:
    stack = [
        FAKE_STACK[0],
        # Passes before its PR: a test that cannot fail.
        ("weak-test", {"torch/feature_b.py": "C = 2\n"},
         {"test/functorch/test_weak.py": "def test_w():\n    assert True\n"}),
        # Breaks the first PR's test; its own passes: only the whole-stack run sees it.
        ("breaks-a", {"torch/feature.py": "A = 5\nB = 1\n"},
         {"test/functorch/test_fix_b.py": FAKE_STACK[2][2]["test/functorch/test_fix_b.py"]}),
    ]
    results, whole, _ = run_fake_check(tmp_path, monkeypatch, stack)
    assert [r.ok for r in results] == [True, False, True]
    assert results[1].passing_before == ["test/functorch/test_weak.py"]
    assert whole is not None and whole.failing == ["test/functorch/test_a.py"]


def test_check_prefixes_one_pr(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    results, whole, _ = run_fake_check(tmp_path, monkeypatch, FAKE_STACK, pr="fix-b")
    assert whole is None
    assert [(r.index, r.ok, r.before, r.after) for r in results] == [
        (3, True, {"test/functorch/test_fix_b.py": "failed"}, {"test/functorch/test_fix_b.py": "passed"})
    ]


def test_unknown_pr_is_one_line_exit_1(capsys) -> None:  # noqa: ANN001
    from viewreplay_testlib import REAL_REPO, run_cli

    assert run_cli("check-prefixes", *REAL_REPO, "--stock-python", sys.executable, "--pr", "no-such-pr") == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--pr no-such-pr: no such PR" in err
