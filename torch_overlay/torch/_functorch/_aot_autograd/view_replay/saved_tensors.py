"""
Saved tensors that share a storage with a tensor the compiled forward returns.

Note [Saved tensors on the storage of a returned tensor]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Eager's backward sees an in-place change of a tensor it saved through the
version counter that the tensor shares with its views: in
    v = x @ w3d; a = v[-1]; b = x @ a; return a, b
``b``'s backward saves ``a``, and ``a.mul_(3)`` then ``b.sum().backward()``
raises "modified by an inplace operation". The compiled forward returns ``a``
(or the intermediate base it is regenerated from) and saves a tensor on the
same storage, but not one that shares its version counter: upstream hides the
alias of an intermediate behind ``_unsafe_view`` (a new tensor with a counter of
its own), and inductor saves a ``reinterpret_tensor`` of the returned buffer
(an alias that autograd does not track). The in-place change then goes
unnoticed and the backward silently computes with the changed values (stock
2.14.1 and 2.13.0, aot_eager and inductor, static and dynamic).

Such an alias is regenerated as eager's view of the intermediate, which the
compiled function returns (one more output of the graph), only where eager's
backward saves a tensor on its storage: at compile time
:func:`eager_saved_storages` walks the autograd graph that the metadata run
built over FunctionalTensors, from the outputs back, and reads each node's
saved tensors (``GraphScope.backward_saves``). Elsewhere (``out = a * 3; return
out.view(-1)``, or the batched ``a @ b``, whose traced ``view`` is eager's
``_unsafe_view``) upstream's hiding stays: no saved tensor can see an in-place
change of the output, and the graph keeps its outputs.

``share_returned_version_counters`` replaces each such saved tensor, before it
is saved, by the same view of the returned tensor taken through ``detach()``
(only tensors the forward returns on a storage it allocated: a saved input
keeps its own counter, which is the caller's):
it shares the returned tensor's storage and version counter, as eager's saved
view does, and holds no reference to the returned tensor itself (whose
``grad_fn`` will hold the saved tensors: no reference cycle). Whether any
saved tensor can lie on such a storage is decided once, at compile time, from
the partitioned forward graph (:func:`saves_on_returned_storages`, stored in
``ViewAndMutationMeta.saves_on_returned_storages``): a graph where none does
pays one attribute test per call; one where some may, one pass over the
returned and the saved tensors.

Layering: runtime (the compile-time functions read traced values only).
Imports nothing of the overlay.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from torch import Tensor
from torch._subclasses.fake_tensor import FakeTensor
from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
from torch.fx import Node
from torch.multiprocessing.reductions import StorageWeakRef


# OutputAliasInfo.output_type names of user outputs on a storage the graph allocated (schemas
# imports this package: compared by name).
_FRESH_OUTPUT_TYPES = frozenset({
    "non_alias", "unsafe_view_alias", "alias_of_intermediate", "alias_of_intermediate_save_as_output",
    "alias_of_intermediate_base_is_user_output",
})


def _fresh_returns(fw_outs: Sequence[object], metadata: Any) -> list[Tensor]:
    """The plain tensors the forward returns on a storage it allocated: user outputs that alias
    no input, and the intermediate bases (never an input's storage, so never a saved input's)."""
    first = metadata.num_mutated_inp_runtime_indices
    outputs = fw_outs[first : first + metadata.num_outputs]
    bases = fw_outs[first + metadata.num_outputs : metadata.num_forward_returns]
    fresh = [o for o, info in zip(outputs, metadata.output_info) if info.output_type.name in _FRESH_OUTPUT_TYPES]
    return [t for t in (*fresh, *bases) if type(t) is Tensor and t.untyped_storage().nbytes()]


def saves_on_returned_storages(fw_module: Any, saved_nodes: Sequence[object], meta: Any, dense_meta: Any) -> bool:
    """Compile-time: whether a tensor the partitioned forward saves (``saved_nodes``) lies on
    the storage of a fresh tensor it returns, by the traced values of the forward graph. True
    wherever they cannot tell: graphs with tensor subclasses (``dense_meta``, the forward
    graph's ViewAndMutationMeta, is not ``meta``, the autograd.Function's) or effect tokens."""
    if dense_meta is not meta or meta.tokens:
        return True
    (output,) = fw_module.graph.find_nodes(op="output")
    first = meta.num_mutated_inp_runtime_indices
    returns = output.args[0]
    outputs = returns[first : first + meta.num_outputs]
    fresh = [o for o, info in zip(outputs, meta.output_info) if info.output_type.name in _FRESH_OUTPUT_TYPES]
    bases = returns[first + meta.num_outputs : meta.num_forward_returns]
    returned: dict[StorageWeakRef, list[Node]] = {}
    for node in (*fresh, *bases):
        if isinstance(node, Node) and type(val := node.meta.get("val")) is FakeTensor:
            returned.setdefault(StorageWeakRef(val.untyped_storage()), []).append(node)
    for node in saved_nodes:
        if isinstance(node, Node) and type(val := node.meta.get("val")) is FakeTensor:
            if any(r is not node for r in returned.get(StorageWeakRef(val.untyped_storage()), ())):
                return True
    return False


def share_returned_version_counters(
    saved: list[Tensor], fw_outs: Sequence[object], metadata: Any, inputs_returned: Sequence[object] = ()
) -> list[Tensor]:
    """Runtime-wrapper hook: ``saved``, each plain tensor on the storage of a tensor that the
    forward returns on a storage it allocated (but not that tensor) replaced by the same view
    of it (Note [Saved tensors on the storage of a returned tensor]). ``metadata`` is the
    graph's ViewAndMutationMeta. ``inputs_returned`` holds the inputs on whose storages the
    graph returned bases that ``fw_outs`` now holds copies of (Note [Bases the graph returns
    as an input]): a tensor saved on such a storage keeps the input's counter, not that of
    another output the graph returned there."""
    if not (metadata.saves_on_returned_storages or inputs_returned):
        return saved
    returns = [*_fresh_returns(fw_outs, metadata), *(r for r in inputs_returned if type(r) is Tensor)]
    by_storage = {r.untyped_storage()._cdata: r for r in returns}
    if not by_storage:
        return saved
    shared = list(saved)
    for i, t in enumerate(saved):
        r = by_storage.get(t.untyped_storage()._cdata) if type(t) is Tensor else None
        if r is not None and r is not t and r.dtype == t.dtype:
            shared[i] = r.detach().as_strided(t.size(), t.stride(), t.storage_offset())
    return shared


def _saved_by(node: Any) -> Iterator[Tensor]:
    """The tensors ``node`` saved for its backward: its ``_saved_*`` attributes (built-in
    nodes) or ``saved_tensors`` (custom autograd.Functions)."""
    for name in dir(node):
        if not (name.startswith("_saved_") or name == "saved_tensors"):
            continue
        try:
            value = getattr(node, name)
        except RuntimeError:
            continue  # changed in place after it was saved: eager's backward raises there itself
        for v in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(v, Tensor):
                yield v


def eager_saved_tensors(
    roots: Sequence[Tensor], stop: frozenset[object] = frozenset()
) -> list[tuple[FunctionalTensor, StorageWeakRef]]:
    """Compile-time: the FunctionalTensors saved by the autograd nodes reachable from
    ``roots``' nodes, not walking past the nodes in ``stop``, each with its storage (Note
    [Saved tensors on the storage of a returned tensor])."""
    saved: list[tuple[FunctionalTensor, StorageWeakRef]] = []
    seen: set[object] = set()
    # See Note [Accessing .grad_fn on FunctionalTensor]: a lazy rebase runs view ops.
    with FunctionalTensorMode():
        stack = [t.grad_fn for t in roots]
        while stack:
            node = stack.pop()
            if node is None or node in seen or node in stop:
                continue
            seen.add(node)
            saved += [(t, StorageWeakRef(t.untyped_storage())) for t in _saved_by(node) if isinstance(t, FunctionalTensor)]
            stack.extend(parent for parent, _ in node.next_functions)
    return saved


def eager_saved_storages(roots: Sequence[Tensor], stop: frozenset[object]) -> frozenset[StorageWeakRef]:
    """Compile-time: the storages of :func:`eager_saved_tensors`."""
    return frozenset(storage for _, storage in eager_saved_tensors(roots, stop))
