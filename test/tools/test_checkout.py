"""make-checkout, and apply/revert on the resulting source-checkout form."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from viewreplay.pin import load_repo
from viewreplay_testlib import run_cli, TOOLS_PIN


def git(checkout: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=checkout, check=True, capture_output=True, text=True).stdout


def test_checkout_apply_revert(
    repo: Path, pinned_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkout = tmp_path / "pytorch"
    assert run_cli("make-checkout", "--repo", repo, "--pin", TOOLS_PIN, "--wheel", pinned_wheel, checkout) == 0
    assert (checkout / "version.txt").read_text() == "2.13.0\n"
    assert git(checkout, "log", "--format=%s|%an|%ad", "--date=iso-strict").strip() == (
        "PyTorch v2.13.0 (from the pinned wheel's torch/ files)|viewreplay|2000-01-01T00:00:00+00:00"
    )
    assert git(checkout, "describe", "--tags").strip() == "v2.13.0"
    files = git(checkout, "ls-files").split()
    assert "torch/version.py" in files and all(f.endswith(".py") or f == "version.txt" for f in files)

    loaded = load_repo(repo, TOOLS_PIN)
    assert run_cli("apply", "--repo", repo, "--pin", TOOLS_PIN, checkout) == 0
    capsys.readouterr()
    assert run_cli("status", "--repo", repo, "--pin", TOOLS_PIN, checkout) == 0
    assert "applied (torch 2.13.0, checkout)" in capsys.readouterr().out
    status = git(checkout, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert sorted(status) == sorted(
        [f" M {rel}" for rel in loaded.touched_files] + [f"?? {rel}" for rel in loaded.overlay]
    )

    assert run_cli("apply", "--repo", repo, "--pin", TOOLS_PIN, "--revert", checkout) == 0
    assert git(checkout, "status", "--porcelain", "--untracked-files=all", "--ignored") == ""


def test_make_checkout_refuses_non_empty_dir(
    fixture_repo: Path, pinned_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "occupied").mkdir()
    (tmp_path / "occupied" / "file").write_text("x")
    assert run_cli("make-checkout", "--repo", fixture_repo, "--wheel", pinned_wheel, tmp_path / "occupied") == 1
    assert "not an empty directory" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "occupied").iterdir()] == ["file"]
