# Owner(s): ["oncall: pt2"]
"""
Tests that a tensor the compiled graph creates and mutates through a view comes
back as eager's fresh tensor, not as a view of the graph's intermediate: in-place
on it works, it is not a view, and a tensor the backward saved off it sees the
in-place change (Note [Fresh outputs the graph returns as views]).
"""

import torch
import torch._dynamo
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)


def mutated_through_a_view(x):
    y = x * 2
    y.view(-1).add_(1)
    return y, y @ x.t()


def transposed_in_place(x):
    y = x * 2
    y.t_()
    return y


def stft(x):
    # ends in squeeze_ on its fresh result for a 1-D signal
    return torch.stft(x.flatten(), 4, return_complex=True, window=torch.hann_window(4))


def viewed_after_a_mutation_through_a_view(x):
    y = x * 2
    y.t().mul_(2)
    return y[0], y.sum()


class TestFreshViews(TestCase):
    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    def test_inplace_on_the_output(self, dynamic, backend):
        torch._dynamo.reset()
        compiled = torch.compile(mutated_through_a_view, backend=backend, dynamic=dynamic)
        for n in (2, 3):
            x = torch.randn(n, 3, requires_grad=True)
            y, z = compiled(x)
            self.assertFalse(y._is_view())
            self.assertIsNone(y._base)
            y.mul_(3)  # stock aot_eager: "Output 0 of CompiledFunction is a view ..."
            with self.assertRaisesRegex(RuntimeError, "modified by an inplace operation"):
                z.sum().backward()

    @parametrize("backend", ["aot_eager", "inductor"])
    def test_view_of_the_output(self, backend):
        torch._dynamo.reset()
        compiled = torch.compile(viewed_after_a_mutation_through_a_view, backend=backend)
        x = torch.randn(2, 3, requires_grad=True)
        xe = x.detach().clone().requires_grad_()
        a, s = compiled(x)
        ae, se = viewed_after_a_mutation_through_a_view(xe)
        # Nothing is saved on y's storage: y[0] stays hidden, as upstream returns it
        # (Note [Saved tensors on the storage of a returned tensor]).
        self.assertFalse(a._is_view())
        a.mul_(3)
        ae.mul_(3)
        (a.sum() + s).backward()
        (ae.sum() + se).backward()
        self.assertEqual(x.grad, xe.grad)

    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("fn", [transposed_in_place, stft], name_fn=lambda fn: fn.__name__)
    def test_viewed_in_place(self, fn, backend):
        # An in-place view op leaves eager's fresh tensor no view; the graph computes it with
        # the out-of-place op (stock aot_eager: a view, and detach_() raises).
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend=backend)
        x = torch.randn(2, 3, requires_grad=True)
        xe = x.detach().clone().requires_grad_()
        y, ye = compiled(x), fn(xe)
        self.assertEqual(y, ye)
        self.assertFalse(y._is_view())
        self.assertIsNone(y._base)
        y.abs().sum().backward()
        ye.abs().sum().backward()
        self.assertEqual(x.grad, xe.grad)
        y.detach_()
        with torch.no_grad():
            self.assertFalse(compiled(x)._is_view())

    def test_without_a_backward(self):
        torch._dynamo.reset()
        compiled = torch.compile(mutated_through_a_view, backend="aot_eager")
        with torch.no_grad():
            y, _ = compiled(torch.randn(2, 3))
        self.assertFalse(y._is_view())
        self.assertIsNone(y._base)


instantiate_parametrized_tests(TestFreshViews)


if __name__ == "__main__":
    run_tests()
