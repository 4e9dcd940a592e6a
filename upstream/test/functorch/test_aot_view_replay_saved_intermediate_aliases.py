# Owner(s): ["oncall: pt2"]
"""
Tests that an output that is the only alias of an intermediate, in a graph with
a backward, is regenerated as a view of that intermediate: an in-place change
of it then makes a backward that saved the intermediate raise, as in eager,
instead of computing with the changed values (Note [Saved tensors on the
storage of a returned tensor]).
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


def view_used_by_a_matmul(x):
    v = x @ x.flatten(0, -3)[0].t()
    a = v[v.shape[0] - 1]
    return a, x @ a


class TestSavedIntermediateAliases(TestCase):
    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    def test_inplace_on_the_view_then_backward_raises(self, dynamic, backend):
        torch._dynamo.reset()
        counters.clear()
        compiled = torch.compile(view_used_by_a_matmul, backend=backend, dynamic=dynamic)
        for n in (1, 3):
            x = torch.randn(2, n, n, requires_grad=True)
            with view_replay.config.patch(strict=True):
                a, b = compiled(x)
            self.assertEqual(a.grad_fn.name(), "SelectBackward0")
            a.mul_(3)
            with self.assertRaisesRegex(RuntimeError, "modified by an inplace operation"):
                b.sum().backward()
            a, b = compiled(x)
            xe = x.detach().clone().requires_grad_()
            ae, be = view_used_by_a_matmul(xe)
            (a.sum() + 2 * b.sum()).backward()
            (ae.sum() + 2 * be.sum()).backward()
            self.assertEqual(x.grad, xe.grad)
        self.assertEqual(dict(counters["view_replay_fallback"]), {})

    @parametrize("backend", ["aot_eager", "inductor"])
    def test_alias_whose_storage_nothing_saves_stays_hidden(self, backend):
        # The backward saves nothing on out's storage: the graph keeps its one
        # output and returns the view as upstream does, behind _unsafe_view.
        def fn(x):
            out = x * 3
            return out.view(-1)

        torch._dynamo.reset()
        x = torch.randn(3, 3, requires_grad=True)
        o = torch.compile(fn, backend=backend)(x)
        self.assertFalse(o._is_view())
        self.assertEqual(o.grad_fn.name(), "CompiledFunctionBackward")
        xe = x.detach().clone().requires_grad_()
        oe = fn(xe)
        for out in (o, oe):
            out.mul_(2)
            out.sum().backward()
        self.assertEqual(x.grad, xe.grad)


instantiate_parametrized_tests(TestSavedIntermediateAliases)


if __name__ == "__main__":
    run_tests()
