# Owner(s): ["oncall: pt2"]
"""
Tests that the tensors an in-place foreach op writes while AOTAutograd traces
get eager's version bumps (Note [Version counters of in-place foreach ops] in
_aot_autograd/foreach_versions.py): views changed with grad mode on are rebased
as in eager, a saved tensor changed after it was saved raises as in eager
(at compile time, as for add_), and an output that is a view taken under
no_grad and changed in place after it was taken, which eager refuses to
differentiate, is refused at compile time instead of coming back fresh.
"""

import torch
import torch._dynamo
from torch._dynamo.exc import BackendCompilerFailed
from torch._functorch._aot_autograd.foreach_versions import ModifiedNoGradViewError
from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)


STALE = "A view was created in no_grad mode and its base or another view of its base has been modified inplace"


def foreach_add_on_no_grad_views(flat):
    with torch.no_grad():
        views = [flat[:4].view(2, 2), flat[4:]]
        torch._foreach_add_(views, 1)
    return views


def foreach_mul_on_no_grad_views_of_an_intermediate(flat):
    z = flat * 2
    with torch.no_grad():
        views = [z[:4].view(2, 2), z[4:]]
        torch._foreach_mul_(views, 3)
    return views


def add_on_a_no_grad_view(flat):
    with torch.no_grad():
        a = flat[:4].view(2, 2)
        a.add_(1)
        b = flat[4:]  # taken after the op: fresh
    return b, a


def foreach_mul_on_views_then_used(x):
    z = x * 2
    views = [z[:2], z[2:]]
    torch._foreach_mul_(views, 3)
    return views[0] + 1, views[1] * 1


def foreach_add_on_a_saved_tensor(x):
    y = x * 1
    z = y.sin()  # SinBackward0 saves y
    torch._foreach_add_([y], 1)
    return z


class TestForeachVersions(TestCase):
    def setUp(self):
        super().setUp()
        torch._dynamo.reset()

    def test_traced_foreach_bumps_versions(self):
        base = torch.zeros(6, requires_grad=True)
        with FunctionalTensorMode():
            flat = FunctionalTensor.to_functional(base)
            with torch.no_grad():
                views = [flat[:4].view(2, 2), flat[4:]]
                torch._foreach_add_(views, 1)
            self.assertEqual([v._version for v in views], [2, 2])

    def _assert_refused(self, fn, name, backend, dynamic):
        compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
        for size in (6, 8):
            flat = torch.randn(size, requires_grad=True)
            with self.assertRaises(BackendCompilerFailed) as caught:
                compiled(flat)
            self.assertIsInstance(caught.exception.inner_exception, ModifiedNoGradViewError)
            self.assertIn(f"cannot return {name}", str(caught.exception))
            self.assertIn(STALE, str(caught.exception))
        outs = fn(torch.randn(6, requires_grad=True))
        with self.assertRaisesRegex(RuntimeError, STALE):
            outs[-1].sum().backward()

    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    def test_no_grad_views_changed_by_foreach_are_refused(self, dynamic, backend):
        self._assert_refused(foreach_add_on_no_grad_views, "output[0]", backend, dynamic)

    @parametrize("dynamic", [False, True])
    def test_no_grad_views_of_an_intermediate_are_refused(self, dynamic):
        fn = foreach_mul_on_no_grad_views_of_an_intermediate
        self._assert_refused(fn, "output[0]", "aot_eager", dynamic)

    def test_no_grad_view_changed_by_add_is_refused(self):
        self._assert_refused(add_on_a_no_grad_view, "output[1]", "aot_eager", False)

    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    def test_views_changed_with_grad_mode_on_are_rebased(self, dynamic, backend):
        fn = foreach_mul_on_views_then_used
        compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
        for size in (4, 6):
            x = torch.randn(size, requires_grad=True)
            sum(o.sum() for o in compiled(x)).backward()
            ref = x.detach().requires_grad_()
            sum(o.sum() for o in fn(ref)).backward()
            self.assertEqual(x.grad, ref.grad)

    def test_saved_tensor_changed_by_foreach_raises(self):
        compiled = torch.compile(foreach_add_on_a_saved_tensor, backend="aot_eager")
        with self.assertRaisesRegex(BackendCompilerFailed, "modified by an inplace operation"):
            compiled(torch.randn(3, requires_grad=True))


instantiate_parametrized_tests(TestForeachVersions)


if __name__ == "__main__":
    run_tests()
