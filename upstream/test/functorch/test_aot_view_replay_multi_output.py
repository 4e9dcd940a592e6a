# Owner(s): ["oncall: pt2"]
"""
Tests for multi-output views (unbind, split, chunk) of compiled graphs: the
pieces are regenerated with one call of the op per group, so the backward has
eager's single UnbindBackward0 / SplitBackward0 node and autograd raises
eager's errors for in-place on a piece and for backward through a piece after
in-place on the base (Note [Multi-output views]).
"""

import torch
import torch._dynamo
from torch._dynamo.utils import counters
from torch._functorch._aot_autograd import view_replay
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)


MULTI_OUTPUT_VIEWS = {
    "unbind": (lambda t: t.unbind(0), "UnbindBackward0"),
    "split": (lambda t: t.split(2), "SplitBackward0"),
    "chunk": (lambda t: t.chunk(3), "SplitBackward0"),
}


class TestMultiOutputViews(TestCase):
    def setUp(self):
        super().setUp()
        torch._dynamo.reset()
        counters.clear()

    @parametrize("dynamic", [False, True])
    @parametrize("name", sorted(MULTI_OUTPUT_VIEWS))
    def test_one_node_per_group(self, name, dynamic):
        op, expected_node = MULTI_OUTPUT_VIEWS[name]

        def fn(x):
            return op(x * 2)

        x = torch.randn(6, 3, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_(True)
        with view_replay.config.patch(strict=True):
            outs = torch.compile(fn, backend="aot_eager", dynamic=dynamic)(x)
        refs = fn(x_ref)
        self.assertEqual(outs, refs)
        self.assertTrue(all(o.grad_fn.name() == expected_node for o in outs))
        self.assertTrue(all(o.grad_fn is outs[0].grad_fn for o in outs))
        sum(o.sum() * i for i, o in enumerate(outs, 1)).backward()
        sum(r.sum() * i for i, r in enumerate(refs, 1)).backward()
        self.assertEqual(x.grad, x_ref.grad)
        self.assertEqual(dict(counters["view_replay_fallback"]), {})

    def test_inplace_on_piece_raises(self):
        def fn(x):
            return (x * 2).unbind(0)

        outs = torch.compile(fn, backend="aot_eager")(torch.randn(3, 3, requires_grad=True))
        with self.assertRaisesRegex(RuntimeError, "Such functions do not allow the output views"):
            outs[0].mul_(2)

    def test_backward_through_piece_after_inplace_on_base_raises(self):
        # Hiding the aliasing from autograd gave a silently wrong gradient here.
        def fn(x):
            out = x * 2
            return *out.unbind(0), out

        outs = torch.compile(fn, backend="aot_eager")(torch.randn(3, 3, requires_grad=True))
        outs[-1].mul_(2)
        with self.assertRaisesRegex(RuntimeError, "Such functions do not allow the output views"):
            outs[0].sum().backward()

    def test_hide_flag_restores_hidden_aliasing(self):
        def fn(x):
            return (x * 2).unbind(0)

        with view_replay.config.patch(hide_multi_output_view_aliasing=True):
            outs = torch.compile(fn, backend="aot_eager")(torch.randn(3, 3, requires_grad=True))
        self.assertTrue(all(o.grad_fn.name() == "CompiledFunctionBackward" for o in outs))


instantiate_parametrized_tests(TestMultiOutputViews)


if __name__ == "__main__":
    run_tests()
