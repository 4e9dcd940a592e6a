"""
Returned tensors whose in-place change eager's backward sees through a tensor it saved.

Note [Version witnesses]
~~~~~~~~~~~~~~~~~~~~~~~~
Eager autograd saves, for the backward, tensors that may share a storage and a
version counter with a tensor the function returns. In
    v = x * 2; a, b = v.split(2); return b, v, a.sin()
SinBackward0 saves the piece ``a`` of ``v``, so ``v.mul_(3)`` then backward
through the sin raises ("its base or another view of its base has been
modified inplace"). What the compiled forward saves is the partitioner's
choice: here ``cos(a)``, computed in the forward, which shares nothing with
``v``, so no version counter carries the change and the backward silently
computes with the forward's values (stock 2.14.1 and 2.13.0, aot_eager and
inductor, static and dynamic; for ``v[1:].sin()`` it saves ``v`` itself and
raises as eager does). Note [Saved tensors on the storage of a returned
tensor] covers only the tensors the partitioner does save on a returned
storage.

At compile time :func:`eager_saved_returns` walks the autograd graph that the
metadata run built over FunctionalTensors, from the user outputs and the
mutated inputs back to the nodes the inputs had before the run, reads each
node's saved tensors, and lists the fresh returns (user outputs that alias
nothing or hide their alias behind ``_unsafe_view``, then intermediate bases)
whose storage one of them shares: ``ViewAndMutationMeta.version_witness_outputs``.
At runtime :func:`version_witnesses` gives ``detach()`` of each of them, which
the forward saves in front of its own saved tensors: it shares the returned
tensor's version counter and holds no reference to it. Unpacking
``ctx.saved_tensors`` checks its version as eager checks its saved view, and
the backward prologue drops it.
Scope:
  - Only nodes reachable from the outputs count: a node whose result the
    function detaches (``v[1:].sin().detach()``) is never run by eager's
    backward, and its saved tensors witness nothing.
  - The compiled backward is one node, which checks every tensor it saved
    whichever output the backward starts from: after ``v.mul_(3)``, backward
    through an output that eager computes without the sin raises too (as stock
    raises wherever the partitioner saves ``v`` itself).
  - Tensors eager saves on an input's storage are not witnessed.
  - Graphs with tensor-subclass outputs or mutated inputs keep upstream's
    behaviour (the forward returns their inner tensors), and so do graphs
    whose inputs are deduplicated or merged into a synthetic base (their
    runtime metadata is rebuilt without this field).
Cost: one walk of the traced autograd graph per compile; per call one
``detach()`` and one saved tensor per witness, where the partitioner may
already save the returned tensor itself. Under saved-tensor hooks a witness
is packed like any saved tensor (offloaded, say), although the hooks turn off
the version check it is for, in eager too.

Layering: runtime (the compile-time walk reads traced values only).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor
from torch._subclasses.functional_tensor import FunctionalTensor
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from .saved_tensors import eager_saved_storages


# OutputAliasInfo.output_type names of the user outputs that alias nothing, the forward's fresh
# returns besides the intermediate bases (schemas imports this package: compared by name).
_NON_ALIAS_OUTPUT_TYPES = frozenset({"non_alias", "unsafe_view_alias"})


def input_nodes(flat_f_args: Sequence[object]) -> frozenset[object]:
    """Compile-time hook, before the metadata run: the autograd nodes of the traced inputs,
    where the walk of :func:`eager_saved_returns` stops."""
    return frozenset(a.grad_fn for a in flat_f_args if isinstance(a, Tensor) and a.grad_fn is not None)


def _plain(t: object) -> bool:
    """A traced tensor that the forward returns as it is (not a subclass it flattens)."""
    return isinstance(t, FunctionalTensor) and not is_traceable_wrapper_subclass(t.elem)


def eager_saved_returns(
    mutated_inputs: Sequence[object],
    outputs: Sequence[object],
    output_info: Sequence[Any],
    intermediate_bases: Sequence[object],
    stop: frozenset[object],
) -> list[int]:
    """Compile-time hook: the indices, among the user outputs and then the intermediate bases,
    of the fresh returns on whose storage eager's backward saves a tensor, one per storage
    (Note [Version witnesses]). ``stop``: :func:`input_nodes`."""
    fresh = [
        o if isinstance(o, Tensor) and info.output_type.name in _NON_ALIAS_OUTPUT_TYPES else None
        for o, info in zip(outputs, output_info)
    ]
    fresh += intermediate_bases
    returned = [t for t in (*mutated_inputs, *outputs, *intermediate_bases) if isinstance(t, Tensor)]
    if not all(_plain(t) for t in returned) or not any(t is not None for t in fresh):
        return []
    saved = set(eager_saved_storages(returned, stop))
    witnesses: list[int] = []
    for index, t in enumerate(fresh):
        storage = StorageWeakRef(t.untyped_storage()) if isinstance(t, Tensor) else None
        if storage in saved:
            saved.discard(storage)
            witnesses.append(index)
    return witnesses


def version_witnesses(fw_outs: Sequence[object], metadata: Any) -> list[Tensor]:
    """Runtime-wrapper hook: ``detach()`` of each return the forward's ``metadata``
    (ViewAndMutationMeta) lists in ``version_witness_outputs``, to be saved for the backward
    (Note [Version witnesses])."""
    if not metadata.version_witness_outputs:
        return []
    first = metadata.num_mutated_inp_runtime_indices
    returns = fw_outs[first : metadata.num_forward_returns]
    return [returns[i].detach() for i in metadata.version_witness_outputs]  # type: ignore[union-attr]
