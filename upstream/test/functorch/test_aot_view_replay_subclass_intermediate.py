# Owner(s): ["oncall: pt2"]
"""
Tests for tensor-subclass outputs that alias one intermediate
(o = x * 2; return o.view(-1), o.t()): they compile, are regenerated off the
intermediate and match eager.
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
from torch.testing._internal.two_tensor import TwoTensor


class TestSubclassIntermediateBases(TestCase):
    """Subclass outputs aliasing one intermediate compile and match eager."""

    def setUp(self):
        super().setUp()
        torch._dynamo.reset()

    @parametrize("dynamic", [False, True])
    def test_two_tensor_outputs_alias_one_intermediate(self, dynamic):
        def fn(x):
            o = x * 2
            return o.view(-1), o.t()

        def two_tensor():
            return TwoTensor(torch.randn(4, 3), torch.randn(4, 3)).requires_grad_()

        x = two_tensor()
        xe = TwoTensor(x.a.detach().clone(), x.b.detach().clone()).requires_grad_()
        with view_replay.config.patch(strict=True):
            outs = torch.compile(fn, backend="aot_eager", dynamic=dynamic)(x)
        refs = fn(xe)
        for o, r in zip(outs, refs):
            self.assertEqual(o.a, r.a)
            self.assertEqual(o.b, r.b)
            self.assertEqual(o.grad_fn.name(), r.grad_fn.name())
        self.assertEqual(outs[0].a.untyped_storage().data_ptr(), outs[1].a.untyped_storage().data_ptr())
        (outs[0].sum() + 3 * outs[1].sum()).backward()
        (refs[0].sum() + 3 * refs[1].sum()).backward()
        self.assertEqual(x.grad.a, xe.grad.a)
        self.assertEqual(x.grad.b, xe.grad.b)


instantiate_parametrized_tests(TestSubclassIntermediateBases)


if __name__ == "__main__":
    run_tests()
