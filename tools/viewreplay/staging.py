"""Stage the series for upstream: ``git am`` onto the pinned tag, exported with ``git format-patch``.

The series is the upstream stack (pin.py): one patch per PR, carrying its hooks, its overlay growth and
its own tests, with its message. Staging applies the patches one commit each, and checks what a
reviewer of each commit would: its message has the structured fields (:data:`MESSAGE_FIELDS`), it adds
at most :data:`MAX_ADDED_LINES` lines outside its tests, it imports on its own (a relative import of
an overlay module, or of a name from one, that only a later commit adds is refused) and its overlay
and test files lint clean with pyflakes.

A PR that changes what an existing upstream test expects carries that change as a test patch,
``upstream/test_patches/<name>.patch`` for the series patch ``NNNN-<name>.patch``: a diff of
upstream's own test files, applied with ``git apply`` into the PR's commit. The stand-in checkout
(``make-checkout``) has no upstream ``test/`` tree: there, a test patch whose file is missing is
left out of the commit and reported (stage on a real checkout, ``--checkout``, to include it).
"""

from __future__ import annotations

import ast
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from viewreplay import ViewReplayError
from viewreplay.checkout import make_checkout
from viewreplay.gitrepo import Identity, check_upstream_checkout, git, patch_identity
from viewreplay.pin import TEST_PREFIX, Repo, patch_sections

TEST_PATCH_DIR = Path("upstream") / "test_patches"
# Every PR message states these, each as a paragraph starting with the field name.
MESSAGE_FIELDS = ("What:", "Why:", "Upstream status:", "Tests:")
# A PR a reviewer can take in one sitting: lines it adds outside its own tests.
MAX_ADDED_LINES = 500
_NUMBER_RE = re.compile(r"^\d{4}-")


@dataclass(frozen=True)
class PullRequest:
    """One patch of the series, as the upstream PR it is."""

    name: str
    patch: Path
    # upstream/test_patches/<name>.patch, if the PR changes upstream's existing tests.
    test_patch: Path | None


def pr_name(patch: Path) -> str:
    """The PR's name: the patch's file name without its number and suffix (``fallback-point`` for ``NNNN-fallback-point.patch``)."""
    return _NUMBER_RE.sub("", patch.name).removesuffix(".patch")


def load_prs(repo: Repo) -> list[PullRequest]:
    """The series as PRs; refuse a test patch that belongs to no patch of the series."""
    prs = []
    for patch in repo.patches:
        test_patch = repo.root / TEST_PATCH_DIR / f"{pr_name(patch)}.patch"
        prs.append(PullRequest(pr_name(patch), patch, test_patch if test_patch.is_file() else None))
    known = {f"{pr.name}.patch" for pr in prs}
    stray = sorted(p.name for p in (repo.root / TEST_PATCH_DIR).glob("*.patch") if p.name not in known)
    if stray:
        raise ViewReplayError(f"{repo.root / TEST_PATCH_DIR}: {stray} name no patch of the series")
    for pr in prs:
        if pr.test_patch is not None:
            upstream_test_targets(pr.test_patch)
    return prs


def message_problems(patch: Path) -> list[str]:
    """The fields :data:`MESSAGE_FIELDS` that the patch's message lacks (as paragraph starts)."""
    text = patch.read_text(encoding="utf-8")
    message = text.split("\n---\n", 1)[0]
    return [f"{patch.name}: its message has no '{f}' paragraph" for f in MESSAGE_FIELDS
            if not re.search(rf"^{re.escape(f)}", message, re.MULTILINE)]


def added_lines(patch: Path) -> int:
    """Lines the patch adds outside its tests (``test/``)."""
    count, in_tests = 0, False
    for line in patch.read_text(encoding="utf-8").splitlines():
        if line.startswith("diff --git "):
            in_tests = line.split(" b/", 1)[1].startswith(TEST_PREFIX)
        elif line.startswith("+") and not line.startswith("+++ ") and not in_tests:
            count += 1
    return count


def series_problems(repo: Repo) -> list[str]:
    """What a reviewer would refuse in the series' messages and sizes, before any checkout."""
    problems = []
    for patch in repo.patches:
        problems += message_problems(patch)
        if added_lines(patch) > MAX_ADDED_LINES:
            problems.append(f"{patch.name}: adds {added_lines(patch)} lines outside its tests (at most {MAX_ADDED_LINES})")
    return problems


def _top_level_names(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def check_imports(worktree: Path, files: list[str], overlay: set[str]) -> list[str]:
    """Relative imports in ``files`` that name an overlay module (or a name of one) absent from ``worktree``."""
    problems = []
    for rel in files:
        if not rel.endswith(".py"):
            continue
        package = Path(rel).parent
        for node in ast.walk(ast.parse((worktree / rel).read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not node.level:
                continue
            base = package
            for _ in range(node.level - 1):
                base = base.parent
            module = base.joinpath(*node.module.split(".")) if node.module else base
            candidates = [f"{module.as_posix()}.py", f"{module.as_posix()}/__init__.py"]
            target = next((c for c in candidates if c in overlay), None)
            if node.module and target is not None and not (worktree / target).is_file():
                problems.append(f"{rel}:{node.lineno} imports {target}, which this commit does not have")
                continue
            for alias in node.names:
                sub = [f"{module.as_posix()}/{alias.name}.py", f"{module.as_posix()}/{alias.name}/__init__.py"]
                sub_overlay = next((s for s in sub if s in overlay), None)
                if sub_overlay is not None:
                    if not (worktree / sub_overlay).is_file():
                        problems.append(f"{rel}:{node.lineno} imports {sub_overlay}, which this commit does not have")
                elif target is not None and (worktree / target).is_file() and alias.name != "*":
                    if alias.name not in _top_level_names((worktree / target).read_text(encoding="utf-8")):
                        problems.append(f"{rel}:{node.lineno} imports {alias.name} from {target}, which does not define it")
    return problems


def upstream_test_targets(patch: Path) -> list[str]:
    """The upstream test files a test patch modifies; refuse one that creates, deletes or leaves ``test/``."""
    targets = []
    for number, line in enumerate(patch.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith(("new file mode", "deleted file mode", "rename from", "--- /dev/null")):
            raise ViewReplayError(f"{patch}:{number}: a test patch may only modify upstream's test files: {line}")
        if line.startswith("diff --git "):
            old, _, new = line[len("diff --git "):].partition(" ")
            if old[2:] != new[2:] or not old.startswith("a/test/"):
                raise ViewReplayError(f"{patch}:{number}: not a change of one file under test/: {line}")
            targets.append(old[2:])
    if not targets:
        raise ViewReplayError(f"{patch}: contains no 'diff --git' sections")
    return targets


def _apply_test_patch(worktree: Path, patch: Path) -> str | None:
    """Apply an upstream test patch in ``worktree``; return why it was left out, if it was."""
    missing = [t for t in upstream_test_targets(patch) if not (worktree / t).is_file()]
    if missing:
        return f"{patch.name}: left out, the checkout has no {', '.join(missing)}"
    git(worktree, "apply", "--index", "--whitespace=nowarn", str(patch))
    return None


def lint_problems(worktree: Path, files: list[str]) -> list[str]:
    """pyflakes' findings (undefined names, unused imports, ...) in the staged ``files``.

    A commit that leaves a name behind, or drops the last use of an import, shows here. Lines
    marked ``# noqa`` (such as a config module's star import) are not reported.
    """
    from pyflakes.api import check
    from pyflakes.reporter import Reporter

    class Collect(Reporter):
        """Keeps pyflakes' findings, except on the lines of ``source`` marked ``# noqa``."""

        def __init__(self, source: str) -> None:
            self.lines = source.splitlines()
            self.found: list[str] = []

        def unexpectedError(self, filename, msg) -> None:  # noqa: N802 - pyflakes' interface
            self.found.append(f"{filename}: {msg}")

        def syntaxError(self, filename, msg, lineno, offset, text) -> None:  # noqa: N802
            self.found.append(f"{filename}:{lineno}: {msg}")

        def flake(self, message) -> None:
            if "# noqa" not in self.lines[message.lineno - 1]:
                self.found.append(str(message))

    problems = []
    for rel in files:
        if rel.endswith(".py"):
            source = (worktree / rel).read_text(encoding="utf-8")
            reporter = Collect(source)
            check(source, rel, reporter)
            problems += reporter.found
    return problems


def _commit_problems(worktree: Path, pr: PullRequest, repo: Repo) -> list[str]:
    """What keeps this commit from standing alone: imports of later modules, lint findings."""
    sections = patch_sections(pr.patch, overlay=repo.overlay_paths)
    overlay = set(repo.overlay)
    present = [rel for rel in sorted(overlay) if (worktree / rel).is_file()]
    problems = check_imports(worktree, sections.hooks + present, overlay)
    changed = [rel for rel in sections.overlay + sections.tests if (worktree / rel).is_file()]
    return problems + lint_problems(worktree, changed)


def _stage_commits(repo: Repo, worktree: Path, identity: Identity) -> list[str]:
    """Apply one commit per PR in ``worktree`` (detached at the tag); return the test patches left out."""
    left_out: list[str] = []
    for pr in load_prs(repo):
        try:
            git(worktree, "am", "-q", "--keep-non-patch", "--committer-date-is-author-date", str(pr.patch),
                identity=identity)
        except ViewReplayError as exc:
            git(worktree, "am", "--abort", check=False)
            raise ViewReplayError(f"{pr.patch}: does not apply on {repo.pin.upstream_tag}: {exc}") from None
        if pr.test_patch is not None:
            reason = _apply_test_patch(worktree, pr.test_patch)
            if reason is None:
                git(worktree, "commit", "-q", "--amend", "--no-edit", "--no-verify", identity=identity)
            else:
                left_out.append(f"{pr.name}: {reason}")
        problems = _commit_problems(worktree, pr, repo)
        if problems:
            raise ViewReplayError(
                f"{pr.patch.name}: the commit does not stand on its own (move the code it needs into it, "
                "or what it adds too early out of it):\n  " + "\n  ".join(problems)
            )
    return left_out


def stage_upstream(
    repo: Repo, out: Path, *, wheel: Path | None, checkout: Path | None, identity: Identity | None = None
) -> tuple[list[Path], list[str]]:
    """Write the staged series into ``out`` (new or empty); return the patch files and the test patches left out."""
    problems = series_problems(repo)
    if problems:
        raise ViewReplayError("the series is not ready for review:\n  " + "\n  ".join(problems))
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ViewReplayError(f"{out}: exists and is not an empty directory")
    identity = identity or patch_identity(repo.patches[0])
    tag = repo.pin.upstream_tag
    with tempfile.TemporaryDirectory(prefix="viewreplay-stage-") as tmp:
        worktree = Path(tmp) / "pytorch"
        if checkout is not None:
            check_upstream_checkout(checkout, repo.pin)
            git(checkout, "worktree", "add", "-q", "--detach", str(worktree), tag)
        else:
            if wheel is None:
                raise ViewReplayError("stage-upstream needs --checkout DIR or the pinned wheel")
            make_checkout(repo.pin, wheel, worktree, all_files=False)
        try:
            left_out = _stage_commits(repo, worktree, identity)
            out.mkdir(parents=True, exist_ok=True)
            git(worktree, "format-patch", "-q", "--no-signature", "--zero-commit", "--numbered",
                "-o", str(out.resolve()), f"{tag}..HEAD")
        finally:
            if checkout is not None:
                git(checkout, "worktree", "remove", "--force", str(worktree), check=False)
                git(checkout, "worktree", "prune", check=False)
    return sorted(out.glob("*.patch")), left_out
