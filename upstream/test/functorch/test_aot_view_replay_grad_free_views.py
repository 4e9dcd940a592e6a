# Owner(s): ["oncall: pt2"]
"""
Tests that an output which is a view of another output comes back as eager's
view of it when neither requires grad: same _base, shared version counter, so a
tensor autograd saves off the view after the call sees an in-place change of the
other output (Note [Views of outputs that do not require grad]).
"""

import torch
import torch._dynamo
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)


def view_and_base(x):
    y = x * 2
    return y[0], y


def view_and_base_mutated_through_a_view(x):
    y = x * 2
    y.view(-1).add_(1)
    return y[0], y


class TestGradFreeViews(TestCase):
    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    @parametrize("mutated", [False, True])
    def test_view_of_an_output(self, mutated, dynamic, backend):
        fn = view_and_base_mutated_through_a_view if mutated else view_and_base
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
        for n in (2, 3):
            a, y = compiled(torch.randn(n, 3))
            self.assertIs(a._base, y)  # stock: None (inductor) or a hidden intermediate
            version = a._version
            y.mul_(2)
            self.assertGreater(a._version, version)

    @parametrize("backend", ["aot_eager", "inductor"])
    def test_saved_after_the_call_then_inplace(self, backend):
        torch._dynamo.reset()
        a, y = torch.compile(view_and_base, backend=backend)(torch.randn(2, 3))
        w = torch.randn(3, requires_grad=True)
        z = (w * a).sum()
        y.mul_(2)
        # Stock returns w.grad computed with the doubled a.
        with self.assertRaisesRegex(RuntimeError, "modified by an inplace operation"):
            z.backward()


instantiate_parametrized_tests(TestGradFreeViews)


if __name__ == "__main__":
    run_tests()
