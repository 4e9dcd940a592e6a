"""Outputs aliasing an intermediate, where upstream silently computes wrong results.

- A view of an intermediate that the backward saves (``v = x @ w3d; a = v[-1]; return a,
  x @ a``): eager's ``a.mul_(3)`` then backward through the second output raises ("modified
  by an inplace operation"); stock 2.14.1 and 2.13.0 (aot_eager and inductor, static and
  dynamic) return ``a`` on the saved storage with a version counter of its own, and the
  backward silently uses the tripled values. Patched: ``a`` is a view of the intermediate the
  function returns, and the saved tensor shares its version counter (PR
  saved-intermediate-aliases, Note [Saved tensors on the storage of a returned tensor]).
- Views of a matmul result mutated afterwards (``v = x @ w3d; a = v[:, 1:]; b = v[:, :1];
  v.add_(1)``): inductor returns ``a`` as a copy off ``v``'s storage, and stock regenerates it
  with ``as_strided()`` on ``v`` using the copy's layout under dynamic shapes: wrong values.
  Patched: eager's view of ``v`` (PR copied-intermediate-aliases, Note [Aliases of
  intermediates copied by the graph]).

Each program is checked for full eager parity (viewreplay_harness.parity): values, layout,
flags, view nodes, base and version-counter classes, backward, and in-place on each output
then backward through each other one.
"""

from __future__ import annotations

import torch
from torch.testing._internal.common_utils import instantiate_parametrized_tests, parametrize, run_tests

from view_replay_testing import CompileTestCase, fallback_counts, PATCHED, stock_213_cache_off, strict_view_replay
from viewreplay_harness.parity import differences


def view_saved_for_backward(x):
    v = x @ x.flatten(0, -3)[0].t()
    a = v[v.shape[0] - 1]
    return a, x @ a


def views_of_a_mutated_matmul(x, w):
    v = x @ w
    a = v[:, 1:]
    b = v[:, :1]
    v.add_(1)
    return a, b


def _saved_inputs():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 3, generator=g, requires_grad=True)
    return [x], [x]


def _matmul_inputs():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(1, 1, generator=g, requires_grad=True)
    return [torch.randn(2, 2, 1, generator=g), w], [w]


class TestIntermediateAliases(CompileTestCase):
    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    def test_view_saved_for_backward(self, dynamic: bool, backend: str) -> None:
        compiled = torch.compile(view_saved_for_backward, backend=backend, dynamic=dynamic)
        with strict_view_replay(), stock_213_cache_off(backend):
            found = differences(view_saved_for_backward, compiled, _saved_inputs)
        if PATCHED:
            self.assertEqual(found, [])
            self.assertEqual(fallback_counts(), {})
        else:
            # The backward silently computes with the tripled values.
            self.assertIn("out0.mul_(3), backward through out1: eager ('backward', 'RuntimeError'), "
                          "compiled grads", found)

    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    def test_views_of_a_mutated_matmul(self, dynamic: bool, backend: str) -> None:
        compiled = torch.compile(views_of_a_mutated_matmul, backend=backend, dynamic=dynamic)
        with strict_view_replay(), stock_213_cache_off(backend):
            found = differences(views_of_a_mutated_matmul, compiled, _matmul_inputs)
        if PATCHED:
            # Eager's autograd regenerates a view whose base was then changed in place with
            # as_strided(): its node is AsStridedBackward0; the compiled function's views are
            # taken after the change (the same values and gradients).
            self.assertEqual(found, [
                f"out{k} view nodes: eager ('AsStridedBackward0',), compiled ('SliceBackward0',)" for k in (0, 1)
            ])
            self.assertEqual(fallback_counts(), {})
        elif backend == "inductor" and dynamic:
            # as_strided() with the copy's layout: other elements of v.
            self.assertTrue(any(f.startswith("out0 layout") for f in found), found)


instantiate_parametrized_tests(TestIntermediateAliases)

if __name__ == "__main__":
    run_tests()
