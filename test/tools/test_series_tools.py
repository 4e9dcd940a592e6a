"""checkout-series / export round trip, stage-upstream (verified by git am), rebase-check."""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest
from viewreplay.checkout import make_checkout
from viewreplay.pin import load_repo
from viewreplay.rebase import parse_hunks
from viewreplay.staging import load_stack
from viewreplay.tree import apply_series
from viewreplay_testlib import GIT_ENV, REAL_REPO, REPO_ROOT, run_cli, TOOLS_PIN
UPSTREAM_TESTS = sorted((REPO_ROOT / "upstream" / "test").rglob("test_*.py"))


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


def test_checkout_series_has_one_commit_per_patch_and_the_overlay(series_checkout: Path) -> None:
    repo = load_repo(REPO_ROOT, TOOLS_PIN)
    subjects = git(series_checkout, "log", "--reverse", "--format=%s", "v2.13.0..HEAD").splitlines()
    assert len(subjects) == len(repo.patches) + 1
    assert subjects[-1].startswith("viewreplay: overlay modules")
    assert subjects[0].startswith("[logging] ")  # bracketed prefixes survive git am
    for rel, data in repo.overlay.items():
        assert (series_checkout / rel).read_bytes() == data


def test_export_check_of_the_repository_is_clean(series_checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The committed patches are exactly what git format-patch writes for the checkout's commits."""
    assert run_cli("export", *REAL_REPO, "--check", series_checkout) == 0, capsys.readouterr().out[-3000:]


def test_export_round_trip_of_an_amended_hook(
    series_checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On an older pin, an amended hook whose shared form no longer gives its tree becomes the pin's own patch."""
    checkout = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(series_checkout), str(checkout))
    repo_copy = copy_repo(tmp_path)
    copy_args = ("--repo", repo_copy, "--pin", TOOLS_PIN)
    first = load_repo(repo_copy, TOOLS_PIN).patches[0]
    assert first.parent == repo_copy / "patches"  # shared: the newest pin's form applies here as is
    # Amend the first hook commit: one more line in the registration it adds.
    target = "torch/_logging/_registrations.py"
    todo_base = git(checkout, "rev-list", "--reverse", f"v{TOOLS_PIN}..HEAD").split()[0]
    git(checkout, "checkout", "-q", "-b", "edit", todo_base)
    path = checkout / target
    path.write_text(path.read_text().replace('    off_by_default=True,\n)\nregister_artifact("custom_format',
                                             '    off_by_default=True,\n    # edited in the checkout\n)\nregister_artifact("custom_format', 1))
    git(checkout, "commit", "-q", "-a", "--amend", "--no-edit")
    git(checkout, "rebase", "-q", "--onto", "edit", todo_base, "main")
    # The repository no longer matches: --check shows the diff and exits 1.
    assert run_cli("export", *copy_args, "--check", checkout) == 1
    assert "++    # edited in the checkout" in capsys.readouterr().out
    # Export writes the changed patch as the pin's own, under its series name; nothing else changes.
    own = repo_copy / "pins" / TOOLS_PIN / "patches"
    shared_before = {p.name: p.read_bytes() for p in (repo_copy / "patches").iterdir()}
    own_before = {p.name: p.read_bytes() for p in own.iterdir()}
    assert run_cli("export", *copy_args, checkout) == 0
    assert {p.name: p.read_bytes() for p in (repo_copy / "patches").iterdir()} == shared_before
    own_after = {p.name: p.read_bytes() for p in own.iterdir()}
    assert sorted(own_after) == sorted([*own_before, first.name])
    assert "+    # edited in the checkout" in own_after[first.name].decode()
    assert run_cli("export", *copy_args, "--check", checkout) == 0
    assert load_repo(repo_copy, TOOLS_PIN, require_pinned_hashes=False).patches[0] == own / first.name
    # Back to the original commit: the pin's own copy is redundant again, and export removes it.
    assert run_cli("export", *copy_args, series_checkout) == 0
    assert {p.name for p in own.iterdir()} == set(own_before)


def test_export_of_an_older_pin_keeps_only_the_patches_that_differ(
    series_checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A needless own copy is removed; a missing needed one is written back; the series is the newest pin's."""
    repo_copy = copy_repo(tmp_path)
    copy_args = ("--repo", repo_copy, "--pin", TOOLS_PIN)
    own = repo_copy / "pins" / TOOLS_PIN / "patches"
    needed = sorted(p.name for p in own.iterdir())
    shared_only = [p.name for p in load_repo(repo_copy, TOOLS_PIN).patches if p.parent != own]
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
    patches = sorted(out.glob("*.patch"))
    assert len(patches) >= 3
    texts = [p.read_text() for p in patches]
    width = len(str(len(patches)))  # format-patch pads the number: [PATCH 01/10]
    assert all(f"[PATCH {i:0{width}d}/{len(patches)}]" in t for i, t in enumerate(texts, 1))
    assert all("Summary:" in t and "Motivation:" in t and "Test Plan:" in t for t in texts)
    assert "55.8 ms" in texts[0] and "${" not in "".join(texts)
    assert "AsStridedBackward0 -> ViewBackward0" in "".join(texts)

    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", str(pristine_checkout), str(fresh))
    git(fresh, "am", "-q", "--keep-non-patch", *map(str, patches))
    repo = load_repo(REPO_ROOT, TOOLS_PIN)
    stack = load_stack(repo)
    assert len(git(fresh, "rev-list", "origin/main..HEAD").split()) == len(patches)
    # The whole stack adds every overlay module as the wheel has it, without the stack markers.
    for rel, data in repo.overlay.items():
        text = (fresh / rel).read_text()
        assert text == stack.overlay_text(repo.overlay, rel, len(stack.prs))
        assert "# [stack" not in text and "# [/stack]" not in text
        assert text.splitlines() == [line for line in data.decode().splitlines() if "# [stack: " not in line
                                     and line.strip() != "# [/stack]"]
    # Reviewable sizes: no PR adds more than about 500 lines (tests included; 600 at most).
    for patch in patches:
        numstat = git(fresh, "apply", "--numstat", str(patch)).splitlines()
        added = sum(int(line.split()[0]) for line in numstat)
        assert added <= 600, f"{patch.name} adds {added} lines"
    pristine = {rel: (pristine_checkout / rel).read_bytes() for rel in repo.touched_files}
    for rel, data in apply_series(pristine, repo.patches, reverse=False).items():
        assert (fresh / rel).read_bytes() == data
    for test in UPSTREAM_TESTS:
        rel = test.relative_to(REPO_ROOT / "upstream")
        assert (fresh / rel).read_bytes() == test.read_bytes()
    # The stand-in checkout has no test/ tree: the test patches of upstream's files are left out, and said so.
    assert "left out, the checkout has no test/functorch/test_aotdispatch.py" in capsys.readouterr().out


def test_stage_upstream_refuses_a_stack_that_does_not_import(
    pristine_checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # render.py moved from its PR to one after symbolic-replay, whose plan.py imports it.
    stack = (REPO_ROOT / "upstream" / "stack.toml").read_text()
    moved = 'overlay = ["torch/_functorch/_aot_autograd/view_replay/render.py"]\n'
    assert moved in stack
    broken = stack.replace(moved, "", 1).replace(
        'name = "traced-base-steps"\n', 'name = "traced-base-steps"\n' + moved, 1
    )
    (tmp_path / "stack.toml").write_text(broken)
    out = tmp_path / "staged"
    assert run_cli("stage-upstream", *REAL_REPO, "--out", out, "--checkout", pristine_checkout,
                   "--stack", tmp_path / "stack.toml") == 1
    err = capsys.readouterr().err
    assert "[[pr]] symbolic-replay would not import on its own" in err
    assert "view_replay/plan.py:" in err and "view_replay/render.py, which this commit does not have" in err
    assert not out.exists() or not any(out.iterdir())


def test_stage_upstream_refuses_a_region_that_leaves_an_unused_import(
    pristine_checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # replay.py's `import dataclasses` belongs to precompiled-regenerators; without its region
    # markers the first PR adds it, unused.
    repo_copy = copy_repo(tmp_path)
    replay = repo_copy / "torch_overlay/torch/_functorch/_aot_autograd/view_replay/replay.py"
    region = "# [stack: precompiled-regenerators]\nimport dataclasses\n# [/stack]\n"
    assert region in replay.read_text()
    replay.write_text(replay.read_text().replace(region, "import dataclasses\n", 1))
    out = tmp_path / "staged"
    assert run_cli("stage-upstream", "--repo", repo_copy, "--pin", TOOLS_PIN, "--out", out,
                   "--checkout", pristine_checkout) == 1
    err = capsys.readouterr().err
    assert "[[pr]] fallback-point: the staged files do not lint" in err
    assert "view_replay/replay.py:" in err and "'dataclasses' imported but unused" in err


def test_stage_upstream_refuses_a_region_of_an_unknown_or_earlier_pr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo_copy = copy_repo(tmp_path)
    plan = repo_copy / "torch_overlay/torch/_functorch/_aot_autograd/view_replay/plan.py"
    text = plan.read_text()
    plan.write_text(text.replace("# [stack: synthetic-base-indices]", "# [stack: no-such-pr]", 1)
                    .replace("# [stack: multi-output-views]", "# [stack: fallback-point]", 1))
    assert run_cli("stage-upstream", "--repo", repo_copy, "--pin", TOOLS_PIN, "--out", tmp_path / "o") == 1
    err = capsys.readouterr().err
    assert "region for 'no-such-pr', which is no [[pr]]" in err
    assert "region for 'fallback-point', not after 'symbolic-replay', which stages the module" in err


def test_stage_upstream_refuses_unstaged_and_unknown_items(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack = (REPO_ROOT / "upstream" / "stack.toml").read_text()
    broken = stack.replace('overlay = ["torch/_functorch/_aot_autograd/view_replay/symbols.py"]\n', "", 1).replace(
        "${unbind_backward_ms}", "${no_such_number}", 1
    )
    (tmp_path / "stack.toml").write_text(broken)
    assert run_cli("stage-upstream", *REAL_REPO, "--out", tmp_path / "o", "--stack", tmp_path / "stack.toml") == 1
    assert "overlay module torch/_functorch/_aot_autograd/view_replay/symbols.py is not staged" in capsys.readouterr().err


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


def test_every_pr_of_the_stack_stages_its_tests() -> None:
    """Each PR brings the tests of its change: a test file of its own, or a patch of upstream's tests."""
    stack = load_stack(load_repo(REPO_ROOT, TOOLS_PIN))
    for pr in stack.prs:
        assert [f for f in pr.files if Path(f).name.startswith("test_")] or pr.test_patches, pr.name
    staged = [f for pr in stack.prs for f in pr.files]
    assert sorted(staged) == sorted(str(t.relative_to(REPO_ROOT / "upstream")) for t in UPSTREAM_TESTS)
    for pr in stack.prs:
        for rel in pr.test_patches:
            assert rel.split("/")[-1].removesuffix(".patch") == pr.name, "a test patch is named after its PR"
            assert "Tests changed:" in pr.body, f"{pr.name}: the message says why upstream's tests change"


TEST_PATCH_STACK = """
[numbers]
[[pr]]
name = "one"
subject = "[test] one"
patches = {patches}
overlay = {overlay}
test_patches = ["test_patches/one.patch"]
body = \"\"\"
Summary: s
Motivation: m
Tests changed: the fixture's expectation.
Test Plan: t
\"\"\"
"""


def test_stage_upstream_applies_test_patches_where_the_file_exists(
    pristine_checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo_copy = copy_repo(tmp_path)
    # One PR stages everything: the overlay's stack regions (which name the real stack's PRs) go.
    for module in (repo_copy / "torch_overlay").rglob("*.py"):
        lines = module.read_text().splitlines(keepends=True)
        module.write_text("".join(line for line in lines if not line.lstrip().startswith(("# [stack: ", "# [/stack]"))))
    repo = load_repo(repo_copy, TOOLS_PIN)
    test_file = "test/functorch/test_fixture.py"
    patch = repo_copy / "upstream" / "test_patches" / "one.patch"
    patch.parent.mkdir(parents=True, exist_ok=True)
    patch.write_text(
        f"diff --git a/{test_file} b/{test_file}\n--- a/{test_file}\n+++ b/{test_file}\n"
        "@@ -1,3 +1,3 @@\n def test_x():\n-    expected = 'AsStridedBackward0'\n+    expected = 'ViewBackward0'\n     return expected\n"
    )
    stack = tmp_path / "stack.toml"
    stack.write_text(TEST_PATCH_STACK.format(
        patches=[p.name for p in repo.patches], overlay=list(repo.overlay)).replace("'", '"'))
    # A checkout that has the upstream test file (its tag moved onto the commit adding it).
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", str(pristine_checkout), str(checkout))
    (checkout / test_file).parent.mkdir(parents=True)
    (checkout / test_file).write_text("def test_x():\n    expected = 'AsStridedBackward0'\n    return expected\n")
    git(checkout, "add", test_file)
    git(checkout, "commit", "-q", "-m", "upstream test file")
    git(checkout, "tag", "-f", "v2.13.0")
    out = tmp_path / "staged"
    assert run_cli("stage-upstream", "--repo", repo_copy, "--pin", TOOLS_PIN, "--out", out, "--checkout", checkout, "--stack", stack) == 0
    assert "left out" not in capsys.readouterr().out
    (staged,) = sorted(out.glob("*.patch"))
    assert "+    expected = 'ViewBackward0'" in staged.read_text()
    # On the stand-in checkout (no test/ tree) the test patch is left out, and said so.
    assert run_cli("stage-upstream", "--repo", repo_copy, "--pin", TOOLS_PIN, "--out", tmp_path / "o2", "--checkout", pristine_checkout,
                   "--stack", stack) == 0
    assert "test_patches/one.patch: left out, the checkout has no test/functorch/test_fixture.py" in capsys.readouterr().out


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
    first = load_repo(REPO_ROOT, TOOLS_PIN).patches[0].name
    assert f"{first}: 1 of 1 hunk(s) FAIL" in out
    assert "torch/_logging/_registrations.py hunk #1 @@" in out
    assert "custom_format_test_artifact" in out  # the expected line that is gone


def test_rebase_check_tells_cascades_from_real_failures(
    pristine_checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hunk that fails only because its context is an earlier rejected hunk's lines is a cascade."""
    repo = load_repo(REPO_ROOT, TOOLS_PIN)
    target = "torch/_functorch/_aot_autograd/functional_utils.py"
    first, *later = [p for p in repo.patches if target in repo.targets[p]]
    longest = max(parse_hunks(first)[target], key=lambda h: len(h.old_lines))
    new = tmp_path / "new"
    shutil.copytree(pristine_checkout, new, ignore=shutil.ignore_patterns(".git"))
    (new / "version.txt").write_text("2.14.0\n")
    text = (new / target).read_text()
    # Change one line that only this hunk expects, in the middle of it.
    changed = next(line for line in longest.old_lines[len(longest.old_lines) // 2:]
                   if line.strip() and text.count(line + "\n") == 1)
    (new / target).write_text(text.replace(changed + "\n", changed + "  # changed upstream\n"))
    assert run_cli("rebase-check", *REAL_REPO, "--checkout", new) == 1
    out = capsys.readouterr().out
    assert f"{first.name}: 1 of " in out and "lines it expects are gone" in out
    assert f"cascade: its context is lines that {first.name} adds in a rejected hunk" in out
    assert "1 need work" in out and "fail only on earlier rejected hunks' lines (cascades)" in out
