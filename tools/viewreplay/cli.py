"""Command-line interface: ``viewreplay {apply,status,pin-update,build-wheel,make-checkout,report,sweep,
checkout-series,export,stage-upstream,check-prefixes,run-aotdispatch,rebase-check}``."""

from __future__ import annotations

import argparse
import sys
import time
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from viewreplay import ViewReplayError
from viewreplay.checkout import make_checkout
from viewreplay.pin import WHEEL_CACHE, Repo, find_repo, load_repo, sha256_bytes, write_pin_files
from viewreplay.pinnedwheel import obtain_wheel
from viewreplay.report import run_report, run_sweep
from viewreplay.tree import (
    APPLIED,
    PRISTINE,
    STALE,
    assess,
    change_tree,
    command_hint,
    locate_tree,
    plan_change,
)
from viewreplay.wheelbuild import build_wheel
from viewreplay import aotdispatch, export, prefixcheck, rebase, staging  # noqa: I001 - series tools (issue 7)


def _repo_root(args: argparse.Namespace) -> Path:
    """The repository given by ``--repo``, or found by walking up from the cwd."""
    return args.repo.resolve() if args.repo else find_repo(Path.cwd())


def _pinned_wheel(repo: Repo, wheel: Path | None) -> Path:
    """The checked pinned wheel: ``--wheel``, else the one in ``.cache/wheels`` (pip-downloaded there if absent)."""
    return obtain_wheel(repo.pin, wheel, repo.root / WHEEL_CACHE)


def cmd_apply(args: argparse.Namespace) -> int:
    """Apply (or revert) the series and overlay on a tree, or with --check only report whether it would work."""
    repo = load_repo(_repo_root(args), args.pin)
    tree = locate_tree(args.tree, repo.pin)
    action = "revert" if args.revert else "apply"

    def wheel() -> Path:
        return _pinned_wheel(repo, args.wheel)

    if args.check:
        print(f"{tree.root}: {assess(repo, tree).describe()}")
        try:
            plan_change(repo, tree, revert=args.revert, wheel=wheel)
        except ViewReplayError as exc:
            print(f"{action} would be refused")
            print(f"viewreplay apply --check: {exc}", file=sys.stderr)
            return 1
        print(f"{action} would succeed")
        return 0
    plan = change_tree(repo, tree, revert=args.revert, wheel=wheel)
    done = "reverted" if args.revert else "applied"
    print(
        f"{tree.root}: {done} {len(repo.patches)} patch(es) and {len(repo.overlay)} overlay file(s); "
        f"{len(plan.writes) + len(plan.deletes)} file(s) changed"
    )
    for rel in plan.from_wheel:
        print(f"  {rel}: restored from the pinned wheel (the current series' hooks do not explain it)")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """Print whether the tree is pristine, applied, applied with a stale overlay or hooks, or partial (with reasons)."""
    repo = load_repo(_repo_root(args), args.pin)
    tree = locate_tree(args.tree, repo.pin)
    assessment = assess(repo, tree)
    print(f"{tree.root}: {assessment.describe()} (torch {tree.version}, {tree.form})")
    for problem in assessment.problems:
        print(f"  {problem}")
    if assessment.state == STALE:
        print(f"  to bring it up to date: {command_hint(repo, 'apply', '--revert', tree.root)}; "
              f"then: {command_hint(repo, 'apply', tree.root)}")
    return 0 if assessment.state in (PRISTINE, APPLIED) else 1


def cmd_pin_update(args: argparse.Namespace) -> int:
    """Rewrite the pin's pin.toml [files] with the pristine wheel's hashes of every file the series touches."""
    repo = load_repo(_repo_root(args), args.pin, require_pinned_hashes=False)
    wheel = _pinned_wheel(repo, args.wheel)
    hashes = {}
    with zipfile.ZipFile(wheel) as archive:
        members = set(archive.namelist())
        for rel in repo.touched_files:
            if rel not in members:
                patches = [p.name for p in repo.patches if rel in repo.targets[p]]
                raise ViewReplayError(f"{wheel}: has no {rel} (patched by {', '.join(patches)})")
            hashes[rel] = sha256_bytes(archive.read(rel))
    write_pin_files(repo.pin.path, hashes)
    print(f"{repo.pin.path}: pinned {len(hashes)} file(s) from {wheel.name}")
    return 0


def cmd_build_wheel(args: argparse.Namespace) -> int:
    """Build the custom wheel into --out and print its path."""
    repo = load_repo(_repo_root(args), args.pin)
    built = build_wheel(repo, _pinned_wheel(repo, args.wheel), args.out.resolve())
    print(built)
    return 0


def cmd_make_checkout(args: argparse.Namespace) -> int:
    """Create the stand-in source checkout from the pinned wheel."""
    repo = load_repo(_repo_root(args), args.pin)
    make_checkout(repo.pin, _pinned_wheel(repo, args.wheel), args.dir.resolve(), all_files=args.all_files)
    print(f"{args.dir}: git checkout of torch {repo.pin.version}, tagged {repo.pin.upstream_tag}")
    return 0


def _require_pythons(*pythons: str | Path) -> None:
    """Refuse, in one line, an interpreter that does not exist (a venv not made yet)."""
    for python in pythons:
        if not Path(python).is_file():
            raise ViewReplayError(f"{python}: no such interpreter; make the venvs first (make, or make PIN=VERSION)")


def cmd_report(args: argparse.Namespace) -> int:
    """Print the seed cases on stock and patched torch, side by side."""
    _require_pythons(args.stock_python, args.patched_python)
    print(run_report(args.stock_python, args.patched_python, args.backend or ["aot_eager", "inductor"]))
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    """Print how many sweep programs carry AsStridedBackward0 on stock and on patched torch."""
    _require_pythons(args.stock_python, args.patched_python)
    print(run_sweep(args.stock_python, args.patched_python, args.backend))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    """Time every workload on eager, stock-compiled and patched-compiled torch; write the results."""
    from viewreplay.bench import BenchConfig, check_readme, run_bench, summary_line, update_readme, write_results

    _require_pythons(args.stock_python, args.patched_python)
    if args.readme is not None:
        check_readme(args.readme)  # before a run of minutes, not after it
    mode = "quick" if args.quick else "full" if args.full else "default"
    config = BenchConfig.for_mode(
        mode,
        rounds=args.rounds,
        compile_repeats=args.compile_repeats,
        threads=args.threads,
        workloads=tuple(args.workload) if args.workload else None,
        backends=tuple(args.backend) if args.backend else None,
        regen=False if args.no_regen else None,
        patched_config=tuple(args.patched_config) if args.patched_config else None,
    )
    results = run_bench(args.stock_python, args.patched_python, config, check_venvs=not args.no_venv_check)
    rows, written = write_results(results, args.out)
    for row in rows:
        print(summary_line(row))
    for path in written:
        print(f"wrote {path}")
    if args.readme is not None:
        update_readme(args.readme, results, rows)
        print(f"updated the bench section of {args.readme}")
    print(f"bench runtime {results['runtime_s']:.0f}s")
    return 0


def _add_bench_parser(add: Callable[..., argparse.ArgumentParser]) -> None:
    from viewreplay.bench import BACKENDS, WORKLOAD_NAMES

    bench = add("bench", cmd_bench, "benchmark eager vs stock vs patched torch.compile, interleaved in one run")
    bench.add_argument("--stock-python", required=True, metavar="PYTHON", help="interpreter of the stock torch venv")
    bench.add_argument("--patched-python", required=True, metavar="PYTHON", help="interpreter of the patched torch venv")
    bench.add_argument("--out", type=Path, default=Path("benchmarks/results"), metavar="DIR",
                       help="results directory: latest.md, latest.png, latest.json (default: benchmarks/results)")
    size = bench.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="smallest sizes, 3 rounds, 1 cold compile (smoke test)")
    size.add_argument("--full", action="store_true", help="more sizes, 75 rounds, 3 cold compiles")
    bench.add_argument("--workload", action="append", choices=WORKLOAD_NAMES, help="repeatable (default: all)")
    bench.add_argument("--backend", action="append", choices=BACKENDS, help="repeatable (default: both)")
    bench.add_argument("--rounds", type=int, metavar="N", help="timing rounds per workload (overrides the mode)")
    bench.add_argument("--compile-repeats", type=int, metavar="N", help="cold compiles per side (overrides the mode)")
    bench.add_argument("--threads", type=int, metavar="N", help="torch.set_num_threads in the workers (default 1)")
    bench.add_argument("--no-regen", action="store_true", help="skip the per-output regeneration micro benchmark")
    bench.add_argument("--patched-config", action="append", metavar="FLAG=VALUE",
                       help="set a boolean view_replay.config flag in the patched worker, e.g. "
                            "hide_multi_output_view_aliasing=True (repeatable)")
    bench.add_argument("--readme", type=Path, metavar="FILE",
                       help="replace FILE's bench section (between the <!-- bench:begin ... --> and "
                            "<!-- bench:end --> lines) with this run's noise, ratios and regeneration table")
    bench.add_argument("--no-venv-check", action="store_true",
                       help="do not require the stock venv to lack, and the patched one to have, view_replay")




def cmd_checkout_series(args: argparse.Namespace) -> int:
    """Make a checkout with one commit per patch (per PR of the stack)."""
    repo = load_repo(_repo_root(args), args.pin)
    subjects = export.checkout_series(repo, _pinned_wheel(repo, args.wheel), args.dir.resolve())
    print(f"{args.dir}: {repo.pin.upstream_tag} + {len(subjects)} commit(s):")
    print("\n".join(f"  {s}" for s in subjects))
    print(f"edit there (commit --fixup=<PR commit>, then rebase -i --autosquash {repo.pin.upstream_tag}), "
          f"then: {command_hint(repo, 'export', args.dir.resolve())}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Write the checkout's commits back to patches/, its tip to torch_overlay/ and upstream/test/ (or --check)."""
    root = _repo_root(args)
    if args.dir is None and not args.check:
        raise ViewReplayError("export needs the checkout DIR (only --check runs without one)")
    if args.check:
        status = 0
        if args.dir is not None:
            repo = load_repo(root, args.pin, require_pinned_hashes=False)
            result = export.compute_export(repo, args.dir.resolve(), numbering=args.numbering)
            diff = export.diff_export(repo, result)
            if diff:
                print(diff, end="")
                print(f"viewreplay export --check: {repo.root} differs from what export would write", file=sys.stderr)
                status = 1
            else:
                print(f"{repo.root}: {len(result.series)} patch(es), torch_overlay/ and upstream/test/ up to date "
                      f"with {args.dir}")
        problems, unchecked = export.check_pins(root, root / WHEEL_CACHE)
        for problem in problems:
            print(f"viewreplay export --check: {problem}", file=sys.stderr)
        for version in unchecked:
            print(f"pin {version}: no wheel in {WHEEL_CACHE}/, its series not applied "
                  f"(viewreplay make-checkout --pin {version} downloads it)")
        if not problems:
            print(f"{root}: every pin's series loads, composes and builds the repository's tip"
                  + (", and applies on its wheel with minimal own forms" if not unchecked else ""))
        return 1 if problems else status
    repo = load_repo(root, args.pin, require_pinned_hashes=False)
    result = export.compute_export(repo, args.dir.resolve(), numbering=args.numbering)
    changed = export.write_export(repo, result)
    print(f"{repo.root}: {len(changed)} file(s) written" + "".join(f"\n  {c}" for c in changed))
    touched = set(load_repo(repo.root, repo.pin.version, require_pinned_hashes=False).touched_files)
    if touched != set(repo.pin.files):
        print(f"the set of touched upstream files changed: run '{command_hint(repo, 'pin-update')}'")
    return 0


def cmd_stage_upstream(args: argparse.Namespace) -> int:
    """Write the PR-sized format-patch series for upstream."""
    repo = load_repo(_repo_root(args), args.pin)
    wheel = None if args.checkout else _pinned_wheel(repo, args.wheel)
    patches, left_out = staging.stage_upstream(
        repo, args.out.resolve(), wheel=wheel, checkout=args.checkout.resolve() if args.checkout else None
    )
    print(f"{args.out}: {len(patches)} patch(es) against {repo.pin.upstream_tag}")
    print("\n".join(f"  {p.name}" for p in patches))
    for note in left_out:
        print(f"note: {note} (stage with --checkout on a PyTorch clone to include it)")
    return 0


def cmd_check_prefixes(args: argparse.Namespace) -> int:
    """Apply every prefix of the staged stack with git am; each PR's tests fail before it and pass with it, and
    every PR's tests pass together on the whole stack (or, with --pr, one PR's tests only)."""
    repo = load_repo(_repo_root(args), args.pin)
    if args.pr is not None:
        prefixcheck.resolve_pr(repo, args.pr)  # an unknown name before minutes of staging
    total = len(repo.patches)
    what = (prefixcheck.HEADER if args.pr is None
            else f"the prefixes before {args.pr} are applied untested; its tests must fail before it and pass with it")
    print(f"check-prefixes: {what}", flush=True)
    started = time.monotonic()
    results, stack = prefixcheck.check_prefixes(
        repo, _pinned_wheel(repo, args.wheel), args.stock_python,
        checkout=args.checkout.resolve() if args.checkout else None, timeout=args.timeout,
        pr=args.pr, jobs=args.jobs, progress=lambda text: print(text, flush=True),
    )
    if args.pr is not None:  # its result was printed as progress
        print(f"{args.pr}: {'its tests fail before it and pass with it' if results[0].ok else 'FAIL'} "
              f"({time.monotonic() - started:.0f} s)")
        return 0 if results[0].ok else 1
    if stack is not None:
        print(prefixcheck.format_stack(stack, total))
    ok = len(results) == total and all(r.ok for r in results) and stack is not None and stack.ok
    print(f"{sum(r.ok for r in results)} of {total} prefix(es) apply, and their tests fail before the PR and pass "
          f"with it; the whole stack's tests: {'pass' if stack and stack.ok else 'FAIL' if stack else 'not run'} "
          f"({time.monotonic() - started:.0f} s)")
    return 0 if ok else 1


def cmd_run_aotdispatch(args: argparse.Namespace) -> int:
    """Run upstream's test_aotdispatch.py on stock and patched torch and compare: the subset, from a checkout at the
    pinned tag (--pytorch-src), or every test of a folder's transcription (--tests-dir)."""
    root = _repo_root(args)
    sides = aotdispatch.Sides(args.stock_python, args.patched_python, args.timeout, args.jobs)
    if args.tests_dir is not None:
        if args.subset is not None:
            raise ViewReplayError("--subset goes with --pytorch-src (--tests-dir runs every test, or those of --classes)")
        table, regressed = aotdispatch.run_tests_dir(
            args.tests_dir.resolve(), args.expectations or root / aotdispatch.EXPECTATIONS_FILE,
            root / staging.TEST_PATCH_DIR, sides, args.classes or (),
        )
    else:
        if args.expectations is not None or args.classes is not None:
            raise ViewReplayError("--expectations and --classes go with --tests-dir")
        table, regressed = _run_aotdispatch_subset(args, root, sides)
    print(table)
    return 1 if regressed else 0


def _run_aotdispatch_subset(args: argparse.Namespace, root: Path, sides: aotdispatch.Sides) -> tuple[str, bool]:
    """The subset from a PyTorch checkout, its test file as the tag's or with the stack's test patches."""
    repo = load_repo(root, args.pin)
    subset_path = args.subset or root / aotdispatch.SUBSET_FILE
    test_file = aotdispatch.load_subset(subset_path).test_file
    test_patches = [
        pr.test_patch
        for pr in staging.load_prs(repo)
        if pr.test_patch is not None and test_file in staging.upstream_test_targets(pr.test_patch)
    ]
    return aotdispatch.run_aotdispatch(repo.pin, args.pytorch_src.resolve(), subset_path, sides, test_patches)


def _class_list(text: str) -> tuple[str, ...]:
    """--classes A,B: the test classes, as the test ids name them."""
    classes = tuple(c.strip() for c in text.split(",") if c.strip())
    if not classes:
        raise argparse.ArgumentTypeError("no class named")
    return classes


def cmd_rebase_check(args: argparse.Namespace) -> int:
    """Try every hunk of the series on another torch version and say which fail and why."""
    repo = load_repo(_repo_root(args), args.pin, require_pinned_hashes=False)
    if (args.wheel is None) == (args.checkout is None):
        raise ViewReplayError("give exactly one of --wheel NEW.whl and --checkout DIR")
    if args.wheel is not None and not args.wheel.is_file():
        raise ViewReplayError(f"{args.wheel}: file not found")
    if args.checkout is not None and not (args.checkout / "torch").is_dir():
        raise ViewReplayError(f"{args.checkout}: not a torch tree (no torch/)")
    version, results = rebase.rebase_check(repo, wheel=args.wheel, checkout=args.checkout)
    print(rebase.format_report(version, str(args.wheel or args.checkout), results))
    return 1 if any(r.problems for r in results) else 0


def _add_series_parsers(add: Callable[..., argparse.ArgumentParser]) -> None:
    """checkout-series, export, stage-upstream, check-prefixes, run-aotdispatch, rebase-check."""
    wheel_help = WHEEL_HELP
    series = add("checkout-series", cmd_checkout_series,
                 "make a git checkout of the pinned torch with one commit per patch (per PR of the upstream stack)")
    series.add_argument("--wheel", type=Path, metavar="PATH", help=wheel_help)
    series.add_argument("dir", type=Path, metavar="DIR", help="new (or empty) directory")

    exp = add("export", cmd_export,
              "write a checkout-series checkout's commits back to patches/ and its tip to torch_overlay/ and upstream/test/")
    exp.add_argument("dir", type=Path, nargs="?", metavar="DIR",
                     help="the checkout (made by checkout-series); optional with --check")
    exp.add_argument("--check", action="store_true",
                     help="write nothing; exit 1 with a diff if the repo differs from DIR, or if any pin's series "
                          "does not apply on its wheel in .cache/wheels or carries own forms that are not minimal")
    exp.add_argument("--numbering", choices=["auto", "numbered", "none"], default="auto",
                     help="[PATCH n/m] or [PATCH] subjects (default: as the current patches)")

    stage = add("stage-upstream", cmd_stage_upstream,
                "stage the series (one patch per PR) as [PATCH n/m] git format-patch commits against the pinned tag")
    stage.add_argument("--out", type=Path, required=True, metavar="DIR", help="new (or empty) output directory")
    stage.add_argument("--checkout", type=Path, metavar="DIR",
                       help="a PyTorch git checkout with the pinned tag (a temporary worktree is used; default: make-checkout)")
    stage.add_argument("--wheel", type=Path, metavar="PATH", help=wheel_help)

    prefixes = add("check-prefixes", cmd_check_prefixes,
                   "stage the stack; apply each prefix with git am: its PR's tests fail before it and pass with it, and all "
                   "PRs' tests pass together on the whole stack")
    prefixes.add_argument("--stock-python", required=True, metavar="PYTHON",
                          help="interpreter of the stock torch venv (its torch is hard-linked, never modified)")
    prefixes.add_argument("--checkout", type=Path, metavar="DIR",
                          help="a PyTorch git checkout with the pinned tag (default: make-checkout)")
    prefixes.add_argument("--wheel", type=Path, metavar="PATH", help=wheel_help)
    prefixes.add_argument("--timeout", type=float, default=1800, metavar="SECONDS",
                          help="per pytest run (default: 1800)")
    prefixes.add_argument("--pr", metavar="NAME",
                          help="check one PR: apply the prefixes before it untested, then its tests must fail before "
                               "it and pass with it (NAME: the patch's name without number and .patch, e.g. "
                               "same-object-outputs, or its file name)")
    prefixes.add_argument("--jobs", type=int, default=2, metavar="N",
                          help="pytest processes at once, each with its own scratch torch (default: 2)")

    aot = add("run-aotdispatch", cmd_run_aotdispatch,
              "run upstream's test_aotdispatch.py on stock and patched torch and compare (exit 1 on a regression)")
    source = aot.add_mutually_exclusive_group(required=True)
    source.add_argument("--pytorch-src", type=Path, metavar="DIR",
                        help="PyTorch checkout at the pinned tag (its test file as the tag's, or with the stack's test "
                             "patches): runs the subset")
    source.add_argument("--tests-dir", type=Path, metavar="DIR",
                        help="a folder holding a transcription of test_aotdispatch.py (not checked against the tag): "
                             "runs every test, or those of --classes")
    aot.add_argument("--stock-python", required=True, metavar="PYTHON", help="interpreter of the stock torch venv")
    aot.add_argument("--patched-python", required=True, metavar="PYTHON", help="interpreter of the patched torch venv")
    aot.add_argument("--subset", type=Path, metavar="TOML", help="subset file (default: tools/aotdispatch_subset.toml)")
    aot.add_argument("--expectations", type=Path, metavar="TOML",
                     help=f"with --tests-dir: the declared expectation changes (default: {aotdispatch.EXPECTATIONS_FILE})")
    aot.add_argument("--classes", type=_class_list, metavar="A,B",
                     help="with --tests-dir: run only these test classes (as the test ids name them)")
    aot.add_argument("--jobs", type=int, default=1, metavar="N", help="pytest-xdist workers per interpreter (default: 1)")
    aot.add_argument("--timeout", type=float, default=3600, metavar="SECONDS", help="per interpreter (default: 3600)")

    rebase_check = add("rebase-check", cmd_rebase_check,
                       "try every hunk of the series on another torch version and report which fail and why")
    rebase_check.add_argument("--wheel", type=Path, metavar="NEW.whl", help="the new torch wheel")
    rebase_check.add_argument("--checkout", type=Path, metavar="DIR", help="a source checkout of the new version")


WHEEL_HELP = f"the pin's upstream wheel (default: the one in {WHEEL_CACHE}/, pip-downloaded there if absent)"


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser with one subcommand per operation."""
    parser = argparse.ArgumentParser(
        prog="viewreplay",
        description="Apply the view-replay patch series to the pinned PyTorch; build and check the custom wheel.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, handler: Callable[[argparse.Namespace], int], help_text: str) -> argparse.ArgumentParser:
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        sub.add_argument(
            "--repo",
            type=Path,
            metavar="DIR",
            help="patch-queue repository (default: nearest parent of the cwd with pins/ and patches/series)",
        )
        sub.add_argument(
            "--pin",
            metavar="VERSION",
            help="the pinned torch release to work on, one of pins/*/ (default: the newest)",
        )
        sub.set_defaults(handler=handler)
        return sub

    tree_help = "site-packages dir containing torch/, the torch/ package dir, or a source checkout root"
    apply = add("apply", cmd_apply, "apply the patch series and overlay to a torch tree (all-or-nothing)")
    apply.add_argument("tree", type=Path, metavar="TREE", help=tree_help)
    apply.add_argument("--check", action="store_true", help="dry run: report the state and whether it would succeed")
    apply.add_argument("--revert", action="store_true",
                       help="revert instead of apply: back to pristine, also a tree applied with another revision "
                            "of the series (a stale overlay or hooks)")
    apply.add_argument("--wheel", type=Path, metavar="PATH",
                       help="with --revert: the pin's upstream wheel, read only for the pinned files the current series "
                            f"does not explain (default: the one in {WHEEL_CACHE}/, pip-downloaded there if absent)")

    status = add("status", cmd_status,
                 "report whether a torch tree is pristine, applied, applied with a stale overlay or hooks, or partial "
                 "(exit 0: pristine or applied)")
    status.add_argument("tree", type=Path, metavar="TREE", help=tree_help)

    pin_update = add("pin-update", cmd_pin_update, "recompute the pin's pin.toml [files] from its upstream wheel")
    pin_update.add_argument("--wheel", type=Path, metavar="PATH", help=WHEEL_HELP)

    build = add("build-wheel", cmd_build_wheel, "build the custom torch wheel")
    build.add_argument("--wheel", type=Path, metavar="PATH", help=WHEEL_HELP)
    build.add_argument("--out", type=Path, default=Path("dist"), metavar="DIR", help="output directory (default: dist)")

    checkout = add("make-checkout", cmd_make_checkout, "make a git checkout of the pinned wheel's torch/ files")
    checkout.add_argument("--wheel", type=Path, metavar="PATH", help=WHEEL_HELP)
    checkout.add_argument("dir", type=Path, metavar="DIR", help="new (or empty) directory")
    checkout.add_argument("--all-files", action="store_true", help="extract every file under torch/, not just *.py")

    for name, handler, help_text in (
        ("report", cmd_report, "run the seed cases on stock and patched torch and print them side by side"),
        ("sweep", cmd_sweep, "run the view-op sweep on stock and patched torch and compare as_strided fallbacks"),
    ):
        sub = add(name, handler, help_text)
        sub.add_argument("--stock-python", required=True, metavar="PYTHON", help="interpreter of the stock torch venv")
        sub.add_argument("--patched-python", required=True, metavar="PYTHON", help="interpreter of the patched torch venv")
    subparsers.choices["report"].add_argument(
        "--backend", action="append", metavar="NAME", help="torch.compile backend, repeatable (default: aot_eager and inductor)"
    )
    subparsers.choices["sweep"].add_argument("--backend", default="aot_eager", metavar="NAME", help="torch.compile backend")
    _add_bench_parser(add)
    _add_series_parsers(add)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return 0 on success, 1 on refusal/failure (argparse exits 2 on usage errors)."""
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except ViewReplayError as exc:
        print(f"viewreplay {args.command}: error: {exc}", file=sys.stderr)
        return 1
