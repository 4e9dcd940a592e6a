"""Views taken under torch.no_grad() inside the compiled region (Note [Views taken under
no_grad]).

Eager: a view taken under no_grad of a tensor that requires grad is a leaf without grad_fn that
still requires grad, views its base (``_base``, shared version counter) and raises on an in-place
op with grad mode on; views taken off it with grad mode on have a grad_fn whose edge towards the
base is None. Stock torch regenerates such outputs in the caller's grad mode: they come back with
SliceBackward0 and backward through them sends a gradient into the base (a silently wrong
gradient). Patched torch replays the no_grad part of the chain under no_grad."""

from __future__ import annotations

import torch
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
)

from view_replay_testing import CompileTestCase, fallback_counts, PATCHED, strict_view_replay
from viewreplay_harness.parity import differences


def of_input(x):
    with torch.no_grad():
        y = x[1:]
    return y, x.t()


def of_intermediate(x):
    z = x * 2
    with torch.no_grad():
        y = z[1:]
    return y, z.t()


def only_output(x):
    with torch.no_grad():
        y = x.t()[1:]
    return (y,)


def only_output_of_intermediate(x):
    z = x * 2
    with torch.no_grad():
        y = z[1:]
    return (y,)


def symbolic(x):
    with torch.no_grad():
        y = x[: x.shape[0] // 2]
    return y, x.t()


def grad_mode_view_of_it(x):
    with torch.no_grad():
        a = x[1:]
    return a.t(), x[0]


def grad_mode_view_of_it_of_intermediate(x):
    z = x * 2
    with torch.no_grad():
        a = z[1:]
    return a.t(), z[0]


PROGRAMS = {
    f.__name__: f
    for f in (
        of_input,
        of_intermediate,
        only_output,
        only_output_of_intermediate,
        symbolic,
        grad_mode_view_of_it,
        grad_mode_view_of_it_of_intermediate,
    )
}


def _inputs(shape):
    def make():
        leaf = torch.randn(shape, generator=torch.Generator().manual_seed(0), requires_grad=True)
        return [leaf], [leaf]

    return make


class TestNoGradViews(CompileTestCase):
    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    @parametrize("name", list(PROGRAMS))
    def test_eager_parity(self, name: str, dynamic: bool, backend: str) -> None:
        fn = PROGRAMS[name]
        compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
        for shape in ((4, 3), (6, 5)):
            with strict_view_replay():
                found = differences(fn, compiled, _inputs(shape))
            if PATCHED:
                self.assertEqual(found, [])
            elif name == "only_output_of_intermediate":
                # Stock hides it behind _unsafe_view: no gradient leaks, but it is no leaf
                # and views nothing.
                self.assertTrue(any("(requires_grad, is_leaf, _is_view)" in d for d in found), found)
            else:
                # The bug: a grad_fn where eager has none, and a gradient into the base.
                self.assertTrue(any("backward through every output" in d for d in found), found)
        if PATCHED:
            self.assertEqual(fallback_counts(), {})


instantiate_parametrized_tests(TestNoGradViews)

if __name__ == "__main__":
    run_tests()
