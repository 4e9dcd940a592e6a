# Owner(s): ["oncall: pt2"]
"""
Tests that outputs which alias each other come back as eager's views when
neither requires grad: a view of another output is a view of it, and views of
one hidden intermediate share its _base; they share a version counter, so a
tensor autograd saves off one after the call sees an in-place change of the
other (Note [Views of outputs that do not require grad]).
"""

import torch
import torch._dynamo
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)


def view_and_base(x):
    y = x * 2
    return y[0], y


def view_and_base_mutated_through_a_view(x):
    y = x * 2
    y.view(-1).add_(1)
    return y[0], y


def overlapping_views_of_a_hidden_intermediate(x, w):
    y = w * 2
    return y[:-1], y[1:], x * 2


class TestGradFreeViews(TestCase):
    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    @parametrize("mutated", [False, True])
    def test_view_of_an_output(self, mutated, dynamic, backend):
        fn = view_and_base_mutated_through_a_view if mutated else view_and_base
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
        for n in (2, 3):
            a, y = compiled(torch.randn(n, 3))
            self.assertIs(a._base, y)  # stock: None (inductor) or a hidden intermediate
            version = a._version
            y.mul_(2)
            self.assertGreater(a._version, version)

    @parametrize("backend", ["aot_eager", "inductor"])
    def test_saved_after_the_call_then_inplace(self, backend):
        torch._dynamo.reset()
        a, y = torch.compile(view_and_base, backend=backend)(torch.randn(2, 3))
        w = torch.randn(3, requires_grad=True)
        z = (w * a).sum()
        y.mul_(2)
        # Stock returns w.grad computed with the doubled a.
        with self.assertRaisesRegex(RuntimeError, "modified by an inplace operation"):
            z.backward()

    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    @parametrize("with_backward", [False, True])
    def test_views_of_a_hidden_intermediate(self, with_backward, dynamic, backend):
        fn = overlapping_views_of_a_hidden_intermediate
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
        for n in (3, 4):
            x = torch.randn(n, requires_grad=with_backward)
            a, b, _ = compiled(x, torch.randn(n, 3))
            # Stock inductor: _base None, a version counter each.
            self.assertIsNotNone(a._base)
            self.assertIs(a._base, b._base)
            self.assertFalse(a.requires_grad or a._base.requires_grad)
            w = torch.randn(3, requires_grad=True)
            z = (w * a).sum()
            b.mul_(2)  # changes a[1:]
            # Stock inductor returns w.grad computed with the changed a.
            with self.assertRaisesRegex(RuntimeError, "modified by an inplace operation"):
                z.backward()

    @parametrize("dynamic", [False, True])
    def test_view_of_a_detached_output(self, dynamic):
        def fn(x):
            y = x * 2
            return y.detach()[1:], y

        torch._dynamo.reset()
        compiled = torch.compile(fn, backend="inductor", dynamic=dynamic)
        x = torch.randn(3, 3, requires_grad=True)
        a, y = compiled(x)
        # Inductor returns y's buffer as y and as a's base, y.detach(): a tensor
        # of its own, not y, whose grad must stay.
        self.assertTrue(y.requires_grad)
        self.assertIsNot(a._base, y)
        y.sum().backward()
        self.assertEqual(x.grad, torch.full((3, 3), 2.0))
        version = a._version
        y.mul_(2)  # stock: a is a separate tensor on y's buffer
        self.assertGreater(a._version, version)

    def test_export_keeps_the_user_outputs(self):
        # The hidden intermediate is not made an intermediate base: export's graph
        # outputs are the user's.
        from torch._functorch.aot_autograd import aot_export_module

        class Views(torch.nn.Module):
            def forward(self, x):
                y = x * 2
                return y[:-1], y[1:]

        gm, signature = aot_export_module(Views(), [torch.randn(4)], trace_joint=False)
        self.assertEqual(len(signature.user_outputs), 2)
        self.assertEqual(len(gm.graph.output_node().args[0]), 2)


instantiate_parametrized_tests(TestGradFreeViews)


if __name__ == "__main__":
    run_tests()
