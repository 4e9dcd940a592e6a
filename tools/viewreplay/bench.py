"""``viewreplay bench``: eager vs stock-compiled vs patched-compiled, measured side by side.

The orchestrator (this module; it does not import torch) starts one long-lived
worker per venv (``python -m viewreplay_harness.bench_worker``, see its docstring for the
methods) and drives both over stdin/stdout JSON, one workload at a time:

  1. cold compile, ``--compile-repeats`` times, alternating stock/patched;
  2. probe (autograd nodes, AsStridedBackward0 nodes, backward peak memory, values vs eager);
  3. ``--rounds`` timing rounds; in each, every (size, variant) is measured in both
     workers back to back, alternating which goes first (ABBA). See Note [Paired
     measurements]: the machine has slow and fast phases lasting seconds, so only
     measurements taken next to each other are compared;

then the regeneration micro benchmark (per aliased output: the runtime regeneration
vs one eager view chain on the same base). It writes ``latest.md``, ``latest.png``
(matplotlib, if importable), ``latest.json`` (a summary) and ``latest-rounds.json`` (every round, not committed) under ``--out`` and prints one
summary line per workload row.

Everything below ``run_bench`` that aggregates or formats is pure Python, so it is
tested without torch (test/tools/test_bench.py).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, IO

from viewreplay import ViewReplayError


WORKLOAD_NAMES = ("f", "g", "h", "slice_t", "slice_t_cgrad", "three_views", "dtensor_view", "moe_split", "block")
REGEN_WORKLOAD_NAMES = ("g", "slice_t")
BACKENDS = ("aot_eager", "inductor")
SIDES = ("stock", "patched")


@dataclasses.dataclass(frozen=True)
class BenchConfig:
    mode: str = "default"  # quick | default | full: sizes per workload (bench_worker.Workload)
    rounds: int = 35
    compile_repeats: int = 2
    regen_rounds: int = 3
    target_s: float = 0.01  # seconds per measurement (calibrated iterations)
    threads: int = 1
    workloads: tuple[str, ...] = WORKLOAD_NAMES
    backends: tuple[str, ...] = BACKENDS
    regen: bool = True
    # view_replay.config flags set in the patched worker ("FLAG=True|False")
    patched_config: tuple[str, ...] = ()

    @classmethod
    def for_mode(cls, mode: str, **overrides: Any) -> "BenchConfig":
        presets = {
            # Many short paired rounds beat few long ones here (Note [Paired measurements]).
            "quick": dict(rounds=3, compile_repeats=1, regen_rounds=1, target_s=0.01),
            "default": dict(rounds=35, compile_repeats=2, regen_rounds=3, target_s=0.01),
            "full": dict(rounds=75, compile_repeats=3, regen_rounds=5, target_s=0.01),
        }
        values: dict[str, Any] = {"mode": mode, **presets[mode]}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


# ---------------------------------------------------------------------------
# Workers


class WorkerProcess:
    """One ``python -m viewreplay_harness.bench_worker`` under a venv's interpreter."""

    def __init__(self, side: str, python: str, config: BenchConfig, log_dir: Path) -> None:
        self.side = side
        self.python = python
        self.log_path = log_dir / f"worker-{side}.log"
        self._log: IO[str] = open(self.log_path, "w")
        env = dict(os.environ)
        env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"  # no compile worker pool: steadier compile times
        env.setdefault("PYTHONHASHSEED", "0")
        tools_dir = str(Path(__file__).resolve().parents[1])
        env["PYTHONPATH"] = tools_dir + os.pathsep + env.get("PYTHONPATH", "")
        cmd = [
            python, "-m", "viewreplay_harness.bench_worker",
            "--mode", config.mode, "--target-s", str(config.target_s), "--threads", str(config.threads),
        ]
        if side == "patched":
            for setting in config.patched_config:
                cmd += ["--view-replay-config", setting]
        try:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True, env=env
            )
        except OSError as e:
            raise ViewReplayError(f"cannot start {python}: {e}") from e

    def send(self, cmd: str, **kwargs: Any) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps({"cmd": cmd, **kwargs}) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise ViewReplayError(self._died()) from None

    def receive(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise ViewReplayError(self._died())
        return json.loads(line)

    def request(self, cmd: str, **kwargs: Any) -> dict[str, Any]:
        self.send(cmd, **kwargs)
        return self.receive()

    def _died(self) -> str:
        self.proc.wait()
        self._log.flush()
        tail = self.log_path.read_text()[-3000:]
        return f"{self.side} worker ({self.python}) exited with code {self.proc.returncode}:\n{tail}"

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send("exit")
                self.proc.wait(timeout=60)
            except (ViewReplayError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def round_order(round_index: int) -> tuple[str, str]:
    """ABBA: which side goes first alternates round by round."""
    return SIDES if round_index % 2 == 0 else SIDES[::-1]


# ---------------------------------------------------------------------------
# Raw results: one record per (workload, backend); filled by run_bench, read by summarize.


def new_record(workload: str, backend: str) -> dict[str, Any]:
    return {
        "workload": workload,
        "backend": backend,
        "compile_s": {side: [] for side in SIDES},
        # seconds inside view_replay's hooks during each cold compile (patched worker only)
        "compile_hooks_s": [],
        "error": {side: None for side in SIDES},
        "probe": {side: {} for side in SIDES},
        # rounds[side] = list of {size: {variant: {fwd_bwd_s, bwd_s, number}}}
        "rounds": {side: [] for side in SIDES},
    }


def run_bench(
    stock_python: str,
    patched_python: str,
    config: BenchConfig,
    *,
    check_venvs: bool = True,
    progress: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
) -> dict[str, Any]:
    """Run every workload on both workers and return the raw results (JSON-able)."""
    started = time.perf_counter()
    load_at_start = os.getloadavg()
    log_dir = Path(tempfile.mkdtemp(prefix="viewreplay-bench-"))
    workers = {
        "stock": WorkerProcess("stock", stock_python, config, log_dir),
        "patched": WorkerProcess("patched", patched_python, config, log_dir),
    }
    try:
        for w in workers.values():
            w.send("hello")
        hello = {side: w.receive() for side, w in workers.items()}
        for side, info in hello.items():
            if "error" in info:
                raise ViewReplayError(f"{side} worker: {info['error']}")
        if check_venvs:
            if hello["stock"]["view_replay"]:
                raise ViewReplayError(f"{stock_python} is not stock torch: it has the view_replay overlay")
            if not hello["patched"]["view_replay"]:
                raise ViewReplayError(f"{patched_python} is not patched torch: view_replay is missing")
        progress(f"bench: workers up (logs in {log_dir}); warming up both backends")
        for w in workers.values():  # not measured: both at once
            w.send("warmup", backends=list(config.backends))
        for side, w in workers.items():
            reply = w.receive()
            if "error" in reply:
                raise ViewReplayError(f"{side} worker warm-up failed: {reply['error']}")

        records = []
        for workload in config.workloads:
            for backend in config.backends:
                t0 = time.perf_counter()
                record = new_record(workload, backend)
                records.append(record)
                measure_workload(workers, record, config)
                progress(f"bench: {workload}[{backend}] done in {time.perf_counter() - t0:.1f}s")

        regen = []
        if config.regen:
            for workload in REGEN_WORKLOAD_NAMES:
                if workload not in config.workloads:
                    continue
                for backend in config.backends:
                    regen.append(_measure_regen(workers, workload, backend, config))
            progress("bench: regeneration micro benchmark done")
    finally:
        for w in workers.values():
            w.close()
    return {
        "config": dataclasses.asdict(config),
        "torch": {side: hello[side]["torch"] for side in SIDES},
        "view_replay": {side: hello[side]["view_replay"] for side in SIDES},
        "python": {"stock": stock_python, "patched": patched_python},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "processor": platform.processor()},
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "records": records,
        "regen": regen,
        "runtime_s": time.perf_counter() - started,
        "load_avg": {"start": list(load_at_start), "end": list(os.getloadavg())},
    }


def measure_workload(workers: dict[str, WorkerProcess], record: dict[str, Any], config: BenchConfig) -> None:
    """Compile, probe and time one (workload, backend) on both workers, interleaved.

    A side whose compiled program fails keeps its eager measurements (the worker
    then times eager only); its error is recorded for the table.
    """
    key = {"workload": record["workload"], "backend": record["backend"]}
    alive = set(SIDES)

    def ask(side: str, cmd: str) -> dict[str, Any] | None:
        reply = workers[side].request(cmd, **key)
        if "error" in reply:
            record["error"][side] = record["error"][side] or reply["error"]
            if cmd != "compile":
                alive.discard(side)
            return None
        return reply

    for rep in range(config.compile_repeats):
        for side in round_order(rep):
            if side in alive and not (rep and record["error"][side]):
                reply = ask(side, "compile")
                if reply is not None:
                    record["compile_s"][side].append(reply["compile_s"])
                    if "hooks_s" in reply:
                        record["compile_hooks_s"].append(reply["hooks_s"])
    for side in SIDES:
        if side in alive:
            reply = ask(side, "probe")
            if reply is not None:
                record["probe"][side] = reply
    # size -> the variants each side can time (eager always; compiled where it compiled)
    variants = {
        size: {side: set(record["probe"][side].get(size, {})) & {"eager", "compiled"} for side in SIDES}
        for side in SIDES for size in record["probe"][side]
    }
    for r in range(config.rounds):
        measured: dict[str, dict[str, Any]] = {side: {} for side in alive}
        order = round_order(r)
        # Note [Paired measurements]: compiled stock/patched adjacent, then eager in the
        # other order, so that eager's patched/stock pair (identical code) is adjacent too.
        for size, per_side in variants.items():
            for variant, sides in (("compiled", order), ("eager", order[::-1])):
                for side in sides:
                    if side in alive and variant in per_side[side]:
                        reply = workers[side].request("time", size=size, variant=variant, **key)
                        if "error" in reply:
                            record["error"][side] = record["error"][side] or reply["error"]
                            alive.discard(side)
                        else:
                            measured[side].setdefault(size, {})[variant] = reply
        for side, result in measured.items():
            if result:
                record["rounds"][side].append(result)


def _measure_regen(
    workers: dict[str, WorkerProcess], workload: str, backend: str, config: BenchConfig
) -> dict[str, Any]:
    result: dict[str, Any] = {"workload": workload, "backend": backend, "error": {}, "rounds": {s: [] for s in SIDES}}
    for r in range(config.regen_rounds):
        for side in round_order(r):
            if side in result["error"]:
                continue
            reply = workers[side].request("regen", workload=workload, backend=backend)
            if "error" in reply:
                result["error"][side] = reply["error"]
            else:
                result["rounds"][side].append(reply["outputs"])
    return result


# ---------------------------------------------------------------------------
# Aggregation (pure Python)


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def iqr_over_median(values: Sequence[float]) -> float | None:
    """Interquartile range divided by the median (a relative spread), None under 3 samples."""
    if len(values) < 3:
        return None
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    m = statistics.median(values)
    return (q3 - q1) / m if m else None


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _samples(rounds: list[dict[str, Any]], size: str, variant: str, metric: str) -> list[float]:
    return [r[size][variant][metric] for r in rounds if variant in r.get(size, {})]


@dataclasses.dataclass
class Row:
    """One (workload, backend, size) of the table; times in seconds."""

    workload: str
    backend: str
    size: str
    eager: dict[str, float | None]
    stock: dict[str, float | None]
    patched: dict[str, float | None]
    # eager measured in the patched worker / in the stock worker: identical code, so noise.
    eager_between_workers: float | None
    spreads: list[float]  # IQR/median of every sample series of the row
    compile_s: dict[str, float | None]
    compile_hooks_s: float | None  # view_replay's own work in the patched compile (bench_worker.HookTimer)
    probe: dict[str, dict[str, Any]]  # side -> {eager: {...}, compiled: {...}, values_equal}
    error: dict[str, str | None]

    # (metric, numerator side, denominator side) -> median of the per-round paired ratios.
    paired: dict[tuple[str, str, str], float | None] = dataclasses.field(default_factory=dict)

    def ratio(self, metric: str, num: str, den: str) -> float | None:
        """Median over rounds of num/den, each pair measured back to back (see paired_ratio)."""
        if (metric, num, den) in self.paired:
            return self.paired[(metric, num, den)]
        return ratio(getattr(self, num)[metric], getattr(self, den)[metric])


# Note [Paired measurements]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# This machine (2 vCPUs of a VM) runs in phases: for seconds at a time everything
# is up to ~1.7x faster or slower. Measured with stock torch in both workers (an
# A/A run): one worker's eager g[inductor] took 25 us per call in six rounds and
# 15 us in the seventh (fastest blocks). A measurement's fastest block moved as much
# as its median, so neither a minimum nor a median over rounds compares two workers:
# the A/A "ratio" of such estimates ranged from 0.72 to 1.70. What cancels the phases is
# comparing measurements taken next to each other. Each round therefore measures
# every (size, variant) in both workers back to back (tens of ms apart, ABBA), and a
# ratio is the median over rounds of the round's ratio. Short measurements in many
# rounds pair better than long ones in few: on one A/A subset (16 rows), 35 rounds
# of 10 ms gave a median |ratio - 1| of 1.3% (max 5.9%) for compiled fwd+bwd,
# 7 rounds of 50 ms 2.1% (max 8.6%), 70 rounds of 5 ms 2.5% (max 37%). Eager runs
# the same code in both workers, so its patched/stock ratio is an A/A measurement
# taken in the same run: the table's last column, and the noise line of the report.


def paired_ratio(numerators: Sequence[float | None], denominators: Sequence[float | None]) -> float | None:
    """Median of the round-by-round ratios (Note [Paired measurements])."""
    return median([n / d for n, d in zip(numerators, denominators) if n is not None and d])


def summarize(results: dict[str, Any]) -> list[Row]:
    rows = []
    for rec in results["records"]:
        sizes: list[str] = []
        for side in SIDES:
            for r in rec["rounds"][side]:
                sizes += [s for s in r if s not in sizes]
            sizes += [s for s in rec["probe"][side] if s not in sizes]
        if not sizes:
            sizes = ["-"]
        for size in sizes:
            spreads = []
            per_side: dict[str, dict[str, float | None]] = {}
            eager_samples: dict[str, dict[str, list[float]]] = {}
            for side in SIDES:
                rounds = rec["rounds"][side]
                per_side[side] = {}
                eager_samples[side] = {}
                for metric in ("fwd_bwd_s", "bwd_s"):
                    compiled = _samples(rounds, size, "compiled", metric)
                    eager = _samples(rounds, size, "eager", metric)
                    per_side[side][metric] = median(compiled)
                    eager_samples[side][metric] = eager
                    spreads += [s for s in (iqr_over_median(compiled), iqr_over_median(eager)) if s is not None]
            eager = {
                metric: median(eager_samples["stock"][metric] + eager_samples["patched"][metric])
                for metric in ("fwd_bwd_s", "bwd_s")
            }
            paired: dict[tuple[str, str, str], float | None] = {}
            for metric in ("fwd_bwd_s", "bwd_s"):
                series = {
                    (side, variant): [r.get(size, {}).get(variant, {}).get(metric) for r in rec["rounds"][side]]
                    for side in SIDES for variant in ("eager", "compiled")
                }
                paired[(metric, "patched", "stock")] = paired_ratio(
                    series[("patched", "compiled")], series[("stock", "compiled")])
                paired[(metric, "patched", "eager")] = paired_ratio(
                    series[("patched", "compiled")], series[("patched", "eager")])
                paired[(metric, "stock", "eager")] = paired_ratio(
                    series[("stock", "compiled")], series[("stock", "eager")])
                paired[(metric, "eager-patched", "eager-stock")] = paired_ratio(
                    series[("patched", "eager")], series[("stock", "eager")])
            between = paired[("fwd_bwd_s", "eager-patched", "eager-stock")]
            rows.append(
                Row(
                    workload=rec["workload"], backend=rec["backend"], size=size,
                    eager=eager, stock=per_side["stock"], patched=per_side["patched"],
                    eager_between_workers=between, spreads=spreads, paired=paired,
                    compile_s={side: median(rec["compile_s"][side]) for side in SIDES},
                    compile_hooks_s=median(rec.get("compile_hooks_s", [])),
                    probe={side: rec["probe"][side].get(size, {}) for side in SIDES},
                    error=dict(rec["error"]),
                )
            )
    return rows


@dataclasses.dataclass
class Noise:
    """The measured noise of a run."""

    median_spread: float | None  # median over all sample series of IQR/median
    eager_between_median: float | None  # median |eager(patched worker)/eager(stock worker) - 1|
    eager_between_max: float | None

    def describe(self) -> str:
        def pct(v: float | None) -> str:
            return "n/a" if v is None else f"{100 * v:.1f}%"

        return (
            f"one measurement varies by {pct(self.median_spread)} from round to round (median IQR/median); "
            f"the paired A/A ratio, eager in the patched worker / in the stock worker (identical code), "
            f"differs from 1 by {pct(self.eager_between_median)} median, {pct(self.eager_between_max)} max"
        )


def measure_noise(rows: Iterable[Row]) -> Noise:
    rows = list(rows)
    spreads = [s for row in rows for s in row.spreads]
    between = [abs(row.eager_between_workers - 1) for row in rows if row.eager_between_workers is not None]
    return Noise(median(spreads), median(between), max(between) if between else None)


# ---------------------------------------------------------------------------
# Formatting (pure Python)


def fmt_us(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:.1f}" if seconds < 1e-3 else f"{seconds * 1e6:.0f}"


def fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def fmt_kib(n: int | None) -> str:
    return "-" if n is None else f"{n / 1024:.1f}"


def _probe(row: Row, side: str, variant: str, key: str) -> Any:
    return row.probe.get(side, {}).get(variant, {}).get(key)


def _error_cell(error: str | None) -> str:
    return f"error: {error}".replace("|", "\\|")


def _per_side(row: Row, side: str, metric: str) -> str:
    return _error_cell(row.error[side]) if row.error[side] else fmt_us(getattr(row, side)[metric])


def _eager_probe(row: Row, key: str) -> Any:
    for side in SIDES:
        value = _probe(row, side, "eager", key)
        if value is not None:
            return value
    return None


def as_strided_text(row: Row) -> str:
    def side(s: str) -> str:
        if row.error[s] and _probe(row, s, "compiled", "as_strided") is None:
            return "error"
        value = _probe(row, s, "compiled", "as_strided")
        return "-" if value is None else str(value)

    return f"{side('stock')} → {side('patched')}"


def compile_ratio(row: Row) -> float | None:
    return ratio(row.compile_s["patched"], row.compile_s["stock"])


def hooks_text(row: Row) -> str:
    """view_replay's own compile-time work: ms and share of the patched compile."""
    share = ratio(row.compile_hooks_s, row.compile_s["patched"])
    if share is None or row.compile_hooks_s is None:
        return "-"
    return f"{1e3 * row.compile_hooks_s:.1f} ms ({100 * share:.2f}%)"


def summary_line(row: Row) -> str:
    """One line per workload row, for stdout."""
    head = f"{row.workload}[{row.backend}] {row.size}:"
    if row.error["stock"] or row.error["patched"]:
        parts = [f"{side} error: {row.error[side]}" for side in SIDES if row.error[side]]
        if not row.error["patched"]:
            parts.append(f"patched/eager {fmt_ratio(row.ratio('fwd_bwd_s', 'patched', 'eager'))}")
        return f"{head} " + "; ".join(parts)
    hooks = "" if row.compile_hooks_s is None else f", view_replay hooks in compile {hooks_text(row)}"
    return (
        f"{head} patched/stock {fmt_ratio(row.ratio('fwd_bwd_s', 'patched', 'stock'))} fwd+bwd, "
        f"{fmt_ratio(row.ratio('bwd_s', 'patched', 'stock'))} bwd; "
        f"patched/eager {fmt_ratio(row.ratio('fwd_bwd_s', 'patched', 'eager'))} "
        f"(bwd {fmt_ratio(row.ratio('bwd_s', 'patched', 'eager'))}); "
        f"AsStrided stock {as_strided_text(row).replace(' → ', ' → patched ')}; "
        f"compile patched/stock {fmt_ratio(compile_ratio(row))}{hooks}"
    )


TABLE_HEADER = (
    "| workload | backend | size | eager fwd+bwd µs | stock fwd+bwd µs | patched fwd+bwd µs "
    "| patched/stock | patched/eager | eager bwd µs | stock bwd µs | patched bwd µs "
    "| patched/stock bwd | patched/eager bwd | AsStrided stock → patched | autograd nodes eager/stock/patched "
    "| bwd peak KiB eager/stock/patched | compile s stock/patched | compile patched/stock "
    "| view_replay hooks in compile (share) | eager patched-worker/stock-worker |"
)


def table_row(row: Row) -> str:
    nodes = "/".join(
        "-" if v is None else str(v)
        for v in (_eager_probe(row, "nodes"), _probe(row, "stock", "compiled", "nodes"),
                  _probe(row, "patched", "compiled", "nodes"))
    )
    peaks = "/".join(
        fmt_kib(v)
        for v in (_eager_probe(row, "peak_bwd_bytes"), _probe(row, "stock", "compiled", "peak_bwd_bytes"),
                  _probe(row, "patched", "compiled", "peak_bwd_bytes"))
    )
    mismatch = [s for s in SIDES if row.probe.get(s, {}).get("values_equal") is False]
    compile_text = "/".join("-" if row.compile_s[s] is None else f"{row.compile_s[s]:.2f}" for s in SIDES)
    cells = [
        row.workload, row.backend, row.size + (f" (MISMATCH vs eager: {', '.join(mismatch)})" if mismatch else ""),
        fmt_us(row.eager["fwd_bwd_s"]), _per_side(row, "stock", "fwd_bwd_s"), _per_side(row, "patched", "fwd_bwd_s"),
        fmt_ratio(row.ratio("fwd_bwd_s", "patched", "stock")), fmt_ratio(row.ratio("fwd_bwd_s", "patched", "eager")),
        fmt_us(row.eager["bwd_s"]), _per_side(row, "stock", "bwd_s"), _per_side(row, "patched", "bwd_s"),
        fmt_ratio(row.ratio("bwd_s", "patched", "stock")), fmt_ratio(row.ratio("bwd_s", "patched", "eager")),
        as_strided_text(row), nodes, peaks, compile_text, fmt_ratio(compile_ratio(row)), hooks_text(row),
        fmt_ratio(row.eager_between_workers),
    ]
    return "| " + " | ".join(cells) + " |"


SUMMARY_HEADER = (
    "| workload | backend | size | patched/stock fwd+bwd | patched/stock bwd | patched/eager bwd "
    "| AsStrided stock → patched | compile patched/stock | view_replay hooks in compile (share) "
    "| eager patched-worker/stock-worker (A/A) |"
)


def summary_table(rows: Iterable[Row]) -> list[str]:
    """The ratio columns of the table (``latest.md``'s first table)."""
    lines = [SUMMARY_HEADER, "|" + "---|" * SUMMARY_HEADER.count(" | ") + "---|"]
    for row in rows:
        cells = [
            row.workload, row.backend, row.size,
            fmt_ratio(row.ratio("fwd_bwd_s", "patched", "stock")), fmt_ratio(row.ratio("bwd_s", "patched", "stock")),
            fmt_ratio(row.ratio("bwd_s", "patched", "eager")), as_strided_text(row),
            fmt_ratio(compile_ratio(row)), hooks_text(row), fmt_ratio(row.eager_between_workers),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def regen_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per (workload, backend, output): medians over rounds of the regeneration and eager view times."""
    out = []
    for entry in results.get("regen", []):
        n_outputs = max((len(r) for side in SIDES for r in entry["rounds"][side]), default=0)
        for i in range(max(n_outputs, 1)):
            row: dict[str, Any] = {"workload": entry["workload"], "backend": entry["backend"], "output": i}
            views = []
            for side in SIDES:
                rounds = [r[i] for r in entry["rounds"][side] if len(r) > i]
                row[f"{side}_regen_s"] = median([r["regen_s"] for r in rounds])
                row[f"{side}_grad_fn"] = rounds[0]["grad_fn"] if rounds else None
                row[f"{side}_error"] = entry["error"].get(side)
                row["size"] = rounds[0]["size"] if rounds else row.get("size", "-")
                views += [r["eager_view_s"] for r in rounds]
            row["eager_view_s"] = median(views)
            out.append(row)
    return out


def _load(results: dict[str, Any], when: str) -> str:
    value = results.get("load_avg", {}).get(when)
    return "n/a" if not value else f"{value[0]:.2f}"


def patched_config_text(cfg: dict[str, Any]) -> str:
    flags = cfg.get("patched_config") or ()
    return f"; view_replay.config in the patched worker: {', '.join(flags)}" if flags else ""


def render_markdown(results: dict[str, Any], rows: list[Row], png_name: str | None) -> str:
    cfg = results["config"]
    noise = measure_noise(rows)
    lines = [
        "# view-replay benchmark: eager vs stock-compiled vs patched-compiled",
        "",
        f"- date {results['date']}; stock torch {results['torch']['stock']} (`{results['python']['stock']}`), "
        f"patched torch {results['torch']['patched']} (`{results['python']['patched']}`, view_replay "
        f"{'installed' if results['view_replay']['patched'] else 'NOT installed'}"
        f"{patched_config_text(cfg)})",
        f"- machine: {results['machine']['cpus']} CPUs, {results['machine']['platform']}; "
        f"torch threads {cfg['threads']}; mode `{cfg['mode']}`, {cfg['rounds']} rounds (ABBA-interleaved "
        f"stock/patched workers), ~{cfg['target_s']}s per measurement, {cfg['compile_repeats']} cold compile(s) "
        f"per side; runtime {results['runtime_s']:.0f}s; 1-min load average {_load(results, 'start')} at start, "
        f"{_load(results, 'end')} at end",
        f"- **noise**: {noise.describe()}",
        "- times: median over rounds of each round's median time per call; fwd+bwd = `outs = fn(*inputs); "
        "torch.autograd.grad(outs, inputs+params, ones)` (torch.utils.benchmark.Timer.blocked_autorange, "
        "median of blocks); bwd = the `autograd.grad` call alone, timed per call (median of calls), each "
        "call after the same untimed work: the eager then the compiled forward, so both backwards start "
        "from equally warm caches; eager = both workers' eager rounds pooled; ratios are medians of round-by-round "
        "ratios, each of two measurements taken back to back (patched/stock: the same size and variant in the "
        "two workers, ABBA; patched/eager: the patched worker's compiled and eager of round r); ratios < 1 mean "
        "patched is faster",
        "- bwd peak: most bytes the CPU allocator held during the backward call above its level at the start "
        "(torch.profiler `profile_memory=True`, running totals of the allocation events; gradients included)",
        "- compile: first forward+backward call after `torch._dynamo.reset()`, in a fresh inductor cache dir with "
        "in-memory inductor caches cleared (`torch._inductor.utils.fresh_cache`), after a warm-up compile of an "
        "unrelated program; `TORCHINDUCTOR_COMPILE_THREADS=1`; median of the cold compiles; view_replay hooks: "
        "time inside the view_replay functions that AOTAutograd calls during the patched compile (planning, "
        "classification, regenerator creation; outermost calls), and its share of that compile",
        "- AsStrided: `AsStridedBackward0` nodes reachable from the compiled outputs (eager has none in any workload)",
        "",
        "## Ratios",
        "",
        *summary_table(rows),
        "",
        "## All columns",
        "",
        TABLE_HEADER,
        "|" + "---|" * TABLE_HEADER.count(" | ") + "---|",
    ]
    lines += [table_row(row) for row in rows]
    regen = regen_table(results)
    if regen:
        lines += [
            "",
            "## Per aliased output: runtime regeneration vs one eager view call",
            "",
            "The function that the compiled function's runtime wrapper calls for the output (patched: the "
            "output's precompiled regenerator; stock: `functional_utils.gen_alias_from_base`) is called "
            "with the exact arguments the wrapper passed it (captured on a real call, last size of the "
            "workload, `dynamic=True`) and timed with torch.utils.benchmark.Timer; \"eager view\" is the "
            "user's view chain on the same base (`x.view(x.shape)`, `x[: n // 2].t()`). Target: patched "
            "regeneration ≤ eager view + 5 µs.",
            "",
            *regen,
        ]
    if png_name:
        lines += ["", f"![ratios]({png_name})"]
    return "\n".join(lines) + "\n"


def regen_table(results: dict[str, Any]) -> list[str]:
    """The regeneration micro benchmark as markdown table lines (none if it did not run)."""
    regen = regen_rows(results)
    if not regen:
        return []
    lines = [
        "| workload | backend | size | output | eager view µs | stock regen µs (grad_fn) "
        "| patched regen µs (grad_fn) | patched − eager view µs | stock − eager view µs |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in regen:
        def cell(side: str) -> str:
            if r[f"{side}_error"]:
                return _error_cell(r[f"{side}_error"])
            return f"{fmt_us(r[f'{side}_regen_s'])} ({r[f'{side}_grad_fn']})"

        def extra(side: str) -> str:
            d = None if r[f"{side}_regen_s"] is None or r["eager_view_s"] is None else r[f"{side}_regen_s"] - r["eager_view_s"]
            return "-" if d is None else f"{d * 1e6:+.1f}"

        lines.append(
            f"| {r['workload']} | {r['backend']} | {r['size']} | {r['output']} | {fmt_us(r['eager_view_s'])} "
            f"| {cell('stock')} | {cell('patched')} | {extra('patched')} | {extra('stock')} |"
        )
    return lines


README_BEGIN = "<!-- bench:begin (written by viewreplay bench --readme) -->"
README_END = "<!-- bench:end -->"


def check_readme(path: Path) -> str:
    """The README's text; it must hold the bench markers once each, in order."""
    try:
        text = path.read_text()
    except OSError as e:
        raise ViewReplayError(f"cannot read {path}: {e}") from e
    if text.count(README_BEGIN) != 1 or text.count(README_END) != 1 or text.index(README_BEGIN) > text.index(README_END):
        raise ViewReplayError(f"{path}: needs one {README_BEGIN!r} line and, after it, one {README_END!r} line")
    return text


def readme_results_path(readme: Path, results: dict[str, Any]) -> Path:
    """Where ``make bench`` writes the run's full results for the README's link: ``benchmarks/results/<pin>/latest.md``
    next to the README, the pin being the patched torch's release (``2.14.1+viewreplay`` -> ``2.14.1``)."""
    pin = str(results["torch"]["patched"]).split("+", 1)[0]
    return readme.parent / "benchmarks" / "results" / pin / "latest.md"


def readme_summary(results: dict[str, Any], rows: list[Row], link: str) -> str:
    """The README's bench section: one line on the run (its ratios' range, AsStrided rows, noise) and the link."""
    cfg = results["config"]
    fwd_bwd = sorted(r for row in rows if (r := row.ratio("fwd_bwd_s", "patched", "stock")) is not None)
    ratios = (
        f"patched/stock fwd+bwd from {fmt_ratio(fwd_bwd[0])} to {fmt_ratio(fwd_bwd[-1])} (median "
        f"{fmt_ratio(median(fwd_bwd))}) over {len(fwd_bwd)} of {len(rows)} rows"
        if fwd_bwd else f"no patched/stock fwd+bwd ratio in {len(rows)} rows"
    )
    with_as_strided = {
        side: sum(1 for row in rows if (_probe(row, side, "compiled", "as_strided") or 0) > 0) for side in SIDES
    }
    return (
        f"Run of {results['date'][:10]}, torch {str(results['torch']['patched']).split('+', 1)[0]}, mode "
        f"`{cfg['mode']}`, {cfg['rounds']} rounds, {results['runtime_s']:.0f} s{patched_config_text(cfg)}: {ratios}; "
        f"rows with `AsStridedBackward0`: stock {with_as_strided['stock']}, patched {with_as_strided['patched']}. "
        f"**Noise**: {measure_noise(rows).describe()}. Every column, the per-output regeneration times and the "
        f"plot: [{link}]({link})."
    )


def update_readme(path: Path, results: dict[str, Any], rows: list[Row], results_md: Path | None = None) -> None:
    """Replace the README's bench section with one summary line of this run and a link to its full results
    (``results_md``, default :func:`readme_results_path`), written relative to the README."""
    text = check_readme(path)
    head, rest = text.split(README_BEGIN, 1)
    _, tail = rest.split(README_END, 1)
    target = results_md if results_md is not None else readme_results_path(path, results)
    link = Path(os.path.relpath(target.resolve(), path.resolve().parent)).as_posix()
    section = [README_BEGIN, readme_summary(results, rows, link)]
    path.write_text(head + "\n".join(section) + "\n" + README_END + tail)


def render_png(rows: list[Row], noise: Noise, path: Path) -> bool:
    """Ratios per row (patched/stock fwd+bwd and bwd, patched/eager bwd); False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import ScalarFormatter
    except ImportError:
        return False
    labels = [f"{r.workload}[{r.backend}] {r.size}" for r in rows]
    series = [
        ("patched/stock fwd+bwd", [r.ratio("fwd_bwd_s", "patched", "stock") for r in rows], 0),
        ("patched/stock bwd", [r.ratio("bwd_s", "patched", "stock") for r in rows], 0),
        ("patched/eager bwd", [r.ratio("bwd_s", "patched", "eager") for r in rows], 1),
        ("stock/eager bwd", [r.ratio("bwd_s", "stock", "eager") for r in rows], 1),
    ]
    height = max(4.0, 0.32 * len(rows) + 1.5)
    fig, axes = plt.subplots(1, 2, figsize=(14, height), sharey=True)
    ys = list(range(len(rows)))
    for ax_index, ax in enumerate(axes):
        mine = [s for s in series if s[2] == ax_index]
        width = 0.8 / len(mine)
        for k, (name, values, _) in enumerate(mine):
            offsets = [y + (k - (len(mine) - 1) / 2) * width for y in ys]
            ax.barh(offsets, [v if v is not None else 0 for v in values], height=width, label=name)
            for y, v in zip(offsets, values):
                if v is None:
                    ax.text(0.01, y, "error / n.a.", va="center", fontsize=6, color="red",
                            transform=ax.get_yaxis_transform())
        ax.axvline(1.0, color="black", linewidth=0.8)
        if ax_index == 0 and noise.eager_between_median is not None:
            ax.axvspan(1 - noise.eager_between_median, 1 + noise.eager_between_median, color="grey", alpha=0.2,
                       label="noise: eager, worker vs worker (median)")
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(ScalarFormatter())
        ax.tick_params(axis="x", which="both", labelsize=6)
        ax.legend(fontsize=7, loc="lower right")
        ax.grid(axis="x", which="both", alpha=0.3)
    axes[0].set_yticks(ys)
    axes[0].set_yticklabels(labels, fontsize=7)
    axes[0].invert_yaxis()
    axes[0].set_title("patched vs stock torch.compile (< 1: patched faster)")
    axes[1].set_title("compiled backward vs eager backward")
    fig.subplots_adjust(left=0.2, right=0.98, top=1 - 0.6 / height, bottom=0.5 / height, wspace=0.05)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def summary(results: dict[str, Any], rows: list[Row]) -> dict[str, Any]:
    """The run's metadata and, per row, the medians and paired ratios the tables show."""
    out = {k: v for k, v in results.items() if k != "records"}
    out["rows"] = [
        {
            "workload": row.workload,
            "backend": row.backend,
            "size": row.size,
            "median_s": {"eager": row.eager, "stock": row.stock, "patched": row.patched},
            "paired_ratios": {f"{m} {num}/{den}": v for (m, num, den), v in row.paired.items()},
            "eager_between_workers": row.eager_between_workers,
            "compile_s": row.compile_s,
            "compile_hooks_s": row.compile_hooks_s,
            "error": row.error,
        }
        for row in rows
    ]
    return out


def write_results(results: dict[str, Any], out_dir: Path, stem: str = "latest") -> tuple[list[Row], list[Path]]:
    """Write ``<stem>.md``, ``<stem>.png`` (if matplotlib is importable), ``<stem>.json`` (the
    summary: medians and paired ratios per row) and ``<stem>-rounds.json`` (every round; not
    committed, see .gitignore)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = summarize(results)
    png = out_dir / f"{stem}.png"
    have_png = render_png(rows, measure_noise(rows), png)
    written = []
    md = out_dir / f"{stem}.md"
    md.write_text(render_markdown(results, rows, png.name if have_png else None))
    written.append(md)
    if have_png:
        written.append(png)
    js = out_dir / f"{stem}.json"
    js.write_text(json.dumps(summary(results, rows), indent=1) + "\n")
    written.append(js)
    rounds = out_dir / f"{stem}-rounds.json"
    rounds.write_text(json.dumps(results) + "\n")
    written.append(rounds)
    return rows, written
