"""A tree applied with an earlier revision of the series: status names it stale, revert brings it back.

The documented quick loop (CONTRIBUTING.md, "Everyday loop") edits the overlay in a checkout, exports
it, then runs ``apply --revert`` and ``apply`` on a tree applied with the previous overlay: revert must
work without the previous revision of the repository (no git stash).
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from viewreplay.pin import OVERLAY_PACKAGE, load_repo
from viewreplay_testlib import FIXTURE_OVERLAY, FIXTURE_TOUCHED, run_cli, snapshot, TOOLS_PIN


def edit_fixture_series(repo: Path, old: str, new: str) -> None:
    """Change the fixture patch (and torch_overlay/, where the text is the overlay's) as an export would."""
    patch = repo / "patches" / "0001-fixture.patch"
    assert old in patch.read_text()
    patch.write_text(patch.read_text().replace(old, new))
    overlay = repo / "torch_overlay" / FIXTURE_OVERLAY
    overlay.write_text(overlay.read_text().replace(old, new))


def status(repo: Path, tree: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = run_cli("status", "--repo", repo, "--pin", TOOLS_PIN, tree)
    return code, capsys.readouterr().out


def test_stale_overlay_is_named_and_reverts(
    fixture_repo: Path, tree: Path, pristine_template: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli("apply", "--repo", fixture_repo, tree) == 0
    # A module the previous overlay had and the new one dropped, with its bytecode.
    old_module = tree / OVERLAY_PACKAGE / "dropped.py"
    old_module.write_text("X = 0\n")
    (old_module.parent / "__pycache__").mkdir()
    (old_module.parent / "__pycache__" / "dropped.cpython-311.pyc").write_bytes(b"bytecode")
    edit_fixture_series(fixture_repo, "VALUE = 1", "VALUE = 2")

    code, out = status(fixture_repo, tree, capsys)
    assert code == 1
    first = out.splitlines()[0]
    assert "applied, stale overlay: 2 file(s) differ from the repository's: __init__.py, dropped.py" in first
    assert "partial" not in out
    assert f"{tree / FIXTURE_OVERLAY}: overlay file differs from the repository's" in out
    assert f"then: viewreplay apply --repo {fixture_repo} {tree}" in out

    before = snapshot(tree)
    assert run_cli("apply", "--repo", fixture_repo, tree) == 1
    assert "revert it first: viewreplay apply --repo" in capsys.readouterr().err
    assert snapshot(tree) == before

    assert run_cli("apply", "--repo", fixture_repo, "--check", "--revert", tree) == 0
    assert snapshot(tree) == before
    # The hints are the commands to run, as they are printed.
    hint = next(line for line in out.splitlines() if "to bring it up to date: " in line)
    revert, then = hint.partition("to bring it up to date: ")[2].split("; then: ")
    assert shlex.split(revert)[:2] == ["viewreplay", "apply"] and "--revert" in revert
    assert run_cli(*shlex.split(revert)[1:]) == 0
    assert snapshot(tree) == snapshot(pristine_template)
    assert run_cli(*shlex.split(then)[1:]) == 0
    assert (tree / FIXTURE_OVERLAY).read_text().endswith("VALUE = 2\n")
    code, out = status(fixture_repo, tree, capsys)
    assert (code, out.split(" (")[0]) == (0, f"{tree}: applied")


def test_stale_hooks_revert_from_the_pinned_wheel(
    fixture_repo: Path, tree: Path, pristine_template: Path, pinned_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli("apply", "--repo", fixture_repo, tree) == 0
    edit_fixture_series(fixture_repo, "return 'patched'", "return 'patched again'")
    code, out = status(fixture_repo, tree, capsys)
    assert code == 1
    assert f"applied, stale hooks: 1 upstream file(s) differ from what the series makes of them: {FIXTURE_TOUCHED[0]}" in out

    capsys.readouterr()
    assert run_cli("apply", "--repo", fixture_repo, "--revert", "--wheel", pinned_wheel, tree) == 0
    assert f"{FIXTURE_TOUCHED[0]}: restored from the pinned wheel" in capsys.readouterr().out
    assert snapshot(tree) == snapshot(pristine_template)


def test_stale_overlay_of_the_real_series(tree: Path, pristine_template: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from viewreplay_testlib import REAL_REPO

    repo = load_repo(REAL_REPO[1], TOOLS_PIN)
    assert run_cli("apply", *REAL_REPO, tree) == 0
    edited = sorted(repo.overlay)[:2]
    for rel in edited:
        (tree / rel).write_bytes((tree / rel).read_bytes() + b"\n# the previous overlay\n")
    code, out = status(REAL_REPO[1], tree, capsys)
    assert code == 1
    names = ", ".join(rel.removeprefix(OVERLAY_PACKAGE) for rel in edited)
    assert f"applied, stale overlay: 2 file(s) differ from the repository's: {names}" in out
    assert run_cli("apply", *REAL_REPO, "--revert", tree) == 0
    assert snapshot(tree) == snapshot(pristine_template)


def test_revert_restores_a_missing_pinned_file_of_an_applied_tree(
    fixture_repo: Path, tree: Path, pristine_template: Path, pinned_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli("apply", "--repo", fixture_repo, tree) == 0
    (tree / FIXTURE_TOUCHED[1]).unlink()
    assert run_cli("apply", "--repo", fixture_repo, tree) == 1
    assert "pinned file is missing" in capsys.readouterr().err
    assert run_cli("apply", "--repo", fixture_repo, "--revert", "--wheel", pinned_wheel, tree) == 0
    assert snapshot(tree) == snapshot(pristine_template)
