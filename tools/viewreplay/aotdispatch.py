"""Run upstream's ``test/functorch/test_aotdispatch.py`` on stock and on patched torch and compare, test by test.

Two sources of the file, each interpreter running pytest once on it (with ``python -P``, so nothing in
the folder shadows the installed torch; junit XML gives the outcomes; nothing is written there):

- ``--pytorch-src``: a PyTorch checkout at the pin's tag. Only the curated subset runs
  (``tools/aotdispatch_subset.toml``: test methods by class and name, each with the reason it is
  listed); a small pytest plugin (``viewreplay.aotdispatch_plugin``) keeps exactly those tests (by
  class and method name; ``parametrized = true`` also keeps ``name_<params>`` variants). The runner
  refuses a checkout that is missing, of another version, or whose test file no longer defines a
  listed test (checked statically, with ``ast``, before anything runs). In a git checkout the test
  file must be the tag's, or the tag's with the stack's test patches applied
  (``upstream/test_patches/<pr-name>.patch``: the expectations the series changes), and nothing else.
- ``--tests-dir``: a folder holding a transcription of the file (``DIR/test_aotdispatch.py``, e.g. of
  upstream's main branch; not checked against any tag). Every test runs, or every test of the classes
  given. A test that passes on stock and fails on patched fails the run unless
  ``upstream/test_expectations.toml`` declares it (:func:`load_expectations`): each declaration names
  the PR whose test patch changes that test, and :func:`check_expectations` refuses one whose test
  patch does not change the method in the transcription (checked with ``ast`` after applying the patch
  to a copy, before anything runs).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from viewreplay import ViewReplayError
from viewreplay.pin import Pin, read_toml
from viewreplay.staging import upstream_test_targets
from viewreplay.tree import public_version, tree_version

SUBSET_FILE = Path("tools") / "aotdispatch_subset.toml"
EXPECTATIONS_FILE = Path("upstream") / "test_expectations.toml"
# The file a --tests-dir folder holds (upstream's test/functorch/test_aotdispatch.py).
TESTS_DIR_FILE = "test_aotdispatch.py"
PLUGIN = "viewreplay.aotdispatch_plugin"
SELECTION_VAR = "VIEWREPLAY_AOTDISPATCH_SELECTION"
PASSED, FAILED, SKIPPED, MISSING = "passed", "failed", "skipped", "not run"
REGRESSED, DECLARED, STALE = "regressed", "declared", "declared but not regressed"
CATEGORIES = ("passed on both", "fixed", REGRESSED, DECLARED, STALE, "failing on both", "skipped")
# --tests-dir lists every row but these (they are counted).
COUNTED_ONLY = ("passed on both", "skipped")
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class DefinedTest:
    """A test method as a class of the test file has it."""

    owner: str  # the class whose body defines it: the class itself or a base class in the same file
    params: tuple[str, ...]  # its parameters after self (instantiate_parametrized_tests expands them)


Methods = dict[str, dict[str, DefinedTest]]


def variant_prefix(name: str, params: Sequence[str]) -> str:
    """Prefix of the names instantiate_parametrized_tests gives the variants of ``name`` (``name_<param>_``)."""
    return f"{name}_{params[0]}_" if params else f"{name}_"


def method_of(tests: dict[str, DefinedTest], name: str) -> str | None:
    """The method that the test ``name`` runs: ``name`` itself, or the parametrized method it is a variant of."""
    if name in tests:
        return name
    variants = [m for m, t in tests.items() if t.params and name.startswith(variant_prefix(m, t.params))]
    return max(variants, key=len, default=None)


@dataclass(frozen=True)
class SubsetTest:
    cls: str
    name: str
    why: str
    parametrized: bool = False

    @property
    def label(self) -> str:
        return f"{self.cls}::{self.name}"

    def variant_prefix(self, params: Sequence[str]) -> str | None:
        """Prefix of the variants' names, for a parametrized test."""
        return variant_prefix(self.name, params) if self.parametrized else None


@dataclass(frozen=True)
class Subset:
    path: Path
    test_file: str
    tests: list[SubsetTest]


@dataclass(frozen=True)
class Declaration:
    """A test allowed to pass on stock and fail on patched torch: the PR's test patch changes what it expects."""

    test: str  # Class::method as in the test ids (a parametrized variant by its full name)
    pr: str  # the PR (patch name without number) whose upstream/test_patches/<pr>.patch changes the test
    why: str

    @property
    def cls(self) -> str:
        return self.test.partition("::")[0]

    @property
    def name(self) -> str:
        return self.test.partition("::")[2]


@dataclass(frozen=True)
class Expectations:
    path: Path
    declarations: tuple[Declaration, ...]


@dataclass(frozen=True)
class Sides:
    """The two interpreters compared, and how pytest runs under each."""

    stock: str
    patched: str
    timeout: float  # seconds, per interpreter
    jobs: int = 1  # pytest-xdist workers (1: no xdist)


@dataclass(frozen=True)
class Row:
    test: str
    stock: str
    patched: str
    category: str


def load_subset(path: Path) -> Subset:
    """Read the subset file; every entry needs a class, a name and a reason."""
    data = read_toml(path)
    test_file = data.get("file")
    if not isinstance(test_file, str) or not test_file:
        raise ViewReplayError(f"{path}: 'file' (the test file, relative to the checkout) is required")
    tests = []
    for index, entry in enumerate(data.get("test", [])):
        values = [entry.get(key) for key in ("class", "name", "why")]
        if not all(isinstance(v, str) and v.strip() for v in values):
            raise ViewReplayError(f"{path}: [[test]] #{index + 1} needs non-empty 'class', 'name' and 'why'")
        tests.append(SubsetTest(*values, parametrized=bool(entry.get("parametrized", False))))
    if not tests:
        raise ViewReplayError(f"{path}: lists no [[test]]")
    _refuse_duplicates(path, [t.label for t in tests])
    return Subset(path=path, test_file=test_file, tests=tests)


def load_expectations(path: Path) -> Expectations:
    """Read the declared expectation changes; every entry needs a ``Class::method`` test, a PR and a reason."""
    declarations = []
    for index, entry in enumerate(read_toml(path).get("test", [])):
        values = [entry.get(key) for key in ("test", "pr", "why")]
        if not all(isinstance(v, str) and v.strip() for v in values) or "::" not in values[0]:
            raise ViewReplayError(f"{path}: [[test]] #{index + 1} needs 'test' (Class::method), 'pr' and 'why'")
        declarations.append(Declaration(*values))
    _refuse_duplicates(path, [d.test for d in declarations])
    return Expectations(path=path, declarations=tuple(declarations))


def _refuse_duplicates(path: Path, labels: list[str]) -> None:
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        raise ViewReplayError(f"{path}: listed more than once: {duplicates}")


def _apply_patches(original: bytes, rel: str, patches: Sequence[Path]) -> bytes | None:
    """``original`` as the file ``rel``, with the ``rel`` part of each of ``patches`` applied in order.

    None if one of them does not apply.
    """
    with tempfile.TemporaryDirectory(prefix="viewreplay-testfile-") as tmp:
        path = Path(tmp) / rel
        path.parent.mkdir(parents=True)
        path.write_bytes(original)
        for patch in patches:
            applied = subprocess.run(
                ["git", "apply", f"--include={rel}", str(patch.resolve())], cwd=tmp, check=False, capture_output=True
            )
            if applied.returncode != 0:
                return None
        return path.read_bytes()


def _tag_file_with_patches(checkout: Path, tag: str, rel: str, test_patches: Sequence[Path]) -> bytes | None:
    """The tag's ``rel`` with ``test_patches`` applied in order; None if one of them does not apply."""
    original = subprocess.run(["git", "show", f"{tag}:{rel}"], cwd=checkout, check=False, capture_output=True)
    if original.returncode != 0:
        return None
    return _apply_patches(original.stdout, rel, test_patches)


def check_checkout(
    checkout: Path, pin: Pin, subset: Subset, test_patches: Sequence[Path] = ()
) -> tuple[Methods, str]:
    """Refuse a missing checkout, one of another version, or one whose test file lacks a listed test.

    ``test_patches`` are the stack's patches of the test file, in stack order. Returns the defined
    tests and which version of the test file the checkout holds.
    """
    if not checkout.is_dir():
        raise ViewReplayError(f"{checkout}: no such directory (pass a PyTorch checkout at {pin.upstream_tag})")
    if not (checkout / "version.txt").is_file():
        raise ViewReplayError(f"{checkout}: not a PyTorch checkout (no version.txt)")
    version = tree_version(checkout)
    if public_version(version) != pin.version:
        raise ViewReplayError(
            f"{checkout / 'version.txt'}: torch version {version}, but the subset is for {pin.version} ({pin.upstream_tag})"
        )
    test_file = checkout / subset.test_file
    version = "not a git checkout: not checked against the tag"
    if (checkout / ".git").exists():
        result = subprocess.run(
            ["git", "diff", "--quiet", pin.upstream_tag, "--", subset.test_file],
            cwd=checkout, check=False, capture_output=True, text=True,
        )
        version = f"{pin.upstream_tag}'s"
        if result.returncode != 0:
            patched = _tag_file_with_patches(checkout, pin.upstream_tag, subset.test_file, test_patches)
            if not test_patches or patched is None or not test_file.is_file() or test_file.read_bytes() != patched:
                detail = result.stderr.strip() or f"it differs from {pin.upstream_tag}'s" + (
                    f" and from {pin.upstream_tag}'s with the stack's {len(test_patches)} test patch(es)"
                    if test_patches else ""
                )
                raise ViewReplayError(f"{test_file}: not the {pin.upstream_tag} version ({detail})")
            version = f"{pin.upstream_tag}'s with the stack's {len(test_patches)} test patch(es)"
    if not test_file.is_file():
        raise ViewReplayError(f"{test_file}: file not found")
    methods = defined_tests(test_file)
    missing = [
        t.label
        for t in subset.tests
        if t.cls not in methods or t.name not in methods[t.cls]
    ]
    if missing:
        raise ViewReplayError(
            f"{test_file}: no longer defines {len(missing)} test(s) listed in {subset.path}: {', '.join(missing)}"
        )
    return methods, version


def _own_tests(tree: ast.Module) -> dict[str, dict[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Class name -> {test method its own body defines: the method's node}, for each top-level class."""
    return {
        node.name: {
            item.name: item for item in node.body if isinstance(item, _FUNCTIONS) and item.name.startswith("test")
        }
        for node in tree.body
        if isinstance(node, ast.ClassDef)
    }


def defined_tests(test_file: Path) -> Methods:
    """Class name -> {test method: where it is defined, its parameters}, defined in the class or inherited in the file."""
    tree = ast.parse(test_file.read_text(encoding="utf-8"))
    own = _own_tests(tree)
    bases = {
        node.name: [b.id for b in node.bases if isinstance(b, ast.Name)]
        for node in tree.body
        if isinstance(node, ast.ClassDef)
    }

    def resolve(name: str, seen: frozenset[str]) -> dict[str, DefinedTest]:
        tests: dict[str, DefinedTest] = {}
        for base in reversed(bases.get(name, ())):
            if base in own and base not in seen:
                tests.update(resolve(base, seen | {base}))
        tests.update({m: DefinedTest(name, tuple(a.arg for a in node.args.args[1:])) for m, node in own[name].items()})
        return tests

    return {name: resolve(name, frozenset({name})) for name in own}


def selection(subset: Subset, methods: Methods) -> list[list[str | None]]:
    """The plugin's selection: [class, method, variant prefix or None] per listed test."""
    return [[t.cls, t.name, t.variant_prefix(methods[t.cls][t.name].params)] for t in subset.tests]


def changed_tests(test_file: Path, patch: Path) -> set[tuple[str, str]]:
    """(class, method) of each test method that ``patch`` changes in ``test_file`` (not counting comments or layout).

    The patch is applied to a copy (``git apply``: its line numbers may be off, its context must match).
    """
    targets = [t for t in upstream_test_targets(patch) if Path(t).name == test_file.name]
    if not targets:
        raise ViewReplayError(f"{patch}: does not change {test_file.name}")
    patched = _apply_patches(test_file.read_bytes(), targets[0], [patch])
    if patched is None:
        raise ViewReplayError(f"{patch}: does not apply to {test_file}, so what it changes there cannot be checked")

    def dumps(source: str) -> dict[tuple[str, str], str]:
        tests = _own_tests(ast.parse(source))
        return {(cls, m): ast.dump(node) for cls, methods in tests.items() for m, node in methods.items()}

    before, after = dumps(test_file.read_text(encoding="utf-8")), dumps(patched.decode("utf-8"))
    return {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}


def check_expectations(expectations: Expectations, test_file: Path, methods: Methods, test_patch_dir: Path) -> None:
    """Refuse a declaration of a test the file does not define, one that names a class inheriting the
    method (declare it on the class that defines it: that covers every class inheriting it), and one
    whose PR has no test patch or whose test patch does not change the method in ``test_file``."""
    changed: dict[str, set[tuple[str, str]]] = {}
    for declaration in expectations.declarations:
        where = f"{expectations.path}: {declaration.test}"
        tests = methods.get(declaration.cls, {})
        method = method_of(tests, declaration.name)
        if method is None:
            raise ViewReplayError(f"{where}: {test_file} defines no such test")
        owner = tests[method].owner
        if owner != declaration.cls:
            raise ViewReplayError(
                f"{where}: {declaration.cls} inherits {method} from {owner}; declare {owner}::{declaration.name} "
                f"(it covers every class that inherits it)"
            )
        patch = test_patch_dir / f"{declaration.pr}.patch"
        if not patch.is_file():
            raise ViewReplayError(f"{where}: pr = {declaration.pr!r} has no test patch ({patch}: file not found)")
        if declaration.pr not in changed:
            changed[declaration.pr] = changed_tests(test_file, patch)
        if (owner, method) not in changed[declaration.pr]:
            raise ViewReplayError(f"{where}: {patch} does not change {owner}.{method} in {test_file}")


def declared_tests(expectations: Expectations, methods: Methods, keys: Iterable[str]) -> frozenset[str]:
    """The test ids among ``keys`` that a declaration covers: its own, and the same test in each class inheriting it."""
    declared = set()
    for key in keys:
        cls, _, name = key.partition("::")
        tests = methods.get(cls, {})
        method = method_of(tests, name)
        if method is not None and any(
            d.name == name and d.cls == tests[method].owner for d in expectations.declarations
        ):
            declared.add(key)
    return frozenset(declared)


def run_side(
    python: str, side: str, sides: Sides, cwd: Path, targets: Sequence[str], selected: list[list[str | None]] | None,
    work: Path,
) -> dict[str, str]:
    """Run pytest on ``targets`` in ``cwd`` under ``python`` (only the ``selected`` tests, if given); return
    {class::method: outcome} for every test it ran."""
    if os.sep in python:  # pytest runs in cwd: keep the venv's path, do not resolve the link
        python = os.path.abspath(python)
    junit = work / f"{side}.xml"
    # No bytecode or pytest cache is written into the tests' folder (it may be read-only).
    env = {**os.environ, "PYTEST_ADDOPTS": "", "PYTHONDONTWRITEBYTECODE": "1"}
    plugin = []
    if selected is not None:
        selection_file = work / f"{side}-selection.json"
        selection_file.write_text(json.dumps(selected))
        tools_dir = str(Path(__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join([tools_dir, *filter(None, [os.environ.get("PYTHONPATH")])])
        env[SELECTION_VAR] = str(selection_file)
        plugin = ["-p", PLUGIN]
    # -P: cwd is not put on sys.path, so a checkout's (unbuilt) torch/ sources never shadow the
    # interpreter's installed torch.
    command = [
        python, "-P", "-m", "pytest", *targets, *plugin, "-p", "no:cacheprovider",
        "-q", "-rA", f"--junitxml={junit}", "-o", "junit_family=xunit1",
        *(["-n", str(sides.jobs)] if sides.jobs > 1 else []),
    ]
    try:
        result = subprocess.run(
            command, cwd=cwd, env=env, check=False, capture_output=True, text=True, timeout=sides.timeout
        )
    except FileNotFoundError:
        raise ViewReplayError(f"--{side}-python {python}: no such interpreter") from None
    except subprocess.TimeoutExpired:
        raise ViewReplayError(f"{side}: pytest did not finish within {sides.timeout:.0f} s") from None
    # pytest exit codes: 0 all passed, 1 some failed, 5 nothing collected; others are usage/internal errors.
    if result.returncode not in (0, 1) or not junit.is_file():
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-20:])
        raise ViewReplayError(f"{side}: '{' '.join(command)}' failed (exit {result.returncode}):\n{tail}")
    return parse_junit(junit)


def run_both(
    sides: Sides, cwd: Path, targets: Sequence[str], selected: list[list[str | None]] | None = None
) -> tuple[dict[str, str], dict[str, str], str]:
    """Run stock, then patched; return their outcomes and a line with the wall time of each."""
    outcomes, seconds = [], []
    with tempfile.TemporaryDirectory(prefix="viewreplay-aotdispatch-") as tmp:
        for side, python in (("stock", sides.stock), ("patched", sides.patched)):
            start = time.monotonic()
            outcomes.append(run_side(python, side, sides, cwd, targets, selected, Path(tmp)))
            seconds.append(time.monotonic() - start)
    return outcomes[0], outcomes[1], f"wall time: stock {seconds[0]:.0f} s, patched {seconds[1]:.0f} s"


def parse_junit(junit: Path) -> dict[str, str]:
    """{class::method: passed|failed|skipped} from a pytest junit XML file."""
    outcomes = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        cls = case.get("classname", "").rsplit(".", 1)[-1]
        key = f"{cls}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            outcomes[key] = FAILED
        elif case.find("skipped") is not None:
            outcomes[key] = SKIPPED
        else:
            outcomes[key] = PASSED
    return outcomes


def classify(stock: str, patched: str) -> str:
    if stock == PASSED and patched == PASSED:
        return "passed on both"
    if patched == PASSED:
        return "fixed"
    if stock == PASSED:
        return REGRESSED
    if SKIPPED in (stock, patched) and FAILED not in (stock, patched):
        return "skipped"
    return "failing on both"


def compare(
    keys: Iterable[str], stock: dict[str, str], patched: dict[str, str], declared: Collection[str] = frozenset()
) -> list[Row]:
    """One row per test id: its outcomes and category (a ``declared`` test is "declared" if it regressed)."""
    rows = []
    for key in keys:
        s, p = stock.get(key, MISSING), patched.get(key, MISSING)
        category = classify(s, p)
        if key in declared:
            category = DECLARED if category == REGRESSED else STALE
        rows.append(Row(key, s, p, category))
    return rows


def subset_keys(subset: Subset, methods: Methods, ran: Collection[str]) -> list[str]:
    """The test ids of the listed tests, in the subset's order: each, or the variants of a parametrized one that ran."""
    keys = []
    for test in subset.tests:
        prefix = test.variant_prefix(methods[test.cls][test.name].params)
        keys += sorted(
            k for k in ran if k == test.label or (prefix and k.startswith(f"{test.cls}::{prefix}"))
        ) or [test.label]
    return keys


def format_table(rows: list[Row], listed: Collection[str] = CATEGORIES) -> str:
    """The rows of the ``listed`` categories, then the counts of every category."""
    header = ("test", "stock", "patched", "result")
    cells = [(r.test, r.stock, r.patched, r.category) for r in rows if r.category in listed]
    widths = [max(len(c[i]) for c in [header, *cells]) for i in range(4)]
    lines = [" | ".join(h.ljust(w) for h, w in zip(header, widths)), "-+-".join("-" * w for w in widths)]
    lines += [" | ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells]
    counts = {c: sum(1 for r in rows if r.category == c) for c in CATEGORIES}
    lines.append("")
    lines.append(", ".join(f"{c}: {n}" for c, n in counts.items()))
    return "\n".join(lines)


def run_aotdispatch(
    pin: Pin, checkout: Path, subset_path: Path, sides: Sides, test_patches: Sequence[Path] = ()
) -> tuple[str, bool]:
    """Run the subset on both interpreters; return the table and whether anything regressed."""
    subset = load_subset(subset_path)
    methods, version = check_checkout(checkout, pin, subset, test_patches)
    stock, patched, timing = run_both(sides, checkout, [subset.test_file], selection(subset, methods))
    rows = compare(subset_keys(subset, methods, stock.keys() | patched.keys()), stock, patched)
    report = f"{subset.test_file}: {version}\n{timing}\n\n{format_table(rows)}"
    return report, any(r.category == REGRESSED for r in rows)


def run_tests_dir(
    tests_dir: Path, expectations_path: Path, test_patch_dir: Path, sides: Sides, classes: Sequence[str] = ()
) -> tuple[str, bool]:
    """Run every test of ``tests_dir``'s test_aotdispatch.py (or of ``classes``) on both interpreters; return
    the report and whether a test regressed that ``expectations_path`` does not declare."""
    test_file = tests_dir / TESTS_DIR_FILE
    if not tests_dir.is_dir():
        raise ViewReplayError(f"{tests_dir}: no such directory (pass a folder holding {TESTS_DIR_FILE})")
    if not test_file.is_file():
        raise ViewReplayError(f"{test_file}: file not found")
    methods = defined_tests(test_file)
    expectations = load_expectations(expectations_path)
    check_expectations(expectations, test_file, methods, test_patch_dir)
    targets = [f"{TESTS_DIR_FILE}::{cls}" for cls in classes] or [TESTS_DIR_FILE]
    stock, patched, timing = run_both(sides, tests_dir, targets)
    keys = sorted(stock.keys() | patched.keys())
    rows = compare(keys, stock, patched, declared_tests(expectations, methods, keys))
    lines = [
        f"{test_file}: a transcription, not checked against the tag",
        f"classes: {', '.join(classes) or 'all'}; {len(expectations.declarations)} declared in {expectations.path}",
        timing,
        "",
        format_table(rows, [c for c in CATEGORIES if c not in COUNTED_ONLY]),
    ]
    stale = [r.test for r in rows if r.category == STALE]
    if stale:
        lines.append(f"{len(stale)} declared test(s) did not regress (a stale declaration, or failing on stock too): "
                     + ", ".join(stale))
    return "\n".join(lines), any(r.category == REGRESSED for r in rows)
