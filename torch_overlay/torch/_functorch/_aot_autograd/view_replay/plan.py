"""
Compile-time planning: how each aliased output is regenerated.

:func:`plan_view_replay`, the hook collect_metadata_analysis calls for every
aliased output, decides the output's whole ViewReplay here (Note [View replay
metadata] in spec.py): its route, what it is checked against and its grad
mode. :func:`output_alias_info_runtime_safe` keeps out of the AOTAutograd
cache the ViewMetaSequences that do not pickle.

Note [Symbolic view replay]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
Functionalization records, for every output that is a view, the ViewMeta
sequence that produced it from its base. With static shapes AOTAutograd replays
that sequence at runtime (apply_view_meta_sequence), so the regenerated output
gets the eager autograd nodes (SliceBackward0, TBackward0, ...). Upstream skips
sequences with symbolic arguments (``x[: x.shape[0] // 2]`` under dynamic
shapes) and drops them before caching, so such outputs fall back to
as_strided() and get AsStridedBackward0.

We plan those sequences once, at compile time (:func:`plan_view_meta_chain`):
  1. every argument of every ViewMeta is rendered as data, a SymInt as the
     Python source of its sympy expression (render.py);
  2. every free symbol gets a SymbolLocator on the runtime values (symbols.py);
  3. the rendered arguments are evaluated on the symbols' hints and compared
     with the traced ones (builder.py).
The result is a ReplayPlan: data, which pickles into the AOTAutograd cache,
and which codegen.py compiles into one Python function per plan and process
(no sympy, and no planning, at runtime). A chain that cannot be planned gets a
Fallback carrying the reason, and the runtime goes to the fallback point.

Layering: planning (compile time). Imports the data (spec), the other
planning modules and the runtime it plans for (replay, fallback); the runtime
never imports this module.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from collections.abc import Callable
from typing import Any

from torch import Tensor
from torch._subclasses.functional_tensor import FunctionalTensor
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from .autograd_chain import mixed_no_grad_steps, taken_under_no_grad
from .builder import PlanBuilder
from .data_views import data_position, with_data_step
from .fallback import FallbackReason
from .merged_inputs import merged_input_layouts, MergedInputAlias, MergedInputs
from .multi_output import is_multi_output_view_meta, MULTI_OUTPUT_VIEW_OPS, OP_ARGS_START, OUT_INDEX_POSITION
from .render import UnrenderableArgument
from .replay import default_view_replay
from .scope import GraphScope, OutputScope
from .spec import (
    BaseHolder,
    Check,
    Fallback,
    FunctionViewBase,
    RecordedViewMetas,
    RegeneratedOutside,
    ReplayPlan,
    Route,
    RuntimeSource,
    SymbolBinding,
    ViewReplay,
)
from .subclass import plan_subclass_view_chain
from .traced_base import autograd_base_prefix
from .traced_base import is_identity_slice, replay_on_traced_base, SLICE
from .view_meta_args import (
    arguments_readable,
    unreadable_reason,
    UnreadableViewMetaArguments,
    unreplayable_reason,
    view_meta_arguments,
)


class MixedGradModeViewError(RuntimeError):
    """An output viewed with grad mode on off a view taken under no_grad, whose chain cannot be
    planned (Note [Views taken under no_grad]): raised at compile time."""


def plan_view_meta_chain(view_metas: Sequence[Any], scope: OutputScope, no_grad_steps: int = 0) -> ReplayPlan | Fallback:
    """The plan of a ViewMeta chain replayed off ``scope.base``, its first ``no_grad_steps``
    steps under no_grad."""
    from . import config

    names = tuple(type(vm).__name__ for vm in view_metas)
    if not config.replay_symbolic_views and any(vm.has_symbolic_inputs for vm in view_metas):
        return Fallback(FallbackReason.SYMBOLIC_REPLAY_DISABLED, f"view chain {names}")
    unreplayable = [reason for name in names if (reason := unreplayable_reason(name))]
    if unreplayable:
        return Fallback(FallbackReason.UNREADABLE_VIEW_META, f"view chain {names}: {unreplayable[0]}")
    try:
        results = replay_on_traced_base(view_metas, scope.base)
    except Exception as e:  # noqa: BLE001 - any failure means: the chain cannot be planned
        return Fallback(FallbackReason.REPLAY_ERROR, f"view chain {names} on the traced base: {type(e).__name__}: {e}")
    builder = PlanBuilder()
    try:
        kept = _add_steps(builder, view_metas, results, scope.base, no_grad_steps)
    except UnreadableViewMetaArguments as e:
        return Fallback(FallbackReason.UNREADABLE_VIEW_META, f"view chain {names}: {e}")
    except UnrenderableArgument as e:
        return Fallback(FallbackReason.UNSUPPORTED_VIEW_STEP, f"view chain {names}: {e}")
    return builder.finish(scope, no_grad_steps=kept)


# Note [In-place view ops replayed in place]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# An in-place view op on a view (``y = x[1:]; y.unsqueeze_(0); return y``) is
# recorded as the ViewMeta of its in-place form. Its forward() makes the
# out-of-place view, so the regenerated output had UnsqueezeBackward0 where
# eager's has UnsqueezeBackward1 (the in-place node) before SliceBackward0
# (stock 2.14.1 and 2.13.0 alike, static and dynamic). A plan calls the
# in-place op itself on the view the earlier steps made: the regeneration
# owns that view, so changing its metadata changes nothing else, and the
# base's version goes up as in eager. Only the in-place steps that end the
# chain are: eager made any later view off the output after its in-place op,
# once. A regeneration of ``y[0].t()`` beside ``y`` that did ``unsqueeze_``
# again would bump the base's version a second time, and ``y``'s node would
# turn into AsStridedBackward0; such a step is replayed as recorded (that
# output's deeper node is UnsqueezeBackward0 where eager's is
# UnsqueezeBackward1). As the first step (nothing made yet: the in-place op
# would restride the base itself) the ViewMeta is replayed as recorded too.
# as_strided_, detach_ and resize_ are never replayed in place.

# In-place view ViewMeta class -> its aten op (path under ``torch.ops``).
IN_PLACE_VIEW_OPS: dict[str, str] = {
    "unsqueeze__ViewMeta": "aten.unsqueeze_.default",
    "squeeze__ViewMeta": "aten.squeeze_.default",
    "squeeze__dim_ViewMeta": "aten.squeeze_.dim",
    "squeeze__dims_ViewMeta": "aten.squeeze_.dims",
    "t__ViewMeta": "aten.t_.default",
    "transpose__ViewMeta": "aten.transpose_.default",
}
# Layout of a single-output ViewMeta's as_tuple():
# (has_symbolic_inputs, reapply_views, InverseReturnMode, *op_args)
SINGLE_OUTPUT_OP_ARGS_START = 3


def _add_steps(
    builder: PlanBuilder, view_metas: Sequence[Any], results: list[Tensor] | None, base: Tensor | None, no_grad_steps: int
) -> int:
    """Add the steps of ``view_metas`` to ``builder``; return how many of the first
    ``no_grad_steps`` it kept (identity slices are dropped: Note [Identity slices])."""
    kept_no_grad = 0
    last = len(view_metas) - 1
    names = [type(vm).__name__ for vm in view_metas]
    in_place_from = next((i + 1 for i in range(last, -1, -1) if names[i] not in IN_PLACE_VIEW_OPS), 0)
    for i, vm in enumerate(view_metas):
        name = type(vm).__name__
        args = view_meta_arguments(vm, None if results is None else results[i])
        before = (results[i - 1] if i else base) if results is not None else None
        if i < last and results is not None and is_identity_slice(name, args, before, results[i]):
            continue
        kept_no_grad += i < no_grad_steps
        if is_multi_output_view_meta(vm):
            op_args = tuple(args[OP_ARGS_START:])
            builder.pieces(MULTI_OUTPUT_VIEW_OPS[name], op_args, args[OUT_INDEX_POSITION], claims=i == last)
        elif i >= in_place_from and builder.steps:
            # Note [In-place view ops replayed in place]
            builder.op(IN_PLACE_VIEW_OPS[name], tuple(args[SINGLE_OUTPUT_OP_ARGS_START:]))
        else:
            builder.view_meta(name, args)
    return kept_no_grad


def needs_replay_plan(view_metas: Sequence[Any]) -> bool:
    """Whether a sequence must be replayed through a plan rather than as recorded."""
    # Symbolic ViewMetas only fit the traced sizes; multi-output ones are called once per group
    # (Note [Multi-output views]).
    # In-place view ops are called in place (Note [In-place view ops replayed in place]).
    return any(
        vm.has_symbolic_inputs or is_multi_output_view_meta(vm) or type(vm).__name__ in IN_PLACE_VIEW_OPS
        for vm in view_metas
    )


def _unreadable(view_metas: Sequence[Any]) -> list[str]:
    return [type(vm).__name__ for vm in view_metas if not arguments_readable(vm)]


def _static_route(view_metas: Sequence[Any], scope: OutputScope) -> Route:
    """A static sequence is replayed as recorded, unless it holds a ViewMeta whose arguments do
    not pickle safely (Note [Reading ViewMeta arguments]) or an identity slice to drop (Note
    [Identity slices]) and a plan can be made; a sequence holding a ViewMeta whose forward()
    must not run falls back."""
    may_drop = any(type(vm).__name__ == SLICE for vm in view_metas[:-1])
    if not (_unreadable(view_metas) or may_drop):
        return RecordedViewMetas()
    plan = plan_view_meta_chain(view_metas, scope)
    if isinstance(plan, ReplayPlan):
        if len(plan.steps) == len(view_metas) and not _unreadable(view_metas):
            return RecordedViewMetas()  # nothing to drop, nothing to hide from the cache
        return plan
    if any(unreplayable_reason(type(vm).__name__) for vm in view_metas):
        return plan
    return RecordedViewMetas()


def _view_meta_route(scope: OutputScope, view_metas: Sequence[Any]) -> Route:
    data = data_position(scope, view_metas)  # Note [Views through .data]
    prefix = autograd_base_prefix(view_metas, scope.base)
    view_metas = view_metas[prefix:]  # Note [Outputs whose autograd base is inside the chain]
    no_grad_steps = mixed_no_grad_steps(scope.output, len(view_metas))
    if not (prefix or no_grad_steps or data or needs_replay_plan(view_metas)):
        return _static_route(view_metas, scope)
    plan = plan_view_meta_chain(view_metas, scope, no_grad_steps)
    if data is not None and isinstance(plan, ReplayPlan):
        plan = with_data_step(plan, data, prefix)
    if no_grad_steps and isinstance(plan, Fallback):
        raise MixedGradModeViewError(
            "view_replay cannot regenerate an output viewed with grad mode on off a view taken under "
            "torch.no_grad() (Note [Views taken under no_grad]): its chain cannot be planned, and "
            f"replaying it in one grad mode would differ from eager ({plan.reason.name}: {plan.detail})"
        )
    return plan


def plan_view_replay(scope: OutputScope, view_meta_sequence: Any) -> ViewReplay:
    """Compile-time hook: how the aliased output of ``scope``, whose recorded ViewMetaSequence
    is ``view_meta_sequence`` (or None), is regenerated at runtime."""
    from torch._functorch import config as functorch_config

    replay_views = functorch_config.view_replay_for_aliased_outputs
    route: Route = default_view_replay(view_meta_sequence, replay_views).route
    if replay_views and view_meta_sequence is not None:
        route = _view_meta_route(scope, view_meta_sequence.sequence)
    elif replay_views and is_traceable_wrapper_subclass(scope.output) and not scope.base_restrided:
        route = plan_subclass_view_chain(scope)
    return ViewReplay(
        route,
        scope.check,
        no_grad=taken_under_no_grad(scope.output),
        same_object=scope.graph.same_object(scope.output),
    )


def plan_function_views(
    scope: GraphScope, output_info: list[Any], intermediate_bases: Sequence[Tensor], view_meta_sequence: Callable[[Tensor], Any]
) -> None:
    """Compile-time hook: give each custom-Function view in ``output_info`` (the graph's
    OutputAliasInfos, replaced in place) whose base the compiled forward holds its
    FunctionViewBase and ViewReplay (Note [Custom-Function views returned as views]);
    ``view_meta_sequence`` records a traced output's ViewMetas."""
    # schemas imports this package (through functional_utils): import it when called.
    from ..schemas import OutputType

    fresh = [info.output_type == OutputType.non_alias for info in output_info]
    for i, info in enumerate(output_info):
        out = scope.outputs[i]
        if info.output_type != OutputType.custom_function_view or out._base is None:
            continue
        found = _function_view_base(scope, out._base, fresh, intermediate_bases)
        if found is None:
            continue
        sequence = view_meta_sequence(out)
        input_index = found.index if found.holder is BaseHolder.INPUT else None
        output_info[i] = dataclasses.replace(
            info,
            view_meta_sequence=sequence,
            view_replay=plan_view_replay(scope.output(out, input_index), sequence),
            function_view_base=found,
        )


def returns_function_view_base(scope: GraphScope, out: Tensor) -> bool:
    """Compile-time hook: whether the forward returns the ``_base`` of the custom-Function view
    ``out`` as a new intermediate base, for FunctionViews to replay ``out`` off (Note
    [Custom-Function views returned as views]): in graphs with a backward, for a plain traced
    output whose base is a hidden intermediate (no graph input or user output) that no
    intermediate base holds yet (the caller's check)."""
    base = out._base
    return (
        scope.has_backward
        and type(out) is FunctionalTensor
        and base is not None
        and not any(base is t for t in (*scope.inputs, *scope.outputs))
    )


def saves_function_view_base(info: Any, num_bases: int) -> bool:
    """Graph-capture hook: whether the forward returns the ``_base`` of ``info``'s output (an
    OutputAliasInfo) as the intermediate base after the ``num_bases`` returned for the outputs
    before it: the base :func:`returns_function_view_base` added for this custom-Function view."""
    found = info.function_view_base
    return found is not None and found.holder is BaseHolder.INTERMEDIATE_BASE and found.index == num_bases


def _function_view_base(
    scope: GraphScope, base: Tensor, fresh: Sequence[bool], intermediate_bases: Sequence[Tensor]
) -> FunctionViewBase | None:
    """Where the compiled forward holds ``base``: an input it does not mutate, a user output
    that aliases nothing, or an intermediate base; None where it does not."""
    for index, inp in enumerate(scope.inputs):
        if inp is base and not (scope.metadata_mutated[index] or scope.data_mutated[index]):
            return FunctionViewBase(BaseHolder.INPUT, index)
    for index, out in enumerate(scope.outputs):
        if out is base and fresh[index]:
            return FunctionViewBase(BaseHolder.USER_OUTPUT, index)
    for index, intermediate in enumerate(intermediate_bases):
        if intermediate is base:
            return FunctionViewBase(BaseHolder.INTERMEDIATE_BASE, index)
    return None


def output_alias_info_runtime_safe(out_info: Any) -> Any:
    """Cache hook: ``out_info`` (an OutputAliasInfo), or a copy of it that pickles safely.

    Only an output replayed as recorded needs its ViewMetaSequence, and only a static one whose
    arguments are owned by its ViewMetas pickles safely (symbolic ViewMetas hold SymInts;
    Note [Reading ViewMeta arguments]). Any other sequence is dropped; an output that was
    replayed as recorded but whose sequence cannot be cached falls back on a warm cache.
    """
    sequence, view_replay = out_info.view_meta_sequence, out_info.view_replay
    if sequence is None:
        return out_info
    if view_replay is not None and not isinstance(view_replay.route, RecordedViewMetas):
        return dataclasses.replace(out_info, view_meta_sequence=None)
    unreadable = _unreadable(sequence.sequence)
    if unreadable:
        fallback = Fallback(
            FallbackReason.UNREADABLE_VIEW_META,
            f"{sequence!r} was replayed as recorded, but cannot be cached: {unreadable_reason(unreadable[0])}",
        )
    elif any(vm.has_symbolic_inputs for vm in sequence.sequence):
        fallback = Fallback(FallbackReason.NO_VIEW_META, f"{sequence!r} has symbolic arguments but no plan")
    else:
        return out_info
    decided = view_replay if view_replay is not None else ViewReplay(fallback)
    return dataclasses.replace(out_info, view_meta_sequence=None, view_replay=dataclasses.replace(decided, route=fallback))


def remap_view_replay_inputs(view_replay: ViewReplay | None, new_index: Callable[[int], int | None]) -> ViewReplay | None:
    """Hook for AOTAutograd's rewrites of the graph's inputs (deduplicated arguments, synthetic
    bases): ``view_replay``, reading input ``new_index(i)`` where its plan read input ``i``.

    ``new_index`` gives None for an input that is no longer a runtime input (merged into a
    synthetic base): such a plan cannot read its symbols, and the output falls back.
    """
    if view_replay is None or not isinstance(plan := view_replay.route, ReplayPlan):
        return view_replay
    mapping = {i: new_index(i) for i in plan.indices_read(RuntimeSource.INPUT)}
    if all(i == j for i, j in mapping.items()):
        return view_replay
    if any(j is None for j in mapping.values()):
        merged = sorted(i for i, j in mapping.items() if j is None)
        route: Route = Fallback(
            FallbackReason.UNBOUND_SYMBOL,
            f"view chain {plan.names()}: its symbols are read off graph inputs {merged}, merged into a synthetic base",
        )
    else:
        route = dataclasses.replace(plan, symbols=tuple(_remapped(b, mapping) for b in plan.symbols))
    return dataclasses.replace(view_replay, route=route)


def _remapped(binding: SymbolBinding, mapping: dict[int, int | None]) -> SymbolBinding:
    locator = binding.locator
    if locator.source is not RuntimeSource.INPUT:
        return binding
    return dataclasses.replace(binding, locator=dataclasses.replace(locator, index=mapping[locator.index]))


def plan_merged_inputs(outer: Any, inner: Any, synthetic_base_info: Sequence[Any]) -> MergedInputs:
    """Compile-time hook (AOTSyntheticBaseWrapper.pre_compile): what the synthetic-base wrapper
    does at runtime for the inputs merged into synthetic bases."""
    return MergedInputs(
        aliases=_defer_merged_input_aliases(outer, inner, synthetic_base_info),
        layouts=merged_input_layouts(synthetic_base_info),
    )


def _defer_merged_input_aliases(outer: Any, inner: Any, synthetic_base_info: Sequence[Any]) -> tuple[MergedInputAlias, ...]:
    """The outputs of ``outer`` (the
    metadata before inputs were merged into synthetic bases) that alias or are a merged input
    and are replayed, which the synthetic-base wrapper regenerates off that input (Note
    [Outputs aliasing inputs merged into a synthetic base] in merged_inputs.py). Their entries
    in ``inner.output_info`` get the pass-through route, in place."""
    # schemas imports this package (through functional_utils): import it when called.
    from ..schemas import OutputType

    deferred = []
    for index, info in enumerate(outer.output_info):
        is_input = info.output_type == OutputType.is_input
        if not (is_input or info.output_type == OutputType.alias_of_input):
            continue
        if not isinstance(synthetic_base_info[info.base_idx], tuple):
            continue  # its input was not merged
        view_replay = info.view_replay or default_view_replay(info.view_meta_sequence, replay_views=True)
        if not is_input and not isinstance(view_replay.route, (ReplayPlan, RecordedViewMetas)):
            continue  # nothing to replay: the runtime wrapper's as_strided() of the synthetic base is right
        checked = dataclasses.replace(info, view_replay=dataclasses.replace(view_replay, check=Check.SIZE))
        deferred.append(MergedInputAlias(index, output_alias_info_runtime_safe(checked), is_input))
        inner.output_info[index] = dataclasses.replace(
            inner.output_info[index], view_replay=ViewReplay(RegeneratedOutside(), Check.SIZE)
        )
    return tuple(deferred)
