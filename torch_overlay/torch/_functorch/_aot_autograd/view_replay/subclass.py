"""
View replay for outputs of traceable wrapper subclasses (DTensor, TwoTensor, ...).

Note [Subclass view replay]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
Functionalization runs below a traceable wrapper subclass: the ViewMetas it
records describe the *inner* tensors, whose view arguments may differ from the
outer ones (a DTensor's local view of a Shard(0) tensor has local sizes). For a
subclass output, AOTAutograd therefore records no ViewMeta sequence and
regenerated the output with as_strided() (DTensor: "as_strided not supported").

At compile time autograd has recorded, for the fake outer output, a view
function at the outer level (``_view_func_unsafe``). We replay it once on the
fake outer base under a TorchDispatchMode that sits above the subclass's
``__torch_dispatch__`` and records the outer view ops with their outer
arguments (global, for DTensor). The recorded chain is planned like a ViewMeta
chain (symbols bound, rendered to plain Python, pickled with the cache entry)
and replayed at runtime by calling the aten view ops on the real outer base:
autograd records eager's nodes and the subclass runs its own view handling
(DTensor's sharding propagation). The result is verified against the graph's
output at the outer level and, recursively, on every inner tensor; anything
else goes to the fallback point.

Layering: planning (compile time).
"""

from __future__ import annotations

import dataclasses
from typing import Any, TYPE_CHECKING

import torch
from torch import Tensor
from torch._subclasses.functional_tensor import FunctionalTensorMode
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import is_traceable_wrapper_subclass, TorchDispatchMode

from . import config
from .builder import PlanBuilder
from .fallback import FallbackReason
from .render import UnrenderableArgument
from .scope import OutputScope
from .spec import Fallback, ReplayPlan
from .traced_base import slice_keeps_every_element


if TYPE_CHECKING:
    from ..schemas import ViewAndMutationMeta


# One recorded aten call: the op, its positional and keyword arguments, its result.
_Call = tuple[Any, tuple[Any, ...], dict[str, Any], Any]


class _RecordOuterViews(TorchDispatchMode):
    """Records the aten ops called on tensors while replaying a view function."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[_Call] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.calls.append((func, tuple(args), dict(kwargs), out))
        return out


def plan_subclass_view_chain(scope: OutputScope) -> ReplayPlan | Fallback:
    """The plan of the outer view chain of a subclass output (Note [Subclass view replay]);
    such outputs record no ViewMetaSequence."""
    if not config.replay_subclass_views:
        return Fallback(FallbackReason.REPLAY_DISABLED, "view_replay.config.replay_subclass_views is off")
    out, base = scope.output, scope.base
    kind = type(out).__name__
    if base is None or not out._is_view() or out._base is not base:
        return Fallback(FallbackReason.NO_VIEW_META, f"{kind} output is not an autograd view of the base it is regenerated from")
    recorder = _RecordOuterViews()
    try:
        with FunctionalTensorMode(), recorder:
            replayed = out._view_func_unsafe(base)
    except Exception as e:  # noqa: BLE001 - any failure means: no replayable outer chain
        return Fallback(FallbackReason.REPLAY_ERROR, f"{kind} view function: {type(e).__name__}: {e}")
    builder = PlanBuilder()
    try:
        last = _add_outer_steps(builder, recorder.calls, base, replayed)
    except UnrenderableArgument as e:
        return Fallback(FallbackReason.UNSUPPORTED_VIEW_STEP, f"{kind} outer view chain: {e}")
    if last is not replayed or not recorder.calls:
        return Fallback(FallbackReason.NO_VIEW_META, f"{kind} view function did not replay as a chain of view ops")
    return builder.finish(scope)


def _add_outer_steps(builder: PlanBuilder, calls: list[_Call], base: Tensor, replayed: Tensor) -> object:
    """Add the recorded outer view ops to ``builder``, each consuming the previous one's result
    (or one of its pieces); return what the last one gave."""
    current: object = base
    for i, (func, args, kwargs, result) in enumerate(calls):
        if not args or kwargs:
            raise UnrenderableArgument(f"{func} called with keyword arguments or no self")
        if args[0] is not current:
            raise UnrenderableArgument(f"{func} does not consume the previous view")
        if not isinstance(func, torch._ops.OpOverload) or not func.is_view:
            raise UnrenderableArgument(f"{func} is not a view op")
        if not isinstance(result, (tuple, list)):
            if i == len(calls) - 1 or not _is_identity_slice_call(func, args, result):
                builder.op(str(func), tuple(args[1:]))
            current = result
            continue
        # A multi-output view: the piece that the next op (or the output itself) takes.
        taken = calls[i + 1][1][0] if i + 1 < len(calls) and calls[i + 1][1] else replayed
        index = next((k for k, piece in enumerate(result) if piece is taken), None)
        if index is None:
            raise UnrenderableArgument(f"no piece of {func} is consumed")
        builder.pieces(str(func), tuple(args[1:]), index, claims=i == len(calls) - 1)
        current = result[index]
    return current


def _is_identity_slice_call(func: Any, args: tuple[Any, ...], result: Tensor) -> bool:
    """A recorded ``aten.slice.Tensor(self, dim=0, start=None, end=None, step=1)`` call that
    keeps every element of its input (Note [Identity slices])."""
    if func is not torch.ops.aten.slice.Tensor:
        return False
    start = args[2] if len(args) > 2 else None
    step = args[4] if len(args) > 4 else 1
    return slice_keeps_every_element(start, step, args[0], result)


# Note [Subclass outputs aliasing an intermediate]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Two outputs aliasing one intermediate (``o = x * 2; return o.view(-1), o.t()``)
# make the intermediate a base that the compiled forward returns as an extra
# output, from which both are regenerated. For subclass graphs 2.13 refused
# this at compile time (aot_autograd.py), and the machinery behind the refusal
# was one miscount: aot_dispatch_subclass() re-collects the metadata of the
# dense graph from the forward *without* the intermediate bases (and with
# inner tensors that do not require grad), so that metadata says 0 intermediate
# bases, while the joint graph's forward does return them, unwrapped. The
# partitioner then takes the bases for backward outputs, and the saved-tensor
# slices shift (StopIteration in the backward, IndexError in the output
# wrappers with dynamic shapes). ``with_dense_intermediate_bases`` puts the
# right count into the dense metadata: each base's dense outputs, inner tensors
# and size/stride symbols included (its SubclassCreationMeta's arg_count).
# The outer metadata, the tangents and the runtime wrappers already handle the
# bases; the regenerated outputs then go through the outer view replay above.
# The dense metadata can count too many as well: an inner tensor that is a view
# taken under no_grad is regenerated off its base (Note [Views taken under
# no_grad]) where the outer output is no view at all. DTensor.from_local(t)
# wraps ``t.view_as(t)``, made inside its autograd.Function's forward, in a
# fresh DTensor, so with ``tmp = (x * w).to_local() + 2`` returning
# ``DTensor.from_local(tmp, ...)`` counted one dense base the joint forward
# does not return ("expected 2 wrapped outputs, got 3", or "Node mul_1 was
# invalid, but is output" at compile time). The count is always the outer's.


def with_dense_intermediate_bases(
    dense_meta: ViewAndMutationMeta, meta: ViewAndMutationMeta
) -> ViewAndMutationMeta:
    """Compile-time hook: ``dense_meta`` (collected on the unwrapped forward) counting the
    intermediate bases of ``meta`` (the subclass-level metadata) as the joint forward returns
    them. See Note [Subclass outputs aliasing an intermediate]."""
    # schemas imports this package (through functional_utils): import it when called.
    from ..schemas import SubclassCreationMeta

    out_metas = meta.subclass_fw_graph_out_meta
    base_metas = out_metas[len(out_metas) - meta.num_intermediate_bases :]
    dense_outputs = sum(m.arg_count if isinstance(m, SubclassCreationMeta) else 1 for m in base_metas)
    if dense_outputs == dense_meta.num_intermediate_bases:
        return dense_meta
    # replace() reruns __post_init__, which recomputes the forward/saved-tensor slices.
    return dataclasses.replace(dense_meta, num_intermediate_bases=dense_outputs)


# Note [Subclass views on a fresh outer storage]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# AOTAutograd finds what an output aliases by its storage. A wrapper
# subclass's outer tensor need not share its base's storage even where
# autograd tracks it as a view: DTensor's multi-output views (x.unbind(1),
# x.split(2, 1) of a Shard(0) x) are new wrappers on a fresh outer storage,
# though their local tensors are views and eager's ``piece._base is x``. The
# storage test then calls each piece an intermediate that nothing else aliases,
# and upstream returns it from the compiled function as a plain output: no
# ``_base``, no version counter shared with ``x``, and in-place on a piece is
# accepted where eager raises. For a subclass output that autograd made as a
# piece of a multi-output view (CreationMeta.MULTI_OUTPUT_NODE),
# ``aliased_storage`` answers with the storage of its autograd base, so the
# output is classified (and regenerated, one call per group: Note [Multi-output
# views]) as the alias eager returns. Other outputs keep their own storage:
# plain tensors (a view's storage is its base's), and single-output subclass
# views, which a subclass may make on a fresh storage off an internal base
# (a nested jagged tensor's transpose has a ``_base`` that is not the input;
# upstream returns it as a plain output, and so do we).


def aliased_storage(out: Tensor) -> StorageWeakRef:
    """Compile-time hook: the storage AOTAutograd's alias analysis files ``out`` under
    (Note [Subclass views on a fresh outer storage])."""
    if (
        is_traceable_wrapper_subclass(out)
        and out._is_view()
        and torch._C._autograd._get_creation_meta(out) == torch._C._autograd.CreationMeta.MULTI_OUTPUT_NODE
    ):
        return StorageWeakRef(out._base.untyped_storage())
    return StorageWeakRef(out.untyped_storage())
