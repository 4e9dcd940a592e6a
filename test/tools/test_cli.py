"""CLI plumbing: help, usage errors, repository discovery, ``python -m viewreplay``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from viewreplay.pin import load_repo
from viewreplay_testlib import REPO_ROOT, run_cli, TOOLS_PIN

SUBCOMMANDS = ["apply", "status", "pin-update", "build-wheel", "make-checkout"]


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_subcommand_has_help_and_repo(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(command, "--help") == 0
    assert "--repo DIR" in capsys.readouterr().out


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli() == 2
    assert run_cli("frobnicate") == 2
    assert run_cli("apply") == 2
    assert run_cli("status", "a", "b") == 2


def test_python_dash_m(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "viewreplay", "status", "--help"], check=False, capture_output=True, text=True
    )
    assert result.returncode == 0 and "TREE" in result.stdout
    result = subprocess.run(
        [sys.executable, "-m", "viewreplay", "status", "x"], check=False, cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 1
    assert "no repository found" in result.stderr and "pins/" in result.stderr


def test_repo_found_by_walking_up(
    fixture_repo: Path, tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(fixture_repo / "patches")
    assert run_cli("status", tree) == 0
    assert "pristine" in capsys.readouterr().out


def test_real_repo_loads_with_current_pins() -> None:
    """The real series is non-empty, parses, and pin.toml pins exactly the files it touches."""
    repo = load_repo(REPO_ROOT, TOOLS_PIN)
    assert repo.patches and repo.touched_files and repo.overlay
    assert set(repo.pin.files) == set(repo.touched_files)


def test_broken_series_is_refused(fixture_repo: Path, tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    series = fixture_repo / "patches" / "series"
    series.write_text("# nothing\n")
    assert run_cli("status", "--repo", fixture_repo, tree) == 1
    assert f"{series}: the series lists no patches" in capsys.readouterr().err
    series.write_text("0002-missing.patch\n")
    assert run_cli("status", "--repo", fixture_repo, tree) == 1
    assert "0002-missing.patch" in capsys.readouterr().err
