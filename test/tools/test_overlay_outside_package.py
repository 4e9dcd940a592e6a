"""An overlay module outside the view_replay package: the overlay is every file the series adds under torch/.

On the fixture repository, a new PR adds ``torch/_functorch/_aot_autograd/example_fix.py`` (a fix of its own
concern, next to the upstream modules) and a hook that imports it. Export writes the module to
``torch_overlay/``, the tip check passes, ``apply`` installs it, ``status`` says applied, ``apply --revert``
removes it; an older pin's own form of the PR carries its hook only, and an older pin's checkout that
changes the module is refused.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from viewreplay.pin import load_repo, patch_sections, split_patch
from viewreplay.pinforms import check_pin
from viewreplay.tip import tip_differences
from viewreplay_testlib import FIXTURE_PIN, FIXTURE_TOUCHED, GIT_ENV, run_cli, snapshot

EXAMPLE_FIX = "torch/_functorch/_aot_autograd/example_fix.py"
EXAMPLE_TEXT = '"""An example fix that needs no view replay.\n\nLayering: shared.\n"""\n\nFIXED = True\n'
HOOK = FIXTURE_TOUCHED[0]
HOOK_LINE = "    return example_fix.FIXED\n"
OLDER_PIN = "2.12.0"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True).stdout


def add_example_fix_pr(checkout: Path) -> None:
    """Commit a new PR at the tip: the module outside view_replay/, and a hook in an upstream file that imports it."""
    (checkout / EXAMPLE_FIX).write_text(EXAMPLE_TEXT)
    hook = checkout / HOOK
    hook.write_text(hook.read_text() + "\n\ndef _example_fix() -> bool:\n"
                    "    from torch._functorch._aot_autograd import example_fix\n\n" + HOOK_LINE)
    git(checkout, "add", "-A")
    git(checkout, "commit", "-q", "-m", "Example fix: a module of its own concern", "-m", "What: x.\n\nWhy: y.")


@pytest.fixture(scope="module")
def exported(fixture_repo_template: Path, pinned_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture repository after the export of a checkout with the example-fix PR (tests copy it to edit it)."""
    root = tmp_path_factory.mktemp("overlay-outside")
    repo = Path(shutil.copytree(fixture_repo_template, root / "repo"))
    checkout = root / "checkout"
    assert run_cli("checkout-series", "--repo", repo, "--wheel", pinned_wheel, checkout) == 0
    add_example_fix_pr(checkout)
    assert run_cli("export", "--repo", repo, checkout) == 0
    return repo


def test_export_writes_the_module_to_torch_overlay_and_the_tip_check_passes(exported: Path) -> None:
    assert (exported / "torch_overlay" / EXAMPLE_FIX).read_text() == EXAMPLE_TEXT
    repo = load_repo(exported)
    assert EXAMPLE_FIX in repo.overlay and EXAMPLE_FIX in repo.overlay_paths
    pr = patch_sections(repo.patches[-1], overlay=repo.overlay_paths)
    assert (pr.overlay, pr.hooks) == ([EXAMPLE_FIX], [HOOK])
    assert EXAMPLE_FIX not in repo.touched_files and EXAMPLE_FIX not in repo.pin.files
    assert tip_differences(repo) == []


def test_apply_installs_it_status_says_applied_and_revert_removes_it(
    exported: Path, tree: Path, pristine_template: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli("apply", "--repo", exported, tree) == 0
    assert (tree / EXAMPLE_FIX).read_text() == EXAMPLE_TEXT
    capsys.readouterr()
    assert run_cli("status", "--repo", exported, tree) == 0
    assert capsys.readouterr().out.startswith(f"{tree}: applied (")
    # A hand edit of it is a stale overlay, by its tree path (it is not in the view_replay package).
    (tree / EXAMPLE_FIX).write_text(EXAMPLE_TEXT + "# the previous revision\n")
    assert run_cli("status", "--repo", exported, tree) == 1
    assert f"applied, stale overlay: 1 file(s) differ from the repository's: {EXAMPLE_FIX} (" in capsys.readouterr().out
    assert run_cli("apply", "--repo", exported, "--revert", tree) == 0
    assert not (tree / EXAMPLE_FIX).exists()
    assert snapshot(tree) == snapshot(pristine_template)


def add_older_pin(repo: Path) -> None:
    """A pin below the fixture's 2.13.0, with the same [files] (its wheel is the fixture's)."""
    text = (repo / "pins" / "2.13.0" / "pin.toml").read_text()
    assert text.startswith(FIXTURE_PIN.split("[files]")[0])
    (repo / "pins" / OLDER_PIN).mkdir()
    (repo / "pins" / OLDER_PIN / "pin.toml").write_text(text.replace("2.13.0", OLDER_PIN))


def older_checkout(repo: Path, pinned_wheel: Path, dest: Path) -> Path:
    """A checkout of the series for the older pin: the fixture's, with its base commit's version.txt and tag moved."""
    assert run_cli("checkout-series", "--repo", repo, "--wheel", pinned_wheel, dest) == 0
    git(dest, "checkout", "-q", "v2.13.0")
    (dest / "version.txt").write_text(f"{OLDER_PIN}\n")
    git(dest, "commit", "-q", "-a", "--amend", "--no-edit")
    git(dest, "tag", f"v{OLDER_PIN}")
    git(dest, "rebase", "-q", "--onto", f"v{OLDER_PIN}", "v2.13.0", "main")
    return dest


def test_an_older_pins_own_form_never_carries_it(
    exported: Path, pinned_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = Path(shutil.copytree(exported, tmp_path / "repo"))
    add_older_pin(repo)
    checkout = older_checkout(repo, pinned_wheel, tmp_path / "older")
    name = load_repo(repo).patches[-1].name
    # The older release's form of the PR's hook: the pin's own form carries that hook, never the module.
    hook = checkout / HOOK
    hook.write_text(hook.read_text().replace(HOOK_LINE, "    return bool(example_fix.FIXED)\n"))
    git(checkout, "commit", "-q", "-a", "--amend", "--no-edit")
    assert run_cli("export", "--repo", repo, "--pin", OLDER_PIN, checkout) == 0
    own = repo / "pins" / OLDER_PIN / "patches" / name
    assert list(split_patch(own.read_text())[1]) == [HOOK]
    older = load_repo(repo, OLDER_PIN)
    assert tip_differences(older) == [] and check_pin(older, pinned_wheel) == []
    assert "\n+FIXED = True\n" in older.patches[-1].read_text()  # the module: patches/NAME's
    # Changing the module in the older pin's checkout is refused: the overlay is the newest pin's.
    (checkout / EXAMPLE_FIX).write_text(EXAMPLE_TEXT + "OLDER = True\n")
    git(checkout, "commit", "-q", "-a", "--amend", "--no-edit")
    capsys.readouterr()
    assert run_cli("export", "--repo", repo, "--pin", OLDER_PIN, checkout) == 1
    err = capsys.readouterr().err
    assert "overlay or test sections differ from patches/" in err and EXAMPLE_FIX in err
    # An own form that carries the module (written by hand) does not load.
    section = split_patch((repo / "patches" / name).read_text())[1][EXAMPLE_FIX]
    own.write_text(own.read_text() + section.replace("FIXED = True", "FIXED = False"))
    assert run_cli("status", "--repo", repo, "--pin", OLDER_PIN, tmp_path) == 1
    assert f"{own}: {EXAMPLE_FIX}: an own form carries upstream files only" in capsys.readouterr().err


def test_an_overlay_file_must_not_shadow_a_file_of_the_pinned_wheel(fixture_repo: Path, pinned_wheel: Path) -> None:
    patch = fixture_repo / "patches" / "0001-fixture.patch"
    upstream = "torch/_functorch/_aot_autograd/fx_utils.py"  # in the wheel, not in the pin's [files]
    patch.write_text(patch.read_text() + f"diff --git a/{upstream} b/{upstream}\nnew file mode 100644\n")
    problems = check_pin(load_repo(fixture_repo), pinned_wheel)
    assert any(p.startswith(f"{upstream}: an overlay file, but torch-2.13.0") for p in problems), problems
