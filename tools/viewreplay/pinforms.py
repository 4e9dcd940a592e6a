"""An older pin's own forms of the series' patches: what ``export --pin`` writes and ``export --check`` checks.

A pin's own form of ``patches/NAME`` holds only what differs on that pin (``pin.compose_patch``):
its commit message where it differs, and the sections of the upstream files whose change differs.
:func:`own_form` decides it from a file's content before and after the pin's commit, one upstream
file at a time: no section where ``patches/NAME``'s section gives the commit's content as it is
(``git apply``, which allows the hunks to have moved) or cut to one line of context
(``pin.OWN_FIT``: only the context drifted between the releases); ``pin.OWN_UNCHANGED`` where the
commit leaves a file alone that ``patches/NAME`` changes; else the commit's own section. The
overlay (every file the series creates under ``torch/``, ``pin.series_overlay``) and the tests are
never a pin's own: a commit whose overlay or test sections differ from ``patches/NAME``'s is refused.

:func:`check_pin` checks a pin without a checkout, on its pinned wheel's files: no overlay file is a
file of the wheel, the composed series applies, and each own form is what :func:`own_form` would
write for the trees it builds (none stale or redundant).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import zipfile
from collections.abc import Collection
from pathlib import Path

from viewreplay import ViewReplayError
from viewreplay.pin import (
    OWN_FIT,
    OWN_UNCHANGED,
    Pin,
    Repo,
    fit_section,
    is_upstream_file,
    overlay_additions,
    patch_message,
    series_names,
    sha256_bytes,
    split_patch,
)


def apply_patch_text(contents: dict[str, bytes | None], text: str) -> dict[str, bytes | None] | None:
    """``contents`` (path -> bytes, None: absent) after ``git apply`` of ``text`` on those paths; None if it fails."""
    if not contents:
        return {}
    with tempfile.TemporaryDirectory(prefix="viewreplay-pinforms-") as tmp:
        stage = Path(tmp) / "tree"
        stage.mkdir()
        for rel, data in contents.items():
            if data is not None:
                (stage / rel).parent.mkdir(parents=True, exist_ok=True)
                (stage / rel).write_bytes(data)
        patch = Path(tmp) / "patch"
        patch.write_text(text, encoding="utf-8")
        env = {**os.environ, "GIT_CEILING_DIRECTORIES": tmp}
        includes = [f"--include={rel}" for rel in contents]
        result = subprocess.run(["git", "apply", "--whitespace=nowarn", *includes, str(patch)],
                                cwd=stage, env=env, check=False, capture_output=True)
        if result.returncode != 0:
            return None
        return {rel: (stage / rel).read_bytes() if (stage / rel).is_file() else None for rel in contents}


def _gives(section: str, rel: str, before: bytes | None, after: bytes | None) -> bool:
    result = apply_patch_text({rel: before}, section)
    return result is not None and result[rel] == after


def own_form(
    name: str,
    shared_text: str,
    commit_text: str,
    before: dict[str, bytes | None],
    after: dict[str, bytes | None],
    *,
    overlay: Collection[str],
) -> str | None:
    """The own form of ``patches/NAME`` for a commit (module docstring); None where it needs none.

    ``commit_text`` is the commit's format-patch; ``before`` and ``after`` hold the content of every
    upstream file either patch changes, at the commit's parent and at the commit. ``overlay`` is the
    series' overlay files; a file either text creates is one too.
    """
    shared_head, shared = split_patch(shared_text)
    commit_head, commit = split_patch(commit_text)
    overlay = {*overlay, *overlay_additions(shared_text), *overlay_additions(commit_text)}
    differing = sorted(p for p in shared.keys() | commit.keys()
                       if not is_upstream_file(p, overlay) and shared.get(p) != commit.get(p))
    if differing:
        raise ViewReplayError(
            f"{name}: the commit's overlay or test sections differ from patches/{name}'s ({', '.join(differing)}); "
            "the overlay and the tests are shared by every pin: change them in a checkout of the newest pin"
        )
    sections = []
    for rel in sorted(p for p in shared.keys() | commit.keys() if is_upstream_file(p, overlay)):
        if shared.get(rel) == commit.get(rel):
            continue
        marker = None
        if rel in shared:
            if _gives(shared[rel], rel, before[rel], after[rel]):
                continue
            if _gives(fit_section(shared[rel]), rel, before[rel], after[rel]):
                marker = OWN_FIT
            elif rel not in commit:
                marker = OWN_UNCHANGED
        sections.append(f"diff --git a/{rel} b/{rel}\n{marker}\n" if marker else commit[rel])
    message = patch_message(commit_head)
    head = message if message != patch_message(shared_head) else ""
    return (head + "".join(sections)) or None


def hook_paths(*texts: str, overlay: Collection[str]) -> list[str]:
    """The upstream files the patch texts change (``overlay``: the series' overlay files)."""
    overlay = {*overlay, *(rel for text in texts for rel in overlay_additions(text))}
    return sorted({rel for text in texts for rel in split_patch(text)[1] if is_upstream_file(rel, overlay)})


def pinned_files(pin: Pin, wheel: Path, paths: list[str]) -> dict[str, bytes | None]:
    """The pristine upstream files ``paths`` from the pin's wheel, each checked against pin.toml's hash."""
    with zipfile.ZipFile(wheel) as archive:
        members = set(archive.namelist())
        files: dict[str, bytes | None] = {}
        for rel in paths:
            files[rel] = archive.read(rel) if rel in members else None
            expected = pin.files.get(rel)
            if expected is not None and (files[rel] is None or sha256_bytes(files[rel]) != expected):
                raise ViewReplayError(f"{wheel}: {rel} is not the file {pin.path} pins")
    return files


def shadowed_files(repo: Repo, wheel: Path) -> list[str]:
    """The overlay files (the series creates them, or ``torch_overlay/`` holds them) that the pin's wheel has."""
    with zipfile.ZipFile(wheel) as archive:
        members = set(archive.namelist())
    return sorted(repo.overlay_files & members)


def check_pin(repo: Repo, wheel: Path) -> list[str]:
    """What is wrong with ``repo``'s pin, on its wheel's files ('' list: nothing): see the module docstring."""
    problems = [f"{rel}: an overlay file, but {wheel.name} has it (an overlay file must be new; a hook changes an "
                "upstream file)" for rel in shadowed_files(repo, wheel)]
    names = series_names(repo.root)
    own_dir = repo.pin.patch_dir
    overlay = repo.overlay_paths
    shared_hooks = hook_paths(*((repo.root / "patches" / name).read_text(encoding="utf-8") for name in names),
                              overlay=overlay)
    contents = pinned_files(repo.pin, wheel, sorted(set(repo.touched_files) | set(shared_hooks)))
    for name, patch in zip(names, repo.patches, strict=True):
        text = patch.read_text(encoding="utf-8")
        hooks = hook_paths(text, overlay=overlay)
        before = {rel: contents[rel] for rel in hooks}
        after = apply_patch_text(before, text)
        shown = (own_dir / name).relative_to(repo.root) if (own_dir / name).is_file() else f"patches/{name}"
        if after is None:
            problems.append(
                f"{shown}: does not apply on {repo.pin.upstream_tag} after the patches before it; port it: "
                f"viewreplay checkout-series --pin {repo.pin.version} DIR (CONTRIBUTING.md, \"Pins\")"
            )
            return problems
        contents.update(after)
        if repo.pin.newest:
            continue
        shared_text = (repo.root / "patches" / name).read_text(encoding="utf-8")
        paths = hook_paths(text, shared_text, overlay=overlay)
        before = {rel: before.get(rel, contents.get(rel)) for rel in paths}
        expected = own_form(name, shared_text, text, before, {rel: contents.get(rel) for rel in paths},
                            overlay=overlay)
        current = (own_dir / name).read_text(encoding="utf-8") if (own_dir / name).is_file() else None
        if expected != current:
            what = "is not needed" if expected is None else "carries more than differs on the pin"
            problems.append(
                f"{own_dir.relative_to(repo.root)}/{name}: {what}; run viewreplay checkout-series --pin "
                f"{repo.pin.version} DIR, then viewreplay export --pin {repo.pin.version} DIR"
            )
    return problems


__all__ = ["apply_patch_text", "check_pin", "hook_paths", "own_form", "pinned_files", "shadowed_files"]
