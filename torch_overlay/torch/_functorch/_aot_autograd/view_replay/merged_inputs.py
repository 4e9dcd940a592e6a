"""
Outputs that alias inputs merged into a synthetic base.

Note [Outputs aliasing inputs merged into a synthetic base]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
When the graph mutates an input that another input overlaps (``a`` and ``b``
views of one tensor, ``a.mul_(2)``), AOTSyntheticBaseWrapper merges them into
one synthetic base: the compiled function takes the base, rebuilds ``a`` and
``b`` from it inside the graph, and writes the mutation back to it. Their size,
stride and storage offset are all that is known of their relation to the base,
as in eager autograd, so they are rebuilt with as_strided() in the graph
(:func:`merged_input_view`; functional and compiled with its backward, no
regeneration of a user-visible output: logged, not counted as a fallback).

An output that aliases ``b`` (``return b[:3]``) was recorded relative to ``b``.
Upstream remaps its base to the synthetic base and keeps the chain, so the
runtime wrapper replays ``b``'s chain on the synthetic base, checked on its
size only: ``b[:3]`` comes back as ``base[:3]`` (wrong values and gradient),
and ``b[1:].t()`` raises (or, in this queue before this fix, fell back).

Eager returns a view of ``b`` itself, so the output is regenerated where ``b``
is still at hand: in the synthetic-base wrapper, after the compiled function
has written the mutation back. At compile time :func:`~plan.plan_merged_inputs`
keeps the output's metadata from before the merge (the chain relative to
``b``, the outer input indices its plan reads) and gives the inner metadata
the pass-through route :class:`~spec.RegeneratedOutside`; at runtime
:meth:`MergedInputs.wrap` replays the chain off ``b``, checked on
its size (the graph's output views the synthetic base's new value, not ``b``).
An output that is ``b`` itself is ``b``. A fallback of such an output is an
as_strided() of the synthetic base, which the graph's output views: never of
``b``, whose offset would count twice.

Only replays move: an output with no chain to replay (a recorded view
function, a fallback) stays with the runtime wrapper, whose as_strided() off
the synthetic base is right. Repro, wrong values on stock 2.14.1 and 2.13.0::

    l = torch.randn(10, requires_grad=True); base = l * 1
    def f(a, b):
        a.mul_(2)
        return b[:3]
    torch.compile(f, backend="aot_eager")(base[0:6], base[2:8])  # base[:3]; eager: b[:3]

Note [Layouts of inputs merged into a synthetic base]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The graph rebuilds each merged input from the synthetic base with the size,
stride and storage offset it had when the graph was traced. Dynamo guards (or
binds, with dynamic shapes) the inputs' sizes and strides, but not their
storage offsets: the offset is a constant of the graph. So a call whose ``a``
starts elsewhere in the base reuses the graph, and the mutation and the
outputs silently land on the elements of the traced offset (upstream too).
:func:`merged_input_layouts` records each merged input's traced offset (with
dynamic shapes, the value of its symbol: no input of the graph carries it),
and :meth:`MergedInputs.wrap` compares every call's merged inputs
with them before the graph runs: a call that differs raises, naming the
argument, rather than computing on the wrong elements. Where duck sizing made
an offset one of the inputs' size or stride symbols (``x[1:]`` of an ``(n,
m)`` ``x`` starts at ``m``), Dynamo guards it and the graph rebuilds the input
at its value: that offset is not checked (:func:`merged_input_layouts`). For
the same reason the offsets of inputs that share a storage are part of the
AOTAutograd cache key (:func:`overlapping_input_offsets`): an entry traced for
other offsets would only raise. Repro (stock 2.14.1 and
2.13.0, any backend, static or dynamic)::

    f = torch.compile(lambda a, b: (a.mul_(2), b * 1)[1])
    base = torch.randn(10, 3, requires_grad=True) * 1
    f(base[1:7], base[2:8])
    f(base[3:9], base[2:8])  # reuses the graph: rows 1-6 doubled, not 3-8

Layering: runtime. Imports the data (spec), the call and the regenerators.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from .call import RegenerationCall
from .fallback import FallbackReason, log
from .replay import make_regenerator, Regenerator


@dataclasses.dataclass(frozen=True)
class MergedInputAlias:
    """A user output that the synthetic-base wrapper regenerates off the input it aliases."""

    # Its index among the user outputs.
    output_index: int
    # Its OutputAliasInfo from before the merge, runtime-safe: base_idx and the inputs its
    # plan reads are indices of the outer calling convention, its chain starts at the input,
    # and its view_replay is checked on its size.
    info: Any
    # The output is the input itself (OutputType.is_input): nothing to regenerate.
    is_input: bool


def merged_input_view(base: Tensor, view: Tensor) -> Tensor:
    """Trace-time hook (_unpack_synthetic_bases): the input ``view`` rebuilt from its synthetic
    ``base`` inside the graph, with as_strided() (Note [Outputs aliasing inputs merged into a
    synthetic base])."""
    log.debug("input of size %s rebuilt off its synthetic base with as_strided()", tuple(view.size()))
    out = base.as_strided(view.size(), view.stride(), view.storage_offset())
    # as_strided() keeps the base's negative and conjugate bits, not the view's.
    if out.is_neg() != view.is_neg():
        out = torch._neg_view(out)
    if out.is_conj() != view.is_conj():
        out = out.conj()
    if out.requires_grad and not view.requires_grad:
        out = out.detach()
    return out


def _synthetic_base_of(x: Tensor) -> Tensor:
    # What the synthetic-base wrapper merged x into: its _base, else its whole storage.
    if x._base is not None:
        return x._base
    whole = torch.empty((0,), dtype=x.dtype, device=x.device)
    return whole.set_(x.untyped_storage())


class _MergedInputRegenerator(Regenerator):
    """A Regenerator whose fallback is an as_strided() of the synthetic base."""

    __slots__ = ()

    def _fallback(self, base: Tensor, target: Tensor, reason: FallbackReason, detail: str) -> Tensor:
        where = "the output aliases an input merged into a synthetic base, and is taken off that base"
        return super()._fallback(_synthetic_base_of(base), target, reason, f"{detail} ({where})")


def _outer_regenerator(alias: MergedInputAlias) -> Regenerator | None:
    return None if alias.is_input else make_regenerator(alias.info, _MergedInputRegenerator)


def _regenerate_aliases(
    fn: Callable[[list[Any]], Any],
    aliases: tuple[MergedInputAlias, ...],
    mark_dynamic: Callable[[Tensor, Any], None],
) -> Callable[[list[Any]], Any]:
    """The boxed ``fn`` (it clears its arguments), then each of ``aliases`` regenerated off its
    outer input."""
    if not aliases:
        return fn
    steps = [(a.output_index, a.info.base_idx, _outer_regenerator(a), a.info.dynamic_dims) for a in aliases]

    def merged_input_aliases(args: list[Any]) -> list[Any]:
        outer = dict(enumerate(args))
        outs = list(fn(args))
        call = RegenerationCall(outer, outs)
        for index, input_index, regenerate, dynamic_dims in steps:
            x = outer[input_index]
            outs[index] = x if regenerate is None else regenerate(x, outs[index], call)
            if dynamic_dims:
                mark_dynamic(outs[index], dynamic_dims)
        return outs

    merged_input_aliases._boxed_call = True  # type: ignore[attr-defined]
    return merged_input_aliases


@dataclasses.dataclass(frozen=True)
class MergedInputLayout:
    """Where the graph assumes an input merged into a synthetic base starts (Note [Layouts of
    inputs merged into a synthetic base])."""

    # The input's index among the compiled function's flat arguments (SymInts included).
    input_index: int
    # Its storage offset when the graph was traced.
    storage_offset: int


def _traced_value(value: int | torch.SymInt) -> int:
    return value if isinstance(value, int) else value.node.hint


def _offset_bound_by_sizes(offset: int | torch.SymInt, views: Sequence[Tensor]) -> bool:
    """Whether ``offset`` is an expression of the merged inputs' size and stride symbols (duck
    sizing made it one): Dynamo guards it, and the graph rebuilds the input at its value."""
    if isinstance(offset, int):
        return False
    bound = {
        symbol for view in views for n in (*view.size(), *view.stride())
        if isinstance(n, torch.SymInt) for symbol in n.node.expr.free_symbols
    }
    return offset.node.expr.free_symbols <= bound


def merged_input_layouts(synthetic_base_info: list[Any]) -> tuple[MergedInputLayout, ...]:
    """Compile-time: the storage offset every merged input had when the graph was traced, where the graph rebuilds it at that value: a constant,
    or a symbol that no size or stride of the merged inputs carries."""
    views = [entry[1] for entry in synthetic_base_info if not isinstance(entry, int)]
    return tuple(
        MergedInputLayout(index, _traced_value(entry[1].storage_offset()))
        for index, entry in enumerate(synthetic_base_info)
        if not isinstance(entry, int) and not _offset_bound_by_sizes(entry[1].storage_offset(), views)
    )


def _layout_error(layout: MergedInputLayout, x: Tensor) -> RuntimeError:
    return RuntimeError(
        f"argument {layout.input_index} overlaps another input that the graph mutates, so the "
        f"compiled graph rebuilds it off their common base at the storage offset it was traced "
        f"with, {layout.storage_offset}; this call passes it at storage offset {x.storage_offset()}, "
        "which Dynamo does not guard. Compile again for this layout (torch._dynamo.reset()), or "
        "pass inputs that do not overlap (Note [Layouts of inputs merged into a synthetic base])"
    )


def _check_layouts(
    fn: Callable[[list[Any]], Any], layouts: tuple[MergedInputLayout, ...]
) -> Callable[[list[Any]], Any]:
    """The boxed ``fn``, called once every merged input starts where the graph assumes; raises
    otherwise."""
    if not layouts:
        return fn

    def merged_input_layouts_checked(args: list[Any]) -> Any:
        for layout in layouts:
            if args[layout.input_index].storage_offset() != layout.storage_offset:
                raise _layout_error(layout, args[layout.input_index])
        return fn(args)

    merged_input_layouts_checked._boxed_call = True  # type: ignore[attr-defined]
    return merged_input_layouts_checked


@dataclasses.dataclass(frozen=True)
class MergedInputs:
    """What AOTSyntheticBaseWrapper does, at runtime, for the inputs it merged into synthetic
    bases: planned once at compile time (plan.plan_merged_inputs), kept in the wrapper (and
    with it in the AOTAutograd cache)."""

    # The user outputs regenerated off the merged input they alias, after the call (Note
    # [Outputs aliasing inputs merged into a synthetic base]).
    aliases: tuple[MergedInputAlias, ...] = ()
    # The merged inputs each call must pass at their traced storage offsets, checked before
    # the call (Note [Layouts of inputs merged into a synthetic base]).
    layouts: tuple[MergedInputLayout, ...] = ()

    def wrap(self, fn: Callable[[list[Any]], Any], mark_dynamic: Callable[[Tensor, Any], None]) -> Callable[[list[Any]], Any]:
        """Runtime hook (AOTSyntheticBaseWrapper.post_compile): the boxed ``fn`` with this
        plan's work around it; ``fn`` itself where there is none."""
        return _check_layouts(_regenerate_aliases(fn, self.aliases, mark_dynamic), self.layouts)


def _storage_key(x: Any) -> StorageWeakRef | None:
    if not isinstance(x, Tensor) or is_traceable_wrapper_subclass(x):
        return None
    return StorageWeakRef(x.untyped_storage())


def overlapping_input_offsets(example_inputs: Sequence[Any]) -> tuple[int | None, ...]:
    """Cache-key hook (AOTAutogradCacheDetails): each input's storage offset where it shares
    its storage with another input, else None (Note [Layouts of inputs merged into a synthetic
    base])."""
    keys = [_storage_key(x) for x in example_inputs]
    shared = Counter(k for k in keys if k is not None)
    return tuple(
        _traced_value(x.storage_offset()) if k is not None and shared[k] > 1 else None
        for x, k in zip(example_inputs, keys)
    )
