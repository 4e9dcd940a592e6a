"""In-place foreach ops on views, above all views taken under torch.no_grad() (Note [Version
counters of in-place foreach ops]).

Eager bumps the version counter of each tensor an in-place foreach op writes. A view taken under
no_grad and changed in place after it was taken is stale: reading its grad_fn (backward) raises
"A view was created in no_grad mode and its base or another view of its base has been modified
inplace"; an in-place op on such a view with grad mode on raises "... is being modified inplace
with grad mode enabled". The FunctionalTensors that AOTAutograd traces got no bump from foreach
ops (add_'s bump is ADInplaceOrView's, foreach ops have none), so the trace saw fresh views: stock
regenerates them in grad mode and backward sends a gradient into the base, the series (Note
[Views taken under no_grad]) regenerated them under no_grad and the base got no gradient. Views
changed with grad mode on kept their old grad_fn, and a backward through their uses skipped the
op; a tensor saved for backward and then changed by a foreach op was used changed where eager
raises "modified by an inplace operation" (stock too). Patch foreach-versions bumps the traced
versions as eager does: the joint graph gets eager's gradients (or eager's error, at compile
time, as for add_), and a stale no_grad view output is refused at compile time
(ModifiedNoGradViewError, naming the output), where add_ gave upstream's bare error. Views taken
outside the compiled function (inputs) were right already: the runtime writes the mutation back
in place, so the caller's views go stale as in eager.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._dynamo.exc import BackendCompilerFailed
from torch.testing._internal.common_utils import instantiate_parametrized_tests, parametrize, run_tests

from view_replay_testing import as_tuple, backward_all, CompileTestCase, fallback_counts, PATCHED, strict_view_replay
from viewreplay_harness.parity import differences


STALE = "A view was created in no_grad mode and its base or another view of its base has been modified inplace"
SAVED_CHANGED = "one of the variables needed for gradient computation has been modified by an inplace operation"
GRAD_MODE_INPLACE = "A view was created in no_grad mode and is being modified inplace with grad mode enabled"


def foreach_add(flat):  # the program
    with torch.no_grad():
        views = [flat[:4].view(2, 2), flat[4:]]
        torch._foreach_add_(views, 1)
    return views


def foreach_mul(flat):
    with torch.no_grad():
        views = [flat[:4].view(2, 2), flat[4:]]
        torch._foreach_mul_(views, 2)
    return views


def of_intermediate(flat):
    z = flat * 2
    with torch.no_grad():
        views = [z[:4].view(2, 2), z[4:]]
        torch._foreach_add_(views, 1)
    return views


def foreach_on_base(flat):
    with torch.no_grad():
        views = [flat[:4].view(2, 2), flat[4:]]
        torch._foreach_add_([flat], 1)
    return views


def on_another_view(flat):
    with torch.no_grad():
        a, b = flat[:4].view(2, 2), flat[4:]
        torch._foreach_add_([b], 1)
    return (a,)


def fresh_then_stale(flat):
    with torch.no_grad():
        a = flat[:4].view(2, 2)
        torch._foreach_add_([a], 1)
        b = flat[4:]  # taken after the op: fresh
    return b, a


def with_a_grad_output(flat):
    with torch.no_grad():
        views = [flat[:4].view(2, 2), flat[4:]]
        torch._foreach_add_(views, 1)
    return views[0], views[1], flat * 3


def add_on_one_view(flat):
    with torch.no_grad():
        a, b = flat[:4].view(2, 2), flat[4:]
        a.add_(1)
    return a, b


def grad_mode_view_of_a_stale_view(flat):
    with torch.no_grad():
        views = [flat[:4].view(2, 2), flat[4:]]
        torch._foreach_add_(views, 1)
    return views[0].t(), views[1]


def foreach_with_grad_mode_on(flat):
    with torch.no_grad():
        views = [flat[:4].view(2, 2), flat[4:]]
    torch._foreach_add_(views, 1)
    return views


def views_after_foreach(flat):
    with torch.no_grad():
        torch._foreach_add_([flat], 1)
        views = [flat[:4].view(2, 2), flat[4:]]
    return views


def foreach_on_input_views(a, b):
    with torch.no_grad():
        torch._foreach_add_([a, b], 1)
    return a, b


def foreach_on_input_views_grad_mode(a, b):
    torch._foreach_add_([a, b], 1)
    return a, b


def foreach_mul_then_used(x):
    z = x * 2
    views = [z[:2], z[2:]]
    torch._foreach_mul_(views, 3)
    return views[0] + 1, views[1] * 1


def foreach_on_a_saved_tensor(x):
    y = x * 1
    z = y.sin()  # SinBackward0 saves y
    torch._foreach_add_([y], 1)
    return z


# Outputs that are stale no_grad views: the program and the output the patched refusal names.
REFUSED = {
    "foreach_add": (foreach_add, "output[0]"),
    "foreach_mul": (foreach_mul, "output[0]"),
    "of_intermediate": (of_intermediate, "output[0]"),
    "foreach_on_base": (foreach_on_base, "output[0]"),
    "on_another_view": (on_another_view, "output[0]"),
    "fresh_then_stale": (fresh_then_stale, "output[1]"),
    "with_a_grad_output": (with_a_grad_output, "output[0]"),
}
# Stock's gradient of flat (size 6), where eager raises, for backward_all's weighted sum.
STOCK_GRADS = {
    "foreach_add": [1.0, 1.0, 1.0, 1.0, 2.0, 2.0],
    "foreach_mul": [1.0, 1.0, 1.0, 1.0, 2.0, 2.0],
    "of_intermediate": [2.0, 2.0, 2.0, 2.0, 4.0, 4.0],
    "foreach_on_base": [1.0, 1.0, 1.0, 1.0, 2.0, 2.0],
    "on_another_view": [1.0, 1.0, 1.0, 1.0, 0.0, 0.0],
    "fresh_then_stale": [2.0, 2.0, 2.0, 2.0, 1.0, 1.0],
    "with_a_grad_output": [10.0, 10.0, 10.0, 10.0, 11.0, 11.0],
}

Inputs = Callable[[], tuple[list[torch.Tensor], list[torch.Tensor]]]


def _flat(size: int) -> Inputs:
    def make() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        flat = torch.arange(float(size)).requires_grad_()
        return [flat], [flat]

    return make


def _input_views() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    flat = torch.arange(6.0).requires_grad_()
    with torch.no_grad():
        views = [flat[:4].view(2, 2), flat[4:]]
    return views, [flat]


def outcome(fn: Callable[..., Any], make_inputs: Inputs) -> tuple[str, Any]:
    """Where ``fn`` stops on fresh inputs: ('compile', the backend's error), ('call', error),
    ('backward', error) of backward_all through every output, or ('grads', the leaves' grads)."""
    inputs, leaves = make_inputs()
    try:
        outs = as_tuple(fn(*inputs))
    except BackendCompilerFailed as e:
        return "compile", e.inner_exception
    except RuntimeError as e:
        return "call", e
    try:
        backward_all(outs)
    except RuntimeError as e:
        return "backward", e
    return "grads", [None if leaf.grad is None else leaf.grad.tolist() for leaf in leaves]


def _refusal_type() -> type[Exception]:
    from torch._functorch._aot_autograd.foreach_versions import ModifiedNoGradViewError

    return ModifiedNoGradViewError


class TestForeachVersions(CompileTestCase):
    def _check_refused(self, name: str, compiled: Callable[..., Any]) -> None:
        fn, output = REFUSED[name]
        kind, error = outcome(fn, _flat(6))
        self.assertEqual((kind, STALE in str(error)), ("backward", True))
        for size in (6, 8):
            kind, found = outcome(compiled, _flat(size))
            if PATCHED:
                self.assertEqual(kind, "compile")
                self.assertIsInstance(found, _refusal_type())
                self.assertIn(f"cannot return {output}", str(found))
                self.assertIn(STALE, str(found))
            else:
                # The bug: backward goes through, a gradient reaches flat.
                self.assertEqual(kind, "grads")
                if size == 6:
                    self.assertEqual(found, [STOCK_GRADS[name]])

    @parametrize("dynamic", [False, True])
    @parametrize("name", list(REFUSED))
    def test_stale_no_grad_views(self, name: str, dynamic: bool) -> None:
        self._check_refused(name, torch.compile(REFUSED[name][0], backend="aot_eager", dynamic=dynamic))

    @parametrize("dynamic", [False, True])
    def test_stale_no_grad_views_inductor(self, dynamic: bool) -> None:
        self._check_refused("foreach_add", torch.compile(foreach_add, backend="inductor", dynamic=dynamic))

    @parametrize("dynamic", [False, True])
    def test_add_on_one_view(self, dynamic: bool) -> None:
        # Stock raised eager's error from its metadata collection already, untyped.
        kind, error = outcome(add_on_one_view, _flat(6))
        self.assertEqual((kind, STALE in str(error)), ("backward", True))
        kind, found = outcome(torch.compile(add_on_one_view, backend="aot_eager", dynamic=dynamic), _flat(6))
        self.assertEqual(kind, "compile")
        self.assertIn(STALE, str(found))
        if PATCHED:
            self.assertIsInstance(found, _refusal_type())
            self.assertIn("cannot return output[0]", str(found))
        else:
            self.assertIs(type(found), RuntimeError)

    @parametrize("dynamic", [False, True])
    def test_grad_mode_view_of_a_stale_view(self, dynamic: bool) -> None:
        # Eager raises where the function takes the view with grad mode on; patched raises the
        # same error while tracing that view.
        fn = grad_mode_view_of_a_stale_view
        kind, error = outcome(fn, _flat(6))
        self.assertEqual((kind, STALE in str(error)), ("call", True))
        kind, found = outcome(torch.compile(fn, backend="aot_eager", dynamic=dynamic), _flat(6))
        if PATCHED:
            self.assertEqual(kind, "compile")
            self.assertIs(type(found), RuntimeError)
            self.assertIn(STALE, str(found))
        else:
            self.assertEqual((kind, found), ("grads", [[1.0, 1.0, 1.0, 1.0, 2.0, 2.0]]))

    @parametrize("dynamic", [False, True])
    def test_in_place_with_grad_mode_on(self, dynamic: bool) -> None:
        # Eager's error at the call, stock and patched alike (from Dynamo's fake run).
        for fn, make in ((foreach_with_grad_mode_on, _flat(6)), (foreach_on_input_views_grad_mode, _input_views)):
            kind, error = outcome(fn, make)
            self.assertEqual((kind, GRAD_MODE_INPLACE in str(error)), ("call", True))
            kind, found = outcome(torch.compile(fn, backend="aot_eager", dynamic=dynamic), make)
            self.assertEqual((kind, GRAD_MODE_INPLACE in str(found)), ("call", True))

    @parametrize("dynamic", [False, True])
    def test_input_views(self, dynamic: bool) -> None:
        # Views taken outside: the runtime writes the mutation back into them, stock alike.
        kind, error = outcome(foreach_on_input_views, _input_views)
        self.assertEqual((kind, STALE in str(error)), ("backward", True))
        compiled = torch.compile(foreach_on_input_views, backend="aot_eager", dynamic=dynamic)
        kind, found = outcome(compiled, _input_views)
        self.assertEqual((kind, STALE in str(found)), ("backward", True))

    @parametrize("dynamic", [False, True])
    def test_views_taken_after_the_op(self, dynamic: bool) -> None:
        compiled = torch.compile(views_after_foreach, backend="aot_eager", dynamic=dynamic)
        for size in (6, 8):
            with strict_view_replay():
                found = differences(views_after_foreach, compiled, _flat(size))
            if PATCHED:
                self.assertEqual(found, [])
            else:
                # Stock regenerates the fresh no_grad views in grad mode (Note [Views taken under
                # no_grad]): a gradient reaches flat.
                self.assertTrue(any("backward through every output" in d for d in found), found)
        if PATCHED:
            self.assertEqual(fallback_counts(), {})

    @parametrize("dynamic", [False, True])
    def test_saved_tensor_changed(self, dynamic: bool) -> None:
        # As for add_, upstream raises eager's error from the joint trace; stock's backward
        # used the changed y.
        kind, error = outcome(foreach_on_a_saved_tensor, _flat(3))
        self.assertEqual((kind, SAVED_CHANGED in str(error)), ("backward", True))
        compiled = torch.compile(foreach_on_a_saved_tensor, backend="aot_eager", dynamic=dynamic)
        for size in (3, 5):
            kind, found = outcome(compiled, _flat(size))
            if PATCHED:
                self.assertEqual((kind, SAVED_CHANGED in str(found)), ("compile", True))
            else:
                self.assertEqual(kind, "grads")
                self.assertEqual(found, [torch.arange(1.0, size + 1.0).cos().tolist()])

    def _check_views_changed_with_grad_mode_on(self, compiled: Callable[..., Any], full_parity: bool) -> None:
        for size in (4, 6):
            make = _flat(size)
            found = outcome(compiled, make)
            if not PATCHED:
                # The backward skipped the mul: flat.grad 2 and 4 where eager has 6 and 12.
                self.assertEqual(found, ("grads", [[2.0, 2.0] + [4.0] * (size - 2)]))
                continue
            self.assertEqual(found, outcome(foreach_mul_then_used, make))
            if full_parity:
                with strict_view_replay():
                    self.assertEqual(differences(foreach_mul_then_used, compiled, make), [])

    @parametrize("dynamic", [False, True])
    def test_views_changed_with_grad_mode_on(self, dynamic: bool) -> None:
        compiled = torch.compile(foreach_mul_then_used, backend="aot_eager", dynamic=dynamic)
        self._check_views_changed_with_grad_mode_on(compiled, full_parity=True)

    def test_views_changed_with_grad_mode_on_inductor(self) -> None:
        # Gradients only: inductor returns out1 at offset 2 of a buffer (stock alike).
        compiled = torch.compile(foreach_mul_then_used, backend="inductor")
        self._check_views_changed_with_grad_mode_on(compiled, full_parity=False)


instantiate_parametrized_tests(TestForeachVersions)

if __name__ == "__main__":
    run_tests()
