# Owner(s): ["oncall: pt2"]
"""
Tests that a tensor-subclass input mutated outside the compiled graph is
counted among the dense forward outputs: inductor's backward neither reuses a
saved user output nor restrides the tangents from the wrong output
(Note [Subclass inputs mutated outside the graph]).
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
    before = [(o.a.clone(), o.b.clone()) for o in outs]
    sum(o.sum() for o in outs).backward()
    return before, [(o.a, o.b) for o in outs], (leaf.grad.a, leaf.grad.b)


class TestSubclassInputMutations(TestCase):
    def setUp(self):
        super().setUp()
        torch._dynamo.reset()

    @parametrize("dynamic", [False, True])
    def test_saved_output_is_not_overwritten(self, dynamic):
        def fn(x):
            x.mul_(2)
            e = x.exp()
            return e, x * 4

        compiled = torch.compile(fn, backend="inductor", dynamic=dynamic)
        self.assertEqual(run(compiled), run(fn))

    @parametrize("dynamic", [False, True])
    def test_tangents_keep_their_layout(self, dynamic):
        def fn(x):
            x.mul_(2)
            return x * 3, (x * 4).t()

        compiled = torch.compile(fn, backend="inductor", dynamic=dynamic)
        self.assertEqual(run(compiled), run(fn))


instantiate_parametrized_tests(TestSubclassInputMutations)


if __name__ == "__main__":
    run_tests()
