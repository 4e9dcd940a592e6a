"""pin-update: hashes come from the pristine wheel; the [torch] table is preserved."""

from __future__ import annotations

import tomllib
import zipfile
from pathlib import Path

import pytest
from viewreplay.pin import load_pin, load_repo, sha256_bytes
from viewreplay_testlib import FIXTURE_TOUCHED, REPO_ROOT, run_cli


def test_pin_update_hashes_the_wheel_and_keeps_torch_table(fixture_repo: Path, pinned_wheel: Path) -> None:
    pin_path = fixture_repo / "pin.toml"
    torch_table_before = pin_path.read_text().split("[files]")[0]
    pin_path.write_text(torch_table_before + '[files]\n"torch/stale.py" = "' + "0" * 64 + '"\n')
    assert run_cli("pin-update", "--repo", fixture_repo, "--wheel", pinned_wheel) == 0
    assert pin_path.read_text().split("[files]")[0] == torch_table_before
    with zipfile.ZipFile(pinned_wheel) as archive:
        expected = {rel: sha256_bytes(archive.read(rel)) for rel in FIXTURE_TOUCHED}
    assert load_pin(fixture_repo).files == expected
    assert tomllib.loads(pin_path.read_text())["torch"]["local_version"] == "viewreplay"


def test_real_pin_matches_the_wheel(pinned_wheel: Path) -> None:
    repo = load_repo(REPO_ROOT)
    with zipfile.ZipFile(pinned_wheel) as archive:
        assert repo.pin.files == {rel: sha256_bytes(archive.read(rel)) for rel in repo.touched_files}


def test_pin_update_refuses_path_not_in_wheel(
    fixture_repo: Path, pinned_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    patch = fixture_repo / "patches" / "0001-fixture.patch"
    patch.write_text(patch.read_text().replace(FIXTURE_TOUCHED[1], "torch/_functorch/no_such_file.py"))
    pin_before = (fixture_repo / "pin.toml").read_text()
    assert run_cli("pin-update", "--repo", fixture_repo, "--wheel", pinned_wheel) == 1
    err = capsys.readouterr().err
    assert "torch/_functorch/no_such_file.py" in err and "0001-fixture.patch" in err
    assert (fixture_repo / "pin.toml").read_text() == pin_before


def test_stale_pin_is_refused(fixture_repo: Path, tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pin_path = fixture_repo / "pin.toml"
    pin_path.write_text(pin_path.read_text().split("[files]")[0] + "[files]\n")
    assert run_cli("apply", "--repo", fixture_repo, tree) == 1
    assert "pin-update" in capsys.readouterr().err


def test_patch_creating_a_file_is_refused(fixture_repo: Path, tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    patch = fixture_repo / "patches" / "0001-fixture.patch"
    patch.write_text(patch.read_text() + "diff --git a/torch/new.py b/torch/new.py\nnew file mode 100644\n")
    assert run_cli("status", "--repo", fixture_repo, tree) == 1
    assert f"{patch}:" in capsys.readouterr().err
