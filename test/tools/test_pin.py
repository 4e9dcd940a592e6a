"""Pins: pin-update's hashes come from the pristine wheel (the [torch] table is preserved); every pin of the
repository loads; an older pin takes its own form of a patch where it has one; bad pins are refused."""

from __future__ import annotations

import tomllib
import zipfile
from pathlib import Path

import pytest
from viewreplay.pin import load_pin, load_repo, pin_versions, sha256_bytes
from viewreplay_testlib import FIXTURE_TOUCHED, REPO_ROOT, run_cli, TOOLS_PIN


def test_every_pin_of_the_repository_loads() -> None:
    """Each pin pins exactly the files its series touches; only older pins have patches of their own."""
    versions = pin_versions(REPO_ROOT)
    assert TOOLS_PIN in versions and len(versions) >= 2
    assert load_pin(REPO_ROOT).version == versions[-1]
    for version in versions:
        repo = load_repo(REPO_ROOT, version)
        assert repo.pin.newest == (version == versions[-1])
        assert set(repo.pin.files) == set(repo.touched_files)
        own = [p for p in repo.patches if p.parent == repo.pin.patch_dir]
        assert (not own) if repo.pin.newest else bool(own), version
        assert [p.name for p in repo.patches] == [p.name for p in load_repo(REPO_ROOT).patches]


def _add_older_pin(fixture_repo: Path, version: str = "2.12.0") -> Path:
    """A second pin below the fixture's 2.13.0, with the same [files]; return its directory."""
    pin_dir = fixture_repo / "pins" / version
    pin_dir.mkdir(parents=True)
    text = (fixture_repo / "pins" / "2.13.0" / "pin.toml").read_text()
    (pin_dir / "pin.toml").write_text(text.replace('"2.13.0"', f'"{version}"').replace("v2.13.0", f"v{version}"))
    return pin_dir


def test_older_pin_takes_its_own_patch(fixture_repo: Path) -> None:
    pin_dir = _add_older_pin(fixture_repo)
    shared = fixture_repo / "patches" / "0001-fixture.patch"
    assert load_repo(fixture_repo).pin.version == "2.13.0"
    assert load_repo(fixture_repo, "2.12.0").patches == [shared]
    (pin_dir / "patches").mkdir()
    (pin_dir / "patches" / shared.name).write_text(shared.read_text())
    assert load_repo(fixture_repo, "2.12.0").patches == [pin_dir / "patches" / shared.name]
    assert load_repo(fixture_repo, "2.13.0").patches == [shared]


@pytest.mark.parametrize(
    "case, message",
    [
        ("unknown pin", "no pin 9.9.9 in"),
        ("stray patch", "not listed in"),
        ("own patch of the newest pin", "the newest pin's patches are patches/ itself"),
        ("version differs from the directory", "[torch] version is 2.13.0, but the directory says 2.12.0"),
    ],
)
def test_bad_pins_are_refused(
    case: str, message: str, fixture_repo: Path, tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pin = "2.13.0"
    if case == "unknown pin":
        pin = "9.9.9"
    elif case == "stray patch":
        pin_dir = _add_older_pin(fixture_repo)
        (pin_dir / "patches").mkdir()
        (pin_dir / "patches" / "0002-gone.patch").write_text("")
        pin = "2.12.0"
    elif case == "own patch of the newest pin":
        own = fixture_repo / "pins" / "2.13.0" / "patches"
        own.mkdir()
        (own / "0001-fixture.patch").write_text((fixture_repo / "patches" / "0001-fixture.patch").read_text())
    else:
        pin_dir = _add_older_pin(fixture_repo)
        (pin_dir / "pin.toml").write_text((fixture_repo / "pins" / "2.13.0" / "pin.toml").read_text())
        pin = "2.12.0"
    assert run_cli("status", "--repo", fixture_repo, "--pin", pin, tree) == 1
    assert message in capsys.readouterr().err
def test_pin_update_hashes_the_wheel_and_keeps_torch_table(fixture_repo: Path, pinned_wheel: Path) -> None:
    pin_path = fixture_repo / "pins" / "2.13.0" / "pin.toml"
    torch_table_before = pin_path.read_text().split("[files]")[0]
    pin_path.write_text(torch_table_before + '[files]\n"torch/stale.py" = "' + "0" * 64 + '"\n')
    assert run_cli("pin-update", "--repo", fixture_repo, "--wheel", pinned_wheel) == 0
    assert pin_path.read_text().split("[files]")[0] == torch_table_before
    with zipfile.ZipFile(pinned_wheel) as archive:
        expected = {rel: sha256_bytes(archive.read(rel)) for rel in FIXTURE_TOUCHED}
    assert load_pin(fixture_repo).files == expected
    assert tomllib.loads(pin_path.read_text())["torch"]["local_version"] == "viewreplay"


def test_real_pin_matches_the_wheel(pinned_wheel: Path) -> None:
    repo = load_repo(REPO_ROOT, TOOLS_PIN)
    with zipfile.ZipFile(pinned_wheel) as archive:
        assert repo.pin.files == {rel: sha256_bytes(archive.read(rel)) for rel in repo.touched_files}


def test_pin_update_refuses_path_not_in_wheel(
    fixture_repo: Path, pinned_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    patch = fixture_repo / "patches" / "0001-fixture.patch"
    patch.write_text(patch.read_text().replace(FIXTURE_TOUCHED[1], "torch/_functorch/no_such_file.py"))
    pin_before = (fixture_repo / "pins" / "2.13.0" / "pin.toml").read_text()
    assert run_cli("pin-update", "--repo", fixture_repo, "--wheel", pinned_wheel) == 1
    err = capsys.readouterr().err
    assert "torch/_functorch/no_such_file.py" in err and "0001-fixture.patch" in err
    assert (fixture_repo / "pins" / "2.13.0" / "pin.toml").read_text() == pin_before


def test_stale_pin_is_refused(fixture_repo: Path, tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pin_path = fixture_repo / "pins" / "2.13.0" / "pin.toml"
    pin_path.write_text(pin_path.read_text().split("[files]")[0] + "[files]\n")
    assert run_cli("apply", "--repo", fixture_repo, tree) == 1
    assert "pin-update" in capsys.readouterr().err


def test_patch_creating_a_file_is_refused(fixture_repo: Path, tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    patch = fixture_repo / "patches" / "0001-fixture.patch"
    patch.write_text(patch.read_text() + "diff --git a/torch/new.py b/torch/new.py\nnew file mode 100644\n")
    assert run_cli("status", "--repo", fixture_repo, tree) == 1
    assert f"{patch}:" in capsys.readouterr().err
