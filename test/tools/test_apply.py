"""apply / revert / status / --check on extracted trees, including every refusal."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from viewreplay import tree as tree_module
from viewreplay.pin import load_repo, sha256_bytes
from viewreplay_testlib import FIXTURE_TOUCHED, run_cli, snapshot, TOOLS_PIN


def test_round_trip_restores_every_byte(repo: Path, tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    loaded = load_repo(repo, TOOLS_PIN)
    before = snapshot(tree)
    assert run_cli("status", "--repo", repo, "--pin", TOOLS_PIN, tree) == 0
    assert run_cli("apply", "--repo", repo, "--pin", TOOLS_PIN, "--check", tree) == 0
    assert run_cli("apply", "--repo", repo, "--pin", TOOLS_PIN, "--check", "--revert", tree) == 1
    assert snapshot(tree) == before
    assert "pristine" in capsys.readouterr().out

    assert run_cli("apply", "--repo", repo, "--pin", TOOLS_PIN, tree) == 0
    for rel in loaded.touched_files:
        assert sha256_bytes((tree / rel).read_bytes()) != loaded.pin.files[rel]
    for rel, data in loaded.overlay.items():
        assert (tree / rel).read_bytes() == data
    changed = {rel for rel, digest in snapshot(tree).items() if before.get(rel) != digest}
    overlay_dirs = {p.as_posix() for rel in loaded.overlay for p in Path(rel).parents} - set(before) - {"."}
    assert changed == set(loaded.touched_files) | set(loaded.overlay) | overlay_dirs

    capsys.readouterr()
    assert run_cli("status", "--repo", repo, "--pin", TOOLS_PIN, tree) == 0
    assert "applied" in capsys.readouterr().out
    assert run_cli("apply", "--repo", repo, "--pin", TOOLS_PIN, "--check", "--revert", tree) == 0
    assert run_cli("apply", "--repo", repo, "--pin", TOOLS_PIN, "--check", tree) == 1

    assert run_cli("apply", "--repo", repo, "--pin", TOOLS_PIN, "--revert", tree) == 0
    assert snapshot(tree) == before


def test_torch_package_dir_form_and_stale_bytecode(fixture_repo: Path, tree: Path) -> None:
    pyc = tree / "torch/_functorch/_aot_autograd/__pycache__/functional_utils.cpython-311.pyc"
    pyc.parent.mkdir()
    pyc.write_bytes(b"stale")
    assert run_cli("apply", "--repo", fixture_repo, tree / "torch") == 0
    assert not pyc.exists()
    assert run_cli("apply", "--repo", fixture_repo, "--revert", tree / "torch") == 0


def assert_refused(repo: Path, tree: Path, capsys: pytest.CaptureFixture[str], *args: str, mentions: str) -> str:
    """Run apply with ``args``; assert exit 1, an unchanged tree and that stderr names ``mentions``."""
    before = snapshot(tree)
    capsys.readouterr()
    assert run_cli("apply", "--repo", repo, "--pin", TOOLS_PIN, *args, tree) == 1
    err = capsys.readouterr().err
    assert mentions in err
    assert snapshot(tree) == before
    return err


def test_refuses_unrecognised_tree(repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_refused(repo, empty, capsys, mentions="not a torch tree")


def test_refuses_wrong_version(repo: Path, tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    version_py = tree / "torch/version.py"
    version_py.write_text(version_py.read_text().replace("'2.13.0+cpu'", "'2.12.0+cpu'"))
    err = assert_refused(repo, tree, capsys, mentions=str(version_py))
    assert "2.12.0+cpu" in err


def test_refuses_modified_pinned_file(repo: Path, tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tree / load_repo(repo, TOOLS_PIN).touched_files[0]
    target.write_bytes(target.read_bytes() + b"# local edit\n")
    err = assert_refused(repo, tree, capsys, mentions=str(target))
    assert "not explained by the patch series" in err
    assert run_cli("status", "--repo", repo, "--pin", TOOLS_PIN, tree) == 1


def test_refuses_missing_pinned_file(repo: Path, tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tree / load_repo(repo, TOOLS_PIN).touched_files[-1]
    target.unlink()
    err = assert_refused(repo, tree, capsys, mentions=str(target))
    assert "missing" in err


def test_refuses_already_applied_and_not_applied(repo: Path, tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_refused(repo, tree, capsys, "--revert", mentions="already pristine")
    assert run_cli("apply", "--repo", repo, "--pin", TOOLS_PIN, tree) == 0
    assert_refused(repo, tree, capsys, mentions="already applied")


def test_overlay_file_missing_refuses_apply_and_reverts(
    repo: Path, tree: Path, pristine_template: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli("apply", "--repo", repo, "--pin", TOOLS_PIN, tree) == 0
    overlay_file = tree / next(iter(load_repo(repo, TOOLS_PIN).overlay))
    overlay_file.unlink()
    assert_refused(repo, tree, capsys, mentions=f"{overlay_file}: overlay file missing")
    assert run_cli("status", "--repo", repo, "--pin", TOOLS_PIN, tree) == 1
    # Revert can still bring every file back: the hooks are the series', the overlay files go.
    assert run_cli("apply", "--repo", repo, "--pin", TOOLS_PIN, "--revert", tree) == 0
    assert snapshot(tree) == snapshot(pristine_template)


def test_refuses_overlay_in_pristine_tree(repo: Path, tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rel, data = next(iter(load_repo(repo, TOOLS_PIN).overlay.items()))
    (tree / rel).parent.mkdir(parents=True, exist_ok=True)
    (tree / rel).write_bytes(data)
    assert_refused(repo, tree, capsys, mentions=f"{tree / rel}: overlay file present")


def test_refuses_one_file_reverted_by_hand(
    fixture_repo: Path, tree: Path, pristine_template: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli("apply", "--repo", fixture_repo, tree) == 0
    shutil.copy(pristine_template / FIXTURE_TOUCHED[1], tree / FIXTURE_TOUCHED[1])
    err = assert_refused(fixture_repo, tree, capsys, mentions=f"{tree / FIXTURE_TOUCHED[1]}: not patched")
    assert "revert it first: viewreplay apply" in err
    # Revert needs nothing the tree lacks: the patched file is reverse-patched, the overlay removed.
    assert run_cli("apply", "--repo", fixture_repo, "--revert", tree) == 0
    assert snapshot(tree) == snapshot(pristine_template)


def test_revert_refuses_hand_edit_of_a_stock_tree(
    fixture_repo: Path, tree: Path, pinned_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tree / FIXTURE_TOUCHED[0]
    target.write_bytes(target.read_bytes() + b"# local edit\n")
    err = assert_refused(fixture_repo, tree, capsys, "--revert", "--wheel", str(pinned_wheel),
                         mentions="not a tree the series was applied to")
    assert len(err.strip().splitlines()) == 1


@pytest.fixture
def immutable() -> Iterator[list[Path]]:
    """Paths appended to the yielded list get ``chattr +i`` (works as root); cleared on teardown."""
    paths: list[Path] = []
    yield paths
    for path in paths:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def make_immutable(immutable: list[Path], path: Path) -> None:
    """Make ``path`` immutable so that even root cannot write it."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed, so a read-only condition cannot be made as root")
    result = subprocess.run(["chattr", "+i", str(path)], check=False, capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"this filesystem does not support chattr +i: {result.stderr.strip()}")
    immutable.append(path)


def test_refuses_read_only_patched_file(
    repo: Path, tree: Path, immutable: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    target = tree / load_repo(repo, TOOLS_PIN).touched_files[-1]
    make_immutable(immutable, target)
    err = assert_refused(repo, tree, capsys, mentions=str(target))
    assert "not writable" in err


def test_refuses_read_only_overlay_parent(
    repo: Path, tree: Path, immutable: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    rel = next(iter(load_repo(repo, TOOLS_PIN).overlay))
    ancestor = next(p for p in (tree / rel).parents if p.exists())
    make_immutable(immutable, ancestor)
    assert_refused(repo, tree, capsys, mentions=str(ancestor))


def test_refuses_read_only_revert(
    repo: Path, tree: Path, immutable: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli("apply", "--repo", repo, "--pin", TOOLS_PIN, tree) == 0
    make_immutable(immutable, tree / next(iter(load_repo(repo, TOOLS_PIN).overlay)))
    assert_refused(repo, tree, capsys, "--revert", mentions="cannot be deleted")


@pytest.mark.parametrize("revert", [False, True])
@pytest.mark.parametrize("fail_at", ["first", "last"])
def test_interrupted_write_rolls_back(
    repo: Path,
    tree: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    revert: bool,
    fail_at: str,
) -> None:
    if revert:
        assert run_cli("apply", "--repo", repo, "--pin", TOOLS_PIN, tree) == 0
    loaded = load_repo(repo, TOOLS_PIN)
    writes = len(loaded.touched_files) + (0 if revert else len(loaded.overlay))
    failing_call = 1 if fail_at == "first" else writes
    real_write = tree_module.write_file
    calls = []

    def failing_write(path: Path, data: bytes) -> None:
        calls.append(path)
        if len(calls) == failing_call:
            path.write_bytes(data[: len(data) // 2])  # a torn write, then the failure
            raise OSError(28, "No space left on device (injected)")
        real_write(path, data)

    monkeypatch.setattr(tree_module, "write_file", failing_write)
    args = ("--revert",) if revert else ()
    err = assert_refused(repo, tree, capsys, *args, mentions="rolled back")
    assert "injected" in err
    assert len(calls) == failing_call
