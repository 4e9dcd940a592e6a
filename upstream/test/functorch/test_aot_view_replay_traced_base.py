# Owner(s): ["oncall: pt2"]
"""
Tests for planning on the traced base (view_replay/plan.py, Note [Planning on
the traced base]): _unsafe_view's size is read off the step replayed on the
traced base, and full slices that Dynamo records under dynamic shapes are
dropped as eager's indexing does (Note [Identity slices]).
"""

import torch
import torch._dynamo
from torch._functorch._aot_autograd import view_replay
from torch.testing._internal.common_utils import run_tests, TestCase


class TestPlanningOnTheTracedBase(TestCase):
    def setUp(self):
        super().setUp()
        torch._dynamo.reset()

    def test_unsafe_view_chain_replays(self):
        # x @ w with a 3-D x is mm + _unsafe_view, whose as_tuple() is not read
        # (Note [Reading ViewMeta arguments]): without the traced step its
        # symbolic chain cannot be planned, and strict mode raises.
        def fn(x, w):
            y = x @ w
            return y[0], y[1].t()

        x, w = torch.randn(2, 4, 8, requires_grad=True), torch.randn(8, 8)
        with view_replay.config.patch(strict=True):
            outs = torch.compile(fn, backend="aot_eager", dynamic=True)(x, w)
        self.assertEqual([o.grad_fn.name() for o in outs], ["SelectBackward0", "TBackward0"])
        self.assertEqual(outs, fn(x, w))

    def test_identity_slice_is_dropped(self):
        # Dynamo records x[:, -1]'s full slice under dynamic shapes; eager's
        # indexing selects directly off the input.
        x = torch.randn(6, 4, requires_grad=True)
        with view_replay.config.patch(strict=True):
            out = torch.compile(lambda x: x[:, -1], backend="aot_eager", dynamic=True)(x)
        self.assertEqual(out.grad_fn.name(), "SelectBackward0")
        self.assertEqual(out.grad_fn.next_functions[0][0].name(), "torch::autograd::AccumulateGrad")
        self.assertEqual(out, x[:, -1])


if __name__ == "__main__":
    run_tests()
