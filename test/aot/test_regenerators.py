"""One precompiled regenerator per aliased output (Note [Regenerators]).

The runtime wrapper decides how each aliased output is regenerated when it is
generated, not on every call. Stock torch calls gen_alias_from_base() on every
call for every aliased output (documented by the stock branches); the patched
wheel calls the regenerator it bound per output, and still verifies, counts
and logs on every call.
"""

import tempfile
from collections import Counter
from unittest import mock

import pytest
import torch
import torch._dynamo  # before runtime_wrappers: the two import each other
from torch._functorch._aot_autograd import runtime_wrappers
from torch.testing._internal.common_utils import run_tests

from view_replay_testing import CompileTestCase, fallback_counts, PATCHED, strict_view_replay
from viewreplay_harness.bench_worker import set_view_replay_flag, Worker

if PATCHED:
    from torch._functorch._aot_autograd.view_replay import config as view_replay_config


def two_aliases(x):
    # A symbolic chain of the input (a replay plan) and a static one of an intermediate.
    y = x * 2
    return x[: x.shape[0] // 2].t(), y.view(-1), y


CALLS = 4


def _counting(calls: Counter, name: str, fn):
    def counted(*args, **kwargs):
        calls[name] += 1
        return fn(*args, **kwargs)

    return counted


class TestPrecompiledRegenerators(CompileTestCase):
    def _run(self, calls: Counter) -> list[tuple[torch.Tensor, ...]]:
        compiled = torch.compile(two_aliases, backend="aot_eager", dynamic=True)
        return [compiled(torch.randn(n, 3, requires_grad=True)) for n in range(6, 6 + CALLS)]

    def test_resolved_once_per_output(self) -> None:
        calls: Counter = Counter()
        if not PATCHED:
            gen = _counting(calls, "gen_alias_from_base", runtime_wrappers.gen_alias_from_base)
            with mock.patch.object(runtime_wrappers, "gen_alias_from_base", gen):
                outs = self._run(calls)
            # Stock: every call re-decides, for every aliased output.
            self.assertEqual(calls["gen_alias_from_base"], 2 * CALLS)
            self.assertEqual(outs[-1][0].shape, (3, (5 + CALLS) // 2))
            return
        # The runtime wrapper no longer calls gen_alias_from_base at all.
        self.assertFalse(hasattr(runtime_wrappers, "gen_alias_from_base"))
        with strict_view_replay():
            regenerators: list = []
            real_make_regenerator = runtime_wrappers.make_regenerator

            def make_regenerator(*args, **kwargs):
                regenerators.append(real_make_regenerator(*args, **kwargs))
                return _counting(calls, "regenerate", regenerators[-1])

            with mock.patch.object(runtime_wrappers, "make_regenerator", make_regenerator):
                outs = self._run(calls)
        # One regenerator per aliased output, made when the wrapper was generated
        # (once: the graph is dynamic), and called on every call.
        self.assertEqual(len(regenerators), 2)
        self.assertEqual(calls["regenerate"], 2 * CALLS)
        for n, (t, flat, y) in zip(range(6, 6 + CALLS), outs):
            self.assertEqual(t.shape, (3, n // 2))
            self.assertEqual(type(t.grad_fn).__name__, "TBackward0")
            self.assertEqual(type(flat.grad_fn).__name__, "ViewBackward0")
            self.assertIs(flat._base, y)
        self.assertEqual(fallback_counts(), {})

    @pytest.mark.fallback_allowed  # it forces a fallback (conftest.py)
    def test_fallback_recorded_on_every_call(self) -> None:
        if not PATCHED:
            self.skipTest("the fallback point is part of the patched wheel (test_fallback.py documents stock)")
        with view_replay_config.patch(replay_symbolic_views=False):
            outs = self._run(Counter())
        # Decided once (the plan was refused at compile time), recorded per call.
        self.assertEqual(fallback_counts(), {"SYMBOLIC_REPLAY_DISABLED": CALLS})
        self.assertEqual(type(outs[-1][0].grad_fn).__name__, "AsStridedBackward0")
        self.assertEqual(type(outs[-1][1].grad_fn).__name__, "ViewBackward0")

    def test_bench_times_what_the_runtime_calls(self) -> None:
        # viewreplay bench's regeneration timing hooks the function the runtime
        # wrapper binds: the regenerator on patched torch, gen_alias_from_base on stock.
        with tempfile.TemporaryDirectory() as cache_root:
            result = Worker("quick", 0.001, cache_root).regen("slice_t", "aot_eager")
        (output,) = result["outputs"]
        self.assertGreater(output["regen_s"], 0)
        self.assertEqual(output["grad_fn"], "TBackward0" if PATCHED else "AsStridedBackward0")

    def test_bench_attributes_compile_time_to_view_replay(self) -> None:
        with tempfile.TemporaryDirectory() as cache_root:
            result = Worker("quick", 0.001, cache_root).compile("slice_t", "aot_eager")
        self.assertGreater(result["compile_s"], 0)
        if not PATCHED:
            self.assertNotIn("hooks_s", result)
            return
        # At least the plan of the output (collect_metadata_analysis) and its regenerator
        # (the runtime wrapper), each timed once as an outermost call.
        self.assertGreaterEqual(result["hook_calls"], 2)
        self.assertGreater(result["hooks_s"], 0)
        self.assertLess(result["hooks_s"], result["compile_s"])
        # The hooks are unwrapped again.
        self.assertEqual(runtime_wrappers.make_regenerator.__module__,
                         "torch._functorch._aot_autograd.view_replay.replay")

    def test_bench_sets_view_replay_flags(self) -> None:
        # viewreplay bench --patched-config FLAG=VALUE measures what a flag costs.
        if not PATCHED:
            self.skipTest("view_replay.config is part of the patched wheel")
        with view_replay_config.patch(hide_multi_output_view_aliasing=False):
            set_view_replay_flag("hide_multi_output_view_aliasing=True")
            self.assertIs(view_replay_config.hide_multi_output_view_aliasing, True)
        for bad in ("strict", "strict=yes", "no_such_flag=True"):
            with self.assertRaisesRegex(SystemExit, "FLAG=True|False"):
                set_view_replay_flag(bad)


if __name__ == "__main__":
    run_tests()
