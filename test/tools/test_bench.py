"""``viewreplay bench``: aggregation, ratios and formatting (pure Python), and one tiny real run."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from viewreplay import ViewReplayError
from viewreplay.bench import (
    BenchConfig,
    check_readme,
    fmt_us,
    iqr_over_median,
    measure_noise,
    measure_workload,
    median,
    new_record,
    paired_ratio,
    ratio,
    README_BEGIN,
    README_END,
    regen_rows,
    render_markdown,
    round_order,
    run_bench,
    summarize,
    summary_line,
    SUMMARY_HEADER,
    table_row,
    TABLE_HEADER,
    update_readme,
    write_results,
)
from viewreplay_testlib import run_cli


def _round(size: str, eager: tuple[float, float], compiled: tuple[float, float] | None) -> dict[str, Any]:
    variants = {"eager": {"fwd_bwd_s": eager[0], "bwd_s": eager[1]}}
    if compiled is not None:
        variants["compiled"] = {"fwd_bwd_s": compiled[0], "bwd_s": compiled[1]}
    return {size: variants}


def _results(records: list[dict[str, Any]], regen: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "config": BenchConfig.for_mode("quick").__dict__ | {"workloads": [], "backends": []},
        "torch": {"stock": "2.13.0+cpu", "patched": "2.13.0+cpu"},
        "view_replay": {"stock": False, "patched": True},
        "python": {"stock": "/s/python", "patched": "/p/python"},
        "machine": {"cpus": 2, "platform": "linux", "processor": ""},
        "date": "2026-01-01T00:00:00+00:00",
        "records": records,
        "regen": regen or [],
        "runtime_s": 12.0,
        "load_avg": {"start": [1.0, 1.0, 1.0], "end": [2.0, 2.0, 2.0]},
    }


def _probe(as_strided: int, nodes: int = 3, peak: int = 2048) -> dict[str, Any]:
    return {
        "eager": {"nodes": 3, "as_strided": 0, "peak_bwd_bytes": 2048},
        "compiled": {"nodes": nodes, "as_strided": as_strided, "peak_bwd_bytes": peak},
        "values_equal": True,
    }


SLICE_T = {
    "workload": "slice_t",
    "backend": "aot_eager",
    "compile_s": {"stock": [1.0, 1.2, 5.0], "patched": [1.1, 1.05, 1.0]},
    "compile_hooks_s": [0.010, 0.012, 0.011],
    "error": {"stock": None, "patched": None},
    "probe": {"stock": {"8x4": _probe(1, 2, 4096)}, "patched": {"8x4": _probe(0)}},
    "rounds": {
        # Medians: stock compiled 200/100, patched compiled 150/50, eager pooled 100/40 (stock 100, patched 110).
        "stock": [_round("8x4", (100e-6, 40e-6), (200e-6, 100e-6)) for _ in range(2)]
        + [_round("8x4", (90e-6, 40e-6), (900e-6, 300e-6))],
        "patched": [_round("8x4", (110e-6, 40e-6), (150e-6, 50e-6)) for _ in range(3)],
    },
}

DTENSOR = {
    "workload": "dtensor_view",
    "backend": "inductor",
    "compile_s": {"stock": [], "patched": []},
    "error": {
        "stock": "RuntimeError: as_strided not supported with DTensor",
        "patched": "RuntimeError: as_strided not supported with DTensor",
    },
    "probe": {"stock": {"8x4": {"eager": {"nodes": 2, "as_strided": 0, "peak_bwd_bytes": 128}}}, "patched": {}},
    "rounds": {"stock": [_round("8x4", (50e-6, 20e-6), None)], "patched": [_round("8x4", (60e-6, 20e-6), None)]},
}


def test_paired_ratio() -> None:
    # A slow round hits both sides alike: the paired ratio stays 0.5, the ratio of medians would not.
    assert paired_ratio([1.0, 1.0, 4.0], [2.0, 2.0, 8.0]) == 0.5
    assert paired_ratio([1.0, None], [2.0, 3.0]) == 0.5 and paired_ratio([], []) is None


def test_statistics() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0 and median([]) is None
    assert iqr_over_median([1.0, 2.0]) is None
    assert iqr_over_median([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx(2.0 / 3.0)
    assert ratio(1.0, 2.0) == 0.5 and ratio(None, 2.0) is None and ratio(1.0, 0.0) is None
    assert [round_order(i) for i in range(3)] == [("stock", "patched"), ("patched", "stock"), ("stock", "patched")]


def test_config_modes_and_overrides() -> None:
    quick = BenchConfig.for_mode("quick", rounds=None, workloads=("g",))
    assert quick.mode == "quick" and quick.rounds == 3 and quick.workloads == ("g",)
    assert BenchConfig.for_mode("default", rounds=4).rounds == 4
    assert BenchConfig.for_mode("full").rounds > BenchConfig.for_mode("default").rounds


def test_ratios_use_medians_and_pooled_eager() -> None:
    (row,) = summarize(_results([SLICE_T]))
    assert row.stock["fwd_bwd_s"] == pytest.approx(200e-6)  # the 900 µs outlier round is ignored
    assert row.patched["bwd_s"] == pytest.approx(50e-6)
    assert row.eager["fwd_bwd_s"] == pytest.approx(105e-6)  # both workers' eager rounds pooled
    assert row.ratio("fwd_bwd_s", "patched", "stock") == pytest.approx(0.75)
    assert row.ratio("bwd_s", "patched", "stock") == pytest.approx(0.5)
    # Paired round by round: patched compiled / patched eager of the same round.
    assert row.ratio("fwd_bwd_s", "patched", "eager") == pytest.approx(150 / 110)
    assert row.ratio("bwd_s", "stock", "eager") == pytest.approx(100 / 40)
    assert row.eager_between_workers == pytest.approx(1.1)
    assert row.compile_s == {"stock": pytest.approx(1.2), "patched": pytest.approx(1.05)}
    line = summary_line(row)
    assert line == (
        "slice_t[aot_eager] 8x4: patched/stock 0.75 fwd+bwd, 0.50 bwd; patched/eager 1.36 (bwd 1.25); "
        "AsStrided stock 1 → patched 0; compile patched/stock 0.88, view_replay hooks in compile 11.0 ms (1.05%)"
    )
    cells = table_row(row).strip("| ").split(" | ")
    assert len(cells) == TABLE_HEADER.count(" | ") + 1
    assert cells[:8] == ["slice_t", "aot_eager", "8x4", "105.0", "200.0", "150.0", "0.75", "1.36"]
    assert "1 → 0" in cells and "3/2/3" in cells and "2.0/4.0/2.0" in cells and "11.0 ms (1.05%)" in cells


def test_errors_become_cells_and_keep_eager() -> None:
    rows = summarize(_results([SLICE_T, DTENSOR]))
    dt = rows[1]
    assert dt.size == "8x4" and dt.eager["fwd_bwd_s"] == pytest.approx(55e-6)
    assert dt.ratio("fwd_bwd_s", "patched", "stock") is None
    assert summary_line(dt) == (
        "dtensor_view[inductor] 8x4: stock error: RuntimeError: as_strided not supported with DTensor; "
        "patched error: RuntimeError: as_strided not supported with DTensor"
    )
    cells = table_row(dt).strip("| ").split(" | ")
    assert cells[3] == "55.0" and cells[4].startswith("error: RuntimeError: as_strided not supported")
    assert "error → error" in cells


def test_noise_and_markdown() -> None:
    results = _results(
        [SLICE_T, DTENSOR],
        regen=[
            {
                "workload": "g", "backend": "aot_eager", "error": {},
                "rounds": {
                    side: [[{"output": 0, "regen_s": t, "eager_view_s": 3e-6, "grad_fn": fn, "size": "4x3"}]]
                    for side, t, fn in (("stock", 4e-6, "AsStridedBackward0"), ("patched", 9e-6, "ViewBackward0"))
                },
            }
        ],
    )
    rows = summarize(results)
    noise = measure_noise(rows)
    assert noise.eager_between_max == pytest.approx(0.2)  # dtensor: 60/50
    assert noise.eager_between_median == pytest.approx(0.15)
    (regen,) = regen_rows(results)
    assert regen["patched_regen_s"] == 9e-6 and regen["eager_view_s"] == 3e-6
    md = render_markdown(results, rows, "latest.png")
    assert "**noise**: one measurement varies by" in md and "differs from 1 by 15.0% median, 20.0% max" in md
    assert TABLE_HEADER in md and "![ratios](latest.png)" in md
    assert SUMMARY_HEADER in md
    assert "| slice_t | aot_eager | 8x4 | 0.75 | 0.50 | 1.25 | 1 → 0 | 0.88 | 11.0 ms (1.05%) | 1.10 |" in md
    assert "| g | aot_eager | 4x3 | 0 | 3.0 | 4.0 (AsStridedBackward0) | 9.0 (ViewBackward0) | +6.0 | +1.0 |" in md
    assert fmt_us(None) == "-" and fmt_us(1.5e-3) == "1500"


def test_write_results(tmp_path: Path) -> None:
    rows, written = write_results(_results([SLICE_T, DTENSOR]), tmp_path / "out")
    names = {p.name for p in written}
    assert {"latest.md", "latest.json", "latest-rounds.json"} <= names
    if importlib.util.find_spec("matplotlib") is not None:
        assert "latest.png" in names and (tmp_path / "out" / "latest.png").stat().st_size > 1000
    summary = json.loads((tmp_path / "out" / "latest.json").read_text())
    assert "records" not in summary and summary["rows"][0]["workload"] == "slice_t"
    assert summary["rows"][0]["paired_ratios"]
    rounds = json.loads((tmp_path / "out" / "latest-rounds.json").read_text())
    assert rounds["records"][0]["workload"] == "slice_t"
    assert len(rows) == 2


def test_cli_registers_bench(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("bench", "--help") == 0
    out = capsys.readouterr().out
    assert "--stock-python" in out and "--quick" in out and "--out DIR" in out
    assert run_cli("bench", "--stock-python", "x") == 2


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch in this interpreter")
def test_tiny_real_run(tmp_path: Path) -> None:
    """Both workers on this interpreter: a view workload, and the DTensor case whose compile fails on 2.13."""
    config = BenchConfig.for_mode(
        "quick", rounds=1, workloads=("g", "dtensor_view"), backends=("aot_eager",), target_s=0.002
    )
    results = run_bench(sys.executable, sys.executable, config, check_venvs=False, progress=lambda s: None)
    rows = summarize(results)
    g, dt = rows
    assert (g.workload, g.size) == ("g", "4x3")
    for side in ("stock", "patched"):
        assert g.error[side] is None and g.patched["fwd_bwd_s"] > 0 and g.stock["bwd_s"] > 0
        assert g.probe[side]["compiled"]["nodes"] >= 1 and g.probe[side]["values_equal"] is True
    assert g.eager["fwd_bwd_s"] > 0 and g.ratio("fwd_bwd_s", "patched", "stock") is not None
    # The DTensor case either compiles or reports its error; it never ends the run, and eager is measured.
    assert dt.workload == "dtensor_view" and dt.eager["fwd_bwd_s"] > 0
    for side in ("stock", "patched"):
        assert dt.error[side] is None or dt.error[side].startswith("RuntimeError")
    (regen,) = regen_rows(results)
    assert regen["stock_regen_s"] > 0 and regen["eager_view_s"] > 0


class _FakeWorker:
    """Answers like a bench worker and logs the timing requests; ``compiles``: whether compile works."""

    def __init__(self, side: str, log: list[tuple[str, str, str]], compiles: bool = True) -> None:
        self.side, self.log, self.compiles = side, log, compiles

    def request(self, cmd: str, **kwargs: Any) -> dict[str, Any]:
        if cmd == "compile":
            return {"compile_s": 1.0} if self.compiles else {"error": "RuntimeError: no"}
        if cmd == "probe":
            variants = ("eager", "compiled") if self.compiles else ("eager",)
            return {size: {v: {"nodes": 1} for v in variants} for size in ("4x3", "8x3")}
        assert cmd == "time"
        self.log.append((self.side, kwargs["size"], kwargs["variant"]))
        return {"fwd_bwd_s": 1e-5, "bwd_s": 1e-5}


def test_measurements_are_paired_back_to_back() -> None:
    # Note [Paired measurements]: per size, compiled in both workers, then eager in both (the
    # other order), and the side that goes first alternates round by round.
    log: list[tuple[str, str, str]] = []
    workers = {side: _FakeWorker(side, log) for side in ("stock", "patched")}
    record = new_record("g", "aot_eager")
    measure_workload(workers, record, BenchConfig.for_mode("quick", rounds=2))  # type: ignore[arg-type]
    per_size = [
        ("stock", "compiled"), ("patched", "compiled"), ("patched", "eager"), ("stock", "eager"),
    ]
    swapped = [("patched", "compiled"), ("stock", "compiled"), ("stock", "eager"), ("patched", "eager")]
    expected = [(side, size, variant) for order in (per_size, swapped) for size in ("4x3", "8x3")
                for side, variant in order]
    assert log == expected
    assert [sorted(r) for r in record["rounds"]["stock"]] == [["4x3", "8x3"]] * 2

    # A side whose compile fails is timed on eager only; the other keeps its pairs.
    log.clear()
    workers["stock"] = _FakeWorker("stock", log, compiles=False)
    record = new_record("dtensor_view", "aot_eager")
    measure_workload(workers, record, BenchConfig.for_mode("quick", rounds=1))  # type: ignore[arg-type]
    assert record["error"]["stock"] == "RuntimeError: no"
    assert log[:3] == [("patched", "4x3", "compiled"), ("patched", "4x3", "eager"), ("stock", "4x3", "eager")]


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch in this interpreter")
def test_orchestrator_knows_every_workload() -> None:
    # bench.py does not import torch, so it names the workers' workloads itself.
    from viewreplay.bench import REGEN_WORKLOAD_NAMES, WORKLOAD_NAMES
    from viewreplay_harness.bench_worker import REGEN_WORKLOADS, WORKLOADS

    assert tuple(WORKLOADS) == WORKLOAD_NAMES and tuple(REGEN_WORKLOADS) == REGEN_WORKLOAD_NAMES


def test_readme_section_is_replaced_between_markers(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# title\n\nbefore\n{README_BEGIN}\nold table\n{README_END}\n\n## after\n")
    results = _results([SLICE_T])
    update_readme(readme, results, summarize(results))
    text = readme.read_text()
    assert text.startswith("# title\n\nbefore\n") and text.endswith(f"{README_END}\n\n## after\n")
    # One summary line and the link to the run's full results (make bench writes them there).
    section = text.split(README_BEGIN + "\n", 1)[1].split(README_END, 1)[0].splitlines()
    assert len(section) == 1 and "old table" not in text and SUMMARY_HEADER not in text
    assert "patched/stock fwd+bwd from 0.75 to 0.75 (median 0.75) over 1 of 1 rows" in section[0]
    assert "rows with `AsStridedBackward0`: stock 1, patched 0" in section[0] and "**Noise**:" in section[0]
    assert section[0].endswith("[benchmarks/results/2.13.0/latest.md](benchmarks/results/2.13.0/latest.md).")

    # Results written elsewhere: the link is relative to the README.
    update_readme(readme, results, summarize(results), results_md=tmp_path / "out" / "2.13.0" / "latest.md")
    assert "[out/2.13.0/latest.md](out/2.13.0/latest.md)." in readme.read_text()

    # No markers, or a second pair: refused before anything is written (exit 1 from the CLI).
    readme.write_text("# title\n")
    with pytest.raises(ViewReplayError, match="bench:begin"):
        check_readme(readme)
    assert run_cli("bench", "--stock-python", "x", "--patched-python", "y", "--readme", str(readme)) == 1
    assert readme.read_text() == "# title\n"
