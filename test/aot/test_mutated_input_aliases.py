"""Outputs that alias an input whose data the graph mutates (Note [Aliases of inputs mutated
by the graph]): the graph's output is a view of the mutation's new value, so its storage
offset is not the output's. The regenerated view must keep eager's offset and strides: the
input here is itself a view, at a nonzero offset of a contiguous or of a transposed tensor.
Stock replays static chains, checks only their size and is right there, but 2.13 falls back to as_strided() with the graph's offset for chains with
symbolic arguments (STOCK_WRONG_LAYOUT): an output pointing at other elements (2.14's stock
translates that offset, and is right unless the input is transposed). The patched
wheel used to verify every replay against the graph's offset and fell back the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._dynamo.utils import counters
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
)

from view_replay_testing import as_tuple, CompileTestCase, fallback_counts, PATCHED, TORCH_2_14


def mul_then_slice(a):
    a.mul_(2)
    return a[1:]


def nograd_add_then_squeeze(a):
    with torch.no_grad():
        a.add_(1)
    return a.unsqueeze(0).squeeze((0,))


def mul_then_half(a):
    a.mul_(2)
    return a[: a.shape[0] // 2]


def mul_then_narrow_item(a, t):
    a.mul_(2)
    k = t.item()
    torch._check(k >= 0)
    torch._check(k + 2 <= a.shape[0])
    return a.narrow(0, k, 2)


def mul_then_split(a, t):
    a.mul_(2)
    return a.split(t.tolist())


# name -> (fn, whether the input requires grad, the extra argument or None)
CASES: dict[str, tuple[Callable[..., Any], bool, Any]] = {
    "mul_then_slice": (mul_then_slice, False, None),
    "nograd_add_then_squeeze": (nograd_add_then_squeeze, True, None),
    "mul_then_half": (mul_then_half, False, None),
    "mul_then_narrow_item": (mul_then_narrow_item, False, 1),
    "mul_then_split": (mul_then_split, False, [1, 2, 4]),
}


# Where stock falls back to as_strided() with the graph's layout (chains with symbolic arguments:
# dynamic shapes, .item()/.tolist() values), the output points at other elements. 2.13 uses the
# graph's offset, which is relative to the mutation's new value. From 2.14, stock's
# gen_alias_from_base adds the base's offset to that of an output on another storage (for
# inductor's copy_misaligned_inputs), and the new value is one: right for an input at an offset,
# still wrong where the new value's strides are not the input's (a transposed input).
STOCK_WRONG_LAYOUT = {
    ("mul_then_narrow_item", False, "transposed"),
    ("mul_then_narrow_item", True, "transposed"),
    ("mul_then_split", False, "transposed"),
    ("mul_then_split", True, "transposed"),
    ("mul_then_half", True, "transposed"),
} | (
    {
        ("mul_then_half", True, "offset"),
        ("mul_then_narrow_item", False, "offset"),
        ("mul_then_narrow_item", True, "offset"),
        ("mul_then_split", False, "offset"),
        ("mul_then_split", True, "offset"),
    }
    if not TORCH_2_14
    else set()
)


def _layout(t: torch.Tensor) -> tuple[int, tuple[int, ...]]:
    return t.storage_offset(), t.stride()


class TestMutatedInputAliases(CompileTestCase):
    @parametrize("layout", ["offset", "transposed"])
    @parametrize("dynamic", [False, True])
    @parametrize("name", list(CASES))
    def test_alias_keeps_eager_layout(self, name: str, dynamic: bool, layout: str) -> None:
        self._check(name, dynamic, "aot_eager", layout)

    @parametrize("name", ["mul_then_half", "mul_then_split"])
    def test_inductor(self, name: str) -> None:
        self._check(name, True, "inductor", "offset")

    def _check(self, name: str, dynamic: bool, backend: str, layout: str) -> None:
        fn, requires_grad, extra = CASES[name]
        # The input is a (7, 2) view: at offset 2 of a contiguous tensor, or at offset 1 of a
        # transposed one (strides (1, 8)), of a leaf that requires grad if it must.
        x = torch.randn(8, 2) if layout == "offset" else torch.randn(2, 8)
        x_eager, x_compiled = x.clone().requires_grad_(requires_grad), x.clone().requires_grad_(requires_grad)

        def make_input(leaf: torch.Tensor) -> torch.Tensor:
            data = leaf.detach() if requires_grad else leaf
            a = data[1:] if layout == "offset" else data.t()[1:]
            return a.requires_grad_() if requires_grad else a

        a_eager, a_compiled = make_input(x_eager), make_input(x_compiled)
        args = () if extra is None else (torch.tensor(extra),)
        with torch._dynamo.config.patch(capture_scalar_outputs=True):
            outs = as_tuple(torch.compile(fn, backend=backend, dynamic=dynamic)(a_compiled, *args))
        expected = as_tuple(fn(a_eager, *args))
        self.assertEqual(a_compiled, a_eager)
        if not PATCHED and (name, dynamic, layout) in STOCK_WRONG_LAYOUT:
            self.assertNotEqual([_layout(o) for o in outs], [_layout(r) for r in expected])
            return
        for out, ref in zip(outs, expected, strict=True):
            self.assertEqual(out.storage_offset(), ref.storage_offset())
            self.assertEqual(out.stride(), ref.stride())
            self.assertEqual(out, ref)
            self.assertEqual(out.untyped_storage().data_ptr(), a_compiled.untyped_storage().data_ptr())
        if PATCHED:
            self.assertEqual(fallback_counts(), {})
            self.assertNotIn("AsStridedBackward0", [type(o.grad_fn).__name__ for o in outs])
        if requires_grad:
            sum(o.sum() for o in outs).backward()
            sum(r.sum() for r in expected).backward()
            self.assertEqual(a_compiled.grad, a_eager.grad)
        self.assertEqual(counters["stats"]["unique_graphs"], 1)


instantiate_parametrized_tests(TestMutatedInputAliases)

if __name__ == "__main__":
    run_tests()
