# Owner(s): ["oncall: pt2"]
"""
Tests for the replay of symbolic view chains (view_replay/plan.py): under
dynamic shapes, an output that aliases an input or intermediate through views
whose arguments depend on a symbolic size replays eager's nodes; plans hold no
sympy, pickle into the AOTAutograd cache and replay after unpickling.
"""

import pickle

import torch
import torch._dynamo
from torch._dynamo.utils import counters
from torch._functorch._aot_autograd import view_replay
from torch._functorch._aot_autograd.view_replay import (
    FallbackReason,
    RegenerationCall,
    ViewReplayFallbackError,
)
from torch._functorch._aot_autograd.view_replay.codegen import compiled_plan, plan_source
from torch._functorch._aot_autograd.view_replay.spec import RecordedViewMetas, ReplayPlan
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)


def _view_of_input(x):
    return x.view(x.shape)


# Output aliases the input through a chain whose arguments depend on the
# symbolic size n = x.shape[0] under dynamic=True; the node eager records for
# the chain's last op.
DYNAMIC_INPUT_VIEWS = {
    "view": (_view_of_input, "ViewBackward0"),
    "view_n_neg1": (lambda x: x.view(x.shape[0], -1), "ViewBackward0"),
    "slice_half": (lambda x: x[: x.shape[0] // 2], "SliceBackward0"),
    "narrow": (lambda x: x.narrow(0, 1, x.shape[0] - 2), "SliceBackward0"),
    "select_last": (lambda x: x[x.shape[0] - 1], "SelectBackward0"),
    "slice_then_t": (lambda x: x[: x.shape[0] // 2].t(), "TBackward0"),
    "expand": (lambda x: x.unsqueeze(0).expand(2, *x.shape), "ExpandBackward0"),
}


class TestViewReplay(TestCase):
    def setUp(self):
        super().setUp()
        torch._dynamo.reset()
        counters.clear()

    @parametrize("name", sorted(DYNAMIC_INPUT_VIEWS))
    def test_dynamic_input_alias_replays_view(self, name):
        fn, expected_node = DYNAMIC_INPUT_VIEWS[name]
        compiled = torch.compile(fn, backend="aot_eager", dynamic=True)
        with view_replay.config.patch(strict=True):
            for n in (6, 8):
                x = torch.randn(n, 4, requires_grad=True)
                x_ref = x.detach().clone().requires_grad_(True)
                out, ref = compiled(x), fn(x_ref)
                self.assertEqual(out.grad_fn.name(), expected_node)
                self.assertEqual(out, ref)
                self.assertEqual(out.stride(), ref.stride())
                self.assertEqual(out.storage_offset(), ref.storage_offset())
                self.assertEqual(out.untyped_storage().data_ptr(), x.untyped_storage().data_ptr())
                out.sum().backward()
                ref.sum().backward()
                self.assertEqual(x.grad, x_ref.grad)
        self.assertEqual(dict(counters["view_replay_fallback"]), {})

    def test_dynamic_intermediate_alias_replays_view(self):
        def fn(x):
            out = x.mul(2)
            return out.view(out.shape), out.view(out.shape)

        compiled = torch.compile(fn, backend="inductor", dynamic=True)
        with view_replay.config.patch(strict=True):
            for n in (4, 6):
                x = torch.randn(n, 3, requires_grad=True)
                outs = compiled(x)
                self.assertEqual([o.grad_fn.name() for o in outs], ["ViewBackward0"] * 2)
                self.assertEqual(outs, fn(x))
        self.assertEqual(dict(counters["view_replay_fallback"]), {})

    def test_symbolic_replay_disabled_falls_back(self):
        # replay_symbolic_views=False reproduces the old behaviour, recorded.
        compiled = torch.compile(_view_of_input, backend="aot_eager", dynamic=True)
        x = torch.randn(6, 4, requires_grad=True)
        with view_replay.config.patch(replay_symbolic_views=False):
            out = compiled(x)
        self.assertEqual(out.grad_fn.name(), "AsStridedBackward0")
        self.assertEqual(out, x)
        self.assertEqual(
            dict(counters["view_replay_fallback"]),
            {FallbackReason.SYMBOLIC_REPLAY_DISABLED.name: 1},
        )

    def test_strict_mode_raises_for_disabled_symbolic_replay(self):
        compiled = torch.compile(_view_of_input, backend="aot_eager", dynamic=True)
        x = torch.randn(6, 4, requires_grad=True)
        with view_replay.config.patch(strict=True, replay_symbolic_views=False):
            with self.assertRaisesRegex(ViewReplayFallbackError, "SYMBOLIC_REPLAY_DISABLED"):
                compiled(x)


class TestViewReplayPlan(TestCase):
    def _decided(self, fn, *args, dynamic=True):
        """Compile ``fn`` and return the ViewReplay decided for each of its aliased outputs."""
        import torch._functorch._aot_autograd.collect_metadata_analysis as cma

        decided = []
        plan_view_replay = cma.plan_view_replay

        def recording_plan_view_replay(scope, view_meta_sequence):
            decided.append(plan_view_replay(scope, view_meta_sequence))
            return decided[-1]

        cma.plan_view_replay = recording_plan_view_replay
        try:
            torch._dynamo.reset()
            torch.compile(fn, backend="aot_eager", dynamic=dynamic)(*args)
        finally:
            cma.plan_view_replay = plan_view_replay
        return decided

    def test_plan_pickles_and_replays(self):
        def fn(x):
            return x[: x.shape[0] // 2].t()

        (decided,) = self._decided(fn, torch.randn(6, 4, requires_grad=True))
        plan = decided.route
        self.assertIsInstance(plan, ReplayPlan)
        self.assertEqual(plan.names(), ("slice_Tensor_ViewMeta", "t_ViewMeta"))
        clone = pickle.loads(pickle.dumps(plan))
        self.assertEqual(clone, plan)
        self.assertNotIn("sympy", plan_source(clone)[0])
        x = torch.randn(10, 4, requires_grad=True)
        out = compiled_plan(clone)(x, fn(x.detach()), RegenerationCall({}, ()))
        self.assertEqual(out, fn(x))
        self.assertEqual(out.stride(), fn(x).stride())
        self.assertEqual(out.grad_fn.name(), "TBackward0")
        self.assertEqual(out.grad_fn.next_functions[0][0].name(), "SliceBackward0")

    def test_static_chain_needs_no_plan(self):
        # Without symbolic arguments the recorded ViewMetas replay as they are.
        (decided,) = self._decided(lambda x: x[:2].t(), torch.randn(6, 4), dynamic=False)
        self.assertEqual(decided.route, RecordedViewMetas())


instantiate_parametrized_tests(TestViewReplay)


if __name__ == "__main__":
    run_tests()
