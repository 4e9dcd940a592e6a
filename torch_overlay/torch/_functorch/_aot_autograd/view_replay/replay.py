"""
Runtime regeneration of aliased outputs.

:func:`regenerate_alias` (the body of AOTAutograd's ``gen_alias_from_base``)
regenerates an aliased output of a compiled graph off the real base: it
replays the output's view chain, verifies the result's metadata against the
graph's own output, and otherwise goes to the single fallback point
(fallback.py). See Note [View replay for aliased outputs].

Note [Recorded view functions of graph outputs]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Without a ViewMeta sequence, the output's ``_view_func`` is the only record of
its view chain. Autograd keeps a real view function for some graph outputs
(aot_eager views of intermediates) but none for others (outputs produced
below ADInplaceOrView, or by inductor's reinterpret_tensor): then
``_view_func`` silently calls as_strided(). We cannot ask autograd which one
it holds, so we look at the node the replay created: an AsStridedBackward0 is
recorded at the fallback point like any other as_strided() regeneration.
When the base does not require grad there is no node to look at; the
metadata is still verified, and no backward exists that could be slowed.
"""

from __future__ import annotations

# [stack: precompiled-regenerators]
import dataclasses
# [/stack]
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor
from torch._C import _functionalization
# [stack: subclass-outer-views]
from torch.utils._python_dispatch import is_traceable_wrapper_subclass
# [/stack]

from .fallback import as_strided_fallback, FallbackReason, record_fallback
# [stack: symbolic-replay]
from .plan import ReplayPlan, UnplannableView, ViewReplayPlan
# [/stack]
# [stack: subclass-outer-views]
from .subclass import same_inner_layouts
# [/stack]


# The runtime values a regeneration may read besides the base and the graph's
# output (None where the caller has none): the graph's inputs, what the
# regenerations of one runtime call share, and the graph's user outputs.
InputsArg = Mapping[int, object] | None
# [stack: multi-output-views]
# The shared values are the multi-output view calls made so far, by group
# (multi_output.MultiOutputGroups, Note [Multi-output views]).
# [/stack]
GroupsArg = dict[tuple[object, ...], list[Any]] | None
OutputsArg = Sequence[object] | None
# regenerate(base, target, inputs=None, groups=None, outputs=None) -> the verified
# view, with the output's requires_grad
Regenerator = Callable[[Tensor, Tensor, InputsArg, GroupsArg, OutputsArg], Tensor]
_apply_view_meta_sequence = _functionalization.apply_view_meta_sequence

# Note [Outputs on another storage than their base] (torch >= 2.14)
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# From 2.14, upstream's gen_alias_from_base translates the storage offset of
# its as_strided() fallback when the graph's output lives on another storage
# than the real base (inductor's copy_misaligned_inputs clones a misaligned
# input, and the output is a view of the clone): the traced output's offset is
# then relative to the base, so the base's own offset is added back. Patch
# 0002 removes that code with the rest of the body, so the fallback and the
# replay's metadata check do it here. Gated to the versions whose upstream
# does it, so 2.13's behaviour (and its tests) stay as they are.
_TRANSLATE_CROSS_STORAGE_OFFSET = torch.torch_version.TorchVersion(torch.__version__) >= (2, 14)


def _cross_storage_shift(base: Tensor, target: Tensor) -> int:
    """What to add to ``target``'s storage offset to address ``base``'s storage (0: same storage)."""
    if not _TRANSLATE_CROSS_STORAGE_OFFSET or type(base) is not Tensor or type(target) is not Tensor:
        return 0
    # _cdata, not data_ptr(): safe on fake and meta storages while tracing.
    if base.untyped_storage()._cdata == target.untyped_storage()._cdata:
        return 0
    return base.storage_offset()


def same_layout(a: Tensor, b: Tensor) -> bool:
    """Whether two views address the same elements of a storage in the same order.

    Strides of dimensions of size 1 (and all strides of empty tensors) are not
    observable, so they may differ.
    """
    if type(a) is Tensor and (
        a.dtype == b.dtype
        and a.size() == b.size()
        and a.stride() == b.stride()
        and a.storage_offset() == b.storage_offset()
    ):
        return True
    # [stack: subclass-outer-views]
    if is_traceable_wrapper_subclass(a):
        # Subclasses must agree at the outer level and on every inner tensor
        # (Note [Subclass view replay]).
        return _same_dense_layout(a, b) and same_inner_layouts(a, b, _same_dense_layout)
    # [/stack]
    return _same_dense_layout(a, b)


def _same_dense_layout(a: Tensor, b: Tensor, offset_shift: int = 0) -> bool:
    """``same_layout`` of dense tensors, ``b``'s storage offset moved by ``offset_shift``."""
    if a.dtype != b.dtype or a.size() != b.size():
        return False
    if a.numel() == 0:
        return True
    if a.storage_offset() != b.storage_offset() + offset_shift:
        return False
    return all(
        size == 1 or sa == sb for size, sa, sb in zip(a.size(), a.stride(), b.stride())
    )


def _verify_on_base(out: Tensor, target: Tensor, base: Tensor) -> bool:
    """``out`` has ``target``'s layout, ``target``'s offset moved onto ``base``'s storage if it lives on another."""
    if same_layout(out, target):
        return True
    shift = _cross_storage_shift(base, target)
    return shift != 0 and _same_dense_layout(out, target, offset_shift=shift)


# [stack: mutated-input-aliases]
# Note [Aliases of inputs mutated by the graph]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# When the graph mutates an input's data, functionalization computes the new
# value as a fresh tensor, and an output that aliases the input leaves the graph
# as a view of that new value, not of the input: its size is the output's, but
# its storage offset is relative to the new value (``a.mul_(2); return a[1:]``
# with ``a = x[1:]`` gives offset 2 where eager has 4) and its strides follow the
# new value's layout. The runtime applies the mutation to the real input first,
# then regenerates the alias off it, so the replayed chain is eager's; only the
# graph's output is the wrong reference. For such an output the replay is
# checked against its size and dtype, as upstream checks every replay, and the
# plan reads no symbol off that output's strides or offset (plan.py).
def _verify_size(out: Tensor, target: Tensor, base: Tensor) -> bool:
    return out.dtype == target.dtype and out.size() == target.size()


# [/stack]
def _patch_requires_grad(out: Tensor, target_requires_grad: bool) -> Tensor:
    # The regenerated view inherits requires_grad from the real base; the
    # compiled output may differ (e.g. an output computed under no_grad).
    # A replayed chain that already drops it (through detach) stays a view.
    if out.requires_grad and not target_requires_grad:
        return out.detach()
    if not out.requires_grad and target_requires_grad:
        out.requires_grad_(True)
    return out


def _fallback(
    base: Tensor, target: Tensor, reason: FallbackReason, detail: str
) -> Tensor:
    out = as_strided_fallback(
        base,
        target.size(),
        target.stride(),
        # See Note [Outputs on another storage than their base]
        target.storage_offset() + _cross_storage_shift(base, target),
        target.dtype,
        reason,
        detail,
    )
    # as_strided() keeps the base's negative and conjugate bits; the output may
    # have others (a _neg_view() or conj() in its chain), and its values with them.
    if out.is_neg() != target.is_neg():
        out = torch._neg_view(out)
    if out.is_conj() != target.is_conj():
        out = out.conj()
    return out


# [stack: symbolic-replay]
def _unplannable(view_meta_sequence: Any, plan: ReplayPlan) -> UnplannableView | None:
    """Why the output (its recorded ViewMetas and its ``replay_plan``) cannot be replayed, if it cannot."""
    if isinstance(plan, UnplannableView):
        return plan
    if plan is None and view_meta_sequence is not None and any(
        vm.has_symbolic_inputs for vm in view_meta_sequence.sequence
    ):
        # Recorded outside collect_metadata_analysis (plan_replay never saw it).
        return UnplannableView(
            FallbackReason.NO_VIEW_META,
            f"{view_meta_sequence!r} has symbolic arguments but no replay plan",
        )
    return None


# [/stack]
# [stack: precompiled-regenerators]
# Note [Precompiled regenerators]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Regeneration runs on every call of the compiled function, once per aliased
# output, so everything that does not depend on the runtime tensors is decided
# once, when the runtime wrapper is generated (at compile time, and when a
# cached graph is loaded): whether the output has a ViewMeta sequence, a replay
# plan or a reason to fall back; the plan's function (compiled from its source
# then, see Note [Symbolic view replay]); the ViewMeta list to apply. The
# runtime wrapper's generated alias function binds one regenerator per output
# and calls it positionally. A call then costs the view ops themselves, the
# symbol reads of a plan, one metadata comparison with the graph's output and a
# requires_grad check: no dict walks, no ViewMeta re-creation (plans memoize
# theirs per symbol values), no keyword-argument plumbing. The metadata check
# stays on the runtime path: it is what proves the replayed view correct for
# the base at hand (the base's strides are not known at compile time).
#
# Note [Regenerators as source] (torch >= 2.14)
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# From 2.14, compile_to_python (the lowering behind torch.compiler.precompile)
# composes the runtime wrapper's generated source with its globals into a
# standalone module: each global must be a known helper, importable, or
# emittable as source. A closure is none of these (stock binds
# gen_alias_from_base and the ViewMetaSequence). A PrecompiledRegenerator
# reduces to PrecompiledRegenerator(sequence, plan, flags), which source_emit
# writes out (ViewMetaSequence through _from_parts, plans and UnplannableViews
# as dataclasses), so the precompiled module rebuilds the same regenerator.
# No version gate: on 2.13 nothing emits it, and a call costs one more
# Python-level call.


class PrecompiledRegenerator:
    """The regenerator of one aliased output, as an importable value object.

    Calls go to the function ``_resolve_regenerator`` made once (Note
    [Precompiled regenerators]). Unlike that closure, the object reduces to
    a call of its class with its arguments, so torch >= 2.14's
    ``compile_to_python`` (torch.compiler.precompile), which turns the runtime
    wrapper's globals into source, can emit it (Note [Regenerators as source]).
    """

    __slots__ = ("_args", "_fn")

    def __init__(
        self,
        view_meta_sequence: Any,
        replay_plan: ReplayPlan,
        requires_grad: bool,
        replay_views: bool,
        # [stack: mutated-input-aliases]
        target_is_view_of_base: bool,
        # [/stack]
        # [stack: no-grad-views]
        no_grad: bool = False,
        # [/stack]
    ) -> None:
        self._args = (
            view_meta_sequence,
            replay_plan,
            requires_grad,
            replay_views,
            # [stack: mutated-input-aliases]
            target_is_view_of_base,
            # [/stack]
            # [stack: no-grad-views]
            no_grad,
            # [/stack]
        )
        self._fn = _resolve_regenerator(
            view_meta_sequence,
            replay_plan,
            requires_grad=requires_grad,
            replay_views=replay_views,
            # [stack: mutated-input-aliases]
            target_is_view_of_base=target_is_view_of_base,
            # [/stack]
        )
        # [stack: no-grad-views]
        if no_grad:
            self._fn = _under_no_grad(self._fn)
        # [/stack]

    def __call__(
        self, base: Tensor, target: Tensor, inputs: InputsArg, groups: GroupsArg, outputs: OutputsArg = None
    ) -> Tensor:
        return self._fn(base, target, inputs, groups, outputs)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Note [Regenerators as source]: a plan is emitted without its compiled
        # function (compare=False, recompiled on first use).
        vms, plan, *flags = self._args
        if isinstance(plan, ViewReplayPlan):
            plan = dataclasses.replace(plan, _fn=None)
        return (PrecompiledRegenerator, (vms, plan, *flags))


def make_regenerator(
    view_meta_sequence: Any,
    replay_plan: ReplayPlan,
    *,
    requires_grad: bool,
    replay_views: bool,
    # [stack: mutated-input-aliases]
    target_is_view_of_base: bool = True,
    # [/stack]
    # [stack: no-grad-views]
    no_grad: bool = False,
    # [/stack]
) -> Regenerator:
    """Runtime-wrapper hook: the regenerator of one aliased output, resolved once
    (a :class:`PrecompiledRegenerator`); ``regenerate_alias`` resolves per call."""
    return PrecompiledRegenerator(
        view_meta_sequence,
        replay_plan,
        requires_grad,
        replay_views,
        # [stack: mutated-input-aliases]
        target_is_view_of_base,
        # [/stack]
        # [stack: no-grad-views]
        no_grad,
        # [/stack]
    )


# [stack: no-grad-views]
def _under_no_grad(regenerate: Regenerator) -> Regenerator:
    """``regenerate`` run under no_grad: the output is a view taken under no_grad (Note
    [Views taken under no_grad]), a leaf without grad_fn that requires grad as its base does."""

    def regenerate_under_no_grad(
        base: Tensor, target: Tensor, inputs: InputsArg = None, groups: GroupsArg = None,
        outputs: OutputsArg = None,
    ) -> Tensor:
        with torch.no_grad():
            return regenerate(base, target, inputs, groups, outputs)

    return regenerate_under_no_grad


# [/stack]


# [/stack]
def _resolve_regenerator(
    view_meta_sequence: Any,
    # [stack: symbolic-replay]
    replay_plan: ReplayPlan,
    # [/stack]
    *,
    requires_grad: bool,
    replay_views: bool,
    # [stack: mutated-input-aliases]
    target_is_view_of_base: bool = True,
    # [/stack]
) -> Regenerator:
    """Resolve how an aliased output is regenerated.

    The arguments come from the output's OutputAliasInfo. Returns ``regenerate(base, target, inputs=None,
    groups=None, outputs=None)``, where ``target`` is the graph's own output
    for this alias (or, while tracing synthetic bases, a fake view).
    """
    if not replay_views:
        return _regenerate_without_view_metas(requires_grad, replay_views)
    verify = _verify_on_base
    # [stack: mutated-input-aliases]
    if not target_is_view_of_base:
        # Note [Aliases of inputs mutated by the graph]
        verify = _verify_size
    # [/stack]
    # [stack: symbolic-replay]
    unplannable = _unplannable(view_meta_sequence, replay_plan)
    if unplannable is not None:
        reason, detail = unplannable.reason, unplannable.detail

        def regenerate_by_fallback(
            base: Tensor, target: Tensor, inputs: InputsArg = None, groups: GroupsArg = None,
            outputs: OutputsArg = None,
        ) -> Tensor:
            return _patch_requires_grad(_fallback(base, target, reason, detail), requires_grad)

        return regenerate_by_fallback
    if replay_plan is not None:
        return _regenerate_by_plan(replay_plan, requires_grad, verify)
    # [/stack]
    if view_meta_sequence is None:
        return _regenerate_without_view_metas(requires_grad, replay_views)
    steps = view_meta_sequence.sequence

    def replay_view_metas(
        base: Tensor, target: Tensor, inputs: InputsArg = None, groups: GroupsArg = None,
        outputs: OutputsArg = None,
    ) -> Tensor:
        return _apply_view_meta_sequence(base, steps)

    return _verified(replay_view_metas, view_meta_sequence.__repr__, requires_grad, verify)


# [stack: symbolic-replay]
def _regenerate_by_plan(
    plan: ViewReplayPlan, requires_grad: bool, verify: Callable[[Tensor, Tensor, Tensor], bool]
) -> Regenerator:
    names = plan.view_metas

    def describe() -> str:
        return f"view chain {names}"

    return _verified(
        plan.replay,  # compiles the plan's source now, not on the first call
        describe,
        requires_grad,
        verify,
        reads_inputs=bool(plan.input_indices),
        # [stack: symbol-outputs]
        reads_outputs=bool(plan.output_indices),
        # [/stack]
    )


# [/stack]
def _verified(
    view: Regenerator,
    describe: Callable[[], str],
    requires_grad: bool,
    verify: Callable[[Tensor, Tensor, Tensor], bool],
    # [stack: symbolic-replay]
    reads_inputs: bool = False,
    reads_outputs: bool = False,
    # [/stack]
) -> Regenerator:
    """``view``, its result verified by ``verify(out, target, base)``, falling back otherwise."""

    def regenerate(
        base: Tensor, target: Tensor, inputs: InputsArg = None, groups: GroupsArg = None,
        outputs: OutputsArg = None,
    ) -> Tensor:
        # [stack: symbolic-replay]
        if reads_inputs and inputs is None or reads_outputs and outputs is None:
            missing = "inputs" if reads_inputs and inputs is None else "outputs"
            out = _fallback(
                base, target, FallbackReason.UNBOUND_SYMBOL,
                f"{describe()} reads graph {missing}, which were not passed",
            )
            return _patch_requires_grad(out, requires_grad)
        # [/stack]
        try:
            out = view(base, target, inputs, groups, outputs)
        except Exception as e:  # noqa: BLE001 - any failure of the replay falls back, verified
            out = _fallback(
                base, target, FallbackReason.REPLAY_ERROR, f"{describe()}: {type(e).__name__}: {e}"
            )
        else:
            if not verify(out, target, base):
                out = _fallback(
                    base, target, FallbackReason.METADATA_MISMATCH,
                    f"{describe()}: replayed size={tuple(out.size())} stride={out.stride()} "
                    f"offset={out.storage_offset()} dtype={out.dtype}, output "
                    f"size={tuple(target.size())} stride={target.stride()} "
                    f"offset={target.storage_offset()} dtype={target.dtype}",
                )
        if out.requires_grad != requires_grad:
            out = _patch_requires_grad(out, requires_grad)
        return out

    return regenerate


def _regenerate_without_view_metas(requires_grad: bool, replay_views: bool) -> Regenerator:
    reason = FallbackReason.NO_VIEW_META if replay_views else FallbackReason.REPLAY_DISABLED

    def regenerate_without_view_metas(
        base: Tensor, target: Tensor, inputs: InputsArg = None, groups: GroupsArg = None,
        outputs: OutputsArg = None,
    ) -> Tensor:
        if target._base is not None:
            out = _replay_view_func(base, target)
        else:
            out = _fallback(base, target, reason, f"output of size {tuple(target.size())}")
        return _patch_requires_grad(out, requires_grad)

    return regenerate_without_view_metas


def _replay_view_func(base: Tensor, target: Tensor) -> Tensor:
    """Regenerate ``target`` off ``base`` with the view function autograd recorded for it.

    Used when no ViewMeta sequence was recorded: for fake views while tracing
    synthetic bases, and for graph outputs whose view function autograd kept.
    See Note [Recorded view functions of graph outputs].
    """
    recorded_base = target._base
    if base is not recorded_base and (
        base.size() != recorded_base.size()
        or base.stride() != recorded_base.stride()
        or base.storage_offset() != recorded_base.storage_offset()
    ):
        base = as_strided_fallback(
            base,
            recorded_base.size(),
            recorded_base.stride(),
            recorded_base.storage_offset(),
            recorded_base.dtype,
            FallbackReason.BASE_METADATA_MISMATCH,
            f"base size={tuple(base.size())} stride={base.stride()}, recorded base "
            f"size={tuple(recorded_base.size())} stride={recorded_base.stride()}",
        )
    out = target._view_func(base)
    if out is None or not same_layout(out, target):
        return _fallback(
            base, target, FallbackReason.VIEW_FUNC_MISMATCH,
            f"view function gave {None if out is None else tuple(out.shape)}, "
            f"expected {tuple(target.shape)}",
        )
    if type(out.grad_fn).__name__ == "AsStridedBackward0":
        # The recorded view function was as_strided() itself.
        record_fallback(
            FallbackReason.VIEW_FUNC_AS_STRIDED, f"output of size {tuple(target.size())}"
        )
    return out


def regenerate_alias(
    aliased_base_tensor: Tensor,
    target_meta_tensor: Tensor,
    target_requires_grad: bool,
    target_view_meta_sequence: Any = None,
    *,
    replay_views: bool,
    # [stack: symbolic-replay]
    inputs: InputsArg = None,
    # [/stack]
    # [stack: multi-output-views]
    groups: GroupsArg = None,
    # [/stack]
    # [stack: symbolic-replay]
    replay_plan: ReplayPlan = None,
    # [/stack]
) -> Tensor:
    """Regenerate ``target_meta_tensor`` as a view of ``aliased_base_tensor``, resolving the way now.

    The body of ``gen_alias_from_base``.
    """
    regenerate = _resolve_regenerator(
        target_view_meta_sequence,
        # [stack: symbolic-replay]
        replay_plan,
        # [/stack]
        requires_grad=target_requires_grad,
        replay_views=replay_views,
    )
    return regenerate(
        aliased_base_tensor,
        target_meta_tensor,
        # [stack: symbolic-replay]
        inputs,
        # [stack: multi-output-views]
        groups,
        # [/stack]
        # [/stack]
    )
