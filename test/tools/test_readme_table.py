"""The README's PR table: written by export from the patch headers, checked by export --check (#35)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from viewreplay import ViewReplayError
from viewreplay.readme_table import (
    BEGIN,
    END,
    HEADER,
    first_sentence,
    main,
    pr_row,
    readme_with_table,
    render_table,
    replace_section,
    series_patches,
)
from viewreplay_testlib import GIT_ENV, REPO_ROOT, run_cli, TOOLS_PIN

MESSAGE = """From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: A <a@invalid>
Date: Wed, 2 Dec 2026 00:00:00 +0000
Subject: [PATCH] [aot_autograd] Do the thing

What: adds the thing (Note [The thing]).

Why: stock regenerates x[1:] with as_strided(), e.g. under dynamic
shapes | always. Eager does not.

    def f(x): ...

Upstream status: to be proposed.

Tests: test/functorch/test_aot_view_replay_thing.py, and the stock side in
test/aot/test_thing.py (Note [Other
thing]).
---
 torch/x.py | 1 +
"""


def test_row_of_a_patch_header() -> None:
    row = pr_row("0007-the-thing.patch", MESSAGE)
    assert row.name == "the-thing"
    assert row.stock == "Stock regenerates x[1:] with as_strided(), e.g. under dynamic shapes | always."
    assert row.notes == ("The thing", "Other thing")
    assert row.tests == ("test/functorch/test_aot_view_replay_thing.py", "test/aot/test_thing.py")
    assert render_table([row])[2] == (
        "| `the-thing` | Stock regenerates x[1:] with as_strided(), e.g. under dynamic shapes \\| always. "
        "| The thing; Other thing | `test/functorch/test_aot_view_replay_thing.py`<br>`test/aot/test_thing.py` |"
    )
    # A message without the paragraphs gives empty cells (stage-upstream refuses such a PR).
    bare = pr_row("0001-fixture.patch", MESSAGE.split("\n\nWhat:", 1)[0] + "\n\nFree text.\n---\n")
    assert render_table([bare])[2] == "| `fixture` | - | - | - |"


def test_long_first_sentences_are_cut_outside_brackets() -> None:
    words = " ".join(f"w{i}" for i in range(50))
    assert first_sentence(f"short one. {words}.") == "Short one."
    assert first_sentence(f"{words}.", max_words=10) == "w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 …"
    assert first_sentence("eager raises; stock (a; b c d e f g) returns it all.", max_words=6) == "Eager raises …"
    assert first_sentence("the base (a, b; c d e f) changes.", max_words=4) == "The base …"
    assert first_sentence("x.view(-1) is a view.") == "x.view(-1) is a view."


def test_the_section_between_the_markers_is_replaced() -> None:
    text = f"# t\n\n{BEGIN}\nold\n{END}\n\nafter\n"
    assert replace_section(text, list(HEADER)) == f"# t\n\n{BEGIN}\n{HEADER[0]}\n{HEADER[1]}\n{END}\n\nafter\n"
    with pytest.raises(ViewReplayError, match="prs:begin"):
        replace_section("# t\n", [])


def test_the_repository_readme_table_is_the_patch_headers() -> None:
    readme = (REPO_ROOT / "README.md").read_bytes()
    assert readme_with_table(REPO_ROOT, series_patches(REPO_ROOT)) == readme, (
        "README.md's PR table is stale: run 'python -m viewreplay.readme_table' (or viewreplay export)")
    table = readme.decode().split(BEGIN, 1)[1].split(END, 1)[0].strip().splitlines()
    assert len(table) == 2 + len(series_patches(REPO_ROOT))


def test_module_main_writes_and_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    (repo / "patches").mkdir(parents=True)
    (repo / "pins").mkdir()
    (repo / "patches" / "0007-the-thing.patch").write_text(MESSAGE)
    (repo / "patches" / "series").write_text("0007-the-thing.patch\n")
    (repo / "README.md").write_text(f"# t\n{BEGIN}\n{END}\n")
    assert main(["--repo", str(repo), "--check"]) == 1
    assert "+| `the-thing` |" in capsys.readouterr().out
    assert main(["--repo", str(repo)]) == 0
    assert main(["--repo", str(repo), "--check"]) == 0
    assert "| `the-thing` |" in (repo / "README.md").read_text()


def test_export_writes_and_checks_the_table(
    fixture_repo: Path, pinned_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fixture repository has one pin, its newest: export writes README.md's table, --check reports it stale."""
    checkout = tmp_path / "pytorch"
    assert run_cli("checkout-series", "--repo", fixture_repo, "--pin", TOOLS_PIN, "--wheel", pinned_wheel, checkout) == 0
    assert run_cli("export", "--repo", fixture_repo, "--pin", TOOLS_PIN, checkout) == 0  # no README.md: no table
    assert not (fixture_repo / "README.md").exists()
    readme = fixture_repo / "README.md"
    readme.write_text(f"# fixture\n\n{BEGIN}\nstale\n{END}\n")
    capsys.readouterr()
    assert run_cli("export", "--repo", fixture_repo, "--pin", TOOLS_PIN, "--check", checkout) == 1
    assert "-stale" in capsys.readouterr().out and readme.read_text().count("stale") == 1
    # A reworded commit: the table follows the commit, not the old patch file.
    env = {**GIT_ENV, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "commit", "-q", "--amend", "-m", "Fixture: reworded", "-m",
                    "Why: stock does the fixture thing.\n\nTests: test/functorch/test_fixture.py"],
                   cwd=checkout, env=env, check=True)
    assert run_cli("export", "--repo", fixture_repo, "--pin", TOOLS_PIN, checkout) == 0
    text = readme.read_text()
    assert "| `fixture` | Stock does the fixture thing. | - | `test/functorch/test_fixture.py` |" in text
    assert run_cli("export", "--repo", fixture_repo, "--pin", TOOLS_PIN, "--check", checkout) == 0
