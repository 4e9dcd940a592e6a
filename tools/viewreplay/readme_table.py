"""The README's table of PRs, written from the patch headers (issue 35).

One row per patch of the series, in ``patches/series`` order, read off the patch's commit message
(its What:, Why:, Upstream status: and Tests: paragraphs, staging.MESSAGE_FIELDS):

- PR: the PR's name, the patch's file name without its number and ``.patch`` (``staging.pr_name``);
- what stock does: the first sentence of Why: (it ends at ``.``, ``!`` or ``?`` followed by a space
  or the paragraph's end; an abbreviation such as ``e.g.`` does not end it), whitespace collapsed,
  the first letter capitalised where the first word is a plain lower-case word; a sentence of more
  than :data:`MAX_WORDS` words is cut after the last ``;`` or ``:`` (outside brackets and quotes)
  within that many words, else after the last whole word there outside brackets, and ends in `` …``;
- Notes: the titles of the Notes the message cites, in order of first citation, each once;
- tests: the ``test/....py`` paths its Tests: paragraph names, in order, each once.

The table sits in README.md between :data:`BEGIN` and :data:`END`. ``viewreplay export`` writes it
from the patches it exports (the newest pin's: ``patches/``), and ``export --check`` reports a stale
one like any other file it would write. Without a checkout, ``python -m viewreplay.readme_table``
writes it from ``patches/`` (``--check``: write nothing, print the diff and exit 1 if it differs).
Torch-free.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from viewreplay import ViewReplayError
from viewreplay.staging import pr_name

README = "README.md"
BEGIN = "<!-- prs:begin (written by viewreplay export) -->"
END = "<!-- prs:end -->"
# A longer first sentence of Why: is cut (module docstring).
MAX_WORDS = 40
HEADER = ("| PR | what stock does | Note | test |", "|---|---|---|---|")

# A field starts a paragraph: after a blank line.
_FIELD_RE = re.compile(r"(?<=\n\n)(What|Why|Upstream status|Tests):[ \t]*")
_SENTENCE_END_RE = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)(?<!\bvs)[.!?](?=\s|$)")
_NOTE_RE = re.compile(r"Note\s+\[([^\[\]]+)\]")
_TEST_RE = re.compile(r"(?<![\w/])test/[\w/.-]*\w\.py\b")
_PLAIN_FIRST_WORD_RE = re.compile(r"[a-z]+(?:'s)?(?=[\s,;:])")


@dataclass(frozen=True)
class PrRow:
    """One row of the table."""

    name: str
    stock: str
    notes: tuple[str, ...]
    tests: tuple[str, ...]


def message(patch_text: str) -> str:
    """The commit message of a format-patch file: its text before the ``---`` line."""
    return patch_text.split("\n---\n", 1)[0]


def paragraphs(patch_text: str) -> dict[str, str]:
    """The message's What/Why/Upstream status/Tests paragraphs (each up to the next field), field name removed."""
    text = message(patch_text)
    starts = list(_FIELD_RE.finditer(text))
    return {m.group(1): text[m.end(): nxt.start() if nxt else len(text)].strip()
            for m, nxt in zip(starts, [*starts[1:], None])}


def _depth_zero(text: str) -> list[bool]:
    """Per character: outside brackets and double quotes."""
    depth, quoted, out = 0, False, []
    for char in text:
        if char == '"':
            quoted = not quoted
        elif char in "([{" and not quoted:
            depth += 1
        elif char in ")]}" and not quoted:
            depth = max(depth - 1, 0)
        out.append(depth == 0 and not quoted)
    return out


def first_sentence(paragraph: str, max_words: int = MAX_WORDS) -> str:
    """The paragraph's first sentence, as the module docstring says."""
    text = " ".join(paragraph.split())
    end = _SENTENCE_END_RE.search(text)
    sentence = text[: end.end()] if end else text
    words = list(re.finditer(r"\S+", sentence))
    if len(words) > max_words:
        head = sentence[: words[max_words - 1].end()]
        outside = _depth_zero(head)
        clause = max((i for i, c in enumerate(head) if c in ";:" and outside[i]), default=-1)
        if clause > len(head) // 3:
            sentence = head[:clause] + " …"
        else:
            ends = [i for i, c in enumerate(head) if c == " " and outside[i]] + ([len(head)] if outside[-1] else [])
            sentence = (head[: ends[-1]] if ends else head).rstrip(",;:") + " …"
    if _PLAIN_FIRST_WORD_RE.match(sentence):
        sentence = sentence[0].upper() + sentence[1:]
    return sentence


def _unique(items: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def pr_row(patch_name: str, patch_text: str) -> PrRow:
    """The row of one patch (an empty cell where its message lacks the paragraph: stage-upstream refuses that)."""
    fields = paragraphs(patch_text)
    notes = [" ".join(n.split()) for n in _NOTE_RE.findall(message(patch_text))]
    return PrRow(pr_name(Path(patch_name)), first_sentence(fields.get("Why", "")), _unique(notes),
                 _unique(_TEST_RE.findall(fields.get("Tests", ""))))


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")


def render_table(rows: list[PrRow]) -> list[str]:
    """The table's lines (header, separator, one line per PR)."""
    lines = list(HEADER)
    for row in rows:
        notes = "; ".join(_cell(n) for n in row.notes) or "-"
        tests = "<br>".join(f"`{t}`" for t in row.tests) or "-"
        lines.append(f"| `{row.name}` | {_cell(row.stock) or '-'} | {notes} | {tests} |")
    return lines


def replace_section(readme_text: str, table: list[str], where: str = README) -> str:
    """``readme_text`` with the lines between its markers replaced by ``table``; refuse missing markers."""
    if readme_text.count(BEGIN) != 1 or readme_text.count(END) != 1 or readme_text.index(BEGIN) > readme_text.index(END):
        raise ViewReplayError(f"{where}: needs one {BEGIN!r} line and, after it, one {END!r} line")
    head, rest = readme_text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + BEGIN + "\n" + "\n".join(table) + "\n" + END + tail


def readme_with_table(root: Path, patches: list[tuple[str, str]]) -> bytes:
    """The repository's README.md with the table of ``patches`` ((file name, text) in series order)."""
    path = root / README
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ViewReplayError(f"cannot read {path}: {exc}") from None
    rows = [pr_row(name, patch_text) for name, patch_text in patches]
    return replace_section(text, render_table(rows), str(path)).encode("utf-8")


def series_patches(root: Path) -> list[tuple[str, str]]:
    """``patches/`` in ``patches/series`` order, as (file name, text)."""
    from viewreplay.pin import series_names

    return [(name, (root / "patches" / name).read_text(encoding="utf-8")) for name in series_names(root)]


def main(argv: list[str] | None = None) -> int:
    """``python -m viewreplay.readme_table [--repo DIR] [--check]``: the table from ``patches/``, no checkout."""
    from viewreplay.pin import find_repo

    parser = argparse.ArgumentParser(prog="python -m viewreplay.readme_table", description=main.__doc__)
    parser.add_argument("--repo", type=Path, default=Path.cwd(), metavar="DIR", help="the repository (default: here)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 with a diff if README.md differs")
    args = parser.parse_args(argv)
    try:
        root = find_repo(args.repo)
        new = readme_with_table(root, series_patches(root)).decode("utf-8")
    except ViewReplayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    path = root / README
    old = path.read_text(encoding="utf-8")
    if args.check:
        if old != new:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                                       f"a/{README}", f"b/{README}"))
            print(f"{path}: the PR table differs from the patch headers", file=sys.stderr)
            return 1
        print(f"{path}: the PR table is up to date")
        return 0
    if old != new:
        path.write_text(new, encoding="utf-8")
        print(f"{path}: PR table written")
    else:
        print(f"{path}: PR table unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
