# Owner(s): ["oncall: pt2"]
"""
Tests for outputs whose view chain goes through a custom autograd.Function's
node (Note [Views made by custom autograd.Functions] in
view_replay/autograd_chain.py): they are returned by the compiled function
itself, whose backward holds the Function's, instead of being regenerated off
their base by replaying the plain views.
"""

import torch
import torch._dynamo
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)


class ViewAs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return g * 5


class SliceF(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x[1:]

    @staticmethod
    def backward(ctx, g):
        out = g.new_zeros(g.shape[0] + 1, *g.shape[1:])
        out[1:] = g * 7
        return out


def view_after_function(x):
    return ViewAs.apply(x)[1:]


def function_view_of_shared_intermediate(x):
    z = x * 2
    return SliceF.apply(z), z.t()


class TestCustomFunctionViews(TestCase):
    def setUp(self):
        super().setUp()
        torch._dynamo.reset()

    def _grad(self, fn, x):
        x = x.detach().requires_grad_()
        outs = fn(x)
        outs = outs if isinstance(outs, tuple) else (outs,)
        sum(o.sum() for o in outs).backward()
        return x.grad

    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    def test_view_after_the_function_keeps_its_backward(self, dynamic, backend):
        x = torch.randn(4, 3)
        compiled = torch.compile(view_after_function, backend=backend, dynamic=dynamic)
        self.assertEqual(self._grad(compiled, x), self._grad(view_after_function, x))

    @parametrize("dynamic", [False, True])
    def test_function_view_of_an_intermediate_keeps_its_backward(self, dynamic):
        x = torch.randn(4, 3)
        fn = function_view_of_shared_intermediate
        compiled = torch.compile(fn, backend="aot_eager", dynamic=dynamic)
        self.assertEqual(self._grad(compiled, x), self._grad(fn, x))
        out, other = compiled(x.requires_grad_())
        self.assertIs(out._base, other._base)


instantiate_parametrized_tests(TestCustomFunctionViews)

if __name__ == "__main__":
    run_tests()
