"""Outputs whose autograd ``_base`` is made by an op that autograd does not track as a view
(``_unsafe_view``: a copying reshape, ``x @ w`` with a 3-D ``x``): eager returns them as views of
that tensor, sharing its version counter. Stock torch replays the ``_unsafe_view`` once more
off that base (static shapes), so the output is a view of a fresh tensor: an in-place op on
the base is not seen through the output, and backward silently drops it (wrong gradient).
Patched torch plans the rest of the chain off the base (Note [Outputs whose autograd base is
inside the chain])."""

from __future__ import annotations

import torch
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
)

from view_replay_testing import (
    CompileTestCase,
    fallback_counts,
    PATCHED,
    stock_213_cache_off,
    strict_view_replay,
)
from viewreplay_harness.parity import differences


def reshape_copy_and_last(x):
    b, h, t, d = x.shape
    y = (x * 2).transpose(1, 2).reshape(b, t, h * d)
    return y, y[:, -1]


def matmul_two_views(x, w):
    y = x @ w
    return y[0], y[1].t()


def _inputs(*shapes):
    def make():
        gen = torch.Generator().manual_seed(0)
        leaves = [torch.randn(s, generator=gen).requires_grad_() for s in shapes]
        return list(leaves), leaves

    return make


# name -> (program, inputs at two sizes)
PROGRAMS = {
    "reshape_copy_and_last": (reshape_copy_and_last, [_inputs((2, 2, 5, 4)), _inputs((2, 2, 7, 4))]),
    "matmul_two_views": (matmul_two_views, [_inputs((3, 4, 8), (8, 8)), _inputs((5, 4, 8), (8, 8))]),
}

# What stock torch gets wrong, per program, with static shapes (dynamic shapes fall back to
# as_strided() off the right base: the structure is right, the nodes are not).
STOCK_STATIC_WRONG = {
    "reshape_copy_and_last": [
        "bases",
        "version counters",
        "out0.mul_(3), backward through out1",
        "out1.mul_(3), backward through out0",
    ],
    "matmul_two_views": ["bases", "version counters"],
}


class TestAutogradBaseInsideChain(CompileTestCase):
    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    @parametrize("name", list(PROGRAMS))
    def test_eager_parity(self, name: str, dynamic: bool, backend: str) -> None:
        fn, sizes = PROGRAMS[name]
        compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
        for make_inputs in sizes:
            with strict_view_replay(), stock_213_cache_off(backend):
                found = differences(fn, compiled, make_inputs)
            if PATCHED:
                self.assertEqual(found, [])
            elif not dynamic:
                # The bug: another base, no shared version counter, and (reshape) a wrong gradient.
                self.assertEqual(
                    sorted({line.split(":")[0] for line in found if "view nodes" not in line}),
                    sorted(STOCK_STATIC_WRONG[name]),
                )
        if PATCHED:
            self.assertEqual(fallback_counts(), {})


instantiate_parametrized_tests(TestAutogradBaseInsideChain)

if __name__ == "__main__":
    run_tests()
