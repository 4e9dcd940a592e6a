"""Pins: pin-update's hashes come from the pristine wheel (the [torch] table is preserved); every pin of the
repository loads; an older pin takes its own form of a patch where it has one; bad pins are refused."""

from __future__ import annotations

import tomllib
import zipfile
from pathlib import Path

import pytest
from viewreplay.pin import (
    OWN_FIT,
    OWN_UNCHANGED,
    compose_text,
    is_upstream_file,
    fit_section,
    load_pin,
    load_repo,
    patch_message,
    pin_versions,
    sha256_bytes,
    split_patch,
)
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
        own = [p for p in repo.patches if (repo.pin.patch_dir / p.name).is_file()]
        assert (not own) if repo.pin.newest else bool(own), version
        assert [p.name for p in repo.patches] == [p.name for p in load_repo(REPO_ROOT).patches]


def test_own_forms_carry_only_upstream_files() -> None:
    """pins/*/patches/ holds no overlay or test section, and at most 1,500 lines (#35)."""
    lines = 0
    overlay = load_repo(REPO_ROOT).overlay_paths  # every pin's: an own form cannot add to it
    for own in sorted((REPO_ROOT / "pins").glob("*/patches/*")):
        text = own.read_text()
        lines += len(text.splitlines())
        paths = [line.split(" b/", 1)[1] for line in text.splitlines() if line.startswith("diff --git ")]
        assert all(is_upstream_file(p, overlay) for p in paths), own
    assert lines <= 1500


def _add_older_pin(fixture_repo: Path, version: str = "2.12.0") -> Path:
    """A second pin below the fixture's 2.13.0, with the same [files]; return its directory."""
    pin_dir = fixture_repo / "pins" / version
    pin_dir.mkdir(parents=True)
    text = (fixture_repo / "pins" / "2.13.0" / "pin.toml").read_text()
    (pin_dir / "pin.toml").write_text(text.replace('"2.13.0"', f'"{version}"').replace("v2.13.0", f"v{version}"))
    return pin_dir


def _own_hook_form(shared: Path, replace: tuple[str, str]) -> str:
    """An own form: the shared patch's section of FIXTURE_TOUCHED[1], with ``replace`` done in it."""
    section = split_patch(shared.read_text())[1][FIXTURE_TOUCHED[1]]
    assert replace[0] in section
    return section.replace(*replace)


def test_older_pin_takes_its_own_patch(fixture_repo: Path, tree: Path) -> None:
    """The composed patch: the own form's message and upstream files, patches/NAME's others, overlay and tests."""
    pin_dir = _add_older_pin(fixture_repo)
    shared = fixture_repo / "patches" / "0001-fixture.patch"
    assert load_repo(fixture_repo).pin.version == "2.13.0"
    assert load_repo(fixture_repo, "2.12.0").patches == [shared]
    (pin_dir / "patches").mkdir()
    own = pin_dir / "patches" / shared.name
    own.write_text(_own_hook_form(shared, ("+# view replay fixture line", "+# view replay fixture line, 2.12's form")))
    (composed,) = load_repo(fixture_repo, "2.12.0").patches
    assert composed.name == shared.name and composed.parent != shared.parent
    shared_head, shared_sections = split_patch(shared.read_text())
    head, sections = split_patch(composed.read_text())
    assert head == shared_head and list(sections) == list(shared_sections)
    assert "2.12's form" in sections[FIXTURE_TOUCHED[1]]
    assert {p: s for p, s in sections.items() if p != FIXTURE_TOUCHED[1]} == {
        p: s for p, s in shared_sections.items() if p != FIXTURE_TOUCHED[1]}
    assert load_repo(fixture_repo, "2.13.0").patches == [shared]
    # A message of its own replaces the shared one.
    message = patch_message(shared_head).replace("Free-text description.", "On 2.12: the fixture line differs.")
    own.write_text(message + own.read_text())
    head, _ = split_patch(load_repo(fixture_repo, "2.12.0").patches[0].read_text())
    assert head == message
    # The markers: the shared section with one line of context, or no change of that file.
    own.write_text(f"diff --git a/{FIXTURE_TOUCHED[1]} b/{FIXTURE_TOUCHED[1]}\n{OWN_FIT}\n")
    section = split_patch(load_repo(fixture_repo, "2.12.0").patches[0].read_text())[1][FIXTURE_TOUCHED[1]]
    assert section == fit_section(shared_sections[FIXTURE_TOUCHED[1]])
    assert sum(line.startswith(" ") for line in section.splitlines()) == 2
    own.write_text(f"diff --git a/{FIXTURE_TOUCHED[1]} b/{FIXTURE_TOUCHED[1]}\n{OWN_UNCHANGED}\n")
    composed = load_repo(fixture_repo, "2.12.0", require_pinned_hashes=False).patches[0]
    assert FIXTURE_TOUCHED[1] not in split_patch(composed.read_text())[1]


def test_an_own_form_of_the_overlay_is_refused(fixture_repo: Path, tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pin_dir = _add_older_pin(fixture_repo)
    shared = fixture_repo / "patches" / "0001-fixture.patch"
    (pin_dir / "patches").mkdir()
    # A full copy (the older format) loads: its overlay section is the shared one.
    (pin_dir / "patches" / shared.name).write_text(shared.read_text())
    shared_head, shared_sections = split_patch(shared.read_text())
    assert split_patch(load_repo(fixture_repo, "2.12.0").patches[0].read_text()) == (
        patch_message(shared_head), shared_sections)
    (pin_dir / "patches" / shared.name).write_text(shared.read_text().replace("VALUE = 1", "VALUE = 2"))
    assert run_cli("status", "--repo", fixture_repo, "--pin", "2.12.0", tree) == 1
    assert "an own form carries upstream files only" in capsys.readouterr().err


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


def test_patch_deleting_a_file_is_refused(fixture_repo: Path, tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    patch = fixture_repo / "patches" / "0001-fixture.patch"
    patch.write_text(patch.read_text() + "diff --git a/torch/version.py b/torch/version.py\ndeleted file mode 100644\n")
    assert run_cli("status", "--repo", fixture_repo, tree) == 1
    err = capsys.readouterr().err
    assert f"{patch}:" in err and "hooks may only modify existing upstream files, not delete them" in err


def test_a_new_file_is_an_overlay_file_and_must_be_new(
    fixture_repo: Path, tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file a patch creates under torch/ is an overlay file, wherever it lives: torch_overlay/ must hold it,
    and it must not be an upstream file."""
    patch = fixture_repo / "patches" / "0001-fixture.patch"
    text = patch.read_text()
    patch.write_text(text + "diff --git a/torch/new.py b/torch/new.py\nnew file mode 100644\n")
    assert run_cli("apply", "--repo", fixture_repo, "--check", tree) == 1
    assert "torch_overlay/torch/new.py: the series adds it, the repository lacks it" in capsys.readouterr().err
    rel = FIXTURE_TOUCHED[1]
    patch.write_text(text + f"diff --git a/{rel} b/{rel}\nnew file mode 100644\n")
    assert run_cli("status", "--repo", fixture_repo, tree) == 1
    err = capsys.readouterr().err
    assert f"pins {rel} as upstream file(s), but the overlay has them" in err


def _format_patch(tmp: Path, before: str, after: str, message: str) -> str:
    """One commit's format-patch changing FIXTURE_TOUCHED[1] from ``before`` to ``after``."""
    import subprocess

    from viewreplay_testlib import GIT_ENV

    def git(*args: str) -> str:
        env = {**GIT_ENV, "GIT_AUTHOR_DATE": "2026-12-02T00:00:00+0000", "GIT_COMMITTER_DATE": "2026-12-02T00:00:00+0000"}
        return subprocess.run(["git", *args], cwd=tmp, env=env, check=True, capture_output=True, text=True).stdout

    path = tmp / FIXTURE_TOUCHED[1]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(before)
    git("init", "-q")
    git("add", "-A")
    git("commit", "-q", "-m", "base")
    path.write_text(after)
    git("commit", "-q", "-a", "-m", message)
    return git("format-patch", "-1", "--stdout", "--zero-commit", "--no-signature")


def test_own_form_holds_only_what_differs(pristine_template: Path, tmp_path: Path) -> None:
    """Moved or context-only drift needs no copy (OWN_FIT where only the context differs); a change that differs does."""
    from viewreplay.pinforms import apply_patch_text, own_form

    rel = FIXTURE_TOUCHED[1]
    newest = (pristine_template / rel).read_text()
    lines = newest.splitlines(keepends=True)
    added = "# view replay: a hook line\n"
    shared = _format_patch(tmp_path / "shared", newest, "".join(lines[:20] + [added] + lines[20:]), "Hook\n\nWhy: x.")

    def form(old_lines: list[str], at: int, hook: str = added, message: str = "Hook\n\nWhy: x.") -> str | None:
        old = "".join(old_lines)
        new = "".join(old_lines[:at] + [hook] + old_lines[at:])
        commit = _format_patch(tmp_path / f"c{len(list(tmp_path.iterdir()))}", old, new, message)
        own = own_form("0001-fixture.patch", shared, commit, {rel: old.encode()}, {rel: new.encode()}, overlay=())
        composed = compose_text(shared, own, "0001-fixture.patch", "own", overlay=()) if own else shared
        assert apply_patch_text({rel: old.encode()}, composed) == {rel: new.encode()}
        return own

    assert form(lines, 20) is None  # the same hunk
    moved = ["# moved by the older release\n"] * 5 + lines
    assert form(moved, 25) is None  # the same hunk, elsewhere in the file
    drifted = lines[:18] + ["# a context line the older release words differently\n"] + lines[19:]
    assert form(drifted, 20) == f"diff --git a/{rel} b/{rel}\n{OWN_FIT}\n"  # context-only drift
    own = form(lines, 20, hook="# view replay: the older release's hook line\n")
    assert own is not None and own.startswith(f"diff --git a/{rel}") and "older release's hook line" in own
    own = form(lines, 20, message="Hook\n\nWhy: x, and on this release y.")
    assert own is not None and own.startswith("From ") and own.endswith("\n---\n")
