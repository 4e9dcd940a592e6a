"""
Saved tensors that alias an input of the compiled forward.

Note [Saved views of graph inputs]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Eager autograd saves a view of an input with the input's version counter: in
    def f(x, w): y = x @ w; return y[0], y[1].t()
with a (2, 3, 4) ``x``, MmBackward0 saves ``x.view(6, 4)``, so ``x.mul_(2)``
under no_grad, then backward, raises "one of the variables needed for
gradient computation has been modified by an inplace operation". The
compiled forward saves the same view of its input ``primals`` (a ``view``,
``select`` or ``split`` node of the forward graph), but inductor returns it as
``reinterpret_tensor`` of the input's buffer: a new TensorImpl on the input's
storage, with a version counter of its own that nothing bumps. The
autograd.Function saves that counter, and the backward silently computes
with the changed input (stock 2.14.1 and 2.13.0, inductor, static and
dynamic; ``q, k, v = (x @ w).split(...)`` and ``x[0] @ w`` too). aot_eager
runs the real view op, whose result shares the input's counter, and raises
as eager does.

At compile time :func:`saved_input_aliases` reads the partitioned forward
graph: each tensor saved with a version check whose traced value lies on the
storage of a traced input (never the input itself, which the forward returns
as it is), with the input's dtype, gives a :class:`SavedInputAlias`, stored in
``ViewAndMutationMeta.saved_input_aliases``. At runtime
:func:`share_input_version_counters` replaces each such saved tensor that is
neither the input nor an autograd view (those share the input's counter
already: aot_eager) by the same view of the input taken through
``detach()``, once it has checked that both lie on one storage: same data,
same layout, the input's version counter, as eager's saved view.

Scope:
  - Inputs the graph mutates are left out, and keep upstream's behaviour:
    the forward saves values computed from the mutation's new value, not
    views of the traced input, and the runtime writes that value back.
    Upstream's gap there stays: with ``x[1].add_(1); return x[0] @ w``, a
    later in-place change of ``x`` goes unnoticed where eager raises
    (aot_eager saves a copy; inductor saves a tensor on ``x``'s buffer, so
    its backward reads the changed ``x``).
  - Graphs with tensor-subclass inputs or outputs, and graphs with effect
    tokens, keep upstream's behaviour: the autograd.Function's arguments are
    then not the forward graph's placeholders one for one (the outer
    tensors against their inner ones; the tokens).
  - Tensors stashed on ``ctx`` (no version check in eager) are not touched.
Cost: one pass over the forward graph's placeholders and saved tensors per
compile; per call, one attribute test where no saved tensor aliases an input
(the aliases are decided at compile time), and otherwise, per alias, a few
identity checks and, where the saved tensor is no view (inductor), one
``detach()`` and one ``as_strided()``.

Layering: outside view_replay (it needs no view replay); the runtime hook and the
compile-time function that reads the traced values of the forward graph. Imports
nothing of the overlay.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from torch import Tensor
from torch.nn import Parameter
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx import Node
from torch.multiprocessing.reductions import StorageWeakRef


# The runtime types of inputs whose views are taken here (a Parameter's detach() is a Tensor).
_PLAIN = (Tensor, Parameter)


@dataclasses.dataclass(frozen=True)
class SavedInputAlias:
    """A tensor the compiled forward saves with a version check on an input's storage:
    ``saved_index`` among the tensors saved with a version check, ``input_index`` among the
    forward's arguments (Note [Saved views of graph inputs])."""

    saved_index: int
    input_index: int


def _mutated(info: Any) -> bool:
    """Whether the graph mutates the input ``info`` (an InputAliasInfo) describes."""
    return bool(
        info.mutates_data
        or info.mutates_metadata
        or info.mutates_storage_metadata
        or info.mutation_inductor_storage_resize
    )


def _input_storages(fw_module: Any, input_info: Sequence[Any]) -> dict[StorageWeakRef, tuple[int, Any]]:
    """The storages of the forward's plain tensor inputs that the graph does not mutate, each
    with the first such input's index and traced value; a storage that a mutated input shares
    is left out."""
    found: dict[StorageWeakRef, tuple[int, Any]] = {}
    mutated: set[StorageWeakRef] = set()
    placeholders = fw_module.graph.find_nodes(op="placeholder")
    for i, (node, info) in enumerate(zip(placeholders, input_info)):
        val = node.meta.get("val")
        if type(val) is not FakeTensor:
            continue
        storage = StorageWeakRef(val.untyped_storage())
        if _mutated(info):
            mutated.add(storage)
        found.setdefault(storage, (i, val))
    return {s: v for s, v in found.items() if s not in mutated}


def saved_input_aliases(
    fw_module: Any, saved_nodes: Sequence[Any], meta: Any, dense_meta: Any
) -> tuple[SavedInputAlias, ...]:
    """Compile-time: the tensors saved with a version check (the first of ``saved_nodes``, the
    forward graph's outputs saved for backward) that lie on an input's storage but are not the
    input. ``meta`` is the autograd.Function's ViewAndMutationMeta, its saved counts set, and
    ``dense_meta`` the forward graph's (another one where the graph has tensor subclasses)."""
    if dense_meta is not meta or meta.tokens:
        return ()
    num_trailing = (
        meta.num_symints_saved_for_bw
        + (meta.num_opaque_objects_saved_for_bw or 0)
        + meta.num_tensors_saved_with_no_vc_check
    )
    storages = _input_storages(fw_module, meta.input_info)
    aliases: list[SavedInputAlias] = []
    for i, node in enumerate(saved_nodes[: len(saved_nodes) - num_trailing]):
        if not isinstance(node, Node) or node.op == "placeholder":
            continue  # a saved input is the input itself at runtime
        val = node.meta.get("val")
        if type(val) is not FakeTensor:
            continue
        found = storages.get(StorageWeakRef(val.untyped_storage()))
        if found is not None and found[1].dtype == val.dtype:
            aliases.append(SavedInputAlias(i, found[0]))
    return tuple(aliases)


def share_input_version_counters(
    saved: list[Tensor], raw: Sequence[Tensor], args: Sequence[object], aliases: Sequence[SavedInputAlias]
) -> None:
    """Runtime-wrapper hook: replace, in ``saved`` (the tensors about to be saved with a version
    check; ``raw`` as the compiled forward returned them), each alias of an input that does not
    share the input's version counter by the same view of the input (Note [Saved views of graph
    inputs])."""
    for alias in aliases:
        t, inp = raw[alias.saved_index], args[alias.input_index]
        if t is inp or type(t) is not Tensor or type(inp) not in _PLAIN or t._is_view():
            continue
        if t.untyped_storage()._cdata == inp.untyped_storage()._cdata:
            saved[alias.saved_index] = inp.detach().as_strided(t.size(), t.stride(), t.storage_offset())
