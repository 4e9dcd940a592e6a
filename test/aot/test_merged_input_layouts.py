"""Inputs merged into a synthetic base at another storage offset than traced (Note [Layouts of
inputs merged into a synthetic base]).

The graph rebuilds ``a`` and ``b`` (overlapping views, ``a`` mutated) off their common base at
the storage offsets they had when it was traced, and Dynamo does not guard input storage
offsets. Stock torch reuses the graph for a call with the views elsewhere in the base: the
mutation and the output land on the traced elements (silent wrong values, every backend,
static and dynamic). Patched torch raises, naming the argument and both offsets."""

from __future__ import annotations

import torch
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
)

from view_replay_testing import CompileTestCase, PATCHED


def mutate_a_read_b(a, b):
    a.mul_(2)
    return b * 1


def mutate_a_return_slice_of_b(a, b):
    a.mul_(2)
    return b[:3]


def _call(fn, start):
    base = torch.arange(30.0).reshape(10, 3).requires_grad_() * 1
    expected = base.detach().clone()
    expected[start : start + 6] *= 2
    out = fn(base[start : start + 6], base[2:8])
    return base, expected, out


class TestMergedInputLayouts(CompileTestCase):
    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    @parametrize("fn", [mutate_a_read_b, mutate_a_return_slice_of_b], name_fn=lambda f: f.__name__)
    def test_call_at_another_offset(self, fn, dynamic: bool, backend: str) -> None:
        compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
        if not PATCHED and fn is mutate_a_return_slice_of_b:
            return  # its first call is already wrong on stock: test_merged_input_aliases
        # Dynamic shapes: the offset-0 call recompiles (duck sizing had equated the offset 3 with a
        # size), the next reuses a graph.
        starts = (1, 0, 3) if dynamic else (1, 3)
        if not PATCHED:
            # The bug: a graph is reused for another offset, and its traced rows are doubled
            # (and b * 1 read there) instead of the call's: silently.
            wrong = []
            for start in starts:
                base, expected, out = _call(compiled, start)
                wrong.append(not torch.equal(base.detach(), expected) or not torch.equal(out, _call(fn, start)[2]))
            self.assertTrue(any(wrong[1:]), wrong)
            return
        for start in starts[:-1]:
            base, expected, out = _call(compiled, start)
            self.assertEqual(base, expected)
            self.assertEqual(out, _call(fn, start)[2])
        with self.assertRaisesRegex(RuntimeError, "at storage offset 9, which Dynamo does not guard"):
            _call(compiled, 3)

    @parametrize("backend", ["aot_eager", "inductor"])
    def test_offset_that_duck_sizing_binds(self, backend: str) -> None:
        # a = x[1:] starts at x.size(1): duck sizing makes the offset that size's symbol, Dynamo
        # guards it, and the graph rebuilds a where each call has it. Nothing to refuse (found
        # by fuzz --long, where the check used to raise at the second size).
        compiled = torch.compile(mutate_a_read_row_0_of_x, backend=backend, dynamic=True)
        for shape in ((3, 2), (5, 4)):
            x = torch.randn(shape)
            xe = x.clone()
            out = compiled(x, x[1:])
            self.assertEqual(out, mutate_a_read_row_0_of_x(xe, xe[1:]))
            self.assertEqual(x, xe)


def mutate_a_read_row_0_of_x(x, a):
    a.add_(1)
    return x[0] * 1


instantiate_parametrized_tests(TestMergedInputLayouts)

if __name__ == "__main__":
    run_tests()
