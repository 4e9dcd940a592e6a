"""Shared fixtures: the pinned wheel, a pristine tree extracted from it, and repositories to test with.

Two repositories are exercised: a miniature fixture repo (its own pin, one patch made with
``git format-patch`` that modifies two upstream files and adds the one-file overlay) and the
real repository's series and overlay.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from viewreplay.pin import load_pin, load_repo
from viewreplay.pinnedwheel import extract_torch, obtain_wheel
from viewreplay_testlib import (
    FIXTURE_OVERLAY,
    FIXTURE_PIN,
    FIXTURE_TOUCHED,
    GIT_ENV,
    REPO_ROOT,
    run_cli,
    TOOLS_PIN,
)


@pytest.fixture(scope="session")
def pinned_wheel() -> Path:
    """The pinned upstream wheel, pip-downloaded once into the repo's (gitignored) .cache/."""
    return obtain_wheel(load_pin(REPO_ROOT, TOOLS_PIN), None, REPO_ROOT / ".cache" / "wheels")


@pytest.fixture(scope="session")
def pristine_template(pinned_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site-packages-style tree holding the wheel's ``torch/**/*.py`` (never modified)."""
    root = tmp_path_factory.mktemp("pristine") / "site-packages"
    extract_torch(pinned_wheel, root, all_files=False)
    return root


@pytest.fixture
def tree(pristine_template: Path, tmp_path: Path) -> Path:
    """A private, pristine copy of the extracted tree."""
    return Path(shutil.copytree(pristine_template, tmp_path / "site-packages"))


def _git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` with the fixture identity and return its stdout."""
    return subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="session")
def fixture_repo_template(
    pristine_template: Path, pinned_wheel: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A miniature patch-queue repo whose pin.toml is filled by ``viewreplay pin-update``."""
    work = tmp_path_factory.mktemp("fixture-src")
    for rel in FIXTURE_TOUCHED:
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(pristine_template / rel, work / rel)
    _git(work, "init", "-q")
    _git(work, "add", ".")
    _git(work, "commit", "-q", "-m", "pristine")
    first = work / FIXTURE_TOUCHED[0]
    first.write_text(first.read_text() + "\n\ndef _view_replay_fixture() -> str:\n    return 'patched'\n")
    second = work / FIXTURE_TOUCHED[1]
    lines = second.read_text().splitlines(keepends=True)
    second.write_text("".join(lines[:5] + ["# view replay fixture line\n"] + lines[5:]))
    overlay_text = '"""View replay fixture overlay."""\nVALUE = 1\n'
    (work / FIXTURE_OVERLAY).parent.mkdir(parents=True)
    (work / FIXTURE_OVERLAY).write_text(overlay_text)
    _git(work, "add", "-A")
    _git(work, "commit", "-q", "-m", "Fixture: touch two aot_autograd files, add the overlay", "-m", "Free-text description.")
    patch_text = _git(work, "format-patch", "-1", "--stdout")

    repo = tmp_path_factory.mktemp("fixture-repo") / "repo"
    (repo / "patches").mkdir(parents=True)
    (repo / "patches" / "0001-fixture.patch").write_text(patch_text)
    (repo / "patches" / "series").write_text("# fixture series\n\n0001-fixture.patch\n")
    (repo / "pins" / "2.13.0").mkdir(parents=True)
    (repo / "pins" / "2.13.0" / "pin.toml").write_text(FIXTURE_PIN)
    overlay = repo / "torch_overlay" / FIXTURE_OVERLAY
    overlay.parent.mkdir(parents=True)
    overlay.write_text(overlay_text)  # the series' tip (viewreplay.tip)
    assert run_cli("pin-update", "--repo", repo, "--pin", TOOLS_PIN, "--wheel", pinned_wheel) == 0
    return repo


@pytest.fixture
def fixture_repo(fixture_repo_template: Path, tmp_path: Path) -> Path:
    """A private copy of the fixture repo (tests may edit it)."""
    return Path(shutil.copytree(fixture_repo_template, tmp_path / "repo"))


@pytest.fixture(params=["fixture", "real"])
def repo(request: pytest.FixtureRequest) -> Path:
    """Each test using this runs against the fixture repo and against the real repository.

    The real repository must have a non-empty series with up-to-date pins: ``load_repo``
    raises (failing the test, never skipping it) otherwise.
    """
    if request.param == "fixture":
        return request.getfixturevalue("fixture_repo")
    load_repo(REPO_ROOT, TOOLS_PIN)
    return REPO_ROOT
