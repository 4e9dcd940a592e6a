# Owner(s): ["oncall: pt2"]
"""
Tests that an in-place change of a returned tensor, on whose storage eager's
backward saves a tensor, makes the compiled backward raise as eager's does,
whatever the partitioner chose to save (Note [Version witnesses]).
"""

import torch
import torch._dynamo
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)


def piece_of_an_output(x):
    v = x * 2
    a, b = v.chunk(2)
    return b, v, a.sin()


def slice_of_an_intermediate(x):
    v = x * 2
    return v[:2], v[2:].sin()


def constant_multiple_of_an_output(x):
    v = x * 2
    return v, v * 2


class TestVersionWitnesses(TestCase):
    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    def test_inplace_on_an_output_then_backward_through_the_sin(self, dynamic, backend):
        torch._dynamo.reset()
        compiled = torch.compile(piece_of_an_output, backend=backend, dynamic=dynamic)
        for n in (4, 6):
            x = torch.randn(n, 3, requires_grad=True)
            _, v, s = compiled(x)
            v.mul_(3)  # eager: the saved piece of v is now at another version
            with self.assertRaisesRegex(RuntimeError, "modified by an inplace operation"):
                s.sum().backward()

    def test_inplace_on_a_view_of_an_intermediate(self):
        torch._dynamo.reset()
        compiled = torch.compile(slice_of_an_intermediate, backend="aot_eager")
        x = torch.randn(4, 3, requires_grad=True)
        head, s = compiled(x)
        head.mul_(3)  # bumps the intermediate's version, which the sin's saved view shares
        with self.assertRaisesRegex(RuntimeError, "modified by an inplace operation"):
            s.sum().backward()

    def test_gradients_without_inplace(self):
        torch._dynamo.reset()
        compiled = torch.compile(piece_of_an_output, backend="aot_eager")
        x = torch.randn(4, 3, requires_grad=True)
        xe = x.detach().clone().requires_grad_()
        sum(o.sum() for o in compiled(x)).backward()
        sum(o.sum() for o in piece_of_an_output(xe)).backward()
        self.assertEqual(x.grad, xe.grad)

    def test_nothing_saved_on_the_output(self):
        torch._dynamo.reset()
        compiled = torch.compile(constant_multiple_of_an_output, backend="aot_eager")
        x = torch.randn(4, 3, requires_grad=True)
        v, w = compiled(x)
        v.mul_(3)
        w.sum().backward()  # eager too: mul by a constant saves nothing
        self.assertEqual(x.grad, torch.full((4, 3), 4.0))


instantiate_parametrized_tests(TestVersionWitnesses)


if __name__ == "__main__":
    run_tests()
