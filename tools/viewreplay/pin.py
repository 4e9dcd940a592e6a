"""Repository model: locate the repo, read ``pin.toml``, the patch series and the overlay."""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from viewreplay import ViewReplayError

PIN_FILE = "pin.toml"
SERIES_FILE = Path("patches") / "series"
OVERLAY_DIR = "torch_overlay"

_DIFF_GIT_RE = re.compile(r"^diff --git a/(\S+) b/(\S+)$")


def sha256_bytes(data: bytes) -> str:
    """Return the hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def find_repo(start: Path) -> Path:
    """Walk up from ``start`` to the first directory holding ``pin.toml`` and ``patches/series``."""
    start = start.resolve()
    for candidate in (start, *start.parents):
        if (candidate / PIN_FILE).is_file() and (candidate / SERIES_FILE).is_file():
            return candidate
    raise ViewReplayError(
        f"no repository found: no directory from {start} upwards contains "
        f"{PIN_FILE} and {SERIES_FILE} (pass --repo DIR)"
    )


@dataclass(frozen=True)
class Pin:
    """The contents of ``pin.toml``."""

    path: Path
    version: str
    wheel_requirement: str
    upstream_tag: str
    local_version: str
    files: dict[str, str]

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


def load_pin(repo: Path) -> Pin:
    """Read and validate ``pin.toml`` of ``repo``."""
    path = repo / PIN_FILE
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
    return Pin(path=path, files=dict(files), **values)


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


def load_series(repo: Path) -> list[Path]:
    """Return the patch files listed in ``patches/series``, in order; refuse an empty series."""
    series = repo / SERIES_FILE
    try:
        text = series.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ViewReplayError(f"{series}: file not found") from None
    patches = []
    for line in text.splitlines():
        name = line.split("#", 1)[0].strip()
        if not name:
            continue
        patch = series.parent / name
        if not patch.is_file():
            raise ViewReplayError(f"{series}: lists {name}, but {patch} does not exist")
        patches.append(patch)
    if not patches:
        raise ViewReplayError(f"{series}: the series lists no patches")
    return patches


def patch_targets(patch: Path) -> list[str]:
    """Return the tree-relative paths a patch modifies, parsed from its ``diff --git`` headers."""
    targets: list[str] = []
    lines = patch.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines):
        if line.startswith("diff --git "):
            match = _DIFF_GIT_RE.match(line)
            if not match or match.group(1) != match.group(2):
                raise ViewReplayError(f"{patch}:{number + 1}: unsupported diff header: {line}")
            if not match.group(1).startswith("torch/"):
                raise ViewReplayError(f"{patch}:{number + 1}: path outside torch/: {match.group(1)}")
        elif line.startswith(("new file mode", "deleted file mode", "rename from", "--- /dev/null")):
            raise ViewReplayError(
                f"{patch}:{number + 1}: patches may only modify existing files "
                f"(put new files in {OVERLAY_DIR}/): {line}"
            )
        else:
            continue
        if match.group(1) not in targets:
            targets.append(match.group(1))
    if not targets:
        raise ViewReplayError(f"{patch}: contains no 'diff --git' sections")
    return targets


@dataclass(frozen=True)
class Repo:
    """Everything the tools need from the patch-queue repository."""

    root: Path
    pin: Pin
    patches: list[Path]
    targets: dict[Path, list[str]]
    overlay: dict[str, bytes]

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


def load_repo(root: Path, *, require_pinned_hashes: bool = True) -> Repo:
    """Load the repository at ``root``.

    With ``require_pinned_hashes`` the ``[files]`` table must list exactly the files the
    series touches (``pin-update`` loads without it, since it is what fixes the table).
    """
    pin = load_pin(root)
    patches = load_series(root)
    repo = Repo(
        root=root,
        pin=pin,
        patches=patches,
        targets={patch: patch_targets(patch) for patch in patches},
        overlay=load_overlay(root),
    )
    for rel in repo.overlay:
        if not rel.startswith("torch/"):
            raise ViewReplayError(f"{root / OVERLAY_DIR / rel}: overlay files must live under torch/")
    if require_pinned_hashes:
        touched = set(repo.touched_files)
        missing = sorted(touched - pin.files.keys())
        extra = sorted(pin.files.keys() - touched)
        if missing or extra:
            raise ViewReplayError(
                f"{pin.path}: [files] is out of date with the series "
                f"(not pinned: {missing or 'none'}; pinned but untouched: {extra or 'none'}); "
                "run 'viewreplay pin-update'"
            )
        clash = sorted(touched & repo.overlay.keys())
        if clash:
            raise ViewReplayError(f"{root / OVERLAY_DIR}: overlay files are also patched: {clash}")
    return repo
