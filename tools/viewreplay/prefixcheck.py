"""Check every prefix of the staged upstream stack: it applies with ``git am`` and its tests pass.

The series (one patch per PR) is staged on a fresh stand-in checkout of the pinned tag (or a real
one, ``--checkout``), then applied one PR at a time with ``git am`` onto another fresh checkout. A
PR's tests are the test files it adds (``test/**/test_*.py``) and, with ``--checkout``, the
upstream test methods its test patches change. What is checked where:

- at each prefix k, PR k's own tests run against the previous prefix's torch, where each test file
  (or method) must fail (they test what the PR changes; a test that cannot fail is a defect), and
  against a torch holding exactly prefix k's ``torch/`` files, where they must pass;
- at the last prefix (the whole stack), every PR's tests run together, in one process, and must all pass: a later
  PR must not break what an earlier one tests. Earlier PRs' tests are not rerun at the
  intermediate prefixes (that made the check quadratic): a PR that breaks an earlier PR's test
  while a later one repairs it is not caught, the stack as it lands is.

Every prefix is applied first (``git am`` is quick); then the tests run, ``--jobs`` pytest processes
at once (default 2), each with its own scratch torch and its own copy of the ``test/`` tree of the
commit whose tests it runs: the whole-stack run first (the longest), then one process per prefix.
The previous prefix's torch is the torch on which PR k's tests must fail, so PR k-1's "with it" run
and PR k's "before" run are one process, on the ``test/`` tree of prefix k. That is exact when PR k
only adds test files (PR k-1's test files are then the same at both prefixes); where PR k changes or
deletes an existing test file, PR k-1's tests run in a process of their own, on prefix k-1's tree.
The last PR's "with it" run is the whole-stack run. Outcomes are per test file (or method), read
from a small pytest plugin's report (every test's setup, call and teardown, and each collection
error; ``--continue-on-collection-errors``, since a test of a later PR usually fails to import
before it): a file fails when any of its tests fails or errors or it does not import, passes when at
least one of its tests ran and none failed; a file none of whose tests ran counts as neither.

``--pr NAME`` checks one PR: the prefixes before it are applied with ``git am`` and not tested,
then its tests must fail before it and pass with it.

Each process's torch is a scratch copy of the stock venv's ``torch`` package made of hard links (no
copy of its 750 MB, no wheel per prefix; one per ``--jobs`` slot). The files a prefix changes replace
their links (unlink, then write: the stock file behind a link is never written), and the previous
job's are linked back to stock. The stock interpreter imports the scratch copy first through ``PYTHONPATH``; its other
packages (numpy, sympy, pytest, ...) come from the stock venv.
"""

from __future__ import annotations

import ast
import concurrent.futures
import json
import os
import queue
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from viewreplay import ViewReplayError
from viewreplay.checkout import make_checkout
from viewreplay.gitrepo import git
from viewreplay.pin import Repo
from viewreplay.staging import pr_name, stage_upstream


FAILED, PASSED, NOT_RUN = "failed", "passed", "not run"


@dataclass
class PrefixResult:
    """One prefix of the stack: the PR it ends with, what it changed and how its tests ran."""

    index: int
    subject: str
    torch_files: list[str]
    tests: list[str]
    # Each test (file or method) of the PR: its outcome on the previous prefix's torch, and on this one's.
    before: dict[str, str] = field(default_factory=dict)
    after: dict[str, str] = field(default_factory=dict)
    # Why the prefix fails without its tests being run ('' when they ran).
    problem: str = ""
    seconds: float = 0.0
    # The output of the pytest runs where its tests did not do as they must.
    output: str = ""

    @property
    def passing_before(self) -> list[str]:
        return [t for t, outcome in self.before.items() if outcome != FAILED]

    @property
    def failing_after(self) -> list[str]:
        return [t for t in self.tests if self.after.get(t) != PASSED]

    @property
    def ok(self) -> bool:
        return not self.problem and bool(self.tests) and not self.passing_before and not self.failing_after


@dataclass
class StackResult:
    """Every PR's tests, run together on the whole stack."""

    tests: list[str]
    outcomes: dict[str, str]
    seconds: float
    output: str

    @property
    def failing(self) -> list[str]:
        return [t for t in self.tests if self.outcomes.get(t) != PASSED]

    @property
    def ok(self) -> bool:
        return not self.failing


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


# The pytest plugin that writes every test's outcome (loaded with -p from a private directory, so that the
# interpreter under test needs nothing but pytest).
PLUGIN = "viewreplay_prefix_outcomes"
PLUGIN_SOURCE = """\
import json, os

_reports = []


def pytest_collectreport(report):
    if report.failed:
        _reports.append([report.nodeid, "collect", "failed"])


def pytest_runtest_logreport(report):
    _reports.append([report.nodeid, report.when, report.outcome])


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller writes
        return
    with open(os.environ["VIEWREPLAY_OUTCOMES"], "w", encoding="utf-8") as handle:
        json.dump({"rootdir": str(session.config.rootpath), "reports": _reports}, handle)
"""


def _test_env(scratch: ScratchTorch, plugin_dir: Path | None = None) -> dict[str, str]:
    path = os.pathsep.join(str(p) for p in (scratch.purelib, plugin_dir) if p is not None)
    return {**os.environ, "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_ADDOPTS": ""}


def _check_scratch_import(python: str, scratch: ScratchTorch, cwd: Path) -> None:
    """Refuse to test unless ``import torch`` gives the scratch copy (not stock, not the checkout's sources)."""
    probe = "import torch, sys; sys.stdout.write(torch.__file__)"
    result = subprocess.run([python, "-c", probe], cwd=cwd, env=_test_env(scratch), check=False,
                            capture_output=True, text=True)
    if result.returncode != 0 or not result.stdout.startswith(str(scratch.torch)):
        raise ViewReplayError(f"the scratch torch does not import: {(result.stdout + result.stderr).strip()[-2000:]}")


def unit_outcomes(units: list[str], checkout: Path, report: dict) -> dict[str, str]:
    """Each unit's outcome (a test file, or ``file::Class::method``, relative to the checkout) from the plugin's
    report: FAILED if a test of it failed or errored or its file did not import, PASSED if one ran and none
    failed, NOT_RUN if none ran."""
    rootdir = Path(report["rootdir"]).resolve()
    by_file: dict[Path, list[tuple[str, str]]] = {}
    for nodeid, _when, outcome in report["reports"]:
        path, _, rest = nodeid.partition("::")
        by_file.setdefault((rootdir / path).resolve(), []).append((rest, outcome))
    outcomes = {}
    for unit in units:
        path, _, wanted = unit.partition("::")
        found = [
            outcome for rest, outcome in by_file.get((checkout / path).resolve(), [])
            if not rest or not wanted or rest == wanted or rest.startswith(wanted + "[")
        ]
        outcomes[unit] = FAILED if FAILED in found else PASSED if found else NOT_RUN
    return outcomes


@dataclass
class _Job:
    """One pytest process: ``units`` from the test/ tree of ``commit``, against a torch holding ``torch_files``."""

    torch_files: dict[str, bytes]
    commit: str
    units: list[str]
    # The PR whose "before" outcomes it gives, the PR whose "with it" outcomes it gives, or the whole stack.
    before_of: PrefixResult | None = None
    after_of: PrefixResult | None = None
    stack: bool = False


@dataclass
class _Slot:
    """What one pytest process at a time needs of its own: a scratch torch, a test tree, an outcomes file."""

    scratch: ScratchTorch
    root: Path


class _Runner:
    """Runs jobs, at most ``workers`` pytest processes at once, each slot with its own scratch torch."""

    def __init__(self, python: str, source: Path, purelib: Path, work: Path, timeout: float, workers: int) -> None:
        self.python, self.source, self.timeout = python, source, timeout
        self.plugin_dir = work / "plugin"
        self.plugin_dir.mkdir()
        (self.plugin_dir / f"{PLUGIN}.py").write_text(PLUGIN_SOURCE, encoding="utf-8")
        self.slots: queue.Queue[_Slot] = queue.Queue()
        for number in range(max(workers, 1)):
            slot = _Slot(ScratchTorch(purelib, work / f"site-packages-{number}"), work / f"tests-{number}")
            self.slots.put(slot)
        self.workers = max(workers, 1)

    def check_import(self) -> None:
        slot = self.slots.get()
        try:
            slot.root.mkdir(parents=True, exist_ok=True)
            _check_scratch_import(self.python, slot.scratch, slot.root)
        finally:
            self.slots.put(slot)

    def run_all(self, jobs: list[_Job], done: Callable[[_Job, dict[str, str], str, float], None]) -> None:
        """Run every job (in this order, ``workers`` at a time); ``done`` gets each result, in this thread."""
        with concurrent.futures.ThreadPoolExecutor(max_workers=self.workers) as pool:
            futures = {pool.submit(self._run, job): job for job in jobs}
            for future in concurrent.futures.as_completed(futures):
                done(futures[future], *future.result())

    def _run(self, job: _Job) -> tuple[dict[str, str], str, float]:
        slot = self.slots.get()
        try:
            slot.scratch.use(job.torch_files)
            if slot.root.exists():
                shutil.rmtree(slot.root)
            slot.root.mkdir()
            # The job's test/ tree, as the commit has it (the checkout moves on meanwhile).
            archive = subprocess.run(["git", "archive", "--format=tar", job.commit, "test"], cwd=self.source,
                                     check=False, capture_output=True)
            if archive.returncode == 0:
                subprocess.run(["tar", "-x", "-C", str(slot.root)], input=archive.stdout, check=True)
            (slot.root / "test").mkdir(exist_ok=True)
            return self.run(slot, job.units)
        finally:
            self.slots.put(slot)

    def run(self, slot: _Slot, units: list[str]) -> tuple[dict[str, str], str, float]:
        """(outcome per unit, pytest's output, seconds)."""
        started = time.monotonic()
        outcomes_file = slot.root / ".outcomes.json"
        outcomes_file.unlink(missing_ok=True)
        command = [self.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", PLUGIN,
                   "--continue-on-collection-errors", *[str(slot.root / u) for u in units]]
        env = {**_test_env(slot.scratch, self.plugin_dir), "VIEWREPLAY_OUTCOMES": str(outcomes_file)}
        try:
            result = subprocess.run(command, cwd=slot.root / "test", env=env, check=False,
                                    capture_output=True, text=True, timeout=self.timeout)
            output = (result.stdout + result.stderr).strip()
        except subprocess.TimeoutExpired:
            output = f"pytest did not finish within {self.timeout:.0f} s"
        try:
            report = json.loads(outcomes_file.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            report = {"rootdir": str(slot.root), "reports": []}
        return unit_outcomes(units, slot.root, report), output, time.monotonic() - started


def _git_am(checkout: Path, patch: Path) -> str | None:
    """Apply one staged patch with git am; the reason it does not apply, or None."""
    result = subprocess.run(
        ["git", "am", "-q", "--keep-non-patch", str(patch)], cwd=checkout, check=False, capture_output=True,
        text=True, env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
                        "GIT_COMMITTER_NAME": "viewreplay", "GIT_COMMITTER_EMAIL": "viewreplay@localhost"},
    )
    if result.returncode == 0:
        return None
    return f"git am {patch.name} failed:\n{(result.stdout + result.stderr).strip()}"


def changes_existing_tests(patch: Path) -> bool:
    """Whether a staged patch changes or deletes a file under test/ (rather than only adding new ones)."""
    lines = patch.read_text(encoding="utf-8", errors="replace").splitlines()
    for number, line in enumerate(lines):
        if line.startswith("diff --git a/test/"):
            following = lines[number + 1] if number + 1 < len(lines) else ""
            if not following.startswith("new file mode"):
                return True
    return False


def resolve_pr(repo: Repo, name: str) -> int:
    """The 1-based index in the series of the PR ``name`` (``same-object-outputs``, or its patch's file name)."""
    for index, patch in enumerate(repo.patches, 1):
        if name in (pr_name(patch), patch.name, patch.stem):
            return index
    raise ViewReplayError(
        f"--pr {name}: no such PR in {repo.root / 'patches' / 'series'} (a patch's name without its number and "
        f".patch, e.g. {pr_name(repo.patches[-1])})"
    )


def check_prefixes(
    repo: Repo, wheel: Path, stock_python: str, *, checkout: Path | None = None, timeout: float = 1800,
    pr: str | None = None, jobs: int = 2, progress: Callable[[str], None] | None = None,
) -> tuple[list[PrefixResult], StackResult | None]:
    """Stage the stack, apply every prefix, then run their tests (module docstring), ``jobs`` pytest processes at
    once; stop at the first prefix that does not apply. With ``pr``, apply the prefixes up to that PR and test
    only it. ``progress`` gets each prefix's lines as soon as they are known, in order."""
    target = resolve_pr(repo, pr) if pr is not None else None
    tag = repo.pin.upstream_tag
    if os.sep in stock_python:  # the tests run in the checkout: keep the venv's path, do not resolve the link
        stock_python = os.path.abspath(stock_python)
    purelib = _stock_purelib(stock_python)
    total = len(repo.patches)
    with tempfile.TemporaryDirectory(prefix="viewreplay-prefixes-") as tmp:
        work = Path(tmp)
        if checkout is None:  # one stand-in checkout, extracted once: staged on (a worktree of it) and cloned
            checkout = work / "stand-in"
            make_checkout(repo.pin, wheel, checkout, all_files=False)
        patches, _ = stage_upstream(repo, work / "staged", wheel=None, checkout=checkout)
        fresh = work / "pytorch"
        git(work, "clone", "-q", str(checkout), str(fresh))
        git(fresh, "checkout", "-q", "--detach", tag)
        runner = _Runner(stock_python, fresh, purelib, work, timeout, jobs)
        runner.check_import()

        # Apply every prefix first (git am is quick): its commit, torch/ files and tests.
        results: list[PrefixResult] = []
        commits: list[str] = []
        torch_at: list[dict[str, bytes]] = [{}]  # prefix k's torch/ files (0: stock)
        separate: list[bool] = []  # PR k changes an existing test file: PR k-1's tests run on their own tree
        last = target or len(patches)
        for index, patch in enumerate(patches[:last], 1):
            separate.append(changes_existing_tests(patch))
            problem = _git_am(fresh, patch)
            if problem is not None:
                results.append(PrefixResult(index, patch.name, [], [], problem=problem))
                break
            result = PrefixResult(index, git(fresh, "log", "-1", "--format=%s").strip(),
                                  _changed_torch_files(fresh, tag), _added_tests(fresh) + _changed_test_methods(fresh))
            if not result.tests:
                result.problem = "this PR adds no tests"
            results.append(result)
            commits.append(git(fresh, "rev-parse", "HEAD").strip())
            torch_at.append({rel: (fresh / rel).read_bytes() for rel in result.torch_files})
        applied = len(commits)
        stack_ok = target is None and applied == len(patches)

        # The pytest processes: the whole stack first (the longest), then one per prefix.
        plan: list[_Job] = []
        every_test = [t for r in results[:applied] for t in r.tests]
        if stack_ok and every_test:
            plan.append(_Job(torch_at[applied], commits[-1], every_test, after_of=results[applied - 1], stack=True))
        first = target or 1
        for k in range(first, applied + 1):
            result = results[k - 1]
            pending = results[k - 2] if k > first else None  # its "with it" run is on this torch (prefix k-1)
            if pending is not None and not pending.tests:
                pending = None
            if pending is not None and separate[k - 1]:
                plan.append(_Job(torch_at[k - 1], commits[k - 2], pending.tests, after_of=pending))
                pending = None
            units = (pending.tests if pending is not None else []) + result.tests
            if units:
                plan.append(_Job(torch_at[k - 1], commits[k - 1], units, before_of=result if result.tests else None,
                                 after_of=pending))
        if applied >= first and results[applied - 1].tests and not stack_ok:
            # The last applied prefix's "with it" run, where no whole-stack run gives it.
            plan.append(_Job(torch_at[applied], commits[applied - 1], results[applied - 1].tests,
                             after_of=results[applied - 1]))

        stack: StackResult | None = None
        shown = first - 1

        def done(job: _Job, outcomes: dict[str, str], output: str, seconds: float) -> None:
            nonlocal stack, shown
            if job.stack:
                stack = StackResult(job.units, outcomes, seconds, output)
            if job.before_of is not None:
                result = job.before_of
                result.before = {t: outcomes[t] for t in result.tests}
                result.seconds += seconds
                if result.passing_before:
                    result.output += ("\n" if result.output else "") + output
            if job.after_of is not None:
                result = job.after_of
                result.after = {t: outcomes[t] for t in result.tests}
                result.seconds += 0.0 if job.before_of is not None or job.stack else seconds
                if result.failing_after:
                    result.output += ("\n" if result.output else "") + output
            while shown < len(results) and _complete(results[shown]):
                if progress is not None:
                    progress(format_prefix(results[shown], total))
                shown += 1

        runner.run_all(plan, done)
        if target is not None:
            results = results[target - 1:] if len(results) >= target else results[-1:]
    return results, stack


def _complete(result: PrefixResult) -> bool:
    """Whether every run of the prefix has reported (or it has a problem, and none will)."""
    return bool(result.problem and not result.tests) or (
        len(result.before) == len(result.tests) and len(result.after) == len(result.tests))


HEADER = ("each PR's own tests must fail on the previous prefix and pass on its own; "
          "every PR's tests must pass together on the whole stack")


def format_prefix(r: PrefixResult, total: int) -> str:
    """A prefix's lines: its verdict, its tests' outcomes before and with it, and the failing output."""
    lines = [f"[{r.index}/{total}] {'ok' if r.ok else 'FAIL'} {r.subject}"]
    if r.problem:
        lines.append(f"    {r.problem.splitlines()[0]}")
        lines.extend("    | " + line for line in r.problem.splitlines()[1:][-40:])
        return "\n".join(lines)
    before = "fail" if not r.passing_before else "PASS (must fail): " + ", ".join(
        f"{t} ({r.before[t]})" for t in r.passing_before)
    after = "pass" if not r.failing_after else "FAIL (must pass): " + ", ".join(
        f"{t} ({r.after.get(t, NOT_RUN)})" for t in r.failing_after)
    lines.append(f"    torch/ files: {len(r.torch_files)}; tests: {', '.join(r.tests)}; "
                 f"before this PR: {before}; with it: {after} ({r.seconds:.0f} s)")
    if r.output and not r.ok:
        lines.extend("    | " + line for line in r.output.splitlines()[-40:])
    return "\n".join(lines)


def format_stack(stack: StackResult, prs: int) -> str:
    """The whole-stack run's lines."""
    summary = stack.output.splitlines()[-1] if stack.output else ""
    lines = [f"[stack] {'ok' if stack.ok else 'FAIL'} the tests of all {prs} PR(s) ({len(stack.tests)} file(s) or "
             f"method(s)) together on the whole stack: {summary} ({stack.seconds:.0f} s)"]
    if not stack.ok:
        lines.append("    FAIL (must pass): " + ", ".join(f"{t} ({stack.outcomes.get(t, NOT_RUN)})"
                                                         for t in stack.failing))
        lines.extend("    | " + line for line in stack.output.splitlines()[-40:])
    return "\n".join(lines)
