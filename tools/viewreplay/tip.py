"""The tip-equality check: ``torch_overlay/`` and ``upstream/test/`` are the series' tip.

The series patches carry each PR's overlay growth and tests (``pin.patch_sections``; the overlay is
every file the series creates under ``torch/``, wherever it lives); the repository also keeps
their tip as plain files, which the wheel build installs and pytest imports. :func:`series_tip`
builds that tip from the patches alone (``git apply`` of their overlay and test sections onto an
empty directory, in series order) and :func:`check_tip`
refuses a repository whose files differ from it, naming each path. ``export`` writes both from
one checkout, so the check only fails after a hand edit of one side: edit in a
``checkout-series`` checkout and export (CONTRIBUTING.md).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from viewreplay import ViewReplayError
from viewreplay.pin import OVERLAY_DIR, TEST_PREFIX, UPSTREAM_TEST_DIR, Repo, series_overlay


def series_tip(patches: list[Path]) -> dict[str, bytes]:
    """In-tree path -> content of every overlay and test file the series leaves at its tip."""
    with tempfile.TemporaryDirectory(prefix="viewreplay-tip-") as tmp:
        stage = Path(tmp)
        env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(stage.parent)}
        overlay = sorted(series_overlay(patches))
        includes = [*(f"--include={rel}" for rel in overlay), f"--include={TEST_PREFIX}*"]
        for patch in patches:
            command = ["git", "apply", "--whitespace=nowarn", *includes, str(patch.resolve())]
            result = subprocess.run(command, cwd=stage, env=env, check=False, capture_output=True, text=True)
            if result.returncode != 0:
                raise ViewReplayError(f"{patch}: its overlay or test sections do not apply: {result.stderr.strip()}")
        return {
            path.relative_to(stage).as_posix(): path.read_bytes()
            for path in sorted(stage.rglob("*"))
            if path.is_file()
        }


def repository_tip(repo: Repo) -> dict[str, bytes]:
    """The same paths as kept in the repository: ``torch_overlay/`` and the test files of ``upstream/test/``."""
    tests = repo.root / UPSTREAM_TEST_DIR / TEST_PREFIX
    found = dict(repo.overlay)
    if tests.is_dir():
        for path in sorted(tests.rglob("*.py")):
            if "__pycache__" not in path.parts:
                found[path.relative_to(repo.root / UPSTREAM_TEST_DIR).as_posix()] = path.read_bytes()
    return found


def tip_differences(repo: Repo) -> list[str]:
    """Paths where the repository's files and the series' tip disagree ('' list: they agree)."""
    built, kept = series_tip(repo.patches), repository_tip(repo)
    where = {True: f"{UPSTREAM_TEST_DIR}/", False: f"{OVERLAY_DIR}/"}
    problems = []
    for rel in sorted(built.keys() | kept.keys()):
        shown = where[rel.startswith(TEST_PREFIX)] + rel
        if rel not in kept:
            problems.append(f"{shown}: the series adds it, the repository lacks it")
        elif rel not in built:
            problems.append(f"{shown}: not added by any series patch")
        elif built[rel] != kept[rel]:
            problems.append(f"{shown}: differs from the series' tip")
    return problems


def check_tip(repo: Repo) -> None:
    """Refuse a repository whose overlay or PR tests are not the series' tip (module docstring)."""
    problems = tip_differences(repo)
    if problems:
        raise ViewReplayError(
            f"{repo.root}: torch_overlay/ and upstream/test/ must be the tip of the series for pin "
            f"{repo.pin.version} (edit in a checkout-series checkout, then export):\n  " + "\n  ".join(problems)
        )
