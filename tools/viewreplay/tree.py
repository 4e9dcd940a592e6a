"""Torch trees: locate one, detect its version and patch state, apply/revert transactionally."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from viewreplay import ViewReplayError
from viewreplay.pin import OVERLAY_PACKAGE, Pin, Repo, find_repo, sha256_bytes
from viewreplay.tip import check_tip

PRISTINE = "pristine"
APPLIED = "applied"
PARTIAL = "partial"
# Applied, but with another revision of the series than the repository's (Assessment.describe says what differs).
STALE = "stale"

_VERSION_PY_RE = re.compile(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", re.MULTILINE)
_PUBLIC_VERSION_RE = re.compile(r"^\d+(?:\.\d+)*")


@dataclass(frozen=True)
class Tree:
    """A torch tree: ``root`` is the directory that contains ``torch/``."""

    root: Path
    form: str
    version: str


def tree_version(root: Path) -> str:
    """Return the version of the tree at ``root`` (``version.txt`` first, else ``torch/version.py``)."""
    version_txt = root / "version.txt"
    if version_txt.is_file():
        return version_txt.read_text(encoding="utf-8").strip()
    version_py = root / "torch" / "version.py"
    try:
        match = _VERSION_PY_RE.search(version_py.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ViewReplayError(f"{version_py}: file not found; cannot tell the torch version") from None
    if not match:
        raise ViewReplayError(f"{version_py}: no __version__ assignment found")
    return match.group(1)


def public_version(version: str) -> str:
    """Strip the local segment and any pre-release suffix: ``2.13.0a0+git`` gives ``2.13.0``."""
    match = _PUBLIC_VERSION_RE.match(version.partition("+")[0])
    return match.group(0) if match else version


def locate_tree(path: Path, pin: Pin) -> Tree:
    """Recognise ``path`` as a torch tree whose version matches the pin, or refuse."""
    path = path.resolve()
    if path.name == "torch" and (path / "__init__.py").is_file():
        path = path.parent
    if not (path / "torch" / "__init__.py").is_file():
        raise ViewReplayError(
            f"{path}: not a torch tree (expected a site-packages dir containing torch/, "
            "the torch/ package dir, or a source checkout with torch/ and version.txt)"
        )
    form = "checkout" if (path / "version.txt").is_file() else "site-packages"
    version = tree_version(path)
    if public_version(version) != pin.version:
        source = path / ("version.txt" if form == "checkout" else "torch/version.py")
        raise ViewReplayError(
            f"{source}: torch version {version} does not match the pinned {pin.version} ({pin.path}; "
            "--pin selects another pin)"
        )
    return Tree(root=path, form=form, version=version)


class PatchError(ViewReplayError):
    """A patch did not apply cleanly in the staging directory."""


def apply_series(contents: dict[str, bytes], patches: Sequence[Path], *, reverse: bool) -> dict[str, bytes]:
    """Apply ``patches`` (reverse: last first, with ``-R``) to in-memory files via ``git apply``.

    Only the paths in ``contents`` are patched; the work happens in a private staging
    directory, never in a tree.
    """
    with tempfile.TemporaryDirectory(prefix="viewreplay-stage-") as tmp:
        stage = Path(tmp)
        for rel, data in contents.items():
            (stage / rel).parent.mkdir(parents=True, exist_ok=True)
            (stage / rel).write_bytes(data)
        env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(stage.parent)}
        includes = [f"--include={rel}" for rel in contents]
        for patch in reversed(patches) if reverse else patches:
            command = ["git", "apply", "--whitespace=nowarn", *(["-R"] if reverse else []), *includes, str(patch)]
            result = subprocess.run(command, cwd=stage, env=env, check=False, capture_output=True, text=True)
            if result.returncode != 0:
                how = "reverse-apply" if reverse else "apply"
                raise PatchError(f"{patch}: does not {how} cleanly: {result.stderr.strip()}")
        return {rel: (stage / rel).read_bytes() for rel in contents}


@dataclass
class Assessment:
    """The patch state of a tree: each pinned upstream file and each overlay file, classified.

    Upstream files (the pin's ``[files]``): ``pristine`` (the pinned hash), ``patched`` (the current
    series' hooks on the pinned file: reverse-applying them gives the pinned hash), ``unexplained``
    (neither: hooks of another revision of the series, or a hand edit) or ``missing``. Overlay files
    (the tree's, :func:`tree_overlay`, against the repository's ``torch_overlay/``): ``identical``,
    ``different``, ``absent`` (the repository's, not in the tree) and ``extra`` (the tree's, not the
    repository's).
    """

    state: str
    problems: list[str] = field(default_factory=list)
    current: dict[str, bytes] = field(default_factory=dict)
    reverted: dict[str, bytes] = field(default_factory=dict)
    pristine: list[str] = field(default_factory=list)
    patched: list[str] = field(default_factory=list)
    unexplained: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    identical: list[str] = field(default_factory=list)
    different: list[str] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)

    @property
    def overlay_in_tree(self) -> list[str]:
        """The overlay files the tree holds, the repository's or not."""
        return sorted(self.identical + self.different + self.extra)

    @property
    def holds_overlay(self) -> bool:
        """Whether the tree holds overlay files (the series, of some revision, was applied)."""
        return bool(self.overlay_in_tree)

    @property
    def stale_overlay(self) -> list[str]:
        """The overlay files where the tree and the repository differ."""
        return sorted(self.different + self.absent + self.extra)

    @property
    def stale_hooks(self) -> list[str]:
        """The upstream files that do not hold the current series' hooks."""
        return sorted(self.pristine + self.unexplained)

    def describe(self) -> str:
        """The state in words: ``pristine``, ``applied``, ``partial``, or ``applied, stale overlay: ...``."""
        if self.state != STALE:
            return self.state
        parts = []
        if self.stale_overlay:
            parts.append(f"stale overlay: {len(self.stale_overlay)} file(s) differ from the repository's: "
                         + ", ".join(_short(rel) for rel in self.stale_overlay))
        if self.stale_hooks:
            parts.append(f"stale hooks: {len(self.stale_hooks)} upstream file(s) differ from what the series "
                         "makes of them: " + ", ".join(_short(rel) for rel in self.stale_hooks))
        return "applied, " + "; ".join(parts)


def _short(rel: str) -> str:
    """A file of the view replay package by its path in the package (the shortest that names it); any other whole."""
    return rel.removeprefix(OVERLAY_PACKAGE)


def added_packages(repo: Repo) -> list[str]:
    """The packages the series adds (their ``__init__.py`` is an overlay file), as tree paths ending in ``/``.

    The pinned release has no such directory, so every file in one is the series' own.
    """
    inits = (rel for rel in repo.overlay_files if rel.rpartition("/")[2] == "__init__.py")
    return sorted({rel.removesuffix("__init__.py") for rel in inits})


def _is_source(path: Path) -> bool:
    """Whether a tree entry is a file that counts (not a directory, ``__pycache__`` or bytecode)."""
    return (path.is_file() or path.is_symlink()) and "__pycache__" not in path.parts and path.suffix != ".pyc"


def tree_overlay(repo: Repo, tree: Tree) -> dict[str, Path]:
    """The tree's overlay files, by tree-relative path: each file the series creates, wherever it lives, and
    every file of a package it adds (a module an earlier revision of the series had, too)."""
    found = {rel: tree.root / rel for rel in repo.overlay_files if _is_source(tree.root / rel)}
    for package in added_packages(repo):
        base = tree.root / package
        if base.is_dir():
            found.update((path.relative_to(tree.root).as_posix(), path) for path in base.rglob("*") if _is_source(path))
    return dict(sorted(found.items()))


def _package_bytecode(repo: Repo, tree: Tree) -> list[Path]:
    """The bytecode files in the packages the series adds (a revert removes these packages whole)."""
    found: set[Path] = set()
    for package in added_packages(repo):
        base = tree.root / package
        if base.is_dir():
            found.update(path for path in base.rglob("*") if not path.is_dir() and not _is_source(path))
    return sorted(found)


def assess(repo: Repo, tree: Tree) -> Assessment:
    """Classify the tree: pristine, applied (series + overlay), stale (applied, another revision) or partial.

    Stale: the tree holds overlay files and hooks, but not exactly the repository's (an overlay
    edited and exported since the tree was applied, a hook changed, a hand edit). Partial: any other
    mix (a pinned file missing, hooks without an overlay, an overlay without hooks).
    """
    result = Assessment(state=PARTIAL)
    for rel in repo.touched_files:
        path = tree.root / rel
        if not path.is_file():
            result.missing.append(rel)
            result.problems.append(f"{path}: pinned file is missing")
        else:
            result.current[rel] = path.read_bytes()

    for rel, data in result.current.items():
        digest = sha256_bytes(data)
        if digest == repo.pin.files[rel]:
            result.pristine.append(rel)
            continue
        touching = [patch for patch in repo.patches if rel in repo.targets[patch]]
        try:
            reverted = apply_series({rel: data}, touching, reverse=True)[rel]
        except PatchError:
            reverted = None
        if reverted is not None and sha256_bytes(reverted) == repo.pin.files[rel]:
            result.patched.append(rel)
            result.reverted[rel] = reverted
        else:
            result.unexplained.append(rel)
            result.problems.append(
                f"{tree.root / rel}: sha256 {digest} differs from {repo.pin.path.name} "
                "and is not explained by the patch series"
            )

    in_tree = tree_overlay(repo, tree)
    for rel, data in repo.overlay.items():
        path = in_tree.get(rel)
        if path is None:
            result.absent.append(rel)
        elif path.is_file() and path.read_bytes() == data:
            result.identical.append(rel)
        else:
            result.different.append(rel)
    result.extra = sorted(in_tree.keys() - repo.overlay.keys())

    if result.missing:
        return result
    hooked = result.patched or result.unexplained
    if not hooked and not result.holds_overlay:
        result.state = PRISTINE
        return result
    if not result.stale_hooks and not result.stale_overlay:
        result.state = APPLIED
        return result
    if hooked and result.holds_overlay:
        result.state = STALE
    for label, rels in (
        ("patched", result.patched),
        ("not patched", result.pristine),
        ("overlay file present", result.identical),
        ("overlay file missing", result.absent),
        ("overlay file differs from the repository's", result.different),
        ("overlay file not in the repository", result.extra),
    ):
        result.problems.extend(f"{tree.root / rel}: {label}" for rel in rels)
    return result


def command_hint(repo: Repo, command: str, *args: str | Path) -> str:
    """A ``viewreplay`` command line that runs from the current directory: ``--repo`` where the cwd is not
    in the repository, ``--pin`` where the pin is not the default (the newest)."""
    words = ["viewreplay", command]
    try:
        here = find_repo(Path.cwd())
    except ViewReplayError:
        here = None
    if here != repo.root.resolve():
        words += ["--repo", str(repo.root)]
    if not repo.pin.newest:
        words += ["--pin", repo.pin.version]
    return shlex.join([*words, *(str(a) for a in args)])


@dataclass
class Plan:
    """The complete set of file changes of one apply or revert."""

    writes: dict[Path, bytes] = field(default_factory=dict)
    deletes: list[Path] = field(default_factory=list)
    # Upstream files a revert takes from the pinned wheel (the current series does not explain them).
    from_wheel: list[str] = field(default_factory=list)


# Gives the pinned upstream wheel (obtained only when a revert needs it).
WheelSource = Callable[[], Path]


def plan_change(repo: Repo, tree: Tree, *, revert: bool, wheel: WheelSource | None = None) -> Plan:
    """Compute every new file content for apply (or revert) and check the tree is writable."""
    assessment = assess(repo, tree)
    if revert:
        plan = _plan_revert(repo, tree, assessment, wheel)
    else:
        if assessment.state != PRISTINE:
            if assessment.state == APPLIED:
                reason = "the tree is already applied"
            elif assessment.state == STALE:
                reason = (f"the tree is {assessment.describe()}; revert it first: "
                          + command_hint(repo, "apply", "--revert", tree.root) + "\n  "
                          + "\n  ".join(assessment.problems))
            else:
                reason = "the tree is partially patched or modified:\n  " + "\n  ".join(assessment.problems)
            raise ViewReplayError(f"{tree.root}: refusing to apply: {reason}")
        check_tip(repo)
        plan = Plan()
        patched = apply_series(assessment.current, repo.patches, reverse=False)
        plan.writes = {tree.root / rel: data for rel, data in patched.items()}
        plan.writes.update({tree.root / rel: data for rel, data in repo.overlay.items()})
    check_writable(plan)
    return plan


def _plan_revert(repo: Repo, tree: Tree, assessment: Assessment, wheel: WheelSource | None) -> Plan:
    """Every pinned file back to its pinned hash, every overlay file removed, or one line why not.

    A file the current series' hooks explain is reverse-patched; any other changed (or missing) pinned file is
    taken from the pinned wheel (its hash checked), but only in a tree that holds overlay files: the
    evidence that the series, of some revision, was applied to it (not a stock tree edited by hand).
    The overlay files are the series' own (the pinned release has none of them), so every one in the
    tree (:func:`tree_overlay`) goes, whether or not it is the repository's, and so does the bytecode
    in a package the series adds.
    """

    def refuse(reason: str) -> ViewReplayError:
        return ViewReplayError(f"{tree.root}: refusing to revert: {reason}")

    if assessment.state == PRISTINE:
        raise refuse("the tree is already pristine")
    restore = sorted(assessment.unexplained + assessment.missing)
    if restore and not assessment.holds_overlay:
        raise refuse(
            f"{', '.join(restore)}: missing or changed, and not by the current series' hooks, in a tree that holds "
            "no overlay (not a tree the series was applied to)"
        )
    plan = Plan()
    plan.writes = {tree.root / rel: data for rel, data in assessment.reverted.items()}
    if restore:
        if wheel is None:
            raise refuse(f"{', '.join(restore)}: not the current series' hooks, and no pinned wheel to restore "
                         "them from")
        source = wheel()
        with zipfile.ZipFile(source) as archive:
            for rel in restore:
                try:
                    data = archive.read(rel)
                except KeyError:
                    raise refuse(f"{source}: has no {rel}") from None
                if sha256_bytes(data) != repo.pin.files[rel]:
                    raise refuse(f"{source}: its {rel} does not have the pinned sha256")
                plan.writes[tree.root / rel] = data
                plan.from_wheel.append(rel)
    plan.deletes = [tree.root / rel for rel in assessment.overlay_in_tree] + _package_bytecode(repo, tree)
    return plan


def _writable(path: Path, *, directory: bool) -> bool:
    """Whether ``path`` can be modified (honours read-only mounts and immutable files, even as root)."""
    mode = os.W_OK | (os.X_OK if directory else 0)
    return (path.is_dir() if directory else path.is_file()) and os.access(path, mode)


def check_writable(plan: Plan) -> None:
    """Refuse, before anything is written, if any file or directory to be touched is not writable."""
    problems = []
    for path in plan.writes:
        if path.exists() or path.is_symlink():
            if not _writable(path, directory=False):
                problems.append(f"{path}: not a writable file")
            continue
        ancestor = next(p for p in path.parents if p.exists())
        if not _writable(ancestor, directory=True):
            problems.append(f"{ancestor}: cannot create {path} here (not a writable directory)")
    for path in plan.deletes:
        if not _writable(path, directory=False) or not _writable(path.parent, directory=True):
            problems.append(f"{path}: cannot be deleted (file or directory not writable)")
    if problems:
        raise ViewReplayError("refusing: the tree is not writable:\n  " + "\n  ".join(problems))


def write_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path``; the commit phase's only writer (tests replace it to inject failures)."""
    with open(path, "wb") as handle:
        handle.write(data)


def commit(plan: Plan) -> None:
    """Carry out ``plan`` all-or-nothing: on any failure restore every file and remove created ones."""
    backups: list[tuple[Path, bytes | None]] = []
    created_dirs: list[Path] = []
    current = None
    try:
        for current, data in plan.writes.items():
            for parent in reversed(current.parents):
                if not parent.exists():
                    parent.mkdir()
                    created_dirs.append(parent)
            backups.append((current, current.read_bytes() if current.exists() else None))
            write_file(current, data)
        for current in plan.deletes:
            backups.append((current, current.read_bytes()))
            current.unlink()
    except OSError as exc:
        for path, old in reversed(backups):
            if old is None:
                path.unlink(missing_ok=True)
            else:
                path.write_bytes(old)
        for directory in reversed(created_dirs):
            directory.rmdir()
        raise ViewReplayError(f"{current}: write failed ({exc}); all changes were rolled back") from None


def _remove_stale_bytecode(sources: Sequence[Path]) -> None:
    """Delete ``__pycache__`` entries of ``sources`` so the new source is what gets imported."""
    for source in sources:
        cache = source.parent / "__pycache__"
        for pyc in cache.glob(f"{source.stem}.*.pyc"):
            pyc.unlink(missing_ok=True)


def _remove_empty_overlay_dirs(repo: Repo, tree: Tree) -> None:
    """After a revert, remove the overlay's directories left empty (deepest first): those of the overlay
    files, and every directory of a package the series adds."""
    dirs = {tree.root / parent for rel in repo.overlay_files for parent in Path(rel).parents if parent != Path(".")}
    for package in added_packages(repo):
        base = tree.root / package
        if base.is_dir():
            dirs.update(path for path in base.rglob("*") if path.is_dir())
    for directory in sorted(dirs, key=lambda d: len(d.parts), reverse=True):
        cache = directory / "__pycache__"
        if cache.is_dir() and not any(cache.iterdir()):
            cache.rmdir()
        if directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()


def change_tree(repo: Repo, tree: Tree, *, revert: bool, wheel: WheelSource | None = None) -> Plan:
    """Apply (or revert) the series and overlay on ``tree``; all-or-nothing. Returns the plan carried out.

    ``wheel`` gives the pinned upstream wheel, which a revert reads only for the pinned files the
    current series does not explain (:func:`plan_change`).
    """
    plan = plan_change(repo, tree, revert=revert, wheel=wheel)
    commit(plan)
    _remove_stale_bytecode([*plan.writes, *plan.deletes])
    if revert:
        _remove_empty_overlay_dirs(repo, tree)
    return plan
