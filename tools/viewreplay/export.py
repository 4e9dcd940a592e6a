"""The round trip (Electron's patch workflow): a git checkout with one commit per patch, and the export back.

``checkout-series DIR`` makes the stand-in checkout (``make-checkout``) and ``git am``s the series:
one commit per PR of the upstream stack, authors and dates kept, each with its hooks, its overlay
growth and its tests. Edit there with git (``commit --fixup`` + ``rebase -i --autosquash``, ``commit
--amend``), then ``export DIR`` writes the commits back to ``patches/`` with ``git format-patch
--no-signature --zero-commit``, the files the branch adds under ``torch/`` (the overlay, wherever it
lives) at HEAD to ``torch_overlay/`` and those it adds under ``test/`` to ``upstream/test/`` (the
series' tip, checked by ``viewreplay.tip``) and, for the
newest pin, the README's table of PRs from the patch headers (``viewreplay.readme_table``; skipped
where the repository has no README.md). Output is byte-identical for identical commits; ``export
--check`` compares instead of writing.

Naming: a commit keeps the ``series`` name of the patch with the same subject; commits left over are
paired with leftover names by position (a reworded commit keeps its file); any remaining new commit
gets git's own file name; ``series`` lists the names in commit order; patches without a commit are
removed.

Pins: a checkout of the newest pin exports to ``patches/`` and may change the series. A checkout of an
older pin must have the series' commits, by name; each gives ``pins/<version>/patches/<name>``, the
pin's own form, only what differs there (``viewreplay.pinforms``): the message where it differs, and
the upstream files whose section from ``patches/<name>``, applied on the commit's parent, does not
give the commit's file, not even with one line of context. The file is removed once nothing
differs. ``check_pins`` checks every pin without a checkout, on the wheels in ``.cache/wheels``.
"""

from __future__ import annotations

import difflib
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from viewreplay import ViewReplayError, pinforms, readme_table
from viewreplay.checkout import make_checkout
from viewreplay.gitrepo import check_upstream_checkout, git, git_show, numbering_style, patch_identity, patch_subject
from viewreplay.pin import (
    OVERLAY_DIR,
    PINS_DIR,
    SERIES_FILE,
    TEST_PREFIX,
    TORCH_PREFIX,
    UPSTREAM_TEST_DIR,
    Repo,
    compose_text,
    load_repo,
    patch_sections,
    pin_versions,
    series_names,
    series_overlay,
)
from viewreplay.pinnedwheel import check_wheel
from viewreplay.tip import repository_tip, tip_differences


def checkout_series(repo: Repo, wheel: Path, dest: Path) -> list[str]:
    """Make the checkout at ``dest``: the tag, then one commit per patch. Return the subjects.
    A patch that does not apply removes the checkout, so that the same command can run again."""
    make_checkout(repo.pin, wheel, dest, all_files=False)
    identity = patch_identity(repo.patches[0])
    for patch in repo.patches:
        try:
            # --keep-non-patch keeps "[aot_autograd]"-style subject prefixes, so the export reproduces them.
            git(dest, "am", "-q", "--keep-non-patch", "--committer-date-is-author-date", str(patch), identity=identity)
        except ViewReplayError as exc:
            shutil.rmtree(dest)
            why = [line for line in str(exc).splitlines() if not line.startswith("hint:")]
            raise ViewReplayError(
                f"{patch}: does not apply on {repo.pin.upstream_tag} ({dest} removed): {' '.join(why)}"
            ) from None
    return git(dest, "log", "--reverse", "--format=%s", f"{repo.pin.upstream_tag}..HEAD").splitlines()


@dataclass
class Export:
    """What ``export`` would write: repo-relative path -> content (None: delete)."""

    files: dict[str, bytes | None] = field(default_factory=dict)
    series: list[str] = field(default_factory=list)


def _tip_files(checkout: Path, tag: str) -> list[str]:
    """The overlay and test files of HEAD (the tip to export): the files it adds under ``torch/`` and
    ``test/``; refuse other additions and any deletion."""
    added, problems = [], []
    for line in git(checkout, "diff", "--name-status", "--no-renames", tag, "HEAD").splitlines():
        status, _, path = line.partition("\t")
        if status == "A" and not path.startswith((TORCH_PREFIX, TEST_PREFIX)):
            problems.append(f"{path} (a new file outside {TORCH_PREFIX} and {TEST_PREFIX})")
        elif status == "A" and not path.endswith(".py"):
            problems.append(f"{path} (not a Python source: a cache committed by mistake?)")
        elif status == "D":
            problems.append(f"{path} (deleted; hooks may only modify upstream files)")
        elif status == "A":
            added.append(path)
    if problems:
        raise ViewReplayError(f"{checkout}: the branch adds or deletes files that cannot be exported: {problems}")
    return added


def _tip_destination(rel: str) -> str:
    """Where the repository keeps an in-tree overlay or test file."""
    return f"{UPSTREAM_TEST_DIR}/{rel}" if rel.startswith(TEST_PREFIX) else f"{OVERLAY_DIR}/{rel}"


def compute_export(repo: Repo, checkout: Path, *, numbering: str = "auto") -> Export:
    """Compute the patches, series, overlay and PR tests that ``checkout``'s branch stands for."""
    tag = repo.pin.upstream_tag
    check_upstream_checkout(checkout, repo.pin)
    dirty = git(checkout, "status", "--porcelain", "--untracked-files=normal")
    if dirty:
        raise ViewReplayError(f"{checkout}: uncommitted changes; commit them (or stash) first:\n{dirty.rstrip()}")
    tip = _tip_files(checkout, tag)
    if numbering == "auto":
        numbering = numbering_style(repo.patches)
    result = Export()
    with tempfile.TemporaryDirectory(prefix="viewreplay-export-") as tmp:
        out = Path(tmp)
        git(checkout, "format-patch", "-q", "--no-signature", "--zero-commit",
            "--numbered" if numbering == "numbered" else "--no-numbered", "-o", str(out), f"{tag}..HEAD")
        generated = sorted(out.glob("*.patch"))
        if not generated:
            raise ViewReplayError(f"{checkout}: no commit after {tag}; nothing to export")
        overlay = series_overlay(generated)
        for patch in generated:
            patch_sections(patch, overlay=overlay)  # refuses anything a series patch may not contain
        texts = [p.read_text(encoding="utf-8") for p in generated]
        names = _name_patches(repo, texts, [p.name for p in generated])
        if repo.pin.newest:
            for name, patch in zip(names, generated):
                result.files[f"patches/{name}"] = patch.read_bytes()
            if (repo.root / readme_table.README).is_file():
                result.files[readme_table.README] = readme_table.readme_with_table(repo.root, list(zip(names, texts)))
        else:
            _export_pin_patches(repo, checkout, names, generated, result)
        result.series = names
    if repo.pin.newest:
        for old in repo.patches:
            if old.name not in names:
                result.files[f"patches/{old.name}"] = None
        # An older pin's own form of a patch the series drops goes with it.
        for own in sorted((repo.root / PINS_DIR).glob("*/patches/*.patch")):
            if own.name not in names:
                result.files[own.relative_to(repo.root).as_posix()] = None
        result.files[SERIES_FILE.as_posix()] = _series_text(repo, names).encode()
    for rel in tip:
        result.files[_tip_destination(rel)] = git_show(checkout, "HEAD", rel)
    for rel in repository_tip(repo):
        result.files.setdefault(_tip_destination(rel), None)
    return result


def _export_pin_patches(
    repo: Repo, checkout: Path, names: list[str], generated: list[Path], result: Export
) -> None:
    """An older pin's own forms: what differs on it, file by file (module docstring, ``viewreplay.pinforms``)."""
    if names != series_names(repo.root):
        raise ViewReplayError(
            f"{checkout}: the commits stand for the series {names}, not {series_names(repo.root)}; the series "
            f"belongs to the newest pin: change it in a checkout of that pin first, then port the commits here"
        )
    commits = git(checkout, "rev-list", "--reverse", f"{repo.pin.upstream_tag}..HEAD").split()
    own_dir = repo.pin.patch_dir.relative_to(repo.root).as_posix()
    for name, patch, commit in zip(names, generated, commits, strict=True):
        shared_text = (repo.root / "patches" / name).read_text(encoding="utf-8")
        commit_text = patch.read_text(encoding="utf-8")
        paths = pinforms.hook_paths(shared_text, commit_text, overlay=repo.overlay_paths)
        before = {rel: _blob(checkout, f"{commit}^", rel) for rel in paths}
        after = {rel: _blob(checkout, commit, rel) for rel in paths}
        own = pinforms.own_form(name, shared_text, commit_text, before, after, overlay=repo.overlay_paths)
        composed = (compose_text(shared_text, own, name, f"{own_dir}/{name}", overlay=repo.overlay_paths)
                    if own is not None else shared_text)
        if pinforms.apply_patch_text(before, composed) != after:  # a guard: composition must give the commit
            raise ViewReplayError(f"{checkout}: {commit[:12]} ({name}): its own form does not give its upstream files")
        result.files[f"{own_dir}/{name}"] = own.encode() if own is not None else None


def _blob(checkout: Path, rev: str, rel: str) -> bytes | None:
    """``rel`` at ``rev``, None where it does not exist."""
    if not git(checkout, "ls-tree", "--name-only", rev, "--", rel).strip():
        return None
    return git_show(checkout, rev, rel)


def check_pins(repo_root: Path, wheel_dir: Path) -> tuple[list[str], list[str]]:
    """Check every pin without a checkout (``pinforms.check_pin``); return the problems and the pins not checked.

    A pin's series loads and composes (``load_repo``) and its tip is the repository's; where its
    wheel is in ``wheel_dir``, its series applies on its files and its own forms are minimal.
    """
    problems, unchecked = [], []
    for version in pin_versions(repo_root):
        try:
            repo = load_repo(repo_root, version)
        except ViewReplayError as exc:
            problems.append(f"pin {version}: {exc}")
            continue
        problems += [f"pin {version}: {p}" for p in tip_differences(repo)]
        wheels = sorted(wheel_dir.glob(f"torch-{version}*.whl")) if wheel_dir.is_dir() else []
        if len(wheels) != 1:
            unchecked.append(version)
            continue
        check_wheel(wheels[0], repo.pin)
        problems += [f"pin {version}: {p}" for p in pinforms.check_pin(repo, wheels[0])]
    return problems, unchecked


def _name_patches(repo: Repo, texts: list[str], git_names: list[str]) -> list[str]:
    """Series names for the generated patches (see the module docstring)."""
    old = [(p.name, patch_subject(p.read_text(encoding="utf-8"))) for p in repo.patches]
    names: list[str | None] = [None] * len(texts)
    free = dict(old)
    for i, text in enumerate(texts):
        subject = patch_subject(text)
        match = next((name for name, s in free.items() if s == subject), None)
        if match is not None:
            names[i] = match
            del free[match]
    leftovers = [name for name, _ in old if name in free]
    for i in range(len(texts)):
        if names[i] is None and leftovers:
            names[i] = leftovers.pop(0)
    taken = {n for n in names if n}
    for i, git_name in enumerate(git_names):
        if names[i] is None:
            candidate = git_name
            number = 1
            while candidate in taken:
                number += 1
                candidate = re.sub(r"\.patch$", f"-{number}.patch", git_name)
            names[i] = candidate
            taken.add(candidate)
    return [n for n in names if n]


def _series_text(repo: Repo, names: list[str]) -> str:
    """The series file for ``names``: unchanged if the order is, else its comment lines plus the names."""
    path = repo.root / SERIES_FILE
    current = path.read_text(encoding="utf-8")
    if [p.name for p in repo.patches] == names:
        return current
    comments = [line for line in current.splitlines() if line.lstrip().startswith("#")]
    return "".join(f"{line}\n" for line in comments + names)


def current_files(repo: Repo, export: Export) -> dict[str, bytes | None]:
    """The repository's present content of every path ``export`` would write or delete."""
    paths = set(export.files) | {_tip_destination(rel) for rel in repository_tip(repo)}
    return {rel: (repo.root / rel).read_bytes() if (repo.root / rel).is_file() else None for rel in sorted(paths)}


def diff_export(repo: Repo, export: Export) -> str:
    """A unified diff from the repository's files to what ``export`` would write ('' if equal)."""
    chunks = []
    current = current_files(repo, export)
    for rel in sorted(export.files):
        old, new = current.get(rel), export.files[rel]
        if old == new:
            continue
        old_lines = old.decode("utf-8", "replace").splitlines(keepends=True) if old is not None else []
        new_lines = new.decode("utf-8", "replace").splitlines(keepends=True) if new is not None else []
        chunks.append(
            "".join(difflib.unified_diff(old_lines, new_lines, f"a/{rel}" if old is not None else "/dev/null",
                                         f"b/{rel}" if new is not None else "/dev/null"))
            or f"{rel}: differs\n"
        )
    return "".join(chunks)


def write_export(repo: Repo, export: Export) -> list[str]:
    """Write ``export`` into the repository; return the changed paths."""
    changed = []
    current = current_files(repo, export)
    for rel, data in sorted(export.files.items()):
        if current.get(rel) == data:
            continue
        path = repo.root / rel
        if data is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        changed.append(rel)
    overlay_root = repo.root / OVERLAY_DIR
    if overlay_root.is_dir():
        for directory in sorted((d for d in overlay_root.rglob("*") if d.is_dir()), key=lambda d: -len(d.parts)):
            if not any(directory.iterdir()):
                directory.rmdir()
    return changed


__all__ = [
    "Export",
    "check_pins",
    "checkout_series",
    "compute_export",
    "diff_export",
    "write_export",
]
