"""Check every prefix of the staged upstream stack: it applies with ``git am`` and its tests pass.

The series (one patch per PR) is staged on a fresh stand-in checkout of the pinned tag (or a real
one, ``--checkout``), then applied one PR at a time with ``git am`` onto another fresh checkout. After each PR, the tests that PR adds (its ``test/**/test_*.py`` files) and the upstream
test methods its test patches change run twice: against the previous prefix's torch, where they
must fail (they test what the PR changes; a test that cannot fail is a defect), and against a torch
holding exactly this prefix's ``torch/`` files, where they must pass, together with every earlier
PR's tests (a later PR must not break what an earlier one tests).

The torch is one scratch copy of the stock venv's ``torch`` package made of hard links (no copy of
its 750 MB, no wheel per prefix). The files a prefix changes replace their links (unlink, then
write: the stock file behind a link is never written), and the previous prefix's are linked back
to stock. The stock interpreter imports the scratch copy first through ``PYTHONPATH``; its other
packages (numpy, sympy, pytest, ...) come from the stock venv.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from viewreplay import ViewReplayError
from viewreplay.checkout import make_checkout
from viewreplay.gitrepo import git
from viewreplay.pin import Repo
from viewreplay.staging import stage_upstream


@dataclass(frozen=True)
class PrefixResult:
    """One prefix of the stack: the PR it ends with, what it changed and how its tests ran."""

    index: int
    subject: str
    torch_files: list[str]
    tests: list[str]
    # Tests of the earlier PRs, run with this PR's.
    earlier_tests: list[str]
    passing_before: list[str]
    passed: bool
    seconds: float
    output: str

    @property
    def ok(self) -> bool:
        return self.passed and not self.passing_before


class ScratchTorch:
    """A hard-linked copy of the stock ``torch`` package whose files can be swapped per prefix."""

    def __init__(self, stock_purelib: Path, root: Path) -> None:
        self.stock = stock_purelib / "torch"
        if not (self.stock / "__init__.py").is_file():
            raise ViewReplayError(f"{stock_purelib}: no torch package")
        self.purelib = root
        self.torch = root / "torch"
        # Bytecode is linked too: it stays valid for the linked sources (same mtime and size), and the
        # tests run with PYTHONDONTWRITEBYTECODE, so nothing is ever written into the stock venv.
        shutil.copytree(self.stock, self.torch, copy_function=os.link)
        self._swapped: set[str] = set()

    def use(self, files: dict[str, bytes]) -> None:
        """Make the scratch torch equal stock except for ``files`` (paths relative to the purelib, under torch/)."""
        for rel in self._swapped - set(files):
            self._restore(rel)
        for rel, data in files.items():
            target = self.purelib / rel
            target.unlink(missing_ok=True)  # never write through a link into the stock file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        self._swapped = set(files)

    def _restore(self, rel: str) -> None:
        target, stock = self.purelib / rel, self.stock.parent / rel
        target.unlink(missing_ok=True)
        if stock.is_file():
            os.link(stock, target)


def _changed_torch_files(checkout: Path, tag: str) -> list[str]:
    out = git(checkout, "diff", "--name-only", "--no-renames", tag, "HEAD", "--", "torch")
    return sorted(line for line in out.splitlines() if line)


def _added_tests(checkout: Path) -> list[str]:
    out = git(checkout, "diff", "--name-only", "--diff-filter=A", "HEAD~1", "HEAD", "--", "test")
    return sorted(line for line in out.splitlines() if Path(line).name.startswith("test_") and line.endswith(".py"))


def _changed_test_methods(checkout: Path) -> list[str]:
    """pytest ids of the test methods the last commit changes in existing test files."""
    out = git(checkout, "diff", "--name-only", "--diff-filter=M", "HEAD~1", "HEAD", "--", "test")
    ids = []
    for rel in sorted(line for line in out.splitlines() if line.endswith(".py")):
        diff = git(checkout, "diff", "-U0", "HEAD~1", "HEAD", "--", rel)
        changed: set[int] = set()
        for start, count in re.findall(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@", diff, flags=re.MULTILINE):
            first = int(start)
            changed.update(range(first, first + max(int(count or 1), 1)))
        for cls in ast.parse((checkout / rel).read_text(encoding="utf-8")).body:
            if not isinstance(cls, ast.ClassDef):
                continue
            for method in cls.body:
                if (isinstance(method, ast.FunctionDef) and method.name.startswith("test")
                        and changed.intersection(range(method.lineno, (method.end_lineno or method.lineno) + 1))):
                    ids.append(f"{rel}::{cls.name}::{method.name}")
    return ids


def _stock_purelib(python: str) -> Path:
    try:
        result = subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        )
    except (FileNotFoundError, subprocess.CalledProcessError) as exc:
        raise ViewReplayError(f"--stock-python {python}: cannot run it ({exc})") from None
    return Path(result.stdout.strip())


def _test_env(scratch: ScratchTorch) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(scratch.purelib), "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_ADDOPTS": ""}


def _check_scratch_import(python: str, scratch: ScratchTorch, cwd: Path) -> None:
    """Refuse to test unless ``import torch`` gives the scratch copy (not stock, not the checkout's sources)."""
    probe = "import torch, sys; sys.stdout.write(torch.__file__)"
    result = subprocess.run([python, "-c", probe], cwd=cwd, env=_test_env(scratch), check=False,
                            capture_output=True, text=True)
    if result.returncode != 0 or not result.stdout.startswith(str(scratch.torch)):
        raise ViewReplayError(f"the scratch torch does not import: {(result.stdout + result.stderr).strip()[-2000:]}")


def _run_tests(
    python: str, checkout: Path, scratch: ScratchTorch, tests: list[str], timeout: float
) -> tuple[bool, str]:
    """Run pytest on ``tests`` (paths or ids relative to the checkout) from ``checkout/test``; (passed, output)."""
    command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *[str(checkout / t) for t in tests]]
    try:
        result = subprocess.run(command, cwd=checkout / "test", env=_test_env(scratch), check=False,
                                capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"pytest did not finish within {timeout:.0f} s"
    return result.returncode == 0, (result.stdout + result.stderr).strip()


def check_prefixes(
    repo: Repo, wheel: Path, stock_python: str, *, checkout: Path | None = None, timeout: float = 1800,
) -> list[PrefixResult]:
    """Stage the stack, then apply and test each prefix; stop at the first prefix that does not apply."""
    tag = repo.pin.upstream_tag
    if os.sep in stock_python:  # the tests run in the checkout: keep the venv's path, do not resolve the link
        stock_python = os.path.abspath(stock_python)
    purelib = _stock_purelib(stock_python)
    with tempfile.TemporaryDirectory(prefix="viewreplay-prefixes-") as tmp:
        work = Path(tmp)
        patches, _ = stage_upstream(repo, work / "staged", wheel=wheel, checkout=checkout)
        fresh = work / "pytorch"
        if checkout is not None:
            git(work, "clone", "-q", str(checkout), str(fresh))
            git(fresh, "checkout", "-q", "--detach", tag)
        else:
            make_checkout(repo.pin, wheel, fresh, all_files=False)
        scratch = ScratchTorch(purelib, work / "site-packages")
        (fresh / "test").mkdir(exist_ok=True)
        _check_scratch_import(stock_python, scratch, fresh / "test")
        results = []
        earlier: list[str] = []
        for index, patch in enumerate(patches, 1):
            started = time.monotonic()
            result = subprocess.run(
                ["git", "am", "-q", "--keep-non-patch", str(patch)], cwd=fresh, check=False, capture_output=True,
                text=True, env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
                                "GIT_COMMITTER_NAME": "viewreplay", "GIT_COMMITTER_EMAIL": "viewreplay@localhost"},
            )
            subject = git(fresh, "log", "-1", "--format=%s").strip() if result.returncode == 0 else patch.name
            if result.returncode != 0:
                results.append(PrefixResult(index, subject, [], [], [], [], False, time.monotonic() - started,
                                            f"git am {patch.name} failed:\n{(result.stdout + result.stderr).strip()}"))
                break
            tests = _added_tests(fresh) + _changed_test_methods(fresh)
            if not tests:
                results.append(PrefixResult(index, subject, [], [], list(earlier), [], False,
                                            time.monotonic() - started, "this PR adds no tests"))
                continue
            # The scratch torch still holds the previous prefix: each test file the PR adds, and each
            # upstream test method it changes, must fail there.
            passing_before = [t for t in tests if _run_tests(stock_python, fresh, scratch, [t], timeout)[0]]
            files = _changed_torch_files(fresh, tag)
            scratch.use({rel: (fresh / rel).read_bytes() for rel in files})
            passed, output = _run_tests(stock_python, fresh, scratch, tests + earlier, timeout)
            results.append(PrefixResult(index, subject, files, tests, list(earlier), passing_before, passed,
                                        time.monotonic() - started, output))
            earlier += tests
    return results


def format_results(results: list[PrefixResult], total: int) -> str:
    lines = []
    for r in results:
        status = "ok" if r.ok else "FAIL"
        summary = r.output.splitlines()[-1] if r.output else ""
        lines.append(f"[{r.index}/{total}] {status} {r.subject}")
        lines.append(f"    torch/ files: {len(r.torch_files)}; tests: {', '.join(r.tests) or '-'} "
                     f"(+ {len(r.earlier_tests)} of earlier PRs); "
                     f"before this PR: {'fail' if not r.passing_before else 'PASS: ' + ', '.join(r.passing_before)}; "
                     f"with it: {summary} ({r.seconds:.0f} s)")
        if not r.passed:
            lines.extend("    | " + line for line in r.output.splitlines()[-40:])
    return "\n".join(lines)
