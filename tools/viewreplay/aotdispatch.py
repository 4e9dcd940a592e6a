"""Run a curated subset of upstream's ``test/functorch/test_aotdispatch.py`` on stock and on patched torch.

The subset (``tools/aotdispatch_subset.toml``) names test methods by class and name, each with the
reason it is in the subset. The runner refuses a checkout that is missing, of another version, or
whose test file no longer defines a listed test (checked statically, with ``ast``, before anything
runs). In a git checkout the test file must be the tag's, or the tag's with the staged stack's test
patches applied (``upstream/stack.toml``: the expectations the series changes, each PR saying why),
and nothing else. Each interpreter runs pytest once in the checkout; a small pytest plugin
(``viewreplay.aotdispatch_plugin``) keeps exactly the listed tests (by class and method name;
``parametrized = true`` also keeps ``name_<params>`` variants) and junit XML gives the outcomes.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from viewreplay import ViewReplayError
from viewreplay.pin import Pin, read_toml
from viewreplay.tree import public_version, tree_version

SUBSET_FILE = Path("tools") / "aotdispatch_subset.toml"
PLUGIN = "viewreplay.aotdispatch_plugin"
PASSED, FAILED, SKIPPED, MISSING = "passed", "failed", "skipped", "not run"
CATEGORIES = ("passed on both", "fixed", "regressed", "failing on both", "skipped")


@dataclass(frozen=True)
class SubsetTest:
    cls: str
    name: str
    why: str
    parametrized: bool = False

    @property
    def label(self) -> str:
        return f"{self.cls}::{self.name}"

    def variant_prefix(self, params: list[str]) -> str | None:
        """Prefix of the names instantiate_parametrized_tests gives the variants (``name_<param>_``)."""
        if not self.parametrized:
            return None
        return f"{self.name}_{params[0]}_" if params else f"{self.name}_"


@dataclass(frozen=True)
class Subset:
    path: Path
    test_file: str
    tests: list[SubsetTest]


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
    labels = [t.label for t in tests]
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        raise ViewReplayError(f"{path}: listed more than once: {duplicates}")
    return Subset(path=path, test_file=test_file, tests=tests)


def _tag_file_with_patches(checkout: Path, tag: str, rel: str, test_patches: Sequence[Path]) -> bytes | None:
    """The tag's ``rel`` with ``test_patches`` applied in order; None if one of them does not apply."""
    original = subprocess.run(["git", "show", f"{tag}:{rel}"], cwd=checkout, check=False, capture_output=True)
    if original.returncode != 0:
        return None
    with tempfile.TemporaryDirectory(prefix="viewreplay-testfile-") as tmp:
        (Path(tmp) / rel).parent.mkdir(parents=True)
        (Path(tmp) / rel).write_bytes(original.stdout)
        for patch in test_patches:
            applied = subprocess.run(["git", "apply", str(patch)], cwd=tmp, check=False, capture_output=True)
            if applied.returncode != 0:
                return None
        return (Path(tmp) / rel).read_bytes()


def check_checkout(
    checkout: Path, pin: Pin, subset: Subset, test_patches: Sequence[Path] = ()
) -> tuple[dict[str, dict[str, list[str]]], str]:
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


def defined_tests(test_file: Path) -> dict[str, dict[str, list[str]]]:
    """Class name -> {test method: its parameter names} defined in the class or inherited within the file."""
    tree = ast.parse(test_file.read_text(encoding="utf-8"))
    own: dict[str, dict[str, list[str]]] = {}
    bases: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            own[node.name] = {
                item.name: [a.arg for a in item.args.args[1:]]
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test")
            }
            bases[node.name] = [b.id for b in node.bases if isinstance(b, ast.Name)]

    def resolve(name: str, seen: frozenset[str]) -> dict[str, list[str]]:
        names: dict[str, list[str]] = {}
        for base in reversed(bases.get(name, ())):
            if base in own and base not in seen:
                names.update(resolve(base, seen | {base}))
        names.update(own.get(name, {}))
        return names

    return {name: resolve(name, frozenset({name})) for name in own}


def selection(subset: Subset, methods: dict[str, dict[str, list[str]]]) -> list[list[str | None]]:
    """The plugin's selection: [class, method, variant prefix or None] per listed test."""
    return [[t.cls, t.name, t.variant_prefix(methods[t.cls][t.name])] for t in subset.tests]


def run_side(
    python: str, checkout: Path, subset: Subset, methods: dict[str, dict[str, list[str]]], work: Path, side: str,
    timeout: float,
) -> dict[str, str]:
    """Run the subset under ``python``; return {class::method: outcome} for every test it ran."""
    if os.sep in python:  # pytest runs in the checkout: keep the venv's path, do not resolve the link
        python = os.path.abspath(python)
    selection_file = work / f"{side}-selection.json"
    selection_file.write_text(json.dumps(selection(subset, methods)))
    junit = work / f"{side}.xml"
    tools_dir = str(Path(__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([tools_dir, *filter(None, [os.environ.get("PYTHONPATH")])]),
        "VIEWREPLAY_AOTDISPATCH_SELECTION": str(selection_file),
        "PYTEST_ADDOPTS": "",
    }
    # -P: the checkout's root is not put on sys.path, so its (unbuilt) torch/ sources never shadow the
    # interpreter's installed torch.
    command = [
        python, "-P", "-m", "pytest", subset.test_file, "-p", PLUGIN, "-p", "no:cacheprovider",
        "-q", "-rA", f"--junitxml={junit}", "-o", "junit_family=xunit1",
    ]
    try:
        result = subprocess.run(command, cwd=checkout, env=env, check=False, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise ViewReplayError(f"--{side}-python {python}: no such interpreter") from None
    except subprocess.TimeoutExpired:
        raise ViewReplayError(f"{side}: pytest did not finish within {timeout:.0f} s") from None
    # pytest exit codes: 0 all passed, 1 some failed, 5 nothing collected; others are usage/internal errors.
    if result.returncode not in (0, 1) or not junit.is_file():
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-20:])
        raise ViewReplayError(f"{side}: '{' '.join(command)}' failed (exit {result.returncode}):\n{tail}")
    return parse_junit(junit)


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
        return "regressed"
    if SKIPPED in (stock, patched) and FAILED not in (stock, patched):
        return "skipped"
    return "failing on both"


def compare(
    subset: Subset, methods: dict[str, dict[str, list[str]]], stock: dict[str, str], patched: dict[str, str]
) -> list[tuple[str, str, str, str]]:
    """Rows (test, stock outcome, patched outcome, category) for every listed test and its variants."""
    rows = []
    for test in subset.tests:
        prefix = test.variant_prefix(methods[test.cls][test.name])
        keys = sorted(
            k for k in set(stock) | set(patched)
            if k == test.label or (prefix and k.startswith(f"{test.cls}::{prefix}"))
        ) or [test.label]
        for key in keys:
            s, p = stock.get(key, MISSING), patched.get(key, MISSING)
            rows.append((key, s, p, classify(s, p)))
    return rows


def format_table(rows: list[tuple[str, str, str, str]]) -> str:
    header = ("test", "stock", "patched", "result")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(4)]
    lines = [" | ".join(h.ljust(w) for h, w in zip(header, widths)), "-+-".join("-" * w for w in widths)]
    lines += [" | ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    counts = {c: sum(1 for r in rows if r[3] == c) for c in CATEGORIES}
    lines.append("")
    lines.append(", ".join(f"{c}: {n}" for c, n in counts.items()))
    return "\n".join(lines)


def run_aotdispatch(
    pin: Pin, checkout: Path, subset_path: Path, stock_python: str, patched_python: str, timeout: float,
    test_patches: Sequence[Path] = (),
) -> tuple[str, bool]:
    """Run the subset on both interpreters; return the table and whether anything regressed."""
    subset = load_subset(subset_path)
    methods, version = check_checkout(checkout, pin, subset, test_patches)
    with tempfile.TemporaryDirectory(prefix="viewreplay-aotdispatch-") as tmp:
        stock = run_side(stock_python, checkout, subset, methods, Path(tmp), "stock", timeout)
        patched = run_side(patched_python, checkout, subset, methods, Path(tmp), "patched", timeout)
    rows = compare(subset, methods, stock, patched)
    return f"{subset.test_file}: {version}\n\n{format_table(rows)}", any(r[3] == "regressed" for r in rows)
