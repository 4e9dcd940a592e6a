"""Torch trees: locate one, detect its version and patch state, apply/revert transactionally."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from viewreplay import ViewReplayError
from viewreplay.pin import Pin, Repo, sha256_bytes
from viewreplay.tip import check_tip

PRISTINE = "pristine"
APPLIED = "applied"
PARTIAL = "partial"

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
    """The patch state of a tree, with reasons when it is partial."""

    state: str
    problems: list[str] = field(default_factory=list)
    current: dict[str, bytes] = field(default_factory=dict)
    reverted: dict[str, bytes] = field(default_factory=dict)


def assess(repo: Repo, tree: Tree) -> Assessment:
    """Classify the tree as pristine, applied (series + overlay) or partial."""
    result = Assessment(state=PARTIAL)
    for rel in repo.touched_files:
        path = tree.root / rel
        if not path.is_file():
            result.problems.append(f"{path}: pinned file is missing")
        else:
            result.current[rel] = path.read_bytes()
    if result.problems:
        return result

    pristine, patched = [], []
    for rel, data in result.current.items():
        digest = sha256_bytes(data)
        if digest == repo.pin.files[rel]:
            pristine.append(rel)
            continue
        touching = [patch for patch in repo.patches if rel in repo.targets[patch]]
        try:
            reverted = apply_series({rel: data}, touching, reverse=True)[rel]
        except PatchError:
            reverted = None
        if reverted is not None and sha256_bytes(reverted) == repo.pin.files[rel]:
            patched.append(rel)
            result.reverted[rel] = reverted
        else:
            result.problems.append(
                f"{tree.root / rel}: sha256 {digest} differs from {repo.pin.path.name} "
                "and is not explained by the patch series"
            )

    absent, identical, different = [], [], []
    for rel, data in repo.overlay.items():
        path = tree.root / rel
        if not path.exists():
            absent.append(rel)
        elif path.is_file() and path.read_bytes() == data:
            identical.append(rel)
        else:
            different.append(rel)

    if not result.problems:
        if not patched and not identical and not different:
            result.state = PRISTINE
            return result
        if not pristine and not absent and not different:
            result.state = APPLIED
            return result
    for label, rels in (
        ("patched", patched),
        ("not patched", pristine),
        ("overlay file present", identical),
        ("overlay file missing", absent),
        ("overlay file differs from the repository's", different),
    ):
        result.problems.extend(f"{tree.root / rel}: {label}" for rel in rels)
    return result


@dataclass
class Plan:
    """The complete set of file changes of one apply or revert."""

    writes: dict[Path, bytes] = field(default_factory=dict)
    deletes: list[Path] = field(default_factory=list)


def plan_change(repo: Repo, tree: Tree, *, revert: bool) -> Plan:
    """Compute every new file content for apply (or revert) and check the tree is writable."""
    assessment = assess(repo, tree)
    wanted = APPLIED if revert else PRISTINE
    if assessment.state != wanted:
        if assessment.state == PARTIAL:
            reason = "the tree is partially patched or modified:\n  " + "\n  ".join(assessment.problems)
        else:
            reason = f"the tree is already {assessment.state}"
        action = "revert" if revert else "apply"
        raise ViewReplayError(f"{tree.root}: refusing to {action}: {reason}")
    plan = Plan()
    if revert:
        plan.writes = {tree.root / rel: data for rel, data in assessment.reverted.items()}
        plan.deletes = [tree.root / rel for rel in repo.overlay]
    else:
        check_tip(repo)
        patched = apply_series(assessment.current, repo.patches, reverse=False)
        plan.writes = {tree.root / rel: data for rel, data in patched.items()}
        plan.writes.update({tree.root / rel: data for rel, data in repo.overlay.items()})
    check_writable(plan)
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
    """After a revert, remove overlay directories left empty (deepest first)."""
    dirs = {tree.root / parent for rel in repo.overlay for parent in Path(rel).parents if parent != Path(".")}
    for directory in sorted(dirs, key=lambda d: len(d.parts), reverse=True):
        cache = directory / "__pycache__"
        if cache.is_dir() and not any(cache.iterdir()):
            cache.rmdir()
        if directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()


def change_tree(repo: Repo, tree: Tree, *, revert: bool) -> Plan:
    """Apply (or revert) the series and overlay on ``tree``; all-or-nothing. Returns the plan carried out."""
    plan = plan_change(repo, tree, revert=revert)
    commit(plan)
    _remove_stale_bytecode([*plan.writes, *plan.deletes])
    if revert:
        _remove_empty_overlay_dirs(repo, tree)
    return plan
