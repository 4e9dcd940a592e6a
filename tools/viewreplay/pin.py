"""Repository model: locate the repo, read a pin, the patch series and the overlay.

The repository carries one series for several pinned torch releases (CONTRIBUTING.md, "Pins"):
``pins/<version>/pin.toml`` for each, ``patches/`` in the form that applies to the newest pin (the
default of every command), and ``pins/<version>/patches/<name>``, an older pin's own form of a patch
of ``patches/series`` whose hunks differ there: only what differs (:func:`compose_patch`).

The series is the upstream stack: one patch per PR, in review order. A patch has three kinds of
sections (:func:`patch_sections`): hooks, changes of existing upstream files under ``torch/``;
overlay, the files the series adds under ``torch/`` (:func:`series_overlay`: new files, wherever
they live) that the PR adds or changes; tests, the PR's own upstream-form test files under
``test/``. ``torch_overlay/`` and ``upstream/test/`` hold the tip of the last two, as files to read
and to import; :func:`check_tip` refuses a repository where they differ from what the series builds.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import re
import shutil
import tempfile
import tomllib
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from viewreplay import ViewReplayError

PINS_DIR = "pins"
PIN_FILE = "pin.toml"
SERIES_FILE = Path("patches") / "series"
OVERLAY_DIR = "torch_overlay"
# Upstream's package: the series modifies its files (hooks) and adds files to it (the overlay).
TORCH_PREFIX = "torch/"
# The view replay package the series adds (in-tree path); overlay files may live anywhere under TORCH_PREFIX.
OVERLAY_PACKAGE = "torch/_functorch/_aot_autograd/view_replay/"
# Where the PRs' own tests live in-tree, and their tip in the repository.
TEST_PREFIX = "test/"
UPSTREAM_TEST_DIR = "upstream"
WHEEL_CACHE = ".cache/wheels"  # gitignored: the pins' upstream wheels, downloaded once

_DIFF_GIT_RE = re.compile(r"^diff --git a/(\S+) b/(\S+)$")


def sha256_bytes(data: bytes) -> str:
    """Return the hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def find_repo(start: Path) -> Path:
    """Walk up from ``start`` to the first directory holding ``pins/`` and ``patches/series``."""
    start = start.resolve()
    for candidate in (start, *start.parents):
        if (candidate / PINS_DIR).is_dir() and (candidate / SERIES_FILE).is_file():
            return candidate
    raise ViewReplayError(
        f"no repository found: no directory from {start} upwards contains "
        f"{PINS_DIR}/ and {SERIES_FILE} (pass --repo DIR)"
    )


def version_key(version: str) -> tuple[int, ...]:
    """Sort key of a release version (``2.14.1`` -> ``(2, 14, 1)``); refuse anything else."""
    if not re.fullmatch(r"\d+(\.\d+)*", version):
        raise ViewReplayError(f"{version!r}: not a release version (like 2.14.1)")
    return tuple(int(part) for part in version.split("."))


def pin_versions(root: Path) -> list[str]:
    """The versions of ``pins/*/pin.toml``, oldest first; refuse a repository with none."""
    pins = root / PINS_DIR
    versions = [d.name for d in pins.iterdir() if (d / PIN_FILE).is_file()] if pins.is_dir() else []
    if not versions:
        raise ViewReplayError(f"{pins}: no pins (expected {PINS_DIR}/<version>/{PIN_FILE})")
    return sorted(versions, key=version_key)


@dataclass(frozen=True)
class Pin:
    """The contents of ``pin.toml``."""

    path: Path
    version: str
    wheel_requirement: str
    upstream_tag: str
    local_version: str
    files: dict[str, str]
    newest: bool

    @property
    def patch_dir(self) -> Path:
        """Where this pin keeps the patches whose hunks differ from ``patches/`` (older pins only)."""
        return self.path.parent / "patches"

    def custom_version(self, original_version: str) -> str:
        """Return our wheel version: ``2.13.0+cpu`` becomes ``2.13.0+viewreplay.cpu``."""
        _, _, original_local = original_version.partition("+")
        local = self.local_version + (f".{original_local}" if original_local else "")
        return f"{self.version}+{local}"


def read_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file; refuse a missing or invalid one, naming it."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ViewReplayError(f"{path}: file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ViewReplayError(f"{path}: invalid TOML: {exc}") from None


def load_pin(repo: Path, version: str | None = None) -> Pin:
    """Read and validate ``pins/<version>/pin.toml`` of ``repo`` (default: the newest pin)."""
    versions = pin_versions(repo)
    if version is None:
        version = versions[-1]
    elif version not in versions:
        raise ViewReplayError(f"no pin {version} in {repo / PINS_DIR} (pins: {', '.join(versions)})")
    path = repo / PINS_DIR / version / PIN_FILE
    data = read_toml(path)
    torch = data.get("torch")
    if not isinstance(torch, dict):
        raise ViewReplayError(f"{path}: missing [torch] table")
    values = {}
    for key in ("version", "wheel_requirement", "upstream_tag", "local_version"):
        value = torch.get(key)
        if not isinstance(value, str) or not value:
            raise ViewReplayError(f"{path}: [torch] {key} must be a non-empty string")
        values[key] = value
    files = data.get("files", {})
    if not isinstance(files, dict) or not all(
        isinstance(v, str) and re.fullmatch(r"[0-9a-f]{64}", v) for v in files.values()
    ):
        raise ViewReplayError(f"{path}: [files] must map paths to sha256 hex digests")
    if values["version"] != version:
        raise ViewReplayError(f"{path}: [torch] version is {values['version']}, but the directory says {version}")
    return Pin(path=path, files=dict(files), newest=version == versions[-1], **values)


def write_pin_files(pin_path: Path, hashes: dict[str, str]) -> None:
    """Replace the ``[files]`` table of ``pin_path`` with ``hashes``, keeping all other text."""
    lines = pin_path.read_text(encoding="utf-8").splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.strip() == "[files]"), None)
    if start is None:
        kept_before, kept_after = lines, []
        if kept_before and not kept_before[-1].endswith("\n"):
            kept_before[-1] += "\n"
    else:
        end = next(
            (i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")),
            len(lines),
        )
        kept_before, kept_after = lines[:start], lines[end:]
    table = ["[files]\n"] + [f"{json.dumps(p)} = {json.dumps(h)}\n" for p, h in sorted(hashes.items())]
    if kept_after:
        table.append("\n")
    pin_path.write_text("".join(kept_before + table + kept_after), encoding="utf-8")


def series_names(repo: Path) -> list[str]:
    """The patch names listed in ``patches/series``, in order; refuse an empty series."""
    series = repo / SERIES_FILE
    try:
        text = series.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ViewReplayError(f"{series}: file not found") from None
    names = [name for line in text.splitlines() if (name := line.split("#", 1)[0].strip())]
    if not names:
        raise ViewReplayError(f"{series}: the series lists no patches")
    return names


def load_series(repo: Path, pin: Pin) -> list[Path]:
    """The patch files of ``patches/series`` for ``pin``, in order, each as the pin applies it.

    Where the pin has its own form of a patch, the patch is composed from it and ``patches/NAME``
    (:func:`compose_patch`) into a private temporary directory, under the same file name. Refuses
    a listed patch that exists in neither place, a pin's patch that the series does not list, any
    own patch of the newest pin, and an own form that :func:`compose_patch` refuses.
    """
    names = series_names(repo)
    shared = [repo / "patches" / name for name in names]
    for path in shared:
        if not path.is_file():
            raise ViewReplayError(f"{repo / SERIES_FILE}: lists {path.name}, but {path} does not exist")
    overlay = series_overlay(shared)  # the same on every pin: an own form carries upstream files only
    patches = []
    for path in shared:
        own = pin.patch_dir / path.name
        patches.append(_composed_file(path.name, compose_patch(path, own, overlay)) if own.is_file() else path)
    if pin.patch_dir.is_dir():
        stray = sorted(p.name for p in pin.patch_dir.iterdir() if p.name not in names)
        if stray:
            raise ViewReplayError(f"{pin.patch_dir}: {stray} not listed in {repo / SERIES_FILE}")
        if pin.newest and any(pin.patch_dir.iterdir()):
            raise ViewReplayError(f"{pin.patch_dir}: the newest pin's patches are patches/ itself")
    return patches


# An older pin's own form of a patch (CONTRIBUTING.md, "Pins"): the commit message, in git
# format-patch's form up to its "---" line, only where it differs from patches/NAME's; then the
# sections of upstream files (hooks) whose hunks differ on the pin, as git writes them. A section
# may instead hold one of these lines after its "diff --git" line:
# patches/NAME's section, each hunk cut to one line of context on each side (the context drifted
# between the releases, the change did not; what `git apply -C1` would apply).
OWN_FIT = "viewreplay: patches/NAME's hunks with one line of context"
# The pin's commit leaves the file as it is, where patches/NAME changes it.
OWN_UNCHANGED = "viewreplay: unchanged on this pin"
_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")


def split_patch(text: str) -> tuple[str, dict[str, str]]:
    """A patch's text before its first ``diff --git`` line, and its sections by path, in order."""
    head: list[str] = []
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines(keepends=True):
        if line.startswith("diff --git "):
            match = _DIFF_GIT_RE.match(line.rstrip("\n"))
            path = match.group(2) if match else line.rstrip("\n")
            current = sections.setdefault(path, [])
        if current is None:
            head.append(line)
        else:
            current.append(line)
    return "".join(head), {path: "".join(lines) for path, lines in sections.items()}


def patch_message(head: str) -> str:
    """The mail header and commit message of a format-patch text before its diffs (up to ``---``)."""
    return head.split("\n---\n", 1)[0] + "\n---\n" if "\n---\n" in head else head


def fit_section(section: str) -> str:
    """``section`` with each hunk's leading and trailing context cut to one line (counts and starts adjusted)."""
    lines = section.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith("@@")), len(lines))
    out = lines[:start]
    hunks: list[list[str]] = []
    for line in lines[start:]:
        if line.startswith("@@"):
            hunks.append([line])
        else:
            hunks[-1].append(line)
    for hunk in hunks:
        match = _HUNK_RE.match(hunk[0].rstrip("\n"))
        if match is None:
            raise ViewReplayError(f"unparsable hunk header: {hunk[0].rstrip()}")
        body = hunk[1:]
        # A "\ No newline" line belongs to the line before it.
        units: list[list[str]] = []
        for line in body:
            if line.startswith("\\") and units:
                units[-1].append(line)
            else:
                units.append([line])
        lead = next((i for i, u in enumerate(units) if not u[0].startswith(" ")), len(units))
        trail = next((i for i, u in enumerate(reversed(units)) if not u[0].startswith(" ")), len(units))
        cut_lead = max(lead - 1, 0)
        cut_trail = max(trail - 1, 0) if lead < len(units) else 0
        kept = units[cut_lead:len(units) - cut_trail]
        old_start, new_start = int(match.group(1)), int(match.group(3))
        old_count = sum(1 for u in kept if u[0][0] in " -")
        new_count = sum(1 for u in kept if u[0][0] in " +")
        old_start += cut_lead if old_start else 0
        new_start += cut_lead if new_start else 0
        out.append(f"@@ -{old_start},{old_count} +{new_start},{new_count} @@{match.group(5)}\n")
        out += [line for unit in kept for line in unit]
    return "".join(out)


def compose_patch(shared: Path, own: Path, overlay: Collection[str]) -> str:
    """The patch that an older pin applies for ``shared`` (``patches/NAME``), given its own form ``own``.

    Its message is the own form's where it has one, else the shared one; each upstream file's
    section is the own form's where it has one (:data:`OWN_FIT` and :data:`OWN_UNCHANGED` are read
    as they say), else the shared one; the overlay and test sections are always the shared ones.
    ``overlay`` is the series' overlay files (:func:`series_overlay`). Refuses an own form with an
    overlay or test section, or a marker for a file ``shared`` leaves alone.
    """
    return compose_text(shared.read_text(encoding="utf-8"), own.read_text(encoding="utf-8"), shared.name, str(own),
                        overlay=overlay)


def compose_text(shared_text: str, own_text: str, name: str, own: str, *, overlay: Collection[str]) -> str:
    """:func:`compose_patch` on texts (``own`` names the own form in messages)."""
    shared = f"patches/{name}"
    shared_head, shared_sections = split_patch(shared_text)
    own_head, own_sections = split_patch(own_text)
    if own_head.strip() and not own_head.startswith("From "):
        raise ViewReplayError(f"{own}: text before its first 'diff --git' line that is not a format-patch message")
    overlay = {*overlay, *overlay_additions(shared_text), *overlay_additions(own_text)}
    sections = dict(shared_sections)
    for path, section in own_sections.items():
        where = f"{own}: {path}"
        if not is_upstream_file(path, overlay):
            if shared_sections.get(path) == section:
                continue  # a full copy's (the older format): ``export --check`` asks for its removal
            raise ViewReplayError(
                f"{where}: an own form carries upstream files only; the overlay and the tests are {shared}'s"
            )
        marker = section.splitlines()[1:] if len(section.splitlines()) == 2 else []
        if marker and marker[0] in (OWN_FIT, OWN_UNCHANGED):
            if path not in shared_sections:
                raise ViewReplayError(f"{where}: '{marker[0]}', but {shared} does not change that file")
            if marker[0] == OWN_FIT:
                sections[path] = fit_section(shared_sections[path])
            else:
                del sections[path]
        else:
            sections[path] = section
    head = patch_message(own_head) if own_head.strip() else shared_head
    return head + "".join(sections[path] for path in sorted(sections))


_COMPOSED: list[Path] = []


def _composed_file(name: str, text: str) -> Path:
    """Write a composed patch as ``NAME`` into a private directory per content (removed at exit)."""
    if not _COMPOSED:
        root = Path(tempfile.mkdtemp(prefix="viewreplay-pins-"))
        atexit.register(shutil.rmtree, root, True)
        _COMPOSED.append(root)
    path = _COMPOSED[0] / sha256_bytes(text.encode())[:16] / name
    if not path.is_file() or path.read_text(encoding="utf-8") != text:  # written again if changed since
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return path


def overlay_additions(text: str) -> list[str]:
    """The files under ``torch/`` that a patch text creates (its ``new file mode`` sections), in order."""
    added, path = [], None
    for line in text.splitlines():
        if line.startswith("diff --git "):
            match = _DIFF_GIT_RE.match(line)
            path = match.group(2) if match else None
        elif line.startswith("new file mode") and path is not None and path.startswith(TORCH_PREFIX):
            added.append(path)
    return added


def series_overlay(patches: Iterable[Path]) -> frozenset[str]:
    """The overlay files of a series: every file under ``torch/`` that one of its patches creates.

    The series creates only files the pinned release lacks (a hook may not create or delete one), so
    these are the series' own, wherever they live; a later patch may change or delete them.
    """
    return frozenset(rel for patch in patches for rel in overlay_additions(patch.read_text(encoding="utf-8")))


def is_upstream_file(path: str, overlay: Collection[str]) -> bool:
    """Whether a section's path is an existing upstream file: under ``torch/`` and not in ``overlay``."""
    return path.startswith(TORCH_PREFIX) and path not in overlay


@dataclass(frozen=True)
class PatchSections:
    """The paths one series patch changes, by kind (module docstring)."""

    # Existing upstream files under torch/ the patch modifies (its hooks), in order.
    hooks: list[str]
    # Overlay files (series_overlay) it adds, changes or deletes.
    overlay: list[str]
    # Test files under test/ it adds or changes (the PR's own tests).
    tests: list[str]


def _section_kind(path: str, header: str, where: str, overlay: Collection[str]) -> str:
    """Which kind of section a ``diff --git`` header opens; refuse a path no kind allows."""
    if path.startswith(TEST_PREFIX):
        return "tests"
    if not path.startswith(TORCH_PREFIX):
        raise ViewReplayError(f"{where}: path outside {TORCH_PREFIX} and {TEST_PREFIX}: {header}")
    return "hooks" if is_upstream_file(path, overlay) else "overlay"


def patch_sections(patch: Path, *, overlay: Collection[str]) -> PatchSections:
    """Parse a series patch's ``diff --git`` headers into its hooks, overlay and test paths.

    ``overlay`` is the series' overlay files (:func:`series_overlay`); a file the patch creates under
    ``torch/`` is one in any case. Hooks may only modify existing files; no section may rename or copy.
    """
    text = patch.read_text(encoding="utf-8")
    overlay = {*overlay, *overlay_additions(text)}
    found: dict[str, list[str]] = {"hooks": [], "overlay": [], "tests": []}
    kind = None
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{patch}:{number}"
        if line.startswith("diff --git "):
            match = _DIFF_GIT_RE.match(line)
            if not match or match.group(1) != match.group(2):
                raise ViewReplayError(f"{where}: unsupported diff header: {line}")
            kind = _section_kind(match.group(1), line, where, overlay)
            if match.group(1) not in found[kind]:
                found[kind].append(match.group(1))
        elif line.startswith(("rename from", "copy from")):
            raise ViewReplayError(f"{where}: renames and copies are not supported: {line}")
        elif kind == "hooks" and line.startswith(("deleted file mode", "--- /dev/null", "+++ /dev/null")):
            raise ViewReplayError(f"{where}: hooks may only modify existing upstream files, not delete them: {line}")
    if not any(found.values()):
        raise ViewReplayError(f"{patch}: contains no 'diff --git' sections")
    return PatchSections(**found)


@dataclass(frozen=True)
class Repo:
    """Everything the tools need from the patch-queue repository."""

    root: Path
    pin: Pin
    patches: list[Path]
    # Each patch's hooks: the upstream files it modifies.
    targets: dict[Path, list[str]]
    # Every file the series creates under torch/ (series_overlay), those a later patch deletes included.
    overlay_paths: frozenset[str]
    # torch_overlay/: tree-relative path -> content (the series' overlay at its tip).
    overlay: dict[str, bytes]

    @property
    def overlay_files(self) -> frozenset[str]:
        """The overlay's tree paths: every file the series creates and every file of ``torch_overlay/`` (where
        the tip check passes, these are the series' files but those a later patch deletes)."""
        return self.overlay_paths | self.overlay.keys()

    @property
    def touched_files(self) -> list[str]:
        """Every upstream file modified by the series, in first-touched order."""
        seen: dict[str, None] = {}
        for patch in self.patches:
            seen.update(dict.fromkeys(self.targets[patch]))
        return list(seen)


def load_overlay(repo: Path) -> dict[str, bytes]:
    """Return the overlay as ``{tree-relative path: content}``, ignoring ``__pycache__``."""
    base = repo / OVERLAY_DIR
    overlay = {}
    if base.is_dir():
        for path in sorted(base.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                overlay[path.relative_to(base).as_posix()] = path.read_bytes()
    return overlay


def load_repo(root: Path, pin_version: str | None = None, *, require_pinned_hashes: bool = True) -> Repo:
    """Load the repository at ``root`` for one pin (default: the newest).

    With ``require_pinned_hashes`` the ``[files]`` table must list exactly the files the
    series touches (``pin-update`` loads without it, since it is what fixes the table).
    """
    pin = load_pin(root, pin_version)
    patches = load_series(root, pin)
    overlay_paths = series_overlay(patches)
    repo = Repo(
        root=root,
        pin=pin,
        patches=patches,
        targets={patch: patch_sections(patch, overlay=overlay_paths).hooks for patch in patches},
        overlay_paths=overlay_paths,
        overlay=load_overlay(root),
    )
    check_overlay_paths(repo)
    if require_pinned_hashes:
        touched = set(repo.touched_files)
        missing = sorted(touched - pin.files.keys())
        extra = sorted(pin.files.keys() - touched)
        if missing or extra:
            raise ViewReplayError(
                f"{pin.path}: [files] is out of date with the series "
                f"(not pinned: {missing or 'none'}; pinned but untouched: {extra or 'none'}); "
                f"run 'viewreplay pin-update{'' if pin.newest else ' --pin ' + pin.version}'"
            )
    return repo


def check_overlay_paths(repo: Repo) -> None:
    """Refuse an overlay file outside ``torch/``, or one at the path of an upstream file the pin lists.

    An overlay file is new: it must not shadow a file of the pinned release. Without the wheel, the
    upstream files known here are the pin's ``[files]``; ``pinforms.check_pin`` checks the whole wheel.
    """
    for rel in repo.overlay:
        if not rel.startswith(TORCH_PREFIX):
            raise ViewReplayError(f"{repo.root / OVERLAY_DIR / rel}: overlay files must live under {TORCH_PREFIX}")
    shadowing = sorted(repo.overlay_files & repo.pin.files.keys())
    if shadowing:
        raise ViewReplayError(
            f"{repo.pin.path}: pins {', '.join(shadowing)} as upstream file(s), but the overlay has them (the "
            "series creates them, or torch_overlay/ holds them): an overlay file must be new; a hook changes an "
            "upstream file"
        )
