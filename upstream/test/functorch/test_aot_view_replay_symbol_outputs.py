# Owner(s): ["oncall: pt2"]
"""
Tests for the binding of view-replay symbols from graph outputs: the pieces of
x.split(c.tolist()) carry each other's sizes, and a symbol that no value
carries (x[: t.item()], x.narrow(0, t.item(), 2)) is returned by the graph as
an extra SymInt output, dropped before the caller sees the outputs; so is an
argument of several such symbols (x.narrow(0, a + b, 2)), whole
(Note [Symbol outputs]).
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


def _narrow_two_items(x, t):
    a, b = t.tolist()
    torch._check(a >= 0)
    torch._check(b >= 0)
    torch._check(a + b + 2 <= x.shape[0])
    return x.narrow(0, a + b, 2), x[a:]


# Views whose sizes or offsets are unbacked symbols from .tolist()/.item(), the
# node eager records for them, and two values of the tensor that sets them.
ITEM_VIEWS = {
    "split_input": (lambda x, t: x.split(t.tolist()), "SplitWithSizesBackward0", ([1, 2, 3], [3, 0, 3])),
    "head": (lambda x, t: x[: t.item()], "SliceBackward0", (2, 4)),
    "narrow_item": (lambda x, t: x.narrow(0, t.item(), 2), "SliceBackward0", (1, 3)),
    "narrow_two_items": (_narrow_two_items, "SliceBackward0", ([1, 2], [0, 4])),
}


class TestSymbolOutputs(TestCase):
    def setUp(self):
        super().setUp()
        torch._dynamo.reset()
        counters.clear()

    @parametrize("name", sorted(ITEM_VIEWS))
    def test_unbacked_view_replays(self, name):
        fn, expected_node, values = ITEM_VIEWS[name]
        compiled = torch.compile(fn, backend="aot_eager")
        with torch._dynamo.config.patch(capture_scalar_outputs=True), view_replay.config.patch(strict=True):
            for value in values:
                x = torch.randn(6, 3, requires_grad=True)
                x_ref = x.detach().clone().requires_grad_(True)
                t = torch.tensor(value)
                outs, refs = compiled(x, t), fn(x_ref, t)
                if isinstance(refs, torch.Tensor):
                    outs, refs = (outs,), (refs,)
                self.assertEqual(len(outs), len(refs))  # the symbol outputs are dropped
                self.assertEqual(outs, refs)
                self.assertEqual([o.grad_fn.name() for o in outs], [expected_node] * len(refs))
                self.assertEqual([o.storage_offset() for o in outs], [r.storage_offset() for r in refs])
                sum(o.sum() * i for i, o in enumerate(outs, 1)).backward()
                sum(r.sum() * i for i, r in enumerate(refs, 1)).backward()
                self.assertEqual(x.grad, x_ref.grad)
        self.assertEqual(dict(counters["view_replay_fallback"]), {})


instantiate_parametrized_tests(TestSymbolOutputs)


if __name__ == "__main__":
    run_tests()
