"""Stage the series for upstream: PR-sized commits on the pinned tag, exported with ``git format-patch``.

``upstream/stack.toml`` says how: one ``[[pr]]`` table per commit, in order, naming the series
patches it applies, the overlay modules it adds (as new files) and the upstream-form files it adds
from ``upstream/`` (tests, at their in-tree paths); its subject and message template; and the
``[numbers]`` the messages quote (``${name}`` placeholders). Every patch and every overlay module
must be staged exactly once, and every commit must be importable on its own: a relative import of
an overlay module (or of a name from one) that only a later commit adds is refused.

A PR that changes what an existing upstream test expects carries that change as ``test_patches``:
diffs (a few lines of context) of upstream's own test files, kept under ``upstream/``, applied with
``git apply`` in the PR's commit. The stand-in checkout (``make-checkout``) has no ``test/`` tree:
there, a test patch whose file is missing is left out of the commit and reported (stage on a real
checkout, ``--checkout``, to include it).
"""

from __future__ import annotations

import ast
import tempfile
from dataclasses import dataclass
from pathlib import Path
from string import Template

from viewreplay import ViewReplayError
from viewreplay.checkout import make_checkout
from viewreplay.gitrepo import Identity, check_upstream_checkout, git, patch_identity
from viewreplay.pin import read_toml, Repo
from viewreplay.regions import check_regions, parse_regions, Region, staged_text

STACK_FILE = Path("upstream") / "stack.toml"
UPSTREAM_DIR = "upstream"


@dataclass(frozen=True)
class PullRequest:
    """One commit of the staged series."""

    name: str
    subject: str
    body: str
    patches: list[Path]
    overlay: list[str]
    files: list[str]
    test_patches: list[str]

    def message(self, numbers: dict[str, object]) -> str:
        try:
            body = Template(self.body).substitute({k: str(v) for k, v in numbers.items()})
        except (KeyError, ValueError) as exc:
            raise ViewReplayError(f"[[pr]] {self.name}: message template: unknown or bad placeholder {exc}") from None
        return f"{self.subject}\n\n{body.strip()}\n"


@dataclass(frozen=True)
class Stack:
    path: Path
    numbers: dict[str, object]
    prs: list[PullRequest]
    # Overlay module -> its stack regions (viewreplay.regions): the lines later PRs add.
    regions: dict[str, list[Region]]

    def overlay_text(self, overlay: dict[str, bytes], rel: str, upto: int) -> str:
        """Overlay module ``rel`` as the first ``upto`` PRs leave it."""
        included = {pr.name for pr in self.prs[:upto]}
        return staged_text(overlay[rel].decode("utf-8"), self.regions[rel], included)


def _string_list(table: dict, key: str, where: str) -> list[str]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ViewReplayError(f"{where}: '{key}' must be a list of strings")
    return value


def load_stack(repo: Repo, path: Path | None = None) -> Stack:
    """Read and check the stack file against the repository's series, overlay and upstream/ files."""
    path = path or repo.root / STACK_FILE
    data = read_toml(path)
    numbers = data.get("numbers", {})
    if not isinstance(numbers, dict):
        raise ViewReplayError(f"{path}: [numbers] must be a table")
    by_name = {p.name: p for p in repo.patches}
    prs, problems = [], []
    for index, table in enumerate(data.get("pr", [])):
        where = f"{path}: [[pr]] #{index + 1}"
        name, subject, body = table.get("name"), table.get("subject"), table.get("body")
        if not all(isinstance(v, str) and v.strip() for v in (name, subject, body)):
            raise ViewReplayError(f"{where}: 'name', 'subject' and 'body' must be non-empty strings")
        patches = _string_list(table, "patches", where)
        overlay = _string_list(table, "overlay", where)
        files = _string_list(table, "files", where)
        test_patches = _string_list(table, "test_patches", where)
        problems += [f"{where}: patch {p} is not in the series" for p in patches if p not in by_name]
        problems += [f"{where}: {o} is not an overlay module" for o in overlay if o not in repo.overlay]
        problems += [
            f"{where}: {f} does not exist under {UPSTREAM_DIR}/"
            for f in files + test_patches
            if not (repo.root / UPSTREAM_DIR / f).is_file()
        ]
        for rel in test_patches:
            if (repo.root / UPSTREAM_DIR / rel).is_file():
                upstream_test_targets(repo.root / UPSTREAM_DIR / rel)
        prs.append(
            PullRequest(name, subject, body, [by_name[p] for p in patches if p in by_name], overlay, files, test_patches)
        )
    if not prs:
        raise ViewReplayError(f"{path}: no [[pr]] tables")
    staged_patches = [p.name for pr in prs for p in pr.patches]
    staged_overlay = [o for pr in prs for o in pr.overlay]
    for label, staged, expected in (
        ("patch", staged_patches, [p.name for p in repo.patches]),
        ("overlay module", staged_overlay, list(repo.overlay)),
    ):
        problems += [f"{path}: {label} {x} is staged more than once" for x in sorted(set(staged)) if staged.count(x) > 1]
        problems += [f"{path}: {label} {x} is not staged by any [[pr]]" for x in expected if x not in staged]
    if staged_patches != [p for p in (p.name for p in repo.patches) if p in staged_patches]:
        problems.append(f"{path}: patches must be staged in series order ({', '.join(staged_patches)})")
    names = [pr.name for pr in prs]
    problems += [f"{path}: [[pr]] name {n} is used more than once" for n in sorted(set(names)) if names.count(n) > 1]
    order = {pr.name: index for index, pr in enumerate(prs)}
    staged_by = {o: pr.name for pr in prs for o in pr.overlay}
    regions: dict[str, list[Region]] = {}
    for rel, content in repo.overlay.items():
        where = f"torch_overlay/{rel}"
        regions[rel] = parse_regions(content.decode("utf-8"), where) if rel.endswith(".py") else []
        if rel in staged_by:
            problems += check_regions(regions[rel], order, staged_by[rel], where)
    if problems:
        raise ViewReplayError("the stack does not match the repository:\n  " + "\n  ".join(problems))
    for pr in prs:
        pr.message(numbers)  # refuse unknown placeholders before touching any checkout
    return Stack(path=path, numbers=numbers, prs=prs, regions=regions)


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


def _apply_test_patch(repo: Repo, worktree: Path, rel: str) -> str | None:
    """Apply the upstream test patch ``rel`` in ``worktree``; return why it was left out, if it was."""
    patch = repo.root / UPSTREAM_DIR / rel
    missing = [t for t in upstream_test_targets(patch) if not (worktree / t).is_file()]
    if missing:
        return f"{rel}: left out, the checkout has no {', '.join(missing)}"
    git(worktree, "apply", "--index", "--whitespace=nowarn", str(patch))
    return None


def lint_problems(worktree: Path, files: list[str]) -> list[str]:
    """pyflakes' findings (undefined names, unused imports, ...) in the staged ``files``.

    A region that leaves a name behind, or drops the last use of an import, shows here. Lines
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


def _stage_commits(repo: Repo, stack: Stack, worktree: Path, identity: Identity) -> list[str]:
    """Create one commit per PR in ``worktree`` (detached at the tag); return the test patches left out."""
    left_out: list[str] = []
    overlay = set(repo.overlay)
    touched: list[str] = []
    staged: list[str] = []
    for index, pr in enumerate(stack.prs, 1):
        for patch in pr.patches:
            git(worktree, "apply", "--index", "--whitespace=nowarn", str(patch))
            touched += [t for t in repo.targets[patch] if t not in touched]
        staged += pr.overlay
        # Modules staged so far, as this PR leaves them (their regions up to this PR).
        changed = []
        for rel in staged:
            text = stack.overlay_text(repo.overlay, rel, index)
            target = worktree / rel
            if not target.is_file() or target.read_text(encoding="utf-8") != text:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
                changed.append(rel)
        for rel in pr.files:
            (worktree / rel).parent.mkdir(parents=True, exist_ok=True)
            (worktree / rel).write_bytes((repo.root / UPSTREAM_DIR / rel).read_bytes())
        if changed or pr.files:
            git(worktree, "add", "-f", "--", *changed, *pr.files)
        for rel in pr.test_patches:
            reason = _apply_test_patch(repo, worktree, rel)
            if reason is not None:
                left_out.append(f"[[pr]] {pr.name}: {reason}")
        problems = check_imports(worktree, touched + staged, overlay)
        if problems:
            raise ViewReplayError(
                f"{stack.path}: [[pr]] {pr.name} would not import on its own; stage the module earlier "
                "or split it:\n  " + "\n  ".join(problems)
            )
        problems = lint_problems(worktree, staged + pr.files)
        if problems:
            raise ViewReplayError(
                f"{stack.path}: [[pr]] {pr.name}: the staged files do not lint (check the stack regions "
                "of the modules named):\n  " + "\n  ".join(problems)
            )
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".msg", delete=False) as handle:
            handle.write(pr.message(stack.numbers))
        try:
            git(worktree, "commit", "-q", "--no-verify", "--cleanup=verbatim", "-F", handle.name, identity=identity)
        finally:
            Path(handle.name).unlink()
    return left_out


def stage_upstream(
    repo: Repo, out: Path, *, wheel: Path | None, checkout: Path | None, stack_path: Path | None = None,
    identity: Identity | None = None,
) -> tuple[list[Path], list[str]]:
    """Write the staged series into ``out`` (new or empty); return the patch files and the test patches left out."""
    stack = load_stack(repo, stack_path)
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
            left_out = _stage_commits(repo, stack, worktree, identity)
            out.mkdir(parents=True, exist_ok=True)
            git(worktree, "format-patch", "-q", "--no-signature", "--zero-commit", "--numbered",
                "-o", str(out.resolve()), f"{tag}..HEAD")
        finally:
            if checkout is not None:
                git(checkout, "worktree", "remove", "--force", str(worktree), check=False)
                git(checkout, "worktree", "prune", check=False)
    return sorted(out.glob("*.patch")), left_out
