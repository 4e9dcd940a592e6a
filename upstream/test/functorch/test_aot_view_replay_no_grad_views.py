# Owner(s): ["oncall: pt2"]
"""
Tests for outputs that are views taken under torch.no_grad() inside the
compiled region (Note [Views taken under no_grad] in
view_replay/autograd_chain.py): eager returns a leaf without grad_fn that
requires grad and views its base; views taken off it with grad mode on have no
edge towards the base. Regenerated in the caller's grad mode, they got a
grad_fn and sent a gradient into their base.
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


def no_grad_view(x):
    with torch.no_grad():
        y = x[1:]
    return y, x.t()


def grad_mode_view_of_a_no_grad_view(x):
    z = x * 2
    with torch.no_grad():
        a = z[1:]
    return a.t(), z[0]


class TestNoGradViews(TestCase):
    def setUp(self):
        super().setUp()
        torch._dynamo.reset()

    def _run(self, fn, x):
        x = x.detach().requires_grad_()
        outs = fn(x)
        sum(o.sum() * (k + 1) for k, o in enumerate(outs)).backward()
        return outs, x.grad

    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    def test_no_grad_view_is_a_leaf_view(self, dynamic, backend):
        x = torch.randn(4, 3)
        compiled = torch.compile(no_grad_view, backend=backend, dynamic=dynamic)
        with view_replay.config.patch(strict=True):
            (y, _), grad = self._run(compiled, x)
        (ref, _), ref_grad = self._run(no_grad_view, x)
        self.assertEqual(grad, ref_grad)
        self.assertTrue(y.is_leaf and y.requires_grad and y.grad_fn is None and y._is_view())
        with self.assertRaisesRegex(RuntimeError, "no_grad mode"):
            y.add_(1)

    @parametrize("dynamic", [False, True])
    def test_grad_mode_view_of_a_no_grad_view(self, dynamic):
        fn = grad_mode_view_of_a_no_grad_view
        x = torch.randn(4, 3)
        compiled = torch.compile(fn, backend="aot_eager", dynamic=dynamic)
        with view_replay.config.patch(strict=True):
            (out, _), grad = self._run(compiled, x)
        (ref, _), ref_grad = self._run(fn, x)
        self.assertEqual(grad, ref_grad)
        self.assertEqual(out.grad_fn.name(), "TBackward0")
        self.assertEqual(out.grad_fn.next_functions, ref.grad_fn.next_functions)


instantiate_parametrized_tests(TestNoGradViews)

if __name__ == "__main__":
    run_tests()
