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
"""

from __future__ import annotations

# [stack: subclass-intermediate-bases]
import dataclasses
# [/stack]
from collections.abc import Sequence
from typing import Any
# [stack: subclass-intermediate-bases]
from typing import TYPE_CHECKING
# [/stack]

import torch
from torch import Tensor
from torch._subclasses.functional_tensor import FunctionalTensorMode
from torch.utils._python_dispatch import is_traceable_wrapper_subclass, TorchDispatchMode

from . import config
from .fallback import FallbackReason
from .plan import assemble_plan, render_pieces_call, UnplannableView, ViewReplayPlan
from .render import ArgumentRenderer, UnrenderableArgument


# [stack: subclass-intermediate-bases]
if TYPE_CHECKING:
    from ..schemas import ViewAndMutationMeta
# [/stack]


class _RecordOuterViews(TorchDispatchMode):
    """Records the aten ops called on tensors while replaying a view function."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[torch._ops.OpOverload, tuple[Any, ...], dict[str, Any], Any]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.calls.append((func, tuple(args), dict(kwargs), out))
        return out


def plan_subclass_view_chain(
    out: Tensor, *, base: Tensor | None, inputs: Sequence[object]
) -> ViewReplayPlan | UnplannableView:
    """Compile-time hook: the replay plan (OutputAliasInfo.replay_plan) of the outer view
    chain of a subclass output aliasing ``base``; such outputs record no ViewMetaSequence."""
    if not config.replay_subclass_views:
        return UnplannableView(FallbackReason.REPLAY_DISABLED, "view_replay.config.replay_subclass_views is off")
    return _plan(out, base=base, inputs=inputs)


def _plan(out: Tensor, *, base: Tensor | None, inputs: Sequence[object]) -> ViewReplayPlan | UnplannableView:
    kind = type(out).__name__
    if base is None or not out._is_view() or out._base is not base:
        return UnplannableView(
            FallbackReason.NO_VIEW_META,
            f"{kind} output is not an autograd view of the base it is regenerated from",
        )
    recorder = _RecordOuterViews()
    try:
        with FunctionalTensorMode(), recorder:
            replayed = out._view_func_unsafe(base)
    except Exception as e:  # noqa: BLE001 - any failure means: no replayable outer chain
        return UnplannableView(FallbackReason.REPLAY_ERROR, f"{kind} view function: {type(e).__name__}: {e}")

    renderer = ArgumentRenderer()
    body: list[str] = []
    constants: dict[str, str] = {}
    names: list[str] = []
    # Each recorded call must consume the previous one's result (or one of its pieces).
    current: Any = base
    key_parts: list[str] = ["id(base)"]
    last_pieces: tuple[list[str], str] | None = None  # key and compute of the last multi-output call
    try:
        for i, (func, args, kwargs, result) in enumerate(recorder.calls):
            if not args or kwargs:
                raise UnrenderableArgument(f"{func} called with keyword arguments or no self")
            if isinstance(current, (tuple, list)):
                index = next((k for k, t in enumerate(current) if t is args[0]), None)
                if index is None:
                    raise UnrenderableArgument(f"{func} does not consume the previous view")
                body[-1] += f"[{index}]"
                key_parts.append(repr(index))
            elif args[0] is not current:
                raise UnrenderableArgument(f"{func} does not consume the previous view")
            if not isinstance(func, torch._ops.OpOverload) or not func.is_view:
                raise UnrenderableArgument(f"{func} is not a view op")
            first_expr = len(renderer.symbolic_exprs)
            rendered = renderer.render_args(tuple(args[1:]))
            name = str(func)  # e.g. aten.slice.Tensor
            names.append(name)
            constants[f"_op{i}"] = f"ops.{name}"
            if isinstance(result, (tuple, list)):
                key_parts += [repr(f"{name}{rendered}"), *renderer.symbolic_exprs[first_expr:]]
                last_pieces = (list(key_parts), f"lambda t=t: _op{i}(t, *{rendered})")
                body.append(render_pieces_call(*last_pieces, None))
            else:
                body.append(f"t = _op{i}(t, *{rendered})")
            current = result
    except UnrenderableArgument as e:
        return UnplannableView(FallbackReason.UNSUPPORTED_VIEW_STEP, f"{kind} outer view chain: {e}")
    if isinstance(current, (tuple, list)) and last_pieces is not None:
        index = next((k for k, t in enumerate(current) if t is replayed), None)
        if index is not None:
            # The piece is the output: claim it (Note [Multi-output views]).
            body[-1] = render_pieces_call(*last_pieces, index) + f"[{index}]"
            current = current[index]
    if current is not replayed or not recorder.calls:
        return UnplannableView(
            FallbackReason.NO_VIEW_META, f"{kind} view function did not replay as a chain of view ops"
        )
    return assemble_plan(tuple(names), body, renderer, constants, base=base, target=out, inputs=inputs)


# [stack: subclass-intermediate-bases]
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


def with_dense_intermediate_bases(
    dense_meta: ViewAndMutationMeta, meta: ViewAndMutationMeta
) -> ViewAndMutationMeta:
    """Compile-time hook: ``dense_meta`` (collected on the unwrapped forward) counting the
    intermediate bases of ``meta`` (the subclass-level metadata) as the joint forward returns
    them. See Note [Subclass outputs aliasing an intermediate]."""
    # schemas imports this package (through functional_utils): import it when called.
    from ..schemas import SubclassCreationMeta

    if meta.num_intermediate_bases == 0:
        return dense_meta
    base_metas = meta.subclass_fw_graph_out_meta[-meta.num_intermediate_bases :]
    dense_outputs = sum(m.arg_count if isinstance(m, SubclassCreationMeta) else 1 for m in base_metas)
    # replace() reruns __post_init__, which recomputes the forward/saved-tensor slices.
    return dataclasses.replace(dense_meta, num_intermediate_bases=dense_outputs)


# [/stack]
def same_inner_layouts(a: Any, b: Any, same_layout: Any) -> bool:
    """Whether two subclass tensors' inner tensors (recursively) have the same layouts.

    Flattened attributes that are not tensors (opaque objects such as a
    DTensor's device mesh) must be equal.
    """
    if not isinstance(a, Tensor):
        return not isinstance(b, Tensor) and a == b
    if not is_traceable_wrapper_subclass(a):
        return not is_traceable_wrapper_subclass(b) and same_layout(a, b)
    if type(a) is not type(b):
        return False
    attrs_a, _ = a.__tensor_flatten__()  # type: ignore[attr-defined]
    attrs_b, _ = b.__tensor_flatten__()  # type: ignore[attr-defined]
    if attrs_a != attrs_b:
        return False
    return all(same_inner_layouts(getattr(a, n), getattr(b, n), same_layout) for n in attrs_a)
