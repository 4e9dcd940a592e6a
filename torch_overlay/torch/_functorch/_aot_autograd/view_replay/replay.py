"""
Runtime regeneration of aliased outputs.

Note [Regenerators]
~~~~~~~~~~~~~~~~~~~
Regeneration runs on every call of the compiled function, once per aliased
output, so it carries out decisions made at compile time (Note [View replay
metadata] in spec.py): each alias handler of the runtime wrapper holds one
:class:`Regenerator`, built from the output's ``ViewReplay`` when the wrapper
is built (at compile time, and when a cached graph is loaded). It resolves the
route once, and a call costs the view ops, one check against the graph's
output and a requires_grad check. The check stays on the runtime path: it is what proves
the replayed view right for the base at hand (the base's strides are not known
at compile time); a view that fails it, or whose replay raises, goes to the
fallback point with the reason.

Both runtime paths call regenerators the same way, ``regenerate(base, target,
call)``: the alias function that _create_runtime_wrapper generates, and the
handlers' reference ``__call__``. ``call`` is the one
:class:`~call.RegenerationCall` of a runtime call: what the regenerations of
one call share, such as the graph's inputs and outputs.

Note [Regenerators as source] (torch >= 2.14)
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
From 2.14, compile_to_python (the lowering behind torch.compiler.precompile)
composes the runtime wrapper's generated source with its globals into a
standalone module: each global must be a known helper, importable, or
emittable as source. A Regenerator reduces to ``Regenerator(view_replay,
view_meta_sequence, requires_grad)``, all of them data that source_emit writes
out (the ViewMetaSequence through _from_parts), so the precompiled module
rebuilds the same regenerator. No version gate: on 2.13 nothing emits it.

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

Note [Aliases of intermediates copied by the graph]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
An alias of an intermediate normally leaves the graph as a view of the base
the graph returns, so the replayed view can be checked against its layout.
Inductor may return it as a copy on another storage instead (the view of a
matmul whose result is then mutated: ``v = x @ w3d; a = v[:, 1:]; v.add_(1);
return a, v[:, :1]`` with dynamic shapes), whose strides and offset say
nothing about the base. Upstream's as_strided() with the copy's layout then
reads other elements of the base: silently wrong values (stock 2.14.1 and
2.13.0, inductor, dynamic=True). Such an output (Check.INTERMEDIATE, target
on another storage) is not checked against the copy's layout: a plan that
reads nothing off the copy's strides or offset (its arguments come from the
base, the inputs or sizes) gives eager's view, and is checked on size and
dtype; a plan that does read them cannot be trusted, and the copy itself is
returned at the fallback point with the reason (eager's values, not a view of
the base), as it is wherever this output falls back.

Layering: runtime. Imports the data (spec) and the runtime modules; never a
planning module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch._C import _functionalization

from .call import RegenerationCall, ViewFn
from .codegen import compiled_plan
from .fallback import as_strided_fallback, FallbackReason, record_fallback
from .spec import (
    Check,
    Fallback,
    RecordedViewFunction,
    RecordedViewMetas,
    RegeneratedOutside,
    ReplayPlan,
    RuntimeSource,
    ViewReplay,
)
from .verify import cross_storage_shift, on_other_storage, VERIFIERS


def default_view_replay(view_meta_sequence: Any, replay_views: bool) -> ViewReplay:
    """The regeneration of an output that planning did not decide on (gen_alias_from_base's
    callers, outputs recorded outside collect_metadata_analysis)."""
    if not replay_views:
        return ViewReplay(RecordedViewFunction(FallbackReason.REPLAY_DISABLED))
    if view_meta_sequence is None:
        return ViewReplay(RecordedViewFunction(FallbackReason.NO_VIEW_META))
    if any(vm.has_symbolic_inputs for vm in view_meta_sequence.sequence):
        return ViewReplay(
            Fallback(FallbackReason.NO_VIEW_META, f"{view_meta_sequence!r} has symbolic arguments but no plan")
        )
    return ViewReplay(RecordedViewMetas())


def inputs_read_by_replay(view_replay: ViewReplay | None) -> tuple[int, ...]:
    """Runtime-wrapper hook: the graph inputs an output's regeneration reads, which the
    runtime wrapper must keep for it."""
    if view_replay is None or not isinstance(view_replay.route, ReplayPlan):
        return ()
    return view_replay.route.indices_read(RuntimeSource.INPUT)


def _fallback(base: Tensor, target: Tensor, reason: FallbackReason, detail: str) -> Tensor:
    # See Note [Outputs on another storage than their base]
    return as_strided_fallback(base, target, reason, detail, cross_storage_shift(base, target))


def _patch_requires_grad(out: Tensor, requires_grad: bool) -> Tensor:
    # The regenerated view inherits requires_grad from the real base; the compiled output
    # may differ (e.g. an output computed under no_grad). A replayed chain that already
    # drops it (through detach) stays a view.
    if out.requires_grad and not requires_grad:
        return out.detach()
    if not out.requires_grad and requires_grad:
        out.requires_grad_(True)
    return out


def _pass_through(base: Tensor, target: Tensor, call: RegenerationCall) -> Tensor:
    return target


def _replay_recorded(steps: list[Any]) -> ViewFn:
    return lambda base, target, call: _functionalization.apply_view_meta_sequence(base, steps)


class Regenerator:
    """The regeneration of one aliased output, its route resolved once."""

    __slots__ = ("view_replay", "view_meta_sequence", "requires_grad", "_view", "_check", "_what", "_trusts_copies")

    def __init__(self, view_replay: ViewReplay, view_meta_sequence: Any, requires_grad: bool) -> None:
        self.view_replay = view_replay
        self.view_meta_sequence = view_meta_sequence
        self.requires_grad = requires_grad
        self._check = VERIFIERS[view_replay.check]
        route = view_replay.route
        # The view function of the route, and what the log says about the chain.
        self._view: ViewFn | None = None
        if isinstance(route, ReplayPlan):
            self._view, self._what = compiled_plan(route), f"view chain {route.names()}"
        elif isinstance(route, RecordedViewMetas):
            self._view, self._what = _replay_recorded(view_meta_sequence.sequence), repr(view_meta_sequence)
        elif isinstance(route, RegeneratedOutside):
            self._view, self._what = _pass_through, "the graph's output, regenerated outside"
        else:
            self._what = ""
        # Note [Aliases of intermediates copied by the graph]
        self._trusts_copies = view_replay.check is Check.INTERMEDIATE and (
            isinstance(route, RecordedViewMetas)
            or isinstance(route, ReplayPlan) and not route.reads_target_layout()
        )

    def __call__(self, base: Tensor, target: Tensor, call: RegenerationCall) -> Tensor:
        # Note [Outputs that are one tensor] in scope.py
        same_object = self.view_replay.same_object
        if same_object is not None and same_object in call.same_objects:
            return call.same_objects[same_object]
        if self.view_replay.no_grad:
            # Note [Views taken under no_grad]
            with torch.no_grad():
                out = self._regenerate(base, target, call)
        else:
            out = self._regenerate(base, target, call)
        if out.requires_grad != self.requires_grad:
            out = _patch_requires_grad(out, self.requires_grad)
        if same_object is not None:
            call.same_objects[same_object] = out
        return out

    def _regenerate(self, base: Tensor, target: Tensor, call: RegenerationCall) -> Tensor:
        if self._view is None:
            return self._without_view(base, target)
        try:
            out = self._view(base, target, call)
        except Exception as e:  # noqa: BLE001 - any failure of the replay falls back, checked
            return self._fallback(base, target, FallbackReason.REPLAY_ERROR, f"{self._what}: {type(e).__name__}: {e}")
        if self._check(out, target, base) or self._trusted_off_copy(out, base, target):
            return out
        return self._fallback(
            base, target, FallbackReason.METADATA_MISMATCH,
            f"{self._what}: replayed size={tuple(out.size())} stride={out.stride()} "
            f"offset={out.storage_offset()} dtype={out.dtype}, output size={tuple(target.size())} "
            f"stride={target.stride()} offset={target.storage_offset()} dtype={target.dtype}",
        )

    def _without_view(self, base: Tensor, target: Tensor) -> Tensor:
        route = self.view_replay.route
        if isinstance(route, Fallback):
            return self._fallback(base, target, route.reason, route.detail)
        assert isinstance(route, RecordedViewFunction)
        if target._base is not None:
            return _replay_view_func(base, target, self._check)
        return self._fallback(base, target, route.reason, f"output of size {tuple(target.size())}")

    def _trusted_off_copy(self, out: Tensor, base: Tensor, target: Tensor) -> bool:
        # Note [Aliases of intermediates copied by the graph]
        return (
            self._trusts_copies
            and out.dtype == target.dtype
            and out.size() == target.size()
            and on_other_storage(base, target)
        )

    def _fallback(self, base: Tensor, target: Tensor, reason: FallbackReason, detail: str) -> Tensor:
        if self.view_replay.check is Check.INTERMEDIATE and on_other_storage(base, target):
            # Note [Aliases of intermediates copied by the graph]: the copy's layout says
            # nothing about the base, so no as_strided() off it.
            record_fallback(reason, f"{detail}; the graph's output is a copy off the base, returned as it is")
            return target
        return _fallback(base, target, reason, detail)

    def __reduce__(self) -> tuple[Callable[..., Regenerator], tuple[Any, ...]]:
        # Note [Regenerators as source]
        return (Regenerator, (self.view_replay, self.view_meta_sequence, self.requires_grad))


def make_regenerator(info: Any, kind: type[Regenerator] = Regenerator) -> Regenerator:
    """Runtime-wrapper hook: the regenerator of the aliased output ``info`` (an
    OutputAliasInfo), built once when the runtime wrapper is built."""
    view_replay = info.view_replay or default_view_replay(info.view_meta_sequence, replay_views=True)
    return kind(view_replay, info.view_meta_sequence, info.requires_grad)


def _replay_view_func(base: Tensor, target: Tensor, check: Callable[[Tensor, Tensor, Tensor], bool]) -> Tensor:
    """Regenerate ``target`` off ``base`` with the view function autograd recorded for it
    (Note [Recorded view functions of graph outputs]), checked by ``check``."""
    recorded_base = target._base
    if base is not recorded_base and (
        base.size() != recorded_base.size()
        or base.stride() != recorded_base.stride()
        or base.storage_offset() != recorded_base.storage_offset()
    ):
        base = as_strided_fallback(
            base, recorded_base, FallbackReason.BASE_METADATA_MISMATCH,
            f"base size={tuple(base.size())} stride={base.stride()}, recorded base "
            f"size={tuple(recorded_base.size())} stride={recorded_base.stride()}",
        )
    out = target._view_func(base)
    if out is None or not check(out, target, base):
        return _fallback(
            base, target, FallbackReason.VIEW_FUNC_MISMATCH,
            f"view function gave {None if out is None else tuple(out.shape)}, expected {tuple(target.shape)}",
        )
    if type(out.grad_fn).__name__ == "AsStridedBackward0":
        # The recorded view function was as_strided() itself.
        record_fallback(FallbackReason.VIEW_FUNC_AS_STRIDED, f"output of size {tuple(target.size())}")
    return out


def regenerate_alias(base: Tensor, target: Tensor, requires_grad: bool, view_meta_sequence: Any, replay_views: bool) -> Tensor:
    """Regenerate ``target`` as a view of ``base``: the body of ``gen_alias_from_base``, for its
    callers that have no output metadata (the runtime wrapper uses regenerators)."""
    regenerator = Regenerator(default_view_replay(view_meta_sequence, replay_views), view_meta_sequence, requires_grad)
    return regenerator(base, target, RegenerationCall({}, ()))
