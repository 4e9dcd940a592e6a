"""
Multi-output views (unbind, split, split_with_sizes, chunk): one regeneration
per group, with eager's autograd semantics.

Note [Multi-output views]
~~~~~~~~~~~~~~~~~~~~~~~~~
Upstream hides the aliasing between outputs of one multi-output view call from
autograd (Note: [AOTAutograd: differentiable outputs that alias each other
from a multi-output view call] in collect_metadata_analysis.py): the pieces
leave the compiled autograd.Function as plain outputs. That avoids one
AsStridedBackward0 per piece but drops eager's safety: in-place on a piece is
allowed, and in-place on the base followed by backward through a piece gives
a silently wrong gradient.

With ``config.hide_multi_output_view_aliasing`` off (the default), such pieces
are classified as aliases of their input or intermediate like any other view
and regenerated outside the function. Regeneration calls the multi-output op
**once per group**: all outputs whose view chains agree up to and including
the multi-output op (same base, same resolved arguments) share one call,
cached for the duration of one runtime call in the call's ``groups``
(replay.RegenerationCall, pieces.pieces_of). The backward then holds eager's
structure (one UnbindBackward0 / SplitBackward0 / SplitWithSizesBackward0
per group), and autograd's CreationMeta for multi-output views makes in-place
on a piece, and backward through a piece after in-place on the base, raise
eager's errors.

Two separate calls of the same op on the same base in user code cannot be told
apart from one call after functionalization; they are regenerated as one call
(one backward node instead of two; same gradients and errors), except that
two outputs that are the same piece get a call each (``pieces_of``'s claim):
they are two tensors in eager, and the same tensor twice would be observable
(in-place metadata changes, hooks, requires_grad_).

Layering: planning (compile time): the table of multi-output ops and the two
classification hooks; the runtime part is pieces.py.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch._subclasses.functional_tensor import FunctionalTensor
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from . import config
from .autograd_chain import has_no_grad_steps


# ViewMeta class -> the aten op (path under ``torch.ops``) that produces all pieces.
MULTI_OUTPUT_VIEW_OPS: dict[str, str] = {
    "unbind_int_ViewMeta": "aten.unbind.int",
    "split_Tensor_ViewMeta": "aten.split.Tensor",
    "split_with_sizes_ViewMeta": "aten.split_with_sizes.default",
}

# Layout of a multi-output ViewMeta's as_tuple():
# (has_symbolic_inputs, out_index, reapply_views, InverseReturnMode, *op_args)
OUT_INDEX_POSITION = 1
OP_ARGS_START = 4


def is_multi_output_view_meta(view_meta: Any) -> bool:
    return type(view_meta).__name__ in MULTI_OUTPUT_VIEW_OPS


def hide_input_multi_output_aliasing() -> bool:
    """Compile-time hook: whether outputs that are pieces of one multi-output
    view of an input are returned from the compiled function as plain outputs."""
    return config.hide_multi_output_view_aliasing


def hide_intermediate_alias(
    out: Tensor, num_aliased_outs: int, num_aliased_outs_not_multi_output: int, backward_saves_its_storage: bool
) -> bool:
    """Compile-time hook: whether an output aliasing an intermediate is returned
    as a plain output (via _unsafe_view) instead of being regenerated.

    Upstream hides it when it is the only output on its storage, or when all
    other outputs on it are multi-output views. In faithful mode, a piece of a
    multi-output view is always regenerated (Note [Multi-output views]), and so
    is a plain alias of an intermediate on whose storage eager's backward saves
    a tensor (Note [Saved tensors on the storage of a returned tensor] in
    saved_tensors.py); any other output that is the only alias of its storage
    and no such piece stays hidden.
    """
    if has_no_grad_steps(out):
        return False  # regenerated off its base: Note [Views taken under no_grad]
    if config.hide_multi_output_view_aliasing:
        return num_aliased_outs == 1 or num_aliased_outs_not_multi_output <= 1
    if backward_saves_its_storage and not is_traceable_wrapper_subclass(out):
        return False
    is_piece = isinstance(out, FunctionalTensor) and torch._functionalize_is_multi_output_view(  # type: ignore[attr-defined]
        out.elem
    )
    return num_aliased_outs == 1 and not is_piece
