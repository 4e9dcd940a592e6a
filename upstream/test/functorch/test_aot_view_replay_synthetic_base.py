# Owner(s): ["oncall: pt2"]
"""
Tests for aliased outputs next to synthetic-base inputs: an alias of an
intermediate keeps its own base when aliased inputs are merged into a
synthetic base, and gets eager's node and gradient.
"""

import torch
import torch._dynamo
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)


class TestSyntheticBaseIndices(TestCase):
    """An alias of an intermediate next to a synthetic-base input keeps its base."""

    @parametrize("dynamic", [False, True])
    def test_alias_of_intermediate_next_to_synthetic_base(self, dynamic):
        def fn(x, a, w):
            y = w.unsqueeze(0).expand(2, *w.shape).flatten(0, 1)
            v = y[y.shape[0] - 1]
            torch.ops.aten.alias(x)
            x.add_(1)  # a is a view of x: x and a are merged into a synthetic base
            torch.ops.aten.alias(a)
            return v, y

        def inputs():
            torch.manual_seed(0)
            x = torch.randn(1, 2)
            return x, x.unsqueeze(0).expand(2, *x.shape), torch.randn(2, 1, requires_grad=True)

        torch._dynamo.reset()
        eager_in, compiled_in = inputs(), inputs()
        ref = fn(*eager_in)
        out = torch.compile(fn, backend="aot_eager", dynamic=dynamic)(*compiled_in)
        self.assertEqual(out, ref)
        (ref[0].sum() + 2 * ref[1].sum()).backward()
        (out[0].sum() + 2 * out[1].sum()).backward()
        self.assertEqual(compiled_in[2].grad, eager_in[2].grad)
        self.assertEqual(out[0].grad_fn.name(), "SelectBackward0")

    @parametrize("requires_grad", [False, True])
    def test_view_of_an_output_next_to_synthetic_base(self, requires_grad):
        # The base_idx of d.view(-1) indexes the outputs (its base is the user
        # output d), beyond the two inputs.
        def fn(x, y):
            y.mul_(2)  # x and y overlap: merged into a synthetic base
            a, b, c = x + 1, x + 2, x + 3
            d = x + 4 + y
            return a, b, c, d, d.view(-1)

        def inputs():
            base = torch.ones(8, requires_grad=requires_grad).clone()
            return base, (base[0:6], base[2:8])

        torch._dynamo.reset()
        (eager_base, eager_in), (base, compiled_in) = inputs(), inputs()
        ref = fn(*eager_in)
        out = torch.compile(fn, backend="aot_eager")(*compiled_in)
        self.assertEqual(out, ref)
        self.assertEqual(base, eager_base)
        self.assertIsNot(out[4], out[3])
        self.assertEqual(out[4].data_ptr(), out[3].data_ptr())


instantiate_parametrized_tests(TestSyntheticBaseIndices)


if __name__ == "__main__":
    run_tests()
