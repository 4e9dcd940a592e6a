"""``viewreplay report`` and ``viewreplay sweep``: stock and patched torch, side by side.

Each runs a probe module (``viewreplay_harness.cases`` or ``viewreplay_harness.sweep``) under
the two interpreters and compares the JSON they print.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from viewreplay import ViewReplayError


def collect(python: str, module: str, args: list[str]) -> dict[str, Any]:
    """Run ``python -m module *args`` and return the JSON it prints."""
    cmd = [python, "-m", module, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ViewReplayError(
            f"{' '.join(cmd)} failed with exit code {proc.returncode}:\n{proc.stderr[-4000:]}"
        )
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise ViewReplayError(f"{' '.join(cmd)} printed no JSON report: {e}\n{proc.stdout[-2000:]}") from e


def _cell(record: dict[str, Any], recorded: bool) -> str:
    # Stock torch has no fallback point, so it records no reasons.
    if recorded:
        fallbacks = ", ".join(f"{k} x{v}" for k, v in sorted(record["fallbacks"].items())) or "-"
    else:
        fallbacks = "(not recorded)"
    ok = "" if record["values_equal"] and record["grad_equal"] else " MISMATCH-vs-eager"
    return f"{'/'.join(record['grad_fns'])} | {record['as_strided_nodes']} | {fallbacks}{ok}"


def render(stock: dict[str, Any], patched: dict[str, Any]) -> str:
    """A markdown table with one row per (case, backend, dynamic)."""
    lines = [
        f"stock:   torch {stock['torch']} (view_replay installed: {stock['view_replay']})",
        f"patched: torch {patched['torch']} (view_replay installed: {patched['view_replay']})",
        "",
        "| case | backend | dynamic | stock grad_fn | stock AsStrided | stock fallbacks "
        "| patched grad_fn | patched AsStrided | patched fallbacks |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    patched_by_key = {
        (r["case"], r["backend"], r["dynamic"]): r for r in patched["records"]
    }
    for s in stock["records"]:
        key = (s["case"], s["backend"], s["dynamic"])
        p = patched_by_key.get(key)
        if p is None:
            raise ViewReplayError(f"patched run has no record for {key}")
        lines.append(f"| {s['case']} | {s['backend']} | {s['dynamic']} | {_cell(s, stock['view_replay'])} | {_cell(p, patched['view_replay'])} |")
    return "\n".join(lines)


def _collect_both(
    stock_python: str, patched_python: str, module: str, args: list[str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    stock = collect(stock_python, module, args)
    patched = collect(patched_python, module, args)
    if stock["view_replay"]:
        raise ViewReplayError(f"{stock_python} is not stock torch: it has the view_replay overlay")
    if not patched["view_replay"]:
        raise ViewReplayError(f"{patched_python} is not patched torch: view_replay is missing")
    return stock, patched


def run_report(stock_python: str, patched_python: str, backends: list[str]) -> str:
    """The seed cases' table."""
    args = [arg for backend in backends for arg in ("--backend", backend)]
    return render(*_collect_both(stock_python, patched_python, "viewreplay_harness.cases", args))


def run_sweep(stock_python: str, patched_python: str, backend: str) -> str:
    """The sweep's summary: programs whose compiled outputs carry extra AsStridedBackward0 nodes."""
    stock, patched = _collect_both(
        stock_python, patched_python, "viewreplay_harness.sweep", ["--backend", backend]
    )
    lines = [f"sweep: {len(stock['counts'])} programs, backend={backend}, dynamic=True, 3 sizes each"]
    for label, run in (("stock", stock), ("patched", patched)):
        bad = sorted(name for name, n in run["counts"].items() if n > 0)
        nodes = sum(run["counts"].values())
        lines.append(
            f"{label:8s} torch {run['torch']}: {len(bad)} programs with AsStridedBackward0 "
            f"beyond eager ({nodes} nodes)"
        )
        if bad:
            lines.append("         " + ", ".join(bad))
    return "\n".join(lines)
