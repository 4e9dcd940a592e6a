"""
Checking a regenerated view against the graph's own output for the alias.

Every regeneration compares its result with the graph's output (``target``),
as :class:`~spec.Check` says, before it is handed out.

Note [Outputs on another storage than their base] (torch >= 2.14)
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
From 2.14, upstream's gen_alias_from_base translates the storage offset of
its as_strided() fallback when the graph's output lives on another storage
than the real base (inductor's copy_misaligned_inputs clones a misaligned
input, and the output is a view of the clone): the traced output's offset is
then relative to the base, so the base's own offset is added back. The
regeneration hook replaces that code, so the fallback does it here (and the
layout check). Gated to the versions whose upstream does it, so 2.13's
behaviour (and its tests) stay as they are.

Note [Aliases of inputs mutated by the graph]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
When the graph mutates an input's data, functionalization computes the new
value as a fresh tensor, and an output that aliases the input leaves the graph
as a view of that new value, not of the input: its size is the output's, but
its storage offset is relative to the new value (``a.mul_(2); return a[1:]``
with ``a = x[1:]`` gives offset 2 where eager has 4) and its strides follow the
new value's layout. The runtime applies the mutation to the real input first,
then regenerates the alias off it, so the replayed chain is eager's; only the
graph's output is the wrong reference. Such an output is checked against its
size and dtype (Check.SIZE), and its plan reads no symbol off that output's
strides or offset (symbols.py); every other output is checked on its whole
layout (Check.LAYOUT), which proves a plan's arguments for the base at hand.

Layering: runtime. Imports the data (spec) only.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from .spec import Check


_TRANSLATE_CROSS_STORAGE_OFFSET = torch.torch_version.TorchVersion(torch.__version__) >= (2, 14)


def cross_storage_shift(base: Tensor, target: Tensor) -> int:
    """What to add to ``target``'s storage offset to address ``base``'s storage (0: same storage)."""
    if not _TRANSLATE_CROSS_STORAGE_OFFSET or type(base) is not Tensor or type(target) is not Tensor:
        return 0
    # _cdata, not data_ptr(): safe on fake and meta storages while tracing.
    if base.untyped_storage()._cdata == target.untyped_storage()._cdata:
        return 0
    return base.storage_offset()


def same_dense_layout(a: Tensor, b: Tensor, offset_shift: int = 0) -> bool:
    """Whether two dense views address the same elements in the same order, ``b``'s storage
    offset moved by ``offset_shift``. Strides of dimensions of size 1 (and all strides of
    empty tensors) are not observable, so they may differ."""
    if a.dtype != b.dtype or a.size() != b.size():
        return False
    if a.numel() == 0:
        return True
    if a.storage_offset() != b.storage_offset() + offset_shift:
        return False
    return all(size == 1 or sa == sb for size, sa, sb in zip(a.size(), a.stride(), b.stride()))


def same_inner_layouts(a: object, b: object) -> bool:
    """Whether two subclass tensors' inner tensors (recursively) have the same layouts.

    Flattened attributes that are not tensors (opaque objects such as a DTensor's device
    mesh) must be equal.
    """
    if not isinstance(a, Tensor):
        return not isinstance(b, Tensor) and a == b
    if not is_traceable_wrapper_subclass(a):
        return isinstance(b, Tensor) and not is_traceable_wrapper_subclass(b) and same_dense_layout(a, b)
    if type(a) is not type(b):
        return False
    attrs_a, _ = a.__tensor_flatten__()  # type: ignore[attr-defined]
    attrs_b, _ = b.__tensor_flatten__()  # type: ignore[attr-defined]
    return attrs_a == attrs_b and all(same_inner_layouts(getattr(a, n), getattr(b, n)) for n in attrs_a)


def same_layout(a: Tensor, b: Tensor) -> bool:
    """Whether ``a`` has ``b``'s layout: at the outer level and, for a tensor subclass, on
    every inner tensor (Note [Subclass view replay] in subclass.py)."""
    if type(a) is Tensor and (
        a.dtype == b.dtype
        and a.size() == b.size()
        and a.stride() == b.stride()
        and a.storage_offset() == b.storage_offset()
    ):
        return True
    if is_traceable_wrapper_subclass(a):
        return same_dense_layout(a, b) and same_inner_layouts(a, b)
    return same_dense_layout(a, b)


def _layout_on_base(out: Tensor, target: Tensor, base: Tensor) -> bool:
    """``out`` has ``target``'s layout, ``target``'s offset moved onto ``base``'s storage if it
    lives on another (Note [Outputs on another storage than their base])."""
    if same_layout(out, target):
        return True
    shift = cross_storage_shift(base, target)
    return shift != 0 and same_dense_layout(out, target, offset_shift=shift)


def _same_size(out: Tensor, target: Tensor, base: Tensor) -> bool:
    return out.dtype == target.dtype and out.size() == target.size()


# check(out, target, base): whether the regenerated ``out`` may stand for ``target``.
VERIFIERS: dict[Check, Callable[[Tensor, Tensor, Tensor], bool]] = {
    Check.LAYOUT: _layout_on_base,
    Check.SIZE: _same_size,
    Check.INTERMEDIATE: _layout_on_base,
}


def on_other_storage(base: Tensor, target: Tensor) -> bool:
    """Whether the dense ``target`` lives on another storage than the dense ``base``."""
    if type(base) is not Tensor or type(target) is not Tensor:
        return False
    return base.untyped_storage()._cdata != target.untyped_storage()._cdata
