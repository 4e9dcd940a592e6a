# Owner(s): ["oncall: pt2"]
"""
Tests that backward through views of a tensor-subclass input mutated in the
compiled graph computes as in eager when the input's new value is the
backward's only tangent (Note [The only tangent is a mutated subclass input's]).
"""

import torch
import torch._dynamo
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)
from torch.testing._internal.two_tensor import TwoTensor


def run(fn):
    g = torch.Generator().manual_seed(0)
    leaf = TwoTensor(
        torch.randn(4, 4, generator=g), torch.randn(4, 4, generator=g)
    ).requires_grad_()
    outs = fn(leaf * 1)
    values = [(o.a.clone(), o.b.clone()) for o in outs]
    sum(o.sum() for o in outs).backward()
    return values, (leaf.grad.a, leaf.grad.b)


class TestMutatedSubclassTangents(TestCase):
    def setUp(self):
        super().setUp()
        torch._dynamo.reset()

    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    def test_views_of_mutated_input(self, dynamic, backend):
        def fn(x):
            x.add_(1)
            return x[1:], x.t()

        compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
        self.assertEqual(run(compiled), run(fn))

    @parametrize("dynamic", [False, True])
    def test_single_view_of_mutated_input(self, dynamic):
        def fn(x):
            x.mul_(2)
            return (x.view(-1),)

        compiled = torch.compile(fn, backend="aot_eager", dynamic=dynamic)
        self.assertEqual(run(compiled), run(fn))


instantiate_parametrized_tests(TestMutatedSubclassTangents)


if __name__ == "__main__":
    run_tests()
