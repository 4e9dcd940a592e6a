"""Batched matmul outputs: eager's ``a @ b`` of (2, 3, 4) and (2, 4, 5) tensors ends in
``_unsafe_view``, so its result is no autograd view (UnsafeViewBackward0; ``detach_()`` works).

matmul's Python decomposition, which the trace runs, ended the batched product in ``view``
instead: the traced output aliased the hidden ``bmm`` result. Stock hides a sole alias of an
intermediate behind ``_unsafe_view`` and so returns a plain tensor; the series regenerated it as
a view of the intermediate wherever the backward saves a tensor on that storage (``o.sin()``
saves ``o``), and, before the saved-intermediate-aliases PR was made precise, in every graph
with a backward: ``o._is_view()``, ViewBackward0, and ``o.detach_()`` raised "Can't detach views
in-place". Patch batched-matmul-decomposition makes the decomposition end in ``_unsafe_view`` as
``at::matmul`` does. Each program is checked for full eager parity (viewreplay_harness.parity)
on stock and patched torch; stock shows the difference STOCK_DIFFERENCE names.
"""
from __future__ import annotations

import torch
import torch._dynamo
from torch.testing._internal.common_utils import instantiate_parametrized_tests, parametrize, run_tests

from view_replay_testing import CompileTestCase, fallback_counts, PATCHED, strict_view_replay
from viewreplay_harness.parity import differences


def product(a, b):
    return a @ b


def product_and_a_use(a, b):
    o = a @ b
    return o, o.sin()  # SinBackward0 saves o


def attention_like(q, k):
    o = q @ k.transpose(-1, -2) @ k
    torch._dynamo.graph_break()
    o += 1
    return o


PROGRAMS = {"product": product, "product_and_a_use": product_and_a_use, "attention_like": attention_like}
SHAPES = {
    "3d_3d": ((2, 3, 4), (2, 4, 5)),
    "4d_3d": ((2, 2, 3, 4), (2, 4, 5)),
    "broadcast": ((2, 1, 3, 4), (2, 4, 5)),
    "2d_3d": ((3, 4), (2, 4, 5)),
}


def _inputs(shapes):
    def make():
        gen = torch.Generator().manual_seed(0)
        a, b = (torch.randn(s, generator=gen, requires_grad=True) for s in shapes)
        return [a, b], [a, b]

    return make


# Stock hides the alias of the bmm result and returns a plain tensor, as eager does; but with
# product_and_a_use, after out0.mul_(3) its backward through out1 computes with the changed
# values where eager raises (no saved tensor shares out0's version counter; patch
# version-witnesses fixes that).
STOCK_DIFFERENCE = {"product_and_a_use": "out0.mul_(3), backward through out1: eager ('backward', 'RuntimeError')"}


class TestBatchedMatmul(CompileTestCase):
    @parametrize("dynamic", [False, True])
    @parametrize("shapes", list(SHAPES))
    @parametrize("program", ["product", "product_and_a_use"])
    def test_parity(self, program: str, shapes: str, dynamic: bool) -> None:
        fn = PROGRAMS[program]
        compiled = torch.compile(fn, backend="aot_eager", dynamic=dynamic)
        with strict_view_replay():
            found = differences(fn, compiled, _inputs(SHAPES[shapes]))
        # 2-D @ 3-D folds into mm and a contiguous copy: no alias, stock gets it right.
        if PATCHED or program not in STOCK_DIFFERENCE or shapes == "2d_3d":
            self.assertEqual(found, [])
        else:
            self.assertTrue(any(f.startswith(STOCK_DIFFERENCE[program]) for f in found), found)
        if PATCHED:
            self.assertEqual(fallback_counts(), {})

    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    def test_detach_in_place(self, dynamic: bool, backend: str) -> None:
        compiled = torch.compile(product_and_a_use, backend=backend, dynamic=dynamic)
        (a, b), _ = _inputs(SHAPES["3d_3d"])()
        o, _ = compiled(a, b)
        self.assertFalse(o._is_view())
        o.detach_()  # eager allows it: o is no view
        self.assertFalse(o.requires_grad)

    @parametrize("backend", ["aot_eager", "inductor"])
    def test_across_a_graph_break(self, backend: str) -> None:
        compiled = torch.compile(attention_like, backend=backend)
        with strict_view_replay():
            self.assertEqual(differences(attention_like, compiled, _inputs(((2, 3, 4), (2, 5, 4)))), [])


instantiate_parametrized_tests(TestBatchedMatmul)


if __name__ == "__main__":
    run_tests()
