# Owner(s): ["oncall: pt2"]
"""
Tests for outputs that alias an input merged into a synthetic base: they are
regenerated off that input, after the mutation is written back, as eager
returns them (Note [Outputs aliasing inputs merged into a synthetic base]).
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


def slice_of_b(a, b):
    a.mul_(2)
    return (b[:3],)


def transposed_slice_of_b_and_select_of_a(a, b):
    a.mul_(2)
    return b[1:].t(), a[0]


def pieces_of_b(a, b):
    a.mul_(2)
    return b.unbind(0)


class TestMergedInputAliases(TestCase):
    """a and b overlap and a is mutated: outputs aliasing b are views of b."""

    def _run(self, fn, start, compiled):
        leaf = torch.randn(10, 3, generator=torch.Generator().manual_seed(0), requires_grad=True)
        base = leaf * 1
        a, b = base[start : start + 6], base[2:8]
        outs = compiled(a, b)
        sum((k + 1) * o.sum() for k, o in enumerate(outs)).backward()
        return outs, (a, b), leaf.grad

    @parametrize("dynamic", [False, True])
    @parametrize("start", [0, 1])
    @parametrize(
        "fn", [slice_of_b, transposed_slice_of_b_and_select_of_a, pieces_of_b], name_fn=lambda f: f.__name__
    )
    def test_eager_outputs(self, fn, start, dynamic):
        torch._dynamo.reset()
        counters.clear()
        ref, ref_inputs, ref_grad = self._run(fn, start, fn)
        with view_replay.config.patch(strict=True):
            out, inputs, grad = self._run(fn, start, torch.compile(fn, backend="aot_eager", dynamic=dynamic))
        self.assertEqual(out, ref)
        self.assertEqual(grad, ref_grad)
        for o, r in zip(out, ref):
            self.assertEqual((o.stride(), o.storage_offset()), (r.stride(), r.storage_offset()))
            self.assertEqual(o.grad_fn.name(), r.grad_fn.name())
            # The same tensor as eager's is the output's base: the real input's own base.
            self.assertIs(o._base, inputs[0]._base)
            self.assertIs(r._base, ref_inputs[0]._base)
        self.assertEqual(dict(counters["view_replay_fallback"]), {})


instantiate_parametrized_tests(TestMergedInputAliases)


if __name__ == "__main__":
    run_tests()
