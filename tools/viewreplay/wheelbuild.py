"""Build the custom torch wheel: pinned wheel + series + overlay, with our local version."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

from viewreplay import ViewReplayError
from viewreplay.pin import Repo
from viewreplay.pinnedwheel import check_wheel
from viewreplay.tree import change_tree, locate_tree

_METADATA_VERSION_RE = re.compile(r"^Version: .*$", re.MULTILINE)
_VERSION_PY_LINE_RE = re.compile(r"""^__version__\s*=.*$""", re.MULTILINE)


def _wheel_cli(*args: str) -> None:
    """Run ``python -m wheel ARGS``; refuse on failure."""
    result = subprocess.run([sys.executable, "-m", "wheel", *args], check=False, capture_output=True, text=True)
    if result.returncode != 0:
        raise ViewReplayError(f"'wheel {' '.join(args)}' failed: {(result.stderr or result.stdout).strip()}")


def _replace_once(path: Path, pattern: re.Pattern[str], line: str) -> None:
    """Replace the first line of ``path`` matching ``pattern`` with ``line``; refuse if none matches."""
    text = path.read_text(encoding="utf-8")
    new_text, count = pattern.subn(line.replace("\\", "\\\\"), text, count=1)
    if count != 1:
        raise ViewReplayError(f"{path}: no line matching {pattern.pattern!r}")
    path.write_text(new_text, encoding="utf-8")


def build_wheel(repo: Repo, wheel: Path, out_dir: Path) -> Path:
    """Unpack ``wheel``, apply the series and overlay, set our version, and pack into ``out_dir``."""
    pin = repo.pin
    original = check_wheel(wheel, pin)
    version = pin.custom_version(original)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="viewreplay-build-", dir=out_dir) as tmp:
        _wheel_cli("unpack", "-d", tmp, str(wheel))
        (unpacked,) = Path(tmp).iterdir()
        change_tree(repo, locate_tree(unpacked, pin), revert=False)
        dist_info = unpacked / f"torch-{original}.dist-info"
        _replace_once(dist_info / "METADATA", _METADATA_VERSION_RE, f"Version: {version}")
        _replace_once(unpacked / "torch" / "version.py", _VERSION_PY_LINE_RE, f"__version__ = '{version}'")
        dist_info.rename(unpacked / f"torch-{version}.dist-info")
        _wheel_cli("pack", "-d", str(out_dir), str(unpacked))
    built = out_dir / wheel.name.replace(f"-{original}-", f"-{version}-", 1)
    if not built.is_file():
        raise ViewReplayError(f"{out_dir}: expected {built.name} after packing, but it is not there")
    return built
