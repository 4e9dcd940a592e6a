# Owner(s): ["oncall: pt2"]
"""
Tests that a call whose inputs merged into a synthetic base start elsewhere than
when the graph was traced never computes on the traced elements: it raises, or
(when Dynamo recompiles) gives eager's result (Note [Layouts of inputs merged
into a synthetic base]).
"""

import torch
import torch._dynamo
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)


def mutate_a_read_b(a, b):
    a.mul_(2)
    return b * 1


class TestMergedInputLayouts(TestCase):
    """a and b overlap and a is mutated: the graph assumes where a starts."""

    def _call(self, fn, start):
        base = torch.arange(42.0).reshape(14, 3).requires_grad_() * 1
        out = fn(base[start : start + 6], base[4:10])
        return base.detach(), out.detach()

    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    def test_other_offset_is_not_computed_on_the_traced_elements(self, backend, dynamic):
        torch._dynamo.reset()
        compiled = torch.compile(mutate_a_read_b, backend=backend, dynamic=dynamic)
        self.assertEqual(self._call(compiled, 5), self._call(mutate_a_read_b, 5))
        try:
            result = self._call(compiled, 7)
        except RuntimeError as e:
            self.assertIn("storage offset 21, which Dynamo does not guard", str(e))
            return
        self.assertFalse(dynamic is False, "a static graph is never recompiled here: it must raise")
        self.assertEqual(result, self._call(mutate_a_read_b, 7))

    @parametrize("backend", ["aot_eager", "inductor"])
    def test_offset_bound_to_a_size_follows_the_call(self, backend):
        # x[1:] starts at x.size(1): duck sizing binds the offset to that symbol and Dynamo
        # guards it, so the graph rebuilds a where each call has it.
        def mutate_a_read_x(x, a):
            a.add_(1)
            return x[0] * 1

        torch._dynamo.reset()
        compiled = torch.compile(mutate_a_read_x, backend=backend, dynamic=True)
        for shape in ((3, 2), (5, 4)):
            x = torch.randn(shape)
            xe = x.clone()
            self.assertEqual(compiled(x, x[1:]), mutate_a_read_x(xe, xe[1:]))
            self.assertEqual(x, xe)


instantiate_parametrized_tests(TestMergedInputLayouts)


if __name__ == "__main__":
    run_tests()
