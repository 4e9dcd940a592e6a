# Owner(s): ["oncall: pt2"]
"""
Tests that outputs AOTAutograd regenerates off an intermediate are views of a
fresh tensor when the backend computes that intermediate as a graph input:
inductor drops the no-op of ``x * ones_like(x)`` (and of ``x * 1`` from 2.14)
and returns ``x`` itself as the base (Note [Bases the graph returns as an
input]).
"""

import torch
import torch._dynamo
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)


def pieces_of_a_no_op(x):
    return tuple(p.view(2, -1).t() for p in (x * torch.ones_like(x)).chunk(3))


def user_output_and_its_view(x):
    y = x + torch.zeros_like(x)
    return y, y[1:].t()


def pieces_of_a_view_of_the_input(x):
    y = x.view(-1) * torch.ones_like(x).view(-1)
    return y[:12], y[12:]


def pieces_and_a_use(x):
    y = x * torch.ones_like(x)
    return y[:3], y[3:], y * y


class TestFreshIntermediateBases(TestCase):
    def _check_no_alias(self, fn, dynamic, requires_grad):
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend="inductor", dynamic=dynamic)
        x = torch.randn(6, 4, requires_grad=requires_grad)
        outs, eager = compiled(x), fn(x)
        for out in outs:
            # Stock: the outputs lie on x's storage (views of x where x requires grad).
            self.assertNotEqual(out.untyped_storage().data_ptr(), x.untyped_storage().data_ptr())
            self.assertIsNot(out._base, x)
        self.assertEqual([o._is_view() for o in outs], [o._is_view() for o in eager])
        # The views' nodes are eager's (the base's is CompiledFunctionBackward).
        self.assertEqual(
            [o.grad_fn and o.grad_fn.name() for o in outs if o._is_view()],
            [o.grad_fn and o.grad_fn.name() for o in eager if o._is_view()],
        )
        with torch.no_grad():
            x.add_(100)
        # Stock: the outputs changed with x.
        self.assertEqual(outs, eager)

    @parametrize("dynamic", [False, True])
    @parametrize("requires_grad", [False, True])
    def test_pieces_of_a_no_op(self, requires_grad, dynamic):
        self._check_no_alias(pieces_of_a_no_op, dynamic, requires_grad)

    @parametrize("requires_grad", [False, True])
    def test_user_output_and_its_view(self, requires_grad):
        self._check_no_alias(user_output_and_its_view, True, requires_grad)

    @parametrize("requires_grad", [False, True])
    def test_pieces_of_a_view_of_the_input(self, requires_grad):
        self._check_no_alias(pieces_of_a_view_of_the_input, False, requires_grad)

    def test_inplace_on_an_output_then_backward(self):
        # y * y saved y, which out0.mul_(3) changed: eager raises.
        torch._dynamo.reset()
        compiled = torch.compile(pieces_and_a_use, backend="inductor")
        x = torch.randn(6, 4, requires_grad=True)
        out0, _, out2 = compiled(x)
        out0.mul_(3)
        with self.assertRaisesRegex(RuntimeError, "modified by an inplace operation"):
            out2.sum().backward()

    def test_input_changed_then_backward(self):
        # The compiled backward reads x where eager's reads y: it may raise after
        # x.add_(), but must not compute with the changed x.
        torch._dynamo.reset()
        compiled = torch.compile(pieces_and_a_use, backend="inductor")
        x = torch.randn(6, 4, requires_grad=True)
        expected = 2 * x.detach().clone()
        out2 = compiled(x)[2]
        with torch.no_grad():
            x.add_(100)
        try:
            out2.sum().backward()
        except RuntimeError as e:
            self.assertIn("modified by an inplace operation", str(e))
        else:
            self.assertEqual(x.grad, expected)


instantiate_parametrized_tests(TestFreshIntermediateBases)


if __name__ == "__main__":
    run_tests()
