"""
Bases of aliased outputs that the compiled graph returns as one of its inputs.

Note [Bases the graph returns as an input]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
AOTAutograd regenerates an output that aliases a graph intermediate off the
tensor the graph returns for that intermediate: an intermediate base (one more
graph output, ViewAndMutationMeta.num_intermediate_bases) or the user output
it aliases (OutputType.alias_of_intermediate_base_is_user_output). In eager
that intermediate is a fresh tensor. A backend may compute it as the input it
was made from: inductor's joint-graph pass ``remove_no_ops`` replaces
``x * ones_like(x)``, ``x + zeros_like(x)``, ``x - zeros_like(x)`` and
``x / ones_like(x)`` by ``x`` (from 2.14 also ``x * 1``, ``x + 0``, ``x - 0``,
``x / 1``), and the graph then returns ``x`` itself (or a tensor on ``x``'s
storage) for the intermediate:
    def f(x):
        return tuple(p.view(2, -1).t() for p in (x * 1).chunk(3))
    outs = torch.compile(f, backend="inductor", dynamic=True)(x)
    with torch.no_grad():
        x.add_(100)               # eager: outs unchanged; compiled: outs + 100
The outputs then alias ``x``: an in-place change of ``x`` after the call
changes them, and an in-place change of one of them writes ``x``; where ``x``
is a leaf that requires grad they are views of it (``_base is x``, through the
autograd.Function's output for ``x``), and an in-place change of one of them
raises ("created inside a custom Function") where eager's does not. Stock
2.14.1 and 2.13.0, inductor, static and dynamic shapes, ``x`` with and without
requires_grad (stock returns the pieces of a multi-output view as tensors on
``x``'s storage, other aliases as tensors on it or views of it).

Which returns are such bases is known at compile time
(:func:`regeneration_bases`); whether the backend returned an input for one is
known per call only. :func:`copy_input_bases` replaces each of them that is an input
of the call, or a plain tensor on an input's storage, by ``detach().clone()``:
a fresh tensor with the same values (and the dense layout a pointwise op gives),
off which the outputs are regenerated as eager's views of a fresh tensor.
With a backward it runs in the autograd.Function's forward before the forward
saves its tensors: the copy is the Function's output (the outputs' backward is
eager's view nodes, then CompiledFunctionBackward), the tensor saved to check
its version counter is taken off the copy (Note [Version witnesses]: an
in-place change of an output then a backward that reads the intermediate raises,
as eager's does), and a tensor saved on the input's storage keeps the input's
counter: ``share_returned_version_counters`` is given the inputs found, since
it would otherwise hand such a tensor the counter of an aliased output the
graph returned on that storage, and a backward after ``x.add_()`` would compute
with the changed ``x`` without a word.
Scope:
  - Only the bases of regenerated outputs. An output returned as it is
    (``return x * 1``) is ``x`` itself too: that is upstream's
    pytorch/pytorch#197893, to be fixed where ``remove_no_ops`` drops the op.
  - The backward still reads the input where eager's reads the intermediate:
    after ``x.add_()`` a backward that reads it raises "modified by an inplace
    operation" where eager's does not (as on stock torch).
Cost: nothing for a graph without such bases (decided at compile time);
otherwise, per call, one pass over the inputs (the storage of each plain
tensor) and one look-up per base.

Layering: runtime. Imports nothing of the overlay.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import torch
from torch import Tensor


def regeneration_bases(metadata: Any) -> tuple[int, ...]:
    """Compile-time: the indices, among the user outputs and then the intermediate bases, of
    the returns that aliased outputs are regenerated from (Note [Bases the graph returns as
    an input]). ``metadata`` is the graph's ViewAndMutationMeta."""
    user_bases = sorted({
        info.base_idx
        for info in metadata.output_info
        # schemas imports this package: compared by name
        if info.output_type.name == "alias_of_intermediate_base_is_user_output"
    })
    first_base = len(metadata.output_info)
    return (*user_bases, *range(first_base, first_base + metadata.num_intermediate_bases))


def _on_storage(t: object) -> bool:
    return type(t) is Tensor and t.layout is torch.strided


def copy_input_bases(
    returns: list[Any], first_output: int, bases: tuple[int, ...], inputs: Collection[Any]
) -> list[Tensor]:
    """Runtime hook: replace, in ``returns`` (whose user outputs start at ``first_output``, the
    intermediate bases following them), each return of the indices ``bases`` that is one of
    ``inputs`` or a plain tensor on the storage of one by a copy of it (Note [Bases the graph
    returns as an input]). Returns the inputs whose storages those returns were on."""
    by_storage: dict[int, Tensor] | None = None
    found: list[Tensor] = []
    for i in bases:
        base = returns[first_output + i]
        if _on_storage(base):
            if by_storage is None:
                by_storage = {a.untyped_storage()._cdata: a for a in inputs if _on_storage(a)}
            source = by_storage.get(base.untyped_storage()._cdata)
        else:  # a tensor subclass: only the input itself is recognized
            source = next((a for a in inputs if a is base), None) if isinstance(base, Tensor) else None
        if source is not None:
            found.append(source)
            returns[first_output + i] = base.detach().clone()
    return found
