"""The pinned upstream wheel: obtain it, check it, extract its torch/ files."""

from __future__ import annotations

import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

from viewreplay import ViewReplayError
from viewreplay.pin import Pin
from viewreplay.tree import public_version


def wheel_version(wheel: Path) -> str:
    """Return the version field of a wheel file name (``torch-2.13.0+cpu-...whl`` gives ``2.13.0+cpu``)."""
    parts = wheel.name.split("-")
    if not wheel.name.endswith(".whl") or len(parts) < 5:
        raise ViewReplayError(f"{wheel}: not a wheel file name")
    return parts[1]


def check_wheel(wheel: Path, pin: Pin) -> str:
    """Refuse a wheel that is not the pinned torch release or whose archive is corrupt; return its version."""
    if not wheel.is_file():
        raise ViewReplayError(f"{wheel}: file not found")
    version = wheel_version(wheel)
    if (
        not wheel.name.startswith("torch-")
        or public_version(version) != pin.version
        or "+" + pin.local_version in version
    ):
        raise ViewReplayError(
            f"{wheel}: not the pinned upstream torch {pin.version} wheel ({pin.path}: {pin.wheel_requirement})"
        )
    try:
        with zipfile.ZipFile(wheel) as archive:
            for info in archive.infolist():
                _check_member(wheel, archive, info)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ViewReplayError(f"{wheel}: corrupt or truncated wheel: {exc}") from None
    return version


def _check_member(wheel: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> None:
    """Inflate one member to the end, which checks its data and CRC."""
    try:
        with archive.open(info) as member:
            while member.read(1 << 20):
                pass
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        raise ViewReplayError(f"{wheel}: corrupt wheel: member {info.filename}: {exc}") from None


def obtain_wheel(pin: Pin, wheel: Path | None, download_dir: Path) -> Path:
    """Return the checked pinned wheel: ``wheel`` if given, else one in ``download_dir`` (pip-downloaded if absent)."""
    if wheel is None:
        found = sorted(download_dir.glob(f"torch-{pin.version}*.whl")) if download_dir.is_dir() else []
        if not found:
            command = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                pin.wheel_requirement,
                "-d",
                str(download_dir),
            ]
            result = subprocess.run(command, check=False, capture_output=True, text=True)
            if result.returncode != 0:
                raise ViewReplayError(f"'{' '.join(command)}' failed:\n{result.stderr.strip()}")
            found = sorted(download_dir.glob(f"torch-{pin.version}*.whl"))
        if len(found) != 1:
            raise ViewReplayError(f"{download_dir}: expected exactly one torch {pin.version} wheel, found {found}")
        wheel = found[0]
    check_wheel(wheel, pin)
    return wheel


def extract_torch(wheel: Path, dest: Path, *, all_files: bool) -> list[str]:
    """Extract the wheel's ``torch/`` files into ``dest`` (only ``*.py`` unless ``all_files``); return their names."""
    with zipfile.ZipFile(wheel) as archive:
        names = [
            name
            for name in archive.namelist()
            if name.startswith("torch/") and not name.endswith("/") and (all_files or name.endswith(".py"))
        ]
        for name in names:
            archive.extract(name, dest)
    return names
