"""Outputs aliasing an input that AOTAutograd merges into a synthetic base (Note [Outputs
aliasing inputs merged into a synthetic base]).

``a`` and ``b`` are overlapping views of one non-leaf base and ``a`` is mutated: the compiled
function receives a synthetic base instead of ``a`` and ``b``. Stock torch regenerates an output
aliasing ``b`` by replaying ``b``'s ViewMetas on the synthetic base, checked on its size only:
``b[:3]`` comes back as ``base[:3]`` (wrong values, and a gradient sent to other elements) and
``b[1:].t()`` raises. Patched torch regenerates it off ``b`` in the synthetic-base wrapper, after
the mutation is written back: eager's values, layout, bases, version counters, view nodes and
gradients, with no fallback (strict mode)."""

from __future__ import annotations

import torch
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
)

from view_replay_testing import CompileTestCase, fallback_counts, PATCHED, strict_view_replay
from viewreplay_harness.parity import differences


def slice_of_b(a, b):
    a.mul_(2)
    return (b[:3],)


def transposed_slice_of_b_and_select_of_a(a, b):
    a.mul_(2)
    return b[1:].t(), a[0]


def symbolic_slice_of_b(a, b):
    a.mul_(2)
    return (b[: b.shape[0] // 2],)


def pieces_of_b(a, b):
    a.mul_(2)
    return b.unbind(0)


def b_itself_and_a_view(a, b):
    a.mul_(2)
    return b, a.view(-1)


# name -> (program, shape of the leaf, where a starts, what stock does with static shapes, and
# with dynamic shapes): "wrong values" (or layout), "raises", "other bases" (or version
# counters: the right values off another tensor), "right" (no difference but view nodes).
PROGRAMS = {
    "slice_of_b": (slice_of_b, (10,), 0, "wrong values", "wrong values"),
    "transposed_slice_of_b_and_select_of_a": (transposed_slice_of_b_and_select_of_a, (10, 3), 0, "raises", "raises"),
    "select_of_a_at_an_offset": (transposed_slice_of_b_and_select_of_a, (10, 3), 1, "raises", "raises"),
    # Dynamic shapes: stock's chain has a symbolic argument, so it falls back to as_strided()
    # off the graph's output, which is right.
    "symbolic_slice_of_b": (symbolic_slice_of_b, (10, 3), 0, "wrong values", "right"),
    # Stock hides the pieces' aliasing (they are plain outputs): right values, other bases.
    "pieces_of_b": (pieces_of_b, (10, 3), 0, "other bases", "other bases"),
    "b_itself_and_a_view": (b_itself_and_a_view, (10, 3), 0, "right", "right"),
}
STOCK_SIGNS = {
    "wrong values": ("values", "layout"),
    "other bases": ("bases", "version counters"),
}


def _inputs(shape, start):
    def make():
        leaf = torch.randn(shape, generator=torch.Generator().manual_seed(0), requires_grad=True)
        base = leaf * 1
        n = shape[0] - 6
        return [base[start : start + n + 2], base[2 : n + 4]], [leaf]

    return make


class TestMergedInputAliases(CompileTestCase):
    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    @parametrize("name", list(PROGRAMS))
    def test_eager_parity(self, name: str, dynamic: bool, backend: str) -> None:
        fn, shape, start, stock_static, stock_dynamic = PROGRAMS[name]
        stock = stock_dynamic if dynamic else stock_static
        compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
        if PATCHED:
            with strict_view_replay():
                self.assertEqual(differences(fn, compiled, _inputs(shape, start)), [])
            self.assertEqual(fallback_counts(), {})
        elif stock == "raises":
            with self.assertRaisesRegex(Exception, "incorrect out shape after application of ViewMeta"):
                compiled(*_inputs(shape, start)()[0])
        else:
            found = [d for d in differences(fn, compiled, _inputs(shape, start)) if "view nodes" not in d]
            if stock == "right":
                self.assertEqual(found, [])
            else:
                self.assertTrue(any(sign in d for d in found for sign in STOCK_SIGNS[stock]), found)


instantiate_parametrized_tests(TestMergedInputAliases)

if __name__ == "__main__":
    run_tests()
