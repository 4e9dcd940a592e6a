"""Command-line interface: ``viewreplay {apply,status,pin-update,build-wheel,make-checkout,report,sweep}``."""

from __future__ import annotations

import argparse
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from viewreplay import ViewReplayError
from viewreplay.checkout import make_checkout
from viewreplay.pin import find_repo, load_repo, sha256_bytes, write_pin_files
from viewreplay.pinnedwheel import obtain_wheel
from viewreplay.report import run_report, run_sweep
from viewreplay.tree import (
    APPLIED,
    PRISTINE,
    assess,
    change_tree,
    locate_tree,
    plan_change,
)
from viewreplay.wheelbuild import build_wheel


def _repo_root(args: argparse.Namespace) -> Path:
    """The repository given by ``--repo``, or found by walking up from the cwd."""
    return args.repo.resolve() if args.repo else find_repo(Path.cwd())


def cmd_apply(args: argparse.Namespace) -> int:
    """Apply (or revert) the series and overlay on a tree, or with --check only report whether it would work."""
    repo = load_repo(_repo_root(args))
    tree = locate_tree(args.tree, repo.pin)
    action = "revert" if args.revert else "apply"
    if args.check:
        print(f"{tree.root}: {assess(repo, tree).state}")
        try:
            plan_change(repo, tree, revert=args.revert)
        except ViewReplayError as exc:
            print(f"{action} would be refused")
            print(f"viewreplay apply --check: {exc}", file=sys.stderr)
            return 1
        print(f"{action} would succeed")
        return 0
    plan = change_tree(repo, tree, revert=args.revert)
    done = "reverted" if args.revert else "applied"
    print(
        f"{tree.root}: {done} {len(repo.patches)} patch(es) and {len(repo.overlay)} overlay file(s); "
        f"{len(plan.writes) + len(plan.deletes)} file(s) changed"
    )
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """Print whether the tree is pristine, applied or partial (with reasons)."""
    repo = load_repo(_repo_root(args))
    tree = locate_tree(args.tree, repo.pin)
    assessment = assess(repo, tree)
    print(f"{tree.root}: {assessment.state} (torch {tree.version}, {tree.form})")
    for problem in assessment.problems:
        print(f"  {problem}")
    return 0 if assessment.state in (PRISTINE, APPLIED) else 1


def cmd_pin_update(args: argparse.Namespace) -> int:
    """Rewrite pin.toml's [files] with the pristine wheel's hashes of every file the series touches."""
    repo = load_repo(_repo_root(args), require_pinned_hashes=False)
    with tempfile.TemporaryDirectory(prefix="viewreplay-wheel-") as tmp:
        wheel = obtain_wheel(repo.pin, args.wheel, Path(tmp))
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
    repo = load_repo(_repo_root(args))
    with tempfile.TemporaryDirectory(prefix="viewreplay-wheel-") as tmp:
        wheel = obtain_wheel(repo.pin, args.wheel, Path(tmp))
        built = build_wheel(repo, wheel, args.out.resolve())
    print(built)
    return 0


def cmd_make_checkout(args: argparse.Namespace) -> int:
    """Create the stand-in source checkout from the pinned wheel."""
    repo = load_repo(_repo_root(args))
    with tempfile.TemporaryDirectory(prefix="viewreplay-wheel-") as tmp:
        wheel = obtain_wheel(repo.pin, args.wheel, Path(tmp))
        make_checkout(repo.pin, wheel, args.dir.resolve(), all_files=args.all_files)
    print(f"{args.dir}: git checkout of torch {repo.pin.version}, tagged {repo.pin.upstream_tag}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Print the seed cases on stock and patched torch, side by side."""
    print(run_report(args.stock_python, args.patched_python, args.backend or ["aot_eager", "inductor"]))
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    """Print how many sweep programs carry AsStridedBackward0 on stock and on patched torch."""
    print(run_sweep(args.stock_python, args.patched_python, args.backend))
    return 0


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
            help="patch-queue repository (default: nearest parent of the cwd with pin.toml and patches/series)",
        )
        sub.set_defaults(handler=handler)
        return sub

    tree_help = "site-packages dir containing torch/, the torch/ package dir, or a source checkout root"
    apply = add("apply", cmd_apply, "apply the patch series and overlay to a torch tree (all-or-nothing)")
    apply.add_argument("tree", type=Path, metavar="TREE", help=tree_help)
    apply.add_argument("--check", action="store_true", help="dry run: report the state and whether it would succeed")
    apply.add_argument("--revert", action="store_true", help="revert instead of apply")

    status = add("status", cmd_status, "report whether a torch tree is pristine, applied or partial")
    status.add_argument("tree", type=Path, metavar="TREE", help=tree_help)

    pin_update = add("pin-update", cmd_pin_update, "recompute pin.toml [files] from the pinned wheel")
    pin_update.add_argument("--wheel", type=Path, metavar="PATH", help="pinned wheel (default: pip download it)")

    build = add("build-wheel", cmd_build_wheel, "build the custom torch wheel")
    build.add_argument("--wheel", type=Path, metavar="PATH", help="pinned wheel (default: pip download it)")
    build.add_argument("--out", type=Path, default=Path("dist"), metavar="DIR", help="output directory (default: dist)")

    checkout = add("make-checkout", cmd_make_checkout, "make a git checkout of the pinned wheel's torch/ files")
    checkout.add_argument("--wheel", type=Path, metavar="PATH", help="pinned wheel (default: pip download it)")
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return 0 on success, 1 on refusal/failure (argparse exits 2 on usage errors)."""
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except ViewReplayError as exc:
        print(f"viewreplay {args.command}: error: {exc}", file=sys.stderr)
        return 1
