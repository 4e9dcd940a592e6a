"""The contributor loop end to end, with the documented commands (CONTRIBUTING.md, "Everyday loop" and
"Changing a patch or adding a PR"), on the fixture repository: check out the series, change one PR
(``commit --fixup``, ``rebase -i --autosquash``), export, then check every pin (``export --check`` and
``apply --check --pin``), and bring a tree applied with the previous overlay up to date (``status``,
``apply --revert``, ``apply``) without the previous revision of the repository.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest
from viewreplay.pin import pin_versions
from viewreplay_testlib import FIXTURE_OVERLAY, GIT_ENV, run_cli, snapshot


def git(cwd: Path, *args: str) -> str:
    env = {**GIT_ENV, "GIT_SEQUENCE_EDITOR": "true", "GIT_EDITOR": "true"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def test_change_one_pr_export_and_check_every_pin(
    fixture_repo: Path,
    tree: Path,
    pristine_template: Path,
    pinned_wheel: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    repo = ("--repo", str(fixture_repo))
    # A tree applied with the overlay as it is before the change (the patched venv of the quick loop).
    assert run_cli("apply", *repo, tree) == 0

    checkout = tmp_path / "t"
    capsys.readouterr()
    assert run_cli("checkout-series", *repo, "--wheel", pinned_wheel, checkout) == 0
    hint = capsys.readouterr().out.splitlines()[-1]
    export_command = shlex.split(hint.partition("then: ")[2])
    assert export_command[:2] == ["viewreplay", "export"] and "--repo" in export_command  # runs from here

    tag = git(checkout, "describe", "--tags", "--abbrev=0").strip()
    (pr_commit,) = git(checkout, "log", "--format=%H", f"{tag}..HEAD").split()
    overlay = checkout / FIXTURE_OVERLAY
    overlay.write_text(overlay.read_text().replace("VALUE = 1", "VALUE = 3"))
    git(checkout, "commit", "-q", "-a", f"--fixup={pr_commit}")
    git(checkout, "rebase", "-q", "-i", "--autosquash", tag)
    assert len(git(checkout, "log", "--format=%H", f"{tag}..HEAD").split()) == 1  # squashed into the PR

    assert run_cli(*export_command[1:]) == 0
    assert (fixture_repo / "torch_overlay" / FIXTURE_OVERLAY).read_text().endswith("VALUE = 3\n")
    assert "+VALUE = 3" in (fixture_repo / "patches" / "0001-fixture.patch").read_text()

    for pin in pin_versions(fixture_repo):
        assert run_cli("export", *repo, "--pin", pin, "--check", checkout) == 0, pin
        fresh = tmp_path / f"pristine-{pin}"
        fresh.symlink_to(pristine_template)  # --check writes nothing
        capsys.readouterr()
        assert run_cli("apply", *repo, "--pin", pin, "--check", fresh) == 0, pin
        assert "apply would succeed" in capsys.readouterr().out

    # The quick loop on the tree applied before the change: stale, reverted, applied again.
    capsys.readouterr()
    assert run_cli("status", *repo, tree) == 1
    out = capsys.readouterr().out
    assert "applied, stale overlay: 1 file(s) differ from the repository's: __init__.py" in out
    assert run_cli("apply", *repo, "--revert", tree) == 0
    assert snapshot(tree) == snapshot(pristine_template)
    assert run_cli("apply", *repo, tree) == 0
    assert (tree / FIXTURE_OVERLAY).read_text().endswith("VALUE = 3\n")
    capsys.readouterr()
    assert run_cli("status", *repo, tree) == 0
    assert capsys.readouterr().out.startswith(f"{tree}: applied (")
