"""check-prefixes: the scratch torch never writes into the stock venv, and the tests of a prefix are found.

The whole check (stage the stack, git am every prefix, run its tests on stock torch with that prefix's
torch/ files) runs in ``make test`` (``viewreplay check-prefixes``); these are its parts, on fixtures.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

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
