"""``viewreplay report``: the seed cases on stock and on patched torch, side by side."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


class ReportError(RuntimeError):
    pass


def collect(python: str, backends: list[str]) -> dict[str, Any]:
    """Run ``python -m viewreplay.cases`` under ``python`` and return its JSON."""
    cmd = [python, "-m", "viewreplay.cases"]
    for backend in backends:
        cmd += ["--backend", backend]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ReportError(
            f"{' '.join(cmd)} failed with exit code {proc.returncode}:\n{proc.stderr[-4000:]}"
        )
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise ReportError(f"{' '.join(cmd)} printed no JSON report: {e}\n{proc.stdout[-2000:]}") from e


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
            raise ReportError(f"patched run has no record for {key}")
        lines.append(f"| {s['case']} | {s['backend']} | {s['dynamic']} | {_cell(s, stock['view_replay'])} | {_cell(p, patched['view_replay'])} |")
    return "\n".join(lines)


def run(stock_python: str, patched_python: str, backends: list[str]) -> int:
    try:
        stock = collect(stock_python, backends)
        patched = collect(patched_python, backends)
        if stock["view_replay"]:
            raise ReportError(f"{stock_python} is not stock torch: it has the view_replay overlay")
        if not patched["view_replay"]:
            raise ReportError(f"{patched_python} is not patched torch: view_replay is missing")
        print(render(stock, patched))
    except ReportError as e:
        print(f"viewreplay report: {e}", file=sys.stderr)
        return 1
    return 0
