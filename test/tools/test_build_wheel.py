"""build-wheel: one real build per session, checked by RECORD and by installing it in a fresh venv."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import shutil
import subprocess
import venv
import zipfile
from pathlib import Path

import pytest
from viewreplay.pin import load_pin, load_repo
from viewreplay.pinnedwheel import obtain_wheel
from viewreplay_testlib import REAL_REPO, REPO_ROOT, run_cli, TOOLS_PIN

BUILT_NAME = "torch-2.13.0+viewreplay.cpu-cp311-cp311-manylinux_2_28_x86_64.whl"


@pytest.fixture(scope="session")
def built_wheel(pinned_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The custom wheel built from the real repository's series and overlay (once per session)."""
    out = tmp_path_factory.mktemp("dist")
    assert run_cli("build-wheel", *REAL_REPO, "--wheel", pinned_wheel, "--out", out) == 0
    return out / BUILT_NAME


def test_built_wheel_name_version_and_record(built_wheel: Path) -> None:
    assert built_wheel.is_file()
    repo = load_repo(REPO_ROOT, TOOLS_PIN)
    with zipfile.ZipFile(built_wheel) as archive:
        names = set(archive.namelist())
        assert not any(n.startswith("torch-2.13.0+cpu.dist-info/") for n in names)
        metadata = archive.read("torch-2.13.0+viewreplay.cpu.dist-info/METADATA").decode()
        assert "\nVersion: 2.13.0+viewreplay.cpu\n" in metadata
        assert "__version__ = '2.13.0+viewreplay.cpu'\n" in archive.read("torch/version.py").decode()
        for rel, data in repo.overlay.items():
            assert archive.read(rel) == data
        record = archive.read("torch-2.13.0+viewreplay.cpu.dist-info/RECORD").decode()
        rows = list(csv.reader(io.StringIO(record)))
        assert {row[0] for row in rows} == names
        for name, digest, size in rows:
            if name.endswith("RECORD"):
                assert digest == size == ""
                continue
            data = archive.read(name)
            expected = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert (digest, int(size)) == (expected, len(data)), name


def test_built_wheel_installs_and_imports(built_wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    install = subprocess.run(
        [python, "-m", "pip", "install", "-q", str(built_wheel)],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stderr
    result = subprocess.run(
        [python, "-c", "import torch; print(torch.__version__); import torch._functorch._aot_autograd.view_replay"],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "2.13.0+viewreplay.cpu"


def test_truncated_wheel_is_refused(pinned_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    truncated = tmp_path / pinned_wheel.name
    with open(pinned_wheel, "rb") as source, open(truncated, "wb") as target:
        target.write(source.read(5_000_000))
    out = tmp_path / "out"
    assert run_cli("build-wheel", *REAL_REPO, "--wheel", truncated, "--out", out) == 1
    assert f"{truncated}: corrupt or truncated wheel" in capsys.readouterr().err
    assert not out.exists() or not any(out.iterdir())


def test_wrong_wheel_is_refused(pinned_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / pinned_wheel.name.replace("2.13.0", "2.12.0")
    shutil.copy(pinned_wheel, other)
    assert run_cli("build-wheel", *REAL_REPO, "--wheel", other, "--out", tmp_path / "out") == 1
    assert "not the pinned upstream torch 2.13.0 wheel" in capsys.readouterr().err


def test_download_by_requirement(tmp_path: Path) -> None:
    """Without --wheel the pinned requirement is pip-downloaded (from find-links, never another torch)."""
    wheel = obtain_wheel(load_pin(REPO_ROOT, TOOLS_PIN), None, tmp_path)
    assert wheel.name.startswith("torch-2.13.0") and wheel.parent == tmp_path


def _corrupt_member(wheel: Path, dest: Path, member: str) -> None:
    """Copy ``wheel`` to ``dest`` with one byte in the middle of ``member``'s stored data flipped."""
    shutil.copy(wheel, dest)
    with zipfile.ZipFile(dest) as archive:
        info = archive.getinfo(member)
    with open(dest, "r+b") as f:
        f.seek(info.header_offset + 26)
        name_len, extra_len = int.from_bytes(f.read(2), "little"), int.from_bytes(f.read(2), "little")
        at = info.header_offset + 30 + name_len + extra_len + info.compress_size // 2
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ 0xFF]))


@pytest.mark.parametrize("member", ["torch/version.py", "torch/_functorch/_aot_autograd/functional_utils.py"])
def test_corrupt_wheel_is_refused(
    pinned_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], member: str
) -> None:
    """A flipped byte inside one member (intact zip directory) fails the CRC or inflate check."""
    corrupt = tmp_path / pinned_wheel.name
    _corrupt_member(pinned_wheel, corrupt, member)
    out = tmp_path / "out"
    assert run_cli("build-wheel", *REAL_REPO, "--wheel", corrupt, "--out", out) == 1
    err = capsys.readouterr().err
    assert f"{corrupt}: corrupt" in err and member in err, err
    assert not out.exists() or not any(out.iterdir())
