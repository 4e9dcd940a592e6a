# Owner(s): ["oncall: pt2"]
"""
Tests for custom-Function views that the compiled autograd.Function returns as
views of their bases (Note [Custom-Function views returned as views] in
view_replay/function_views.py): inductor's forward returns them as fresh
tensors on the base's buffer, with no _base and a version counter of their own.
"""

import torch
import torch._dynamo
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)


class SliceF(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x[1:]

    @staticmethod
    def backward(ctx, g):
        out = g.new_zeros(g.shape[0] + 1, *g.shape[1:])
        out[1:] = g * 7
        return out


def slice_of_input_and_t(x):
    return SliceF.apply(x), x.t()


def function_view_of_shared_intermediate(x):
    z = x * 2
    return SliceF.apply(z), z.t()


def view_after_function_of_hidden_intermediate(x):
    return SliceF.apply(x * 2).t()


class TestCustomFunctionViewsReturnedAsViews(TestCase):
    def setUp(self):
        super().setUp()
        torch._dynamo.reset()

    @parametrize("dynamic", [False, True])
    def test_view_of_an_input_is_a_view_of_it(self, dynamic):
        compiled = torch.compile(slice_of_input_and_t, backend="inductor", dynamic=dynamic)
        x = torch.randn(4, 3, requires_grad=True)
        a, b = compiled(x)
        self.assertIs(a._base, x)
        self.assertIs(b._base, x)
        self.assertEqual(a, x[1:])
        with self.assertRaisesRegex(RuntimeError, "is a view and is being modified inplace"):
            a.mul_(3)

    @parametrize("dynamic", [False, True])
    def test_view_of_an_intermediate_shares_its_version_counter(self, dynamic):
        fn = function_view_of_shared_intermediate
        compiled = torch.compile(fn, backend="inductor", dynamic=dynamic)
        for f in (fn, compiled):  # eager raises too
            x = torch.randn(4, 3, requires_grad=True)
            a, b = f(x)
            self.assertIs(a._base, b._base)
            version = a._version
            b.mul_(3)
            self.assertEqual(a._version, version + 1)
            with self.assertRaisesRegex(RuntimeError, "another view of its base has been modified inplace"):
                a.sum().backward()

    @parametrize("dynamic", [False, True])
    def test_view_of_a_hidden_intermediate_is_a_view(self, dynamic):
        fn = view_after_function_of_hidden_intermediate
        compiled = torch.compile(fn, backend="inductor", dynamic=dynamic)
        x = torch.randn(4, 3, requires_grad=True)
        xe = x.detach().clone().requires_grad_()
        a = compiled(x)
        self.assertIsNotNone(a._base)
        self.assertEqual(a, fn(xe))
        a.sum().backward()
        fn(xe).sum().backward()
        self.assertEqual(x.grad, xe.grad)  # SliceF's backward
        with self.assertRaisesRegex(RuntimeError, "is a view and is being modified inplace"):
            a.mul_(3)


instantiate_parametrized_tests(TestCustomFunctionViewsReturnedAsViews)

if __name__ == "__main__":
    run_tests()
