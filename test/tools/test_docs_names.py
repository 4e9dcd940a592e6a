"""The repository's text cites PRs by name and Notes that exist; the overlay keeps its layering (#35).

Torch-free: reads the tracked files (``git ls-files``), never imports the overlay. The rules:

1. **No bare patch numbers** in tracked text files outside ``patches/`` and ``pins/`` (a file is
   text when it has no NUL byte and decodes as UTF-8). A patch number is a token of four digits
   starting with ``0`` (``0001`` to ``0999``: the series numbers its files ``NNNN-``), standing
   alone: not preceded by a word character, ``.``, ``+``, ``:`` or ``-`` (decimals such as
   ``1.0012``, time zones ``+0000``, times, ranges), not followed by a word character or by ``.``,
   ``:`` or ``-`` plus a digit (dates, versions, decimals). Such a token followed by
   ``-<letters>`` is a file name, and is flagged only when it is a file of the series
   (``0030-same-object-outputs``): the tools' tests name fixture patches ``0001-fixture.patch``.
   Cite a PR by its name (``same-object-outputs``). This file, which spells out the rule's
   examples, is the one exception.
2. **Every cited Note is defined exactly once.** A citation is ``Note [Title]`` anywhere in a
   tracked text file outside ``patches/``, ``pins/`` and ``test/tools/`` (whose fixtures cite
   made-up Notes), and in the commit message (the text before
   the ``---`` line) of every patch in ``patches/`` and ``pins/*/patches/``; a title may wrap over
   lines (comment markers, a diff's ``+``/``-`` column and TOML's line-ending backslash are
   dropped, whitespace collapsed). A definition, PyTorch's convention, is a line holding only
   ``Note [Title]`` (after indentation and an optional ``#``; a qualifier such as ``(torch >=
   2.14)`` may follow the bracket) directly followed by an underline of at least three ``~``
   (or ``-``/``=``), also after an optional ``#``. Definitions are counted in the tracked files
   outside ``patches/`` and ``pins/`` (the overlay, the tools, the tests) plus, per pin, the lines
   the pin's series adds to upstream files (hooks; net of the lines later patches remove): a Note
   a hook defines exists only where that hook applies. A cited Note must be defined exactly once
   in the files outside the series plus at least one pin's hooks, and at most once per pin. Notes
   of upstream PyTorch are listed in :data:`UPSTREAM_NOTES` with a file of torch that names them,
   and must not be defined here.
3. **One author.** Every patch of ``patches/`` and ``pins/*/patches/`` has the same ``From:`` (a pin's
   own form without a message of its own has none).
4. **Every overlay module says its phase**: each ``torch_overlay/**/*.py`` has a docstring line
   starting with ``Layering:``.
5. **The overlay's imports follow DESIGN.md's layering table** (the table with the columns
   module | phase | imports): every module of the ``view_replay`` package but ``__init__`` has a
   row; each imports exactly the package modules of its row (relative or absolute imports, at
   module level or inside functions; imports under ``if TYPE_CHECKING:`` do not run and do not
   count); each row imports only rows above it; no ``runtime`` or ``shared`` module imports a
   ``planning`` one, a ``shared`` one imports only ``shared`` ones, and neither imports sympy.
"""

from __future__ import annotations

import ast
import email.utils
import re
import subprocess
from collections import defaultdict
from collections.abc import Collection
from pathlib import Path

import pytest
from viewreplay.gitrepo import patch_header
from viewreplay.pin import (
    OVERLAY_DIR,
    OVERLAY_PACKAGE,
    is_upstream_file,
    load_repo,
    overlay_additions,
    pin_versions,
    series_names,
)
from viewreplay_testlib import REPO_ROOT

SERIES_DIRS = ("patches/", "pins/")
TOOLS_TESTS = "test/tools/"
PACKAGE = "torch._functorch._aot_autograd.view_replay"
PACKAGE_DIR = REPO_ROOT / OVERLAY_DIR / OVERLAY_PACKAGE
DESIGN = REPO_ROOT / "docs" / "DESIGN.md"

# Notes of upstream PyTorch (title -> a file under torch/ that names it; upstream does not define
# all of its Notes in Python, so that file may only cite it).
UPSTREAM_NOTES = {
    "AOT Autograd: outputs aliasing inputs or intermediates!": "_functorch/aot_autograd.py",
    "AOTAutograd Tangent Subclassness for mutated inputs": "_functorch/config.py",
    "Accessing .grad_fn on FunctionalTensor": "_functorch/_aot_autograd/collect_metadata_analysis.py",
    "Intermediate Bases Optimization": "_functorch/_aot_autograd/collect_metadata_analysis.py",
}

_NUMBER_RE = re.compile(r"(?<![\w.+:-])(0\d{3})(?!\w|[.:-]\d)")
_FILE_TAIL_RE = re.compile(r"-([a-z][a-z0-9_-]*[a-z0-9])")
_CITE_RE = re.compile(r"Note\s+\[([^\[\]]{1,300})\]")
_LINE_JOIN_RE = re.compile(r"\\?\n[ \t]*[+-]?[ \t]*(?:#+|//|\*|>)?[ \t]*")
_DEFINITION_RE = re.compile(
    r"^[ \t]*(?:#[ \t]*)?Note \[([^\[\]\n]+)\][^\n]*\n[ \t]*(?:#[ \t]*)?(?:~{3,}|-{3,}|={3,})[ \t]*$", re.MULTILINE
)


def _tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, check=True, capture_output=True).stdout
    return [p for p in out.decode().split("\0") if p]


def _text(rel: str) -> str | None:
    path = REPO_ROOT / rel
    if not path.is_file():
        return None
    data = path.read_bytes()
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _text_files(*, series: bool) -> dict[str, str]:
    """Tracked text files inside (``series``) or outside ``patches/`` and ``pins/``."""
    files = {}
    for rel in _tracked():
        if rel.startswith(SERIES_DIRS) == series and (text := _text(rel)) is not None:
            files[rel] = text
    return files


def _patch_files() -> list[str]:
    return sorted(rel for rel in _tracked() if rel.startswith(SERIES_DIRS) and rel.endswith(".patch")
                  and (rel.startswith("patches/") or "/patches/" in rel))


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _title(raw: str) -> str:
    return " ".join(_LINE_JOIN_RE.sub(" ", raw).split())


# 1. Patch numbers -------------------------------------------------------------------------------


def patch_number_citations(rel: str, text: str, series_stems: set[str]) -> list[str]:
    """``rel:line: token`` for each bare patch number in ``text`` (module docstring, rule 1)."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in _NUMBER_RE.finditer(line):
            tail = line[match.end():]
            if tail.startswith("-") and (name := _FILE_TAIL_RE.match(tail)):
                stem = f"{match.group(1)}-{name.group(1)}"
                if stem not in series_stems:
                    continue  # a fixture's file name, not a patch of the series
                found.append(f"{rel}:{number}: {stem}")
            else:
                found.append(f"{rel}:{number}: {match.group(1)}")
    return found


def _series_stems() -> set[str]:
    return {name.removesuffix(".patch") for name in series_names(REPO_ROOT)}


def test_rule_for_patch_numbers() -> None:
    stems = {"0030-same-object-outputs"}
    cite = patch_number_citations
    assert cite("a", "see patch 0030 and 0012, (0018/0019), 0023's detach", stems) == [
        "a:1: 0030", "a:1: 0012", "a:1: 0018", "a:1: 0019", "a:1: 0023"]
    assert cite("a", "patch 0030-same-object-outputs.patch", stems) == ["a:1: 0030-same-object-outputs"]
    assert cite("a", "0001-fixture.patch, 2026-12-07, +0000, 1.0012, 00:00:00, 0x0012, 10012, v0012", stems) == []


def test_no_bare_patch_numbers_outside_the_series() -> None:
    stems = _series_stems()
    this = Path(__file__).resolve().relative_to(REPO_ROOT.resolve()).as_posix()
    found = [hit for rel, text in _text_files(series=False).items() if rel != this
             for hit in patch_number_citations(rel, text, stems)]
    assert found == [], "cite PRs by name, not by number:\n" + "\n".join(found)


# 2. Notes ---------------------------------------------------------------------------------------


def note_citations(text: str) -> list[tuple[str, int]]:
    return [(_title(m.group(1)), _line(text, m.start())) for m in _CITE_RE.finditer(text)]


def note_definitions(text: str) -> list[tuple[str, int]]:
    return [(m.group(1), _line(text, m.start())) for m in _DEFINITION_RE.finditer(text)]


def hook_note_definitions(patch_text: str, overlay: Collection[str]) -> dict[str, int]:
    """Net Note definitions a patch adds to upstream files (not ``overlay``'s): added minus removed, per title."""
    net: dict[str, int] = defaultdict(int)
    overlay = {*overlay, *overlay_additions(patch_text)}
    for section in re.split(r"^diff --git ", patch_text, flags=re.MULTILINE)[1:]:
        path = section.split(" ", 1)[0].removeprefix("a/")
        if not is_upstream_file(path, overlay):
            continue  # the overlay and the PR tests are the files of torch_overlay/ and upstream/
        body = section.split("\n@@", 1)[1] if "\n@@" in section else ""
        for sign, delta in (("+", 1), ("-", -1)):
            side = "\n".join(line[1:] for line in body.splitlines() if line.startswith(sign)
                             and not line.startswith(sign * 3))
            for title, _ in note_definitions(side):
                net[title] += delta
    return net


def test_rule_for_notes() -> None:
    text = '"""\nNote [A title] (torch >= 2.14)\n~~~~~~~~~~~~~~\n"""\n# Note [Other]\n# ~~~~~~~~~~~~~\nx = 1  # Note [A\n# title]\n'
    assert note_definitions(text) == [("A title", 2), ("Other", 5)]
    assert note_citations(text) == [("A title", 2), ("Other", 5), ("A title", 7)]
    assert note_citations('x = """see Note [Aliases of \\\n    the graph]"""') == [("Aliases of the graph", 1)]
    assert note_definitions("# Note [Cited, not defined]\nx = 1\n") == []
    patch = ("diff --git a/torch/_functorch/x.py b/torch/_functorch/x.py\n--- a/x\n+++ b/x\n@@ -1 +1,3 @@\n"
             "+# Note [Hooked]\n+# ~~~~~~~~~~~\n x\n")
    assert hook_note_definitions(patch, overlay=()) == {"Hooked": 1}
    added = patch.replace("--- a/x", "new file mode 100644\n--- /dev/null")
    assert hook_note_definitions(added, overlay=()) == {}  # a file the patch adds is an overlay file


def test_every_cited_note_is_defined_once() -> None:
    cited: dict[str, list[str]] = defaultdict(list)
    defined: dict[str, list[str]] = defaultdict(list)
    for rel, text in _text_files(series=False).items():
        if rel.startswith(TOOLS_TESTS):
            continue  # the tools' tests cite made-up Notes in their fixtures
        for title, line in note_citations(text):
            cited[title].append(f"{rel}:{line}")
        for title, line in note_definitions(text):
            defined[title].append(f"{rel}:{line}")
    for rel in _patch_files():
        text = (REPO_ROOT / rel).read_text(encoding="utf-8")
        message = text.split("\n---\n", 1)[0] if text.startswith("From ") else ""  # a pin's own form may have none
        for title, line in note_citations(message):
            cited[title].append(f"{rel}:{line}")
    per_pin: dict[str, dict[str, list[str]]] = {}
    for version in pin_versions(REPO_ROOT):
        hooks: dict[str, list[str]] = defaultdict(list)
        repo = load_repo(REPO_ROOT, version)
        for patch in repo.patches:
            for title, count in hook_note_definitions(patch.read_text(encoding="utf-8"), repo.overlay_paths).items():
                # A pin's composed patch lives in a temporary directory: name the series file instead.
                where = f"pins/{version}/patches/{patch.name}" if not patch.is_relative_to(REPO_ROOT) else (
                    patch.relative_to(REPO_ROOT).as_posix())
                hooks[title] += [where] * count
        per_pin[version] = hooks
    problems = []
    for title, where in sorted(cited.items()):
        if title in UPSTREAM_NOTES:
            if defined.get(title) or any(hooks.get(title) for hooks in per_pin.values()):
                problems.append(f"Note [{title}]: defined upstream ({UPSTREAM_NOTES[title]}) and here")
            continue
        counts = {v: len(defined.get(title, [])) + len(hooks.get(title, [])) for v, hooks in per_pin.items()}
        if max(counts.values()) != 1:
            places = defined.get(title, []) + sorted({p for hooks in per_pin.values() for p in hooks.get(title, [])})
            problems.append(f"Note [{title}]: defined {max(counts.values())} time(s) on a pin "
                            f"({', '.join(places) or 'nowhere'}); cited at {', '.join(where[:3])}"
                            + (f" and {len(where) - 3} more" if len(where) > 3 else ""))
    assert problems == [], "\n".join(problems)


def test_upstream_notes_are_upstream() -> None:
    """Where this interpreter can find a torch (without importing it), its files name UPSTREAM_NOTES."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("no torch in this interpreter")
    root = Path(next(iter(spec.submodule_search_locations)))
    missing = [f"{title} ({rel})" for title, rel in UPSTREAM_NOTES.items()
               if f"Note [{title}]" not in " ".join((root / rel).read_text(encoding="utf-8").split())]
    assert missing == []


# 3. Authors -------------------------------------------------------------------------------------


def test_the_series_has_one_author() -> None:
    authors: dict[str, list[str]] = defaultdict(list)
    for rel in _patch_files():
        text = (REPO_ROOT / rel).read_text(encoding="utf-8")
        if not text.startswith("From "):
            continue  # a pin's own form without a message of its own (patches/NAME's holds)
        name, mail = email.utils.parseaddr(patch_header(text).get("From", ""))
        authors[f"{name} <{mail}>"].append(rel)
    assert len(authors) == 1, "\n".join(f"{a}: {len(p)} patch(es), e.g. {p[0]}" for a, p in sorted(authors.items()))


# 4. and 5. The overlay's layering ---------------------------------------------------------------


def _overlay_modules() -> dict[str, Path]:
    return {p.relative_to(REPO_ROOT).as_posix(): p
            for p in sorted((REPO_ROOT / OVERLAY_DIR).rglob("*.py")) if "__pycache__" not in p.parts}


def test_every_overlay_module_has_a_layering_line() -> None:
    missing = []
    for rel, path in _overlay_modules().items():
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        if not any(line.strip().startswith("Layering:") for line in doc.splitlines()):
            missing.append(f"{rel}: no 'Layering:' line in its module docstring")
    assert missing == [], "\n".join(missing)


def layering_table(design: str) -> list[tuple[str, str, list[str]]]:
    """DESIGN.md's table ``| module | phase | imports ... |``: (module, phase, imports) in order."""
    lines = design.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"\|\s*module\s*\|\s*phase\s*\|\s*imports", line))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append((cells[0].strip("`"), cells[1], re.findall(r"`(\w+)`", cells[2])))
    return rows


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def package_imports(source: str, modules: set[str]) -> tuple[dict[str, list[int]], list[int]]:
    """The package modules ``source`` imports (-> lines), and the lines importing sympy; not under TYPE_CHECKING."""
    tree = ast.parse(source)
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and _is_type_checking(node.test)
               for stmt in node.body for n in ast.walk(stmt)}
    found: dict[str, list[int]] = defaultdict(list)
    sympy = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "sympy" or alias.name.startswith("sympy."):
                    sympy.append(node.lineno)
                elif alias.name.startswith(PACKAGE + "."):
                    found[alias.name[len(PACKAGE) + 1:].split(".")[0]].append(node.lineno)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 0 and (module == "sympy" or module.startswith("sympy.")):
                sympy.append(node.lineno)
                continue
            if node.level == 1:
                rest = module
            elif node.level == 0 and (module == PACKAGE or module.startswith(PACKAGE + ".")):
                rest = module[len(PACKAGE) + 1:]
            else:
                continue
            if rest:
                found[rest.split(".")[0]].append(node.lineno)
            else:
                for alias in node.names:
                    if alias.name in modules:
                        found[alias.name].append(node.lineno)
    return dict(found), sympy


def test_rule_for_imports() -> None:
    source = (f"from . import config\nfrom .spec import X\nimport sympy\nfrom typing import TYPE_CHECKING\n"
              f"if TYPE_CHECKING:\n    from .scope import GraphScope\n"
              f"def f():\n    from {PACKAGE}.plan import p\n    from {PACKAGE} import replay\n")
    found, sympy = package_imports(source, {"config", "spec", "scope", "plan", "replay"})
    assert found == {"config": [1], "spec": [2], "plan": [8], "replay": [9]} and sympy == [3]


def test_overlay_imports_follow_the_layering_table() -> None:
    rows = layering_table(DESIGN.read_text(encoding="utf-8"))
    phase = {name: ph for name, ph, _ in rows}
    listed = {name: set(imports) for name, _, imports in rows}
    modules = {p.stem for p in PACKAGE_DIR.glob("*.py")} - {"__init__"}
    problems = [f"DESIGN.md: {m} has no row in the layering table" for m in sorted(modules - set(phase))]
    problems += [f"DESIGN.md: the layering table lists {m}, which the overlay lacks" for m in sorted(set(phase) - modules)]
    problems += [f"DESIGN.md: {name}'s phase {ph!r} is not runtime, shared or planning"
                 for name, ph, _ in rows if ph not in ("runtime", "shared", "planning")]
    seen: set[str] = set()
    for name, ph, imports in rows:
        problems += [f"DESIGN.md: {name} imports {dep}, which is not above it" for dep in imports if dep not in seen]
        problems += [f"DESIGN.md: {ph} {name} imports planning {dep}" for dep in imports
                     if ph != "planning" and phase.get(dep) == "planning"]
        problems += [f"DESIGN.md: shared {name} imports {phase.get(dep)} {dep}" for dep in imports
                     if ph == "shared" and phase.get(dep) != "shared"]
        seen.add(name)
    for name in sorted(modules & set(phase)):
        rel = f"{OVERLAY_DIR}/{OVERLAY_PACKAGE}{name}.py"
        found, sympy = package_imports((PACKAGE_DIR / f"{name}.py").read_text(encoding="utf-8"), modules)
        for dep, lines in sorted(found.items()):
            if phase[name] != "planning" and phase.get(dep) == "planning":
                problems.append(f"{rel}:{lines[0]}: {phase[name]} module imports planning module {dep}")
            elif phase[name] == "shared" and phase.get(dep) != "shared":
                problems.append(f"{rel}:{lines[0]}: shared module imports {phase.get(dep)} module {dep}")
            if dep not in listed[name]:
                problems.append(f"{rel}:{lines[0]}: imports {dep}, which DESIGN.md's layering table does not list for it")
        problems += [f"DESIGN.md: the layering table lists {dep} for {name}, which {rel} does not import"
                     for dep in sorted(listed[name] - set(found))]
        if phase[name] != "planning" and sympy:
            problems.append(f"{rel}:{sympy[0]}: {phase[name]} module imports sympy")
    assert problems == [], "\n".join(problems)
