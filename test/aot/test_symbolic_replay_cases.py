"""Symbolic view replay beyond the sweep: symbol sources, unbindable symbols,
mark_dynamic, the AOTAutograd warm cache across processes, and inductor."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tempfile
import textwrap
import unittest

import torch
import torch._dynamo
from torch._dynamo.utils import counters
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)

from view_replay_testing import CompileTestCase, autograd_nodes, fallback_counts, PATCHED, strict_view_replay
from viewreplay_harness.sweep import make_inputs, PROGRAMS, SIZES

if PATCHED:
    from torch._functorch._aot_autograd.view_replay import (
        config as view_replay_config,
        ViewReplayFallbackError,
    )


def _grad_fns(outs) -> list[str]:
    return [type(o.grad_fn).__name__ for o in outs]


class TestSymbolSources(CompileTestCase):
    def test_symint_input(self) -> None:
        # The start of the narrow is a SymInt graph input, not a size.
        def fn(x, k):
            return x.narrow(0, k, 2)

        compiled = torch.compile(fn, backend="aot_eager", dynamic=True)
        for n, k in ((6, 1), (8, 3), (10, 5)):
            x = torch.randn(n, 3, requires_grad=True)
            with strict_view_replay():
                out = compiled(x, k)
            self.assertEqual(out, fn(x, k))
            self.assertEqual(out.storage_offset(), k * 3)
            expected = "SliceBackward0" if PATCHED else "AsStridedBackward0"
            self.assertEqual(_grad_fns([out]), [expected])

    def test_mark_dynamic(self) -> None:
        def fn(x):
            return x[: x.shape[0] // 2].t()

        compiled = torch.compile(fn, backend="aot_eager")
        for n in (6, 8, 10):
            x = torch.randn(n, 4, requires_grad=True)
            torch._dynamo.mark_dynamic(x, 0)
            with strict_view_replay():
                out = compiled(x)
            self.assertEqual(out, fn(x))
            self.assertEqual(out.stride(), fn(x).stride())
            if PATCHED:
                self.assertEqual(autograd_nodes([out]), ["TBackward0", "SliceBackward0", "AccumulateGrad"])
            else:
                self.assertEqual(autograd_nodes([out]), ["AsStridedBackward0", "AccumulateGrad"])

    def test_unbacked_symbol_bound_from_intermediate_base(self) -> None:
        # u0 (rows of nonzero) is unbacked: it is read off the base the graph returns.
        def fn(x):
            idx = x.nonzero().float().requires_grad_(False)
            base = idx * 2
            return base, base[: base.shape[0] // 2]

        x = torch.tensor([[1.0, 0.0, 2.0], [0.0, 3.0, 4.0], [5.0, 0.0, 0.0]])
        with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
            compiled = torch.compile(fn, backend="aot_eager", dynamic=True, fullgraph=True)
            with strict_view_replay():
                base, view = compiled(x)
        ref_base, ref_view = fn(x)
        self.assertEqual(view, ref_view)
        self.assertEqual(view.stride(), ref_view.stride())
        self.assertEqual(view.untyped_storage().data_ptr(), base.untyped_storage().data_ptr())
        self.assertTrue(view._is_view())
        if PATCHED:
            self.assertEqual(fallback_counts(), {})

    def test_unbacked_view_of_requires_grad_intermediate(self) -> None:
        # u0 from .item() sizes the slice; the output's own size carries it.
        def fn(x, n):
            k = n.item()
            torch._check(k >= 0)
            torch._check(k <= x.shape[0])
            base = x * 2
            return base, base[:k]

        x = torch.randn(8, 3, requires_grad=True)
        with torch._dynamo.config.patch(capture_scalar_outputs=True):
            compiled = torch.compile(fn, backend="aot_eager", dynamic=True, fullgraph=True)
            with strict_view_replay():
                base, view = compiled(x, torch.tensor(5))
        self.assertEqual(view, fn(x, torch.tensor(5))[1])
        # Stock replays it too: autograd kept the graph output's view function.
        self.assertEqual(_grad_fns([view]), ["SliceBackward0"])
        if PATCHED:
            self.assertEqual(fallback_counts(), {})
        view.sum().backward()
        expected = torch.zeros(8, 3)
        expected[:5] = 2
        self.assertEqual(x.grad, expected)

class TestUnbackedSlices(CompileTestCase):
    """Slices by .item() values without torch._check: planning replays the chain on the traced
    base, which makes up fresh unbacked sizes; they must not become the graph's pending
    unbacked symbols (PendingUnbackedSymbolNotFound at compile time)."""

    def test_item_slices_compile(self) -> None:
        cases = {
            "narrow": (lambda x, t: x.narrow(0, t.item(), 2), lambda x: x[3:5]),
            "slice": (lambda x, t: x[: t.item()], lambda x: x[:3]),
            "slice_t": (lambda x, t: x[: t.item()].t(), lambda x: x[:3].t()),
        }
        for name, (fn, ref) in cases.items():
            for dynamic in (False, True):
                with self.subTest(name=name, dynamic=dynamic):
                    torch._dynamo.reset()
                    counters.clear()
                    x = torch.randn(8, 3, requires_grad=True)
                    with torch._dynamo.config.patch(capture_scalar_outputs=True):
                        out = torch.compile(fn, backend="aot_eager", dynamic=dynamic, fullgraph=True)(
                            x, torch.tensor(3)
                        )
                    self.assertEqual(out, ref(x))
                    self.assertEqual(out.stride(), ref(x).stride())
                    self.assertEqual(out.storage_offset(), ref(x).storage_offset())
                    # u0 is returned by the graph (Note [Symbol outputs]); stock falls back.
                    if PATCHED:
                        self.assertNotIn("AsStridedBackward0", autograd_nodes([out]))
                        self.assertEqual(fallback_counts(), {})
                    else:
                        self.assertIn("AsStridedBackward0", autograd_nodes([out]))


class TestPlanPickles(TestCase):
    @unittest.skipUnless(PATCHED, "plans exist only in the patched wheel")
    def test_plan_round_trips_through_pickle(self) -> None:
        from torch._functorch._aot_autograd.view_replay import RegenerationCall
        from torch._functorch._aot_autograd.view_replay.codegen import compiled_plan
        from torch._functorch._aot_autograd.view_replay.spec import ReplayPlan

        import torch._functorch._aot_autograd.collect_metadata_analysis as cma

        decided = []
        plan_view_replay = cma.plan_view_replay

        def spy(scope, view_meta_sequence):
            decided.append(plan_view_replay(scope, view_meta_sequence))
            return decided[-1]

        cma.plan_view_replay = spy
        try:
            torch._dynamo.reset()
            fn = PROGRAMS["slice+t-input"].fn
            torch.compile(fn, backend="aot_eager", dynamic=True)(torch.randn(6, 4, requires_grad=True))
        finally:
            cma.plan_view_replay = plan_view_replay
        (view_replay,) = decided
        plan = view_replay.route
        self.assertIsInstance(plan, ReplayPlan)
        self.assertEqual(plan.names(), ("slice_Tensor_ViewMeta", "t_ViewMeta"))
        clone = pickle.loads(pickle.dumps(view_replay))
        self.assertEqual(clone, view_replay)  # plain data
        x = torch.randn(10, 4, requires_grad=True)
        out = compiled_plan(clone.route)(x, x[:5].t(), RegenerationCall({}, ()))
        self.assertEqual(out, x[:5].t())
        self.assertEqual(autograd_nodes([out]), ["TBackward0", "SliceBackward0", "AccumulateGrad"])


WARM_CACHE_SCRIPT = textwrap.dedent(
    """
    import json, torch
    from torch._dynamo.utils import counters
    torch._functorch.config.enable_autograd_cache = True
    def fn(x):
        return x[: x.shape[0] // 2].t()
    compiled = torch.compile(fn, backend="inductor", dynamic=True)
    x = torch.randn(8, 4, requires_grad=True)
    out = compiled(x)
    out.sum().backward()
    ok = torch.equal(out, fn(x)) and out.stride() == fn(x).stride()
    print("RESULT " + json.dumps({
        "grad_fn": type(out.grad_fn).__name__,
        "ok": ok,
        "grad_ok": torch.equal(x.grad[:4], torch.ones(4, 4)) and torch.equal(x.grad[4:], torch.zeros(4, 4)),
        "hit": counters["aot_autograd"]["autograd_cache_hit"],
        "saved": counters["aot_autograd"]["autograd_cache_saved"],
        "fallbacks": dict(counters["view_replay_fallback"]),
    }))
    """
)


class TestWarmCache(TestCase):
    def _run(self, cache_dir: str) -> dict:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache_dir)
        proc = subprocess.run(
            [sys.executable, "-c", WARM_CACHE_SCRIPT], env=env, capture_output=True, text=True, timeout=600
        )
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))
        return json.loads(line[len("RESULT "):])

    def test_second_process_hits_cache_and_replays(self) -> None:
        with tempfile.TemporaryDirectory() as cache_dir:
            cold = self._run(cache_dir)
            warm = self._run(cache_dir)
        self.assertEqual((cold["hit"], cold["saved"]), (0, 1))
        self.assertEqual(warm["hit"], 1)
        for run in (cold, warm):
            self.assertTrue(run["ok"])
            self.assertTrue(run["grad_ok"])
            self.assertEqual(run["grad_fn"], "TBackward0" if PATCHED else "AsStridedBackward0")
            if PATCHED:
                self.assertEqual(run["fallbacks"], {})


INDUCTOR_PROGRAMS = ("slice-input", "select-input", "expand-input", "view-intermediate", "slice+t-input")


class TestInductorSubset(TestCase):
    @parametrize("name", INDUCTOR_PROGRAMS)
    def test_inductor(self, name: str) -> None:
        program = PROGRAMS[name]
        torch._dynamo.reset()
        compiled = torch.compile(program.fn, backend="inductor", dynamic=True)
        for size in SIZES:
            with self.subTest(size=size), strict_view_replay():
                (x,) = make_inputs(program, size)
                (xr,) = make_inputs(program, size)
                out = compiled(x)
                ref = program.fn(xr)
                out = out if isinstance(out, tuple) else (out,)
                ref = ref if isinstance(ref, tuple) else (ref,)
                for o, r in zip(out, ref):
                    self.assertEqual(o, r)
                    self.assertEqual(o.stride(), r.stride())
                    self.assertEqual(o.storage_offset(), r.storage_offset())
                views = [i for i, r in enumerate(ref) if r._is_view()]
                got = [type(out[i].grad_fn).__name__ for i in views]
                if PATCHED:
                    self.assertEqual(got, [type(ref[i].grad_fn).__name__ for i in views])
                    self.assertEqual(autograd_nodes(out).count("AsStridedBackward0"), 0)
                sum(o.sum() for o in out).backward()
                sum(r.sum() for r in ref).backward()
                self.assertEqual(x.grad, xr.grad)


instantiate_parametrized_tests(TestInductorSubset)

if __name__ == "__main__":
    run_tests()
