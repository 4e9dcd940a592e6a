"""Helpers shared by the tools tests (a uniquely named module, so it never clashes with other conftests)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from viewreplay import cli

REPO_ROOT = Path(__file__).resolve().parents[2]
# The tools are version-agnostic; their tests run against this pin of the real repository (its
# CPU wheel is 190 MB, the newest pin's CUDA wheel 555 MB), and expect its version strings.
TOOLS_PIN = "2.13.0"
REAL_REPO = ("--repo", REPO_ROOT, "--pin", TOOLS_PIN)
FIXTURE_TOUCHED = (
    "torch/_functorch/_aot_autograd/functional_utils.py",
    "torch/_functorch/_aot_autograd/utils.py",
)
FIXTURE_OVERLAY = "torch/_functorch/_aot_autograd/view_replay/__init__.py"
FIXTURE_PIN = """# fixture pin
[torch]
version = "2.13.0"
wheel_requirement = "torch==2.13.0"
upstream_tag = "v2.13.0"
local_version = "viewreplay"

[files]
"""
GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "fixture",
    "GIT_AUTHOR_EMAIL": "fixture@localhost",
    "GIT_COMMITTER_NAME": "fixture",
    "GIT_COMMITTER_EMAIL": "fixture@localhost",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


def run_cli(*args: str | Path) -> int:
    """Run the CLI in-process and return its exit code (argparse usage errors included)."""
    try:
        return cli.main([str(a) for a in args])
    except SystemExit as exc:
        return int(exc.code or 0)


def snapshot(root: Path) -> dict[str, str]:
    """Map every file and directory under ``root`` to its sha256 (``dir`` for directories)."""
    result = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        result[rel] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return result
