"""
Fresh outputs that the compiled graph computes as views of its intermediates.

Note [Fresh outputs the graph returns as views]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
When a program mutates a tensor it created through a view of it, e.g.
    y = x * 2; y.view(-1).add_(1); return y
functionalization computes the mutation on a new value and regenerates ``y``
from it with the inverse view (``view(add, y.shape)``; ``alias`` for an alias,
``t`` for a transpose). For autograd ``y`` is a fresh tensor (eager:
``y._base is None``, grad_fn CopySlices), and AOTAutograd classifies it as
such (OutputType.non_alias, or an intermediate base), but the graph returns a
view of its own intermediate ``add``. Returned from the compiled
autograd.Function, that view is "a view created inside a custom Function":
``y.mul_(3)`` raises "Output 0 of CompiledFunction is a view and is being
modified inplace", ``y._base`` is the hidden intermediate, and an output
regenerated off ``y`` (``y[0]``) is a view of that intermediate whose in-place
raises too. Graphs without a backward return it as it is (``y._base`` is the
hidden intermediate). Stock 2.14.1 and 2.13.0, aot_eager (inductor returns
these outputs as fresh buffers).

An in-place view op on a fresh tensor (``y = x * 2; y.t_(); return y``;
``unsqueeze_``, ``squeeze_``, ``transpose_``, ``as_strided_``) does the same
without a mutation: for autograd ``y`` stays a fresh tensor (grad_fn
TBackward1), functionalization records the op as a ViewMeta of its storage,
and the graph computes it with the out-of-place view op, a view of its own
intermediate (``y._is_view()``; ``y.detach_()`` raises "Can't detach views
in-place"). ``torch.stft`` of a 1-D signal ends in ``squeeze_``; its complex
ops keep that view under inductor too. Stock 2.14.1 and 2.13.0 alike.

The outputs that may be such views are found once, at compile time: the fresh
tensors (user outputs that alias nothing, intermediate bases) that the graph
mutated or changed with an in-place view op (:func:`may_return_as_views`; the
traced values cannot tell, they are functional copies). They are stored in
``ViewAndMutationMeta.mutated_fresh_outputs``. At runtime
:func:`detach_returned_views` returns each of them that is a view through
``detach()``: a tensor that autograd does not track as a view (no ``_base``,
no creation meta), on the same storage and with the same version counter, so
tensors the forward saved off that storage still see an in-place change of
the output (Note [Saved tensors on the storage of a returned tensor]). Inside
the autograd.Function (graphs with a backward) the detached tensor is the
Function's output and gets its grad_fn; in graphs without one it is returned
as it is. One ``_is_view()`` per such output and call, and one ``detach()``
where it is a view.

Layering: runtime (the compile-time check reads traced values only).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor
from torch._C import _functionalization
from torch._subclasses.functional_tensor import FunctionalTensor


def _mutated_fresh_tensor(out: object) -> bool:
    """Whether ``out`` is a tensor the graph created (no view for autograd) and then mutated
    or changed with an in-place view op: the graph may return it as a view of an
    intermediate."""
    if type(out) is not FunctionalTensor or out._base is not None:
        return False
    return torch._functionalize_has_data_mutation(out.elem) or _viewed_in_place(out.elem)


def _viewed_in_place(elem: Tensor) -> bool:
    # An in-place op's name ends in "_", so its ViewMeta class is "<op>__<overload>_ViewMeta"
    # or "<op>__ViewMeta" (t__ViewMeta, squeeze__dim_ViewMeta); no out-of-place view op's
    # class name holds "__" after its leading underscore (_unsafe_view_ViewMeta).
    return any(
        "__" in type(vm).__name__.lstrip("_") for vm in _functionalization.get_view_meta_sequence(elem)
    )


def may_return_as_views(fresh_outputs: Sequence[object], intermediate_bases: Sequence[object]) -> list[int]:
    """Compile-time hook: the indices, among the user outputs and then the intermediate bases,
    of the fresh tensors the graph may compute as views of its intermediates: those it mutated
    (Note [Fresh outputs the graph returns as views]). ``fresh_outputs`` holds the user outputs
    that alias nothing (OutputType.non_alias) and None for the others."""
    returns = [*fresh_outputs, *intermediate_bases]
    return [i for i, out in enumerate(returns) if _mutated_fresh_tensor(out)]


def detach_returned_views(returns: list[Any], first_output: int, metadata: Any) -> None:
    """Runtime hook: replace, in ``returns`` (whose user outputs start at ``first_output``, the
    intermediate bases following them), each fresh output the graph may return as a view and
    does by its ``detach()``. ``metadata`` is the graph's ViewAndMutationMeta."""
    for i in metadata.mutated_fresh_outputs:
        out = returns[first_output + i]
        if isinstance(out, Tensor) and out._is_view():
            returns[first_output + i] = out.detach()
