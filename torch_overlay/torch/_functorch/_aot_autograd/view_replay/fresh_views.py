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

The outputs that may be such views are found once, at compile time: the fresh
tensors (user outputs that alias nothing, intermediate bases) that the graph
mutated (:func:`may_return_as_views`; the traced values cannot tell, they are
functional copies). They are stored in
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
from torch._subclasses.functional_tensor import FunctionalTensor


def _mutated_fresh_tensor(out: object) -> bool:
    """Whether ``out`` is a tensor the graph created (not a view for functionalization) and
    then mutated: the graph may return it as a view of the mutation's value."""
    return type(out) is FunctionalTensor and out._base is None and torch._functionalize_has_data_mutation(out.elem)


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
