"""``rebase-check``: which hunks of the series fail on another torch version, and why.

The files the series touches are taken from a new wheel (or a source checkout of the new version)
into a scratch directory; each patch is applied in series order with ``git apply --reject -v``, so
every hunk is reported (applied, applied at an offset, or rejected) and later patches see the
hunks that did apply. For a rejected hunk the report says which of the lines it expects (context
and removed lines) are missing from the new file, or that they exist but no longer together.

A rejected hunk leaves its added lines out of the tree the later patches are tried on, so a later
hunk whose context is those lines fails too. Such a hunk is reported as a cascade (every line it
misses is one an earlier rejected hunk adds): port the earlier patch first, and it likely applies.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from viewreplay.pin import Repo
from viewreplay.tree import tree_version

_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@(.*)$")
_APPLIED_RE = re.compile(r"^Hunk #(\d+) succeeded at (\d+)(?: \(offset (-?\d+) lines?\))?")
_REJECTED_RE = re.compile(r"^Rejected hunk #(\d+)\.")


@dataclass
class Hunk:
    file: str
    number: int
    header: str
    old_start: int
    old_lines: list[str]
    new_lines: list[str] = field(default_factory=list)


@dataclass
class PatchResult:
    patch: str
    hunks: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    cascades: list[str] = field(default_factory=list)  # the problems that are only an earlier rejection's


def parse_hunks(patch: Path) -> dict[str, list[Hunk]]:
    """The hunks of a patch, per file, with the lines each expects in the old file."""
    hunks: dict[str, list[Hunk]] = {}
    current_file = None
    hunk = None
    for line in patch.read_text(encoding="utf-8").splitlines():
        if line.startswith("diff --git "):
            current_file = line.split(" b/", 1)[1]
            hunk = None
        elif current_file and (match := _HUNK_RE.match(line)):
            number = len(hunks.setdefault(current_file, [])) + 1
            hunk = Hunk(current_file, number, line, int(match.group(1)), [])
            hunks[current_file].append(hunk)
        elif hunk is not None and line[:1] in (" ", "-"):
            hunk.old_lines.append(line[1:])
        elif hunk is not None and line[:1] == "+" and not line.startswith("+++ "):
            hunk.new_lines.append(line[1:])
    return hunks


def _missing_lines(hunk: Hunk, text: str) -> list[str]:
    """The lines ``hunk`` expects (context and removed) that ``text`` does not have."""
    present = set(text.splitlines())
    return [line for line in hunk.old_lines if line not in present]


def why_rejected(hunk: Hunk, text: str | None) -> str:
    """A one-line reason a hunk does not apply to ``text`` (None: the file is missing)."""
    if text is None:
        return "the file does not exist in the new version (removed or moved upstream)"
    missing = _missing_lines(hunk, text)
    if missing:
        return (
            f"{len(missing)} of the {len(hunk.old_lines)} lines it expects are gone from the new file, "
            f"first: {missing[0].strip()!r}"
        )
    return (
        f"all {len(hunk.old_lines)} lines it expects still exist, but not together "
        "(code was inserted, moved or reordered inside the hunk's range)"
    )


def cascade_of(hunk: Hunk, text: str, rejected_adds: dict[str, str]) -> str | None:
    """The earlier patch whose rejected hunks add every line ``hunk`` expects and ``text`` lacks, if any."""
    missing = _missing_lines(hunk, text)
    if not missing or any(line not in rejected_adds for line in missing):
        return None
    return rejected_adds[missing[0]]


def _source_files(repo: Repo, wheel: Path | None, checkout: Path | None, dest: Path) -> str:
    """Copy every file the series touches from the new wheel/checkout into ``dest``; return its version."""
    if checkout is not None:
        for rel in repo.touched_files:
            if (checkout / rel).is_file():
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(checkout / rel, dest / rel)
        return tree_version(checkout)
    assert wheel is not None
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        for rel in repo.touched_files:
            if rel in names:
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                (dest / rel).write_bytes(archive.read(rel))
        version_file = next((n for n in names if n == "torch/version.py"), None)
        if version_file:
            (dest / version_file).parent.mkdir(parents=True, exist_ok=True)
            (dest / version_file).write_bytes(archive.read(version_file))
    return tree_version(dest)


def rebase_check(repo: Repo, *, wheel: Path | None = None, checkout: Path | None = None) -> tuple[str, list[PatchResult]]:
    """Apply the series hunk by hunk to the new version's files; return the version and per-patch results."""
    results = []
    with tempfile.TemporaryDirectory(prefix="viewreplay-rebase-") as tmp:
        stage = Path(tmp)
        version = _source_files(repo, wheel, checkout, stage)
        env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(stage.parent)}
        rejected_adds: dict[str, str] = {}  # line an earlier rejected hunk adds -> its patch
        for patch in repo.patches:
            result = PatchResult(patch.name)
            hunks = {rel: found for rel, found in parse_hunks(patch).items() if rel in repo.targets[patch]}
            result.hunks = sum(len(h) for h in hunks.values())
            before = {rel: (stage / rel).read_text(encoding="utf-8") if (stage / rel).is_file() else None for rel in hunks}
            for rel, text in before.items():
                if text is None:
                    result.problems.extend(
                        f"{rel} hunk #{h.number} {h.header}: {why_rejected(h, None)}" for h in hunks[rel]
                    )
            present = [rel for rel, text in before.items() if text is not None]
            if present:
                command = ["git", "apply", "--reject", "-v", "--whitespace=nowarn",
                           *[f"--include={rel}" for rel in present], str(patch)]
                proc = subprocess.run(command, cwd=stage, env=env, check=False, capture_output=True, text=True)
                current = None
                for line in (proc.stdout + proc.stderr).splitlines():
                    if line.startswith(("Checking patch ", "Applying patch ")):
                        current = line.split(" ", 2)[2].split(" with ")[0].rstrip(".")
                    elif (match := _REJECTED_RE.match(line)) and current in hunks:
                        hunk = hunks[current][int(match.group(1)) - 1]
                        earlier = cascade_of(hunk, before[current], rejected_adds)
                        reason = (
                            f"cascade: its context is lines that {earlier} adds in a rejected hunk "
                            "(port that patch first)" if earlier else why_rejected(hunk, before[current])
                        )
                        problem = f"{current} hunk #{hunk.number} {hunk.header}: {reason}"
                        result.problems.append(problem)
                        if earlier:
                            result.cascades.append(problem)
                        rejected_adds.update(dict.fromkeys(hunk.new_lines, patch.name))
                    elif (match := _APPLIED_RE.match(line)) and match.group(3) and current:
                        result.notes.append(f"{current} hunk #{match.group(1)}: applies at an offset of {match.group(3)} lines")
                for rej in stage.rglob("*.rej"):
                    rej.unlink()
            results.append(result)
    return version, results


def format_report(version: str, source: str, results: list[PatchResult]) -> str:
    lines = [f"rebase-check: the series against torch {version} ({source})"]
    for result in results:
        if result.problems:
            lines.append(f"{result.patch}: {len(result.problems)} of {result.hunks} hunk(s) FAIL")
            lines += [f"  {problem}" for problem in result.problems]
        else:
            lines.append(f"{result.patch}: applies ({result.hunks} hunk(s))")
        lines += [f"  note: {note}" for note in result.notes]
    failing = sum(1 for r in results if r.problems)
    cascading = sum(1 for r in results if r.problems and len(r.cascades) == len(r.problems))
    if not failing:
        lines.append("every hunk applies; now update the pin")
    else:
        lines.append(
            f"{failing} of {len(results)} patch(es) fail; {failing - cascading} need work"
            + (f", {cascading} fail only on earlier rejected hunks' lines (cascades)" if cascading else "")
        )
    return "\n".join(lines)
