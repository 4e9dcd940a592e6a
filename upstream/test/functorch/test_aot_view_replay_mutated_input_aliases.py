# Owner(s): ["oncall: pt2"]
"""
Tests for outputs that alias an input whose data the graph mutates: the
graph's output is a view of the mutation's new value, so its storage offset
(and, for a transposed input, its strides) are not the output's; the
regenerated view keeps eager's storage offset and strides (Note [Aliases of
inputs mutated by the graph]).
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


def _mul_then_slice(a):
    a.mul_(2)
    return a[1:]


def _mul_then_half(a):
    a.mul_(2)
    return a[: a.shape[0] // 2]


class TestMutatedInputAliases(TestCase):
    def setUp(self):
        super().setUp()
        torch._dynamo.reset()
        counters.clear()

    @parametrize("transposed", [False, True])
    @parametrize("dynamic", [False, True])
    @parametrize("fn", [_mul_then_slice, _mul_then_half], name_fn=lambda fn: fn.__name__.lstrip("_"))
    def test_alias_of_mutated_input_view_keeps_offset(self, fn, dynamic, transposed):
        # The input is itself a view with a nonzero storage offset, of a
        # contiguous or of a transposed tensor.
        shape = (2, 8) if transposed else (8, 2)
        x, x_ref = torch.randn(shape), torch.randn(shape)
        x_ref.copy_(x)

        def view(t):
            return (t.t() if transposed else t)[1:]

        with view_replay.config.patch(strict=True):
            out = torch.compile(fn, backend="aot_eager", dynamic=dynamic)(view(x))
        ref = fn(view(x_ref))
        self.assertEqual(out.storage_offset(), ref.storage_offset())
        self.assertEqual(out.stride(), ref.stride())
        self.assertEqual(out, ref)
        self.assertEqual(x, x_ref)
        self.assertEqual(dict(counters["view_replay_fallback"]), {})


instantiate_parametrized_tests(TestMutatedInputAliases)


if __name__ == "__main__":
    run_tests()
