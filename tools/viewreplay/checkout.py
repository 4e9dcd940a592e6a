"""Make a git repository from the pinned wheel's torch/ files, standing in for a PyTorch source checkout."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from viewreplay import ViewReplayError
from viewreplay.pin import Pin
from viewreplay.pinnedwheel import extract_torch

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "viewreplay",
    "GIT_AUTHOR_EMAIL": "viewreplay@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_NAME": "viewreplay",
    "GIT_COMMITTER_EMAIL": "viewreplay@localhost",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
}


def _git(dest: Path, *args: str) -> None:
    """Run a git command in ``dest`` with the fixed identity; refuse on failure."""
    env = {**os.environ, **GIT_IDENTITY, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    result = subprocess.run(["git", *args], cwd=dest, env=env, check=False, capture_output=True, text=True)
    if result.returncode != 0:
        raise ViewReplayError(f"{dest}: 'git {' '.join(args)}' failed: {result.stderr.strip()}")


def make_checkout(pin: Pin, wheel: Path, dest: Path, *, all_files: bool) -> None:
    """Create a git repo at ``dest`` holding the wheel's torch/ files and ``version.txt``, tagged upstream_tag."""
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ViewReplayError(f"{dest}: exists and is not an empty directory")
    dest.mkdir(parents=True, exist_ok=True)
    extract_torch(wheel, dest, all_files=all_files)
    (dest / "version.txt").write_text(pin.version + "\n", encoding="utf-8")
    _git(dest, "init", "-q", "-b", "main")
    _git(dest, "add", "-A", "-f", ".")
    _git(
        dest, "commit", "-q", "--no-verify", "-m", f"PyTorch {pin.upstream_tag} (from the pinned wheel's torch/ files)"
    )
    _git(dest, "tag", pin.upstream_tag)
