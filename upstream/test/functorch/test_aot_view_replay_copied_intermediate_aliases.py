# Owner(s): ["oncall: pt2"]
"""
Tests that an alias of an intermediate that inductor returns as a copy off its
base's storage is regenerated as eager's view of the base, never as an
as_strided() with the copy's layout (Note [Aliases of intermediates copied by
the graph]).
"""

import torch
import torch._dynamo
from torch._dynamo.utils import counters
from torch._functorch._aot_autograd import view_replay
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)


def views_of_a_mutated_matmul(x, w):
    v = x @ w
    a = v[:, 1:]
    b = v[:, :1]
    v.add_(1)
    return a, b


class TestCopiedIntermediateAliases(TestCase):
    @parametrize("dynamic", [False, True])
    def test_views_are_eager_views_of_the_base(self, dynamic):
        torch._dynamo.reset()
        counters.clear()
        compiled = torch.compile(views_of_a_mutated_matmul, backend="inductor", dynamic=dynamic)
        for n in (2, 4):
            x = torch.randn(n, 2, 1)
            w = torch.randn(1, 1, requires_grad=True)
            expected = views_of_a_mutated_matmul(x, w)
            with view_replay.config.patch(strict=True):
                outs = compiled(x, w)
            for out, ref in zip(outs, expected, strict=True):
                self.assertEqual(out, ref)
                self.assertEqual(out.stride(), ref.stride())
                self.assertEqual(out.storage_offset(), ref.storage_offset())
            self.assertIs(outs[0]._base, outs[1]._base)
        self.assertEqual(dict(counters["view_replay_fallback"]), {})


instantiate_parametrized_tests(TestCopiedIntermediateAliases)


if __name__ == "__main__":
    run_tests()
