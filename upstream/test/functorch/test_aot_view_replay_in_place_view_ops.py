# Owner(s): ["oncall: pt2"]
"""
Tests that an output made by in-place view ops on a view (``y = x[1:];
y.unsqueeze_(0)``) is regenerated with eager's in-place nodes
(Note [In-place view ops replayed in place] in view_replay/plan.py).
"""

import torch
import torch._dynamo
from torch._functorch._aot_autograd import view_replay
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)


def unsqueeze_a_slice(x):
    y = x[1:]
    y.unsqueeze_(0)
    return y


def transpose_a_view(x):
    y = x.view(4, 3)
    y.transpose_(0, 1)
    return y


class TestInPlaceViewOps(TestCase):
    def setUp(self):
        super().setUp()
        torch._dynamo.reset()

    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    @parametrize("fn", [unsqueeze_a_slice, transpose_a_view], name_fn=lambda f: f.__name__)
    def test_in_place_node(self, fn, dynamic, backend):
        leaf = torch.randn(3, 4, requires_grad=True)
        x, xe = leaf * 1, leaf * 1
        with view_replay.config.patch(strict=True):
            out = torch.compile(fn, backend=backend, dynamic=dynamic)(x)
        ref = fn(xe)
        self.assertEqual(out, ref)
        self.assertEqual(out.stride(), ref.stride())
        self.assertEqual(out.grad_fn.name(), ref.grad_fn.name())
        self.assertEqual(out.grad_fn.next_functions[0][0].name(), ref.grad_fn.next_functions[0][0].name())
        self.assertEqual(x._version, xe._version)


instantiate_parametrized_tests(TestInPlaceViewOps)

if __name__ == "__main__":
    run_tests()
