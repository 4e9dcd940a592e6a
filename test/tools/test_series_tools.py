"""checkout-series / export round trip, stage-upstream (verified by git am), rebase-check."""

from __future__ import annotations

import ast
import functools
import re
import shutil
import subprocess
from pathlib import Path

from collections.abc import Callable

import pytest
from viewreplay.checkout import make_checkout
from viewreplay.pin import (
    OVERLAY_DIR,
    OVERLAY_PACKAGE,
    PatchSections,
    is_upstream_file,
    load_repo,
    patch_sections,
    pin_versions,
    split_patch,
)
from viewreplay.rebase import parse_hunks
from viewreplay.staging import MAX_ADDED_LINES, MESSAGE_FIELDS, added_lines, load_prs
from viewreplay.tip import repository_tip, tip_differences
from viewreplay.tree import apply_series
from viewreplay_testlib import GIT_ENV, REAL_REPO, REPO_ROOT, run_cli, TOOLS_PIN
UPSTREAM_TESTS = sorted((REPO_ROOT / "upstream" / "test").rglob("test_*.py"))


@functools.cache
def real_overlay() -> frozenset[str]:
    """The overlay files of the real series (a copy of the repository has the same)."""
    return load_repo(REPO_ROOT, TOOLS_PIN).overlay_paths


def sections(patch: Path) -> PatchSections:
    """``patch_sections`` of a patch of the real series, or of a copy's."""
    return patch_sections(patch, overlay=real_overlay())


def git(cwd: Path, *args: str) -> str:
    env = {**GIT_ENV, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def copy_repo(tmp_path: Path) -> Path:
    """A copy of the repository's patch queue (what export writes into)."""
    dest = tmp_path / "repo"
    dest.mkdir()
    for name in ("pins", "patches", "torch_overlay", "upstream"):
        source = REPO_ROOT / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, dest / name)
    return dest


@pytest.fixture(scope="module")
def series_checkout(pinned_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """checkout-series of the real repository (tests clone it before editing)."""
    dest = tmp_path_factory.mktemp("series") / "pytorch"
    assert run_cli("checkout-series", *REAL_REPO, "--wheel", pinned_wheel, dest) == 0
    return dest


@pytest.fixture(scope="module")
def pristine_checkout(pinned_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("pristine-checkout") / "pytorch"
    make_checkout(load_repo(REPO_ROOT, TOOLS_PIN).pin, pinned_wheel, dest, all_files=False)
    return dest


def clone(source: Path, tmp_path: Path) -> Path:
    checkout = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(source), str(checkout))
    return checkout


def amend_commit(checkout: Path, index: int, edit: Callable[[Path], None]) -> None:
    """Amend the ``index``-th commit after the tag with ``edit(checkout)``; rebase the later ones onto it."""
    commits = git(checkout, "rev-list", "--reverse", f"v{TOOLS_PIN}..HEAD").split()
    git(checkout, "checkout", "-q", "-b", "edit", commits[index])
    edit(checkout)
    git(checkout, "commit", "-q", "-a", "--amend", "--no-edit")
    git(checkout, "rebase", "-q", "--onto", "edit", commits[index], "main")


def append_to_overlay(repo: Path, name: str, rel: str, line: str) -> None:
    """Append ``line`` to the overlay file ``rel`` that ``patches/NAME`` adds (and no later patch changes), in the
    patch and in torch_overlay/: what the newest pin's export writes for that change (an older pin's refuses it)."""
    patch = repo / "patches" / name
    head, _, rest = patch.read_text().partition(f"diff --git a/{rel} b/{rel}\n")
    section, sep, tail = rest.partition("\ndiff --git ")
    count = int(re.search(r"^@@ -0,0 \+1,(\d+) @@", section, re.MULTILINE).group(1))
    section = section.replace(f"@@ -0,0 +1,{count} @@", f"@@ -0,0 +1,{count + 1} @@", 1).rstrip("\n")
    section += f"\n+{line.rstrip()}" + ("" if sep else "\n")
    patch.write_text(head + f"diff --git a/{rel} b/{rel}\n" + section + sep + tail)
    tip = repo / OVERLAY_DIR / rel
    tip.write_text(tip.read_text() + line)


def append_to(rel: str, text: str) -> Callable[[Path], None]:
    def edit(checkout: Path) -> None:
        (checkout / rel).write_text((checkout / rel).read_text() + text)

    return edit


def test_checkout_series_has_one_commit_per_pr_and_the_tip(series_checkout: Path) -> None:
    repo = load_repo(REPO_ROOT, TOOLS_PIN)
    subjects = git(series_checkout, "log", "--reverse", "--format=%s", f"v{TOOLS_PIN}..HEAD").splitlines()
    assert len(subjects) == len(repo.patches)
    assert all(re.match(r"\[(aot_autograd|decomp)\] ", s) for s in subjects)  # bracketed prefixes survive git am
    for rel, data in repository_tip(repo).items():
        assert (series_checkout / rel).read_bytes() == data, rel


def test_export_check_of_the_repository_is_clean(series_checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The committed patches, overlay and PR tests are exactly what export writes for the checkout."""
    assert run_cli("export", *REAL_REPO, "--check", series_checkout) == 0, capsys.readouterr().out[-3000:]


def test_the_series_tip_is_the_repository_on_every_pin() -> None:
    for pin in pin_versions(REPO_ROOT):
        assert tip_differences(load_repo(REPO_ROOT, pin)) == [], pin


def test_apply_refuses_an_overlay_that_is_not_the_series_tip(
    pristine_checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo_copy = copy_repo(tmp_path)
    config = repo_copy / OVERLAY_DIR / OVERLAY_PACKAGE / "config.py"
    config.write_text(config.read_text() + "# edited by hand\n")
    (repo_copy / "upstream" / "test" / "functorch" / "test_aot_view_replay.py").unlink()
    assert run_cli("apply", "--repo", repo_copy, "--pin", TOOLS_PIN, "--check", pristine_checkout) == 1
    err = capsys.readouterr().err
    assert f"{OVERLAY_DIR}/{OVERLAY_PACKAGE}config.py: differs from the series' tip" in err
    assert "upstream/test/functorch/test_aot_view_replay.py: the series adds it, the repository lacks it" in err


def test_export_round_trip_of_an_amended_hook(
    series_checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On an older pin, an amended hook whose shared form no longer gives its tree becomes the pin's own patch."""
    checkout = clone(series_checkout, tmp_path)
    repo_copy = copy_repo(tmp_path)
    copy_args = ("--repo", repo_copy, "--pin", TOOLS_PIN)
    patches = load_repo(repo_copy, TOOLS_PIN).patches
    index, shared = next((i, p) for i, p in enumerate(patches) if p.parent == repo_copy / "patches"
                         and sections(p).hooks)
    target = sections(shared).hooks[0]
    added = next(line[1:] for line in shared.read_text().split(f"b/{target}\n", 1)[1].splitlines()
                 if line.startswith("+") and line[1:].strip() and not line.startswith("+++"))
    indent = added[: len(added) - len(added.lstrip())]

    def edit(checkout: Path) -> None:
        path = checkout / target
        path.write_text(path.read_text().replace(added + "\n", f"{added}\n{indent}# edited in the checkout\n", 1))

    amend_commit(checkout, index, edit)
    # The repository no longer matches: --check shows the diff and exits 1.
    assert run_cli("export", *copy_args, "--check", checkout) == 1
    assert "# edited in the checkout" in capsys.readouterr().out
    # Export writes the changed patch as the pin's own, under its series name; the shared ones stay.
    own = repo_copy / "pins" / TOOLS_PIN / "patches"
    shared_before = {p.name: p.read_bytes() for p in (repo_copy / "patches").iterdir()}
    own_before = {p.name for p in own.iterdir()}
    assert run_cli("export", *copy_args, checkout) == 0
    assert {p.name: p.read_bytes() for p in (repo_copy / "patches").iterdir()} == shared_before
    own_after = {p.name: p.read_bytes() for p in own.iterdir()}
    assert sorted(own_after) == sorted({*own_before, shared.name})
    # The own form holds the one upstream file that differs, under the shared message, and no overlay or test.
    own_text = own_after[shared.name].decode()
    assert "# edited in the checkout" in own_text and not own_text.startswith("From ")
    assert [line for line in own_text.splitlines() if line.startswith("diff --git ")] == [
        f"diff --git a/{target} b/{target}"]
    assert run_cli("export", *copy_args, "--check", checkout) == 0
    composed = load_repo(repo_copy, TOOLS_PIN, require_pinned_hashes=False).patches[index]
    assert composed.name == shared.name and "# edited in the checkout" in composed.read_text()
    assert sections(composed) == sections(shared)
    # Back to the original commit: the pin's own copy is redundant again, and export removes it.
    assert run_cli("export", *copy_args, series_checkout) == 0
    assert {p.name for p in own.iterdir()} == own_before


def test_an_older_pins_export_refuses_an_overlay_change(
    series_checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The overlay and the tests are shared: changed in an older pin's checkout, export names the newest pin."""
    checkout = clone(series_checkout, tmp_path)
    repo_copy = copy_repo(tmp_path)
    rel = f"{OVERLAY_PACKAGE}view_meta_args.py"  # added by one PR, changed by none after it
    index = next(i for i, p in enumerate(load_repo(repo_copy, TOOLS_PIN).patches) if rel in sections(p).overlay)
    amend_commit(checkout, index, append_to(rel, "# edited in its PR's commit\n"))
    before = {p: p.read_bytes() for p in repo_copy.rglob("*") if p.is_file()}
    assert run_cli("export", "--repo", repo_copy, "--pin", TOOLS_PIN, checkout) == 1
    err = capsys.readouterr().err
    assert "overlay or test sections differ from patches/" in err and rel in err
    assert "change them in a checkout of the newest pin" in err
    assert {p: p.read_bytes() for p in repo_copy.rglob("*") if p.is_file()} == before


def test_export_of_an_older_pin_keeps_only_the_patches_that_differ(
    series_checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A needless own copy is removed; a missing needed one is written back; the series is the newest pin's."""
    repo_copy = copy_repo(tmp_path)
    copy_args = ("--repo", repo_copy, "--pin", TOOLS_PIN)
    own = repo_copy / "pins" / TOOLS_PIN / "patches"
    needed = sorted(p.name for p in own.iterdir())
    shared_only = [p.name for p in load_repo(repo_copy, TOOLS_PIN).patches if not (own / p.name).is_file()]
    assert needed and shared_only
    (own / shared_only[0]).write_bytes((repo_copy / "patches" / shared_only[0]).read_bytes())
    (own / needed[0]).unlink()
    assert run_cli("export", *copy_args, series_checkout) == 0
    assert sorted(p.name for p in own.iterdir()) == needed
    assert run_cli("export", *copy_args, "--check", series_checkout) == 0
    # An older pin's checkout cannot change the series.
    series = repo_copy / "patches" / "series"
    series.write_text(series.read_text().replace(shared_only[-1] + "\n", ""))
    (repo_copy / "patches" / shared_only[-1]).unlink()
    assert run_cli("export", *copy_args, series_checkout) == 1
    assert "belongs to the newest pin" in capsys.readouterr().err


def test_export_check_without_a_checkout_checks_every_pin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each pin's series applies on its wheel and its own forms are minimal; an overlay-only change needs no port."""
    repo_copy = copy_repo(tmp_path)
    (repo_copy / ".cache").symlink_to(REPO_ROOT / ".cache")
    assert run_cli("export", "--repo", repo_copy, "--check") == 0, capsys.readouterr().err
    assert "every pin's series loads, composes" in capsys.readouterr().out
    # An overlay-only change to a PR that the older pin has an own form of, as the newest pin's export
    # writes it (the PR's overlay section and torch_overlay/): the older pin needs nothing.
    own = repo_copy / "pins" / TOOLS_PIN / "patches"
    patches = load_repo(repo_copy, TOOLS_PIN).patches
    index, rel = next((i, rel) for i, p in enumerate(patches) if (own / p.name).is_file()
                      for rel in sections(p).overlay
                      if not any(rel in sections(q).overlay for q in patches[i + 1:]))
    shared = repo_copy / "patches" / patches[index].name
    tip = repo_copy / OVERLAY_DIR / rel
    line = next(line[1:] for line in shared.read_text().split(f"b/{rel}\n", 1)[1].split("\ndiff --git")[0].splitlines()
                if line.startswith("+") and line.strip("+ ") and tip.read_text().count(line[1:] + "\n") == 1)
    shared.write_text(shared.read_text().replace(f"\n+{line}\n", f"\n+{line}  # an overlay-only change\n", 1))
    tip.write_text(tip.read_text().replace(f"{line}\n", f"{line}  # an overlay-only change\n", 1))
    assert tip_differences(load_repo(repo_copy, TOOLS_PIN)) == []
    assert run_cli("export", "--repo", repo_copy, "--check") == 0, capsys.readouterr().err
    # An own form that carries a section patches/NAME gives as well is refused, naming the fix.
    name = next(p.name for p in patches if not (own / p.name).is_file() and sections(p).hooks)
    shared = (repo_copy / "patches" / name).read_text()
    (own / name).write_text(_first_hook_section(shared))
    capsys.readouterr()
    assert run_cli("export", "--repo", repo_copy, "--check") == 1
    err = capsys.readouterr().err
    assert f"pins/{TOOLS_PIN}/patches/{name}: is not needed" in err and f"export --pin {TOOLS_PIN}" in err


def _first_hook_section(patch_text: str) -> str:
    return next(section for rel, section in split_patch(patch_text)[1].items() if is_upstream_file(rel, real_overlay()))


def test_export_refuses_a_dirty_checkout(series_checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    checkout = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(series_checkout), str(checkout))
    (checkout / "torch" / "version.py").write_text("# dirty\n")
    assert run_cli("export", "--repo", copy_repo(tmp_path), "--pin", TOOLS_PIN, checkout) == 1
    assert "uncommitted changes" in capsys.readouterr().err


def test_stage_upstream_applies_with_git_am(
    pinned_wheel: Path, pristine_checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "staged"
    # --checkout: staged in a temporary worktree; the checkout itself is left as it was.
    head = git(pristine_checkout, "rev-parse", "HEAD")
    assert run_cli("stage-upstream", *REAL_REPO, "--out", out, "--checkout", pristine_checkout) == 0
    assert git(pristine_checkout, "rev-parse", "HEAD") == head
    assert git(pristine_checkout, "status", "--porcelain") == ""
    assert len(git(pristine_checkout, "worktree", "list").splitlines()) == 1
    repo = load_repo(REPO_ROOT, TOOLS_PIN)
    patches = sorted(out.glob("*.patch"))
    assert len(patches) == len(repo.patches)
    texts = [p.read_text() for p in patches]
    width = len(str(len(patches)))  # format-patch pads the number: [PATCH 01/10]
    assert all(f"[PATCH {i:0{width}d}/{len(patches)}]" in t for i, t in enumerate(texts, 1))
    assert all(f"\n{field}" in t.split("\n---\n", 1)[0] for t in texts for field in MESSAGE_FIELDS)
    fallback_point = next(i for i, p in enumerate(repo.patches) if p.name.endswith("-fallback-point.patch"))
    assert "55.8 ms" in texts[fallback_point]

    fresh = clone(pristine_checkout, tmp_path)
    git(fresh, "am", "-q", "--keep-non-patch", *map(str, patches))
    assert len(git(fresh, "rev-list", "origin/main..HEAD").split()) == len(patches)
    # The whole stack leaves the overlay and the PR tests as the repository keeps them.
    for rel, data in repository_tip(repo).items():
        assert (fresh / rel).read_bytes() == data, rel
    pristine = {rel: (pristine_checkout / rel).read_bytes() for rel in repo.touched_files}
    for rel, data in apply_series(pristine, repo.patches, reverse=False).items():
        assert (fresh / rel).read_bytes() == data
    # Reviewable sizes.
    assert all(added_lines(patch) <= MAX_ADDED_LINES for patch in patches)
    # The stand-in checkout has no test/ tree: the test patches of upstream's files are left out, and said so.
    assert "left out, the checkout has no test/functorch/test_aotdispatch.py" in capsys.readouterr().out


def test_stage_upstream_refuses_a_commit_that_imports_a_later_module(
    pristine_checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo_copy = copy_repo(tmp_path)
    rel = f"{OVERLAY_PACKAGE}view_meta_args.py"
    patches = load_repo(repo_copy, TOOLS_PIN).patches
    index = next(i for i, p in enumerate(patches) if rel in sections(p).overlay)
    later = next(p for p in patches[index + 1:] if f"{OVERLAY_PACKAGE}codegen.py" in sections(p).overlay)
    assert later  # codegen.py comes in a later PR
    append_to_overlay(repo_copy, patches[index].name, rel, "from .codegen import compiled_plan  # noqa: F401\n")
    out = tmp_path / "staged"
    assert run_cli("stage-upstream", "--repo", repo_copy, "--pin", TOOLS_PIN, "--out", out,
                   "--checkout", pristine_checkout) == 1
    err = capsys.readouterr().err
    assert f"{patches[index].name}: the commit does not stand on its own" in err
    assert f"{rel}:" in err and f"imports {OVERLAY_PACKAGE}codegen.py, which this commit does not have" in err
    assert not out.exists() or not any(out.iterdir())


def test_stage_upstream_refuses_a_commit_that_does_not_lint(
    pristine_checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo_copy = copy_repo(tmp_path)
    rel = f"{OVERLAY_PACKAGE}view_meta_args.py"
    patches = load_repo(repo_copy, TOOLS_PIN).patches
    index = next(i for i, p in enumerate(patches) if rel in sections(p).overlay)
    append_to_overlay(repo_copy, patches[index].name, rel, "import dataclasses\n")
    assert run_cli("stage-upstream", "--repo", repo_copy, "--pin", TOOLS_PIN, "--out", tmp_path / "o",
                   "--checkout", pristine_checkout) == 1
    err = capsys.readouterr().err
    assert f"{patches[index].name}: the commit does not stand on its own" in err
    assert "'dataclasses' imported but unused" in err


def test_stage_upstream_refuses_a_message_without_its_fields_and_an_oversized_pr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo_copy = copy_repo(tmp_path)
    # patches/NAME (an older pin composes its own form with it in a temporary file): its message, overlay and tests.
    first, second = (repo_copy / "patches" / p.name for p in load_repo(repo_copy, TOOLS_PIN).patches[:2])
    first.write_text(first.read_text().replace("\nWhy: ", "\nBecause: ", 1))
    text = second.read_text()
    section = f"diff --git a/{sections(second).hooks[0]}"
    filler = "".join(f"+# filler {n}\n" for n in range(MAX_ADDED_LINES))
    filler_file = f"{OVERLAY_PACKAGE}filler.py"
    added = f"diff --git a/{filler_file} b/{filler_file}\nnew file mode 100644\n--- /dev/null\n+++ b/{filler_file}\n"
    second.write_text(text.replace(section, f"{added}@@ -0,0 +1,{MAX_ADDED_LINES} @@\n{filler}{section}", 1))
    assert run_cli("stage-upstream", "--repo", repo_copy, "--pin", TOOLS_PIN, "--out", tmp_path / "o") == 1
    err = capsys.readouterr().err
    assert f"{first.name}: its message has no 'Why:' paragraph" in err
    assert f"{second.name}: adds " in err and f"lines outside its tests (at most {MAX_ADDED_LINES})" in err


@pytest.mark.parametrize("test_file", UPSTREAM_TESTS, ids=lambda p: p.name)
def test_upstream_test_files_are_self_contained(test_file: Path) -> None:
    """Upstream's idiom: common_utils.TestCase and run_tests(), no import from this repository."""
    tree = ast.parse(test_file.read_text())
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    assert not {m for m in modules if m and m.split(".")[0] in {"viewreplay", "view_replay_testing"}}
    assert "torch.testing._internal.common_utils" in modules
    assert "run_tests()" in test_file.read_text()


def test_every_pr_brings_its_tests() -> None:
    """Each PR adds a test file of its own (and, where it changes upstream's tests, a test patch its message names)."""
    repo = load_repo(REPO_ROOT, TOOLS_PIN)
    added = []
    for pr in load_prs(repo):
        tests = sections(pr.patch).tests
        assert [t for t in tests if Path(t).name.startswith("test_")], pr.name
        added += tests
        if pr.test_patch is not None:
            message = pr.patch.read_text().split("\n---\n", 1)[0]
            assert f"upstream/test_patches/{pr.name}.patch" in message, f"{pr.name}: the message says why"
    assert sorted(added) == sorted(str(t.relative_to(REPO_ROOT / "upstream")) for t in UPSTREAM_TESTS)


def test_stage_upstream_applies_test_patches_where_the_file_exists(
    pristine_checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo_copy = copy_repo(tmp_path)
    first = load_repo(repo_copy, TOOLS_PIN).patches[0]
    test_file = "test/functorch/test_fixture.py"
    patch = repo_copy / "upstream" / "test_patches" / f"{load_prs(load_repo(repo_copy, TOOLS_PIN))[0].name}.patch"
    patch.write_text(
        f"diff --git a/{test_file} b/{test_file}\n--- a/{test_file}\n+++ b/{test_file}\n"
        "@@ -1,3 +1,3 @@\n def test_x():\n-    expected = 'AsStridedBackward0'\n+    expected = 'ViewBackward0'\n     return expected\n"
    )
    # A checkout that has the upstream test file (its tag moved onto the commit adding it).
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", str(pristine_checkout), str(checkout))
    (checkout / test_file).parent.mkdir(parents=True)
    (checkout / test_file).write_text("def test_x():\n    expected = 'AsStridedBackward0'\n    return expected\n")
    git(checkout, "add", test_file)
    git(checkout, "commit", "-q", "-m", "upstream test file")
    git(checkout, "tag", "-f", f"v{TOOLS_PIN}")
    out = tmp_path / "staged"
    assert run_cli("stage-upstream", "--repo", repo_copy, "--pin", TOOLS_PIN, "--out", out, "--checkout", checkout) == 0
    assert f"{patch.name}: left out" not in capsys.readouterr().out
    staged = sorted(out.glob("*.patch"))[0]
    assert "+    expected = 'ViewBackward0'" in staged.read_text()
    assert sections(first).hooks[0] in staged.read_text()  # amended into the PR's own commit
    # On the stand-in checkout (no test/ tree) the test patch is left out, and said so.
    assert run_cli("stage-upstream", "--repo", repo_copy, "--pin", TOOLS_PIN, "--out", tmp_path / "o2",
                   "--checkout", pristine_checkout) == 0
    assert f"{patch.name}: left out, the checkout has no {test_file}" in capsys.readouterr().out


def test_rebase_check_on_the_pinned_wheel_is_clean(pinned_wheel: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("rebase-check", *REAL_REPO, "--wheel", pinned_wheel) == 0
    out = capsys.readouterr().out
    assert "against torch 2.13.0" in out and "FAIL" not in out


def test_rebase_check_names_failing_hunks(
    pristine_checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = tmp_path / "new"
    shutil.copytree(pristine_checkout, new, ignore=shutil.ignore_patterns(".git"))
    (new / "version.txt").write_text("2.14.0\n")
    registrations = new / "torch" / "_logging" / "_registrations.py"
    registrations.write_text(registrations.read_text().replace('register_artifact("custom_format_test_artifact"',
                                                               'register_artifact("renamed_test_artifact"', 1))
    assert run_cli("rebase-check", *REAL_REPO, "--checkout", new) == 1
    out = capsys.readouterr().out
    assert "against torch 2.14.0" in out
    repo = load_repo(REPO_ROOT, TOOLS_PIN)
    first = next(p.name for p in repo.patches if "torch/_logging/_registrations.py" in repo.targets[p])
    assert re.search(rf"{re.escape(first)}: 1 of \d+ hunk\(s\) FAIL", out)
    assert "torch/_logging/_registrations.py hunk #1 @@" in out
    assert "custom_format_test_artifact" in out  # the expected line that is gone


def test_rebase_check_tells_cascades_from_real_failures(
    pristine_checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hunk that fails only because its context is an earlier rejected hunk's lines is a cascade."""
    repo = load_repo(REPO_ROOT, TOOLS_PIN)
    # A hunk of an earlier patch whose added lines are a later patch's context in the same file, and
    # one of whose expected lines only it expects.
    new = tmp_path / "new"
    shutil.copytree(pristine_checkout, new, ignore=shutil.ignore_patterns(".git"))
    (new / "version.txt").write_text("2.14.0\n")

    def only_here(patch: Path, target: str, hunk) -> str | None:
        text = (new / target).read_text()
        expected_elsewhere = {line for other in repo.patches if other != patch
                              for h in parse_hunks(other).get(target, []) for line in h.old_lines}
        return next((line for line in hunk.old_lines
                     if line.strip() and text.count(line + "\n") == 1 and line not in expected_elsewhere), None)

    first, target, changed = next(
        (patch, rel, changed)
        for i, patch in enumerate(repo.patches) for rel in repo.targets[patch]
        for hunk in parse_hunks(patch)[rel]
        for later in repo.patches[i + 1:] if rel in repo.targets[later]
        # (lines the upstream file does not have: the later hunk cannot apply without them)
        if any(set(hunk.new_lines) & set(h.old_lines) - {""} - set((new / rel).read_text().splitlines())
               for h in parse_hunks(later)[rel])
        if (changed := only_here(patch, rel, hunk)) is not None
    )
    text = (new / target).read_text()
    (new / target).write_text(text.replace(changed + "\n", changed + "  # changed upstream\n"))
    assert run_cli("rebase-check", *REAL_REPO, "--checkout", new) == 1
    out = capsys.readouterr().out
    assert f"{first.name}: 1 of " in out and "lines it expects are gone" in out
    assert f"cascade: its context is lines that {first.name} adds in a rejected hunk" in out
    # (the change may break another patch's hunk nearby too: only the cascade's count is fixed)
    assert re.search(r"\d+ need work, 1 fail only on earlier rejected hunks' lines \(cascades\)", out)


def test_checkout_series_names_the_pin_in_its_hint_and_removes_a_failed_checkout(
    pinned_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = copy_repo(tmp_path)
    dest = tmp_path / "checkout"
    assert run_cli("checkout-series", "--repo", repo, "--pin", TOOLS_PIN, "--wheel", pinned_wheel, dest) == 0
    # The hint runs as printed from here: --repo since the cwd is not in the copy, --pin since it is not the newest.
    assert f"then: viewreplay export --repo {repo} --pin {TOOLS_PIN} {dest}" in capsys.readouterr().out
    shutil.rmtree(dest)
    first = repo / "patches" / load_repo(repo, TOOLS_PIN).patches[0].name  # its test section: patches/NAME's
    first.write_text(first.read_text().replace("\n+", "\n+# a line whose context is elsewhere\n+", 1).replace("@@ -", "@@ -9", 1))
    assert run_cli("checkout-series", "--repo", repo, "--pin", TOOLS_PIN, "--wheel", pinned_wheel, dest) == 1
    err = capsys.readouterr().err
    assert f"does not apply on v{TOOLS_PIN} ({dest} removed)" in err and len(err.splitlines()) == 1
    assert not dest.exists()


def test_report_and_sweep_refuse_a_missing_venv_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-venv" / "bin" / "python"
    for command in ("report", "sweep"):
        assert run_cli(command, "--stock-python", missing, "--patched-python", missing) == 1
        err = capsys.readouterr().err
        assert err == f"viewreplay {command}: error: {missing}: no such interpreter; make the venvs first (make, or make PIN=VERSION)\n"
