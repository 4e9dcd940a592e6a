# Owner(s): ["oncall: pt2"]
"""
Tests for outputs whose autograd base is made inside their ViewMeta chain
(view_replay/plan.py, Note [Outputs whose autograd base is inside the chain]):
_unsafe_view (a copying reshape, x @ w with a 3-D x) is no autograd view, so
eager's views of its result have that result as their _base and share its
version counter. Regenerated off that base, the chain must not replay the
_unsafe_view once more; nor, where an in-place view op made the base (y.t_()),
that op.
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


def reshape_copy_and_last(x):
    b, h, t, d = x.shape
    y = (x * 2).transpose(1, 2).reshape(b, t, h * d)
    return y, y[:, -1]


class TestAutogradBaseInsideTheChain(TestCase):
    def setUp(self):
        super().setUp()
        torch._dynamo.reset()

    @parametrize("dynamic", [False, True])
    def test_inplace_on_the_base_reaches_the_view(self, dynamic):
        compiled = torch.compile(reshape_copy_and_last, backend="aot_eager", dynamic=dynamic)
        grads = []
        for fn in (reshape_copy_and_last, compiled):
            x = torch.randn(2, 2, 5, 4, generator=torch.Generator().manual_seed(0), requires_grad=True)
            with view_replay.config.patch(strict=True):
                y, last = fn(x)
            self.assertIs(last._base, y)
            y.mul_(3)  # eager: seen through last, whose backward then carries the factor 3
            last.sum().backward()
            grads.append(x.grad)
        self.assertEqual(grads[0], grads[1])

    @parametrize("dynamic", [False, True])
    def test_views_of_one_matmul_share_their_base(self, dynamic):
        def fn(x, w):
            y = x @ w
            return y[0], y[1].t()

        x, w = torch.randn(3, 4, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True)
        with view_replay.config.patch(strict=True):
            a, b = torch.compile(fn, backend="aot_eager", dynamic=dynamic)(x, w)
        self.assertIs(a._base, b._base)
        self.assertEqual((a.grad_fn.name(), b.grad_fn.name()), ("SelectBackward0", "TBackward0"))
        self.assertEqual((a, b), fn(x, w))


    @parametrize("backend", ["aot_eager", "inductor"])
    def test_base_viewed_in_place(self, backend):
        # y's ViewMetas are (t_,), y[0]'s (t_, select): y[0] is regenerated off y with the
        # select only (stock replays t_ once more: "incorrect out shape").
        def fn(x):
            y = x * 2
            y.t_()
            return y, y[0]

        x = torch.randn(2, 3, requires_grad=True)
        with view_replay.config.patch(strict=True):
            y, first = torch.compile(fn, backend=backend)(x)
        self.assertEqual(first.grad_fn.name(), "SelectBackward0")
        self.assertEqual((y, first), fn(x))


instantiate_parametrized_tests(TestAutogradBaseInsideTheChain)

if __name__ == "__main__":
    run_tests()
