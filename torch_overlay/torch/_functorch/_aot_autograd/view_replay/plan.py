"""
Compile-time planning of symbolic view replay.

Note [Symbolic view replay]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
Functionalization records, for every output that is a view, the ViewMeta
sequence that produced it from its base. With static shapes AOTAutograd replays
that sequence at runtime (apply_view_meta_sequence), so the regenerated output
gets the eager autograd nodes (SliceBackward0, TBackward0, ...). Upstream skips
sequences with symbolic arguments (``x[: x.shape[0] // 2]`` under dynamic
shapes) and drops them before caching, so such outputs fall back to
as_strided() and get AsStridedBackward0.

We plan those sequences once, at compile time:
  1. every SymInt argument of every ViewMeta is turned into a sympy expression;
  2. every free symbol gets a SymbolLocator (symbols.py) on the runtime values;
  3. the whole chain is rendered to the source of one Python function that
     reads the symbols, evaluates the expressions with plain integer
     arithmetic, rebuilds each ViewMeta with concrete arguments and replays the
     sequence on the real base.
The plan is checked at compile time by evaluating the rendered source on the
symbols' hints and comparing with the hints of the original arguments.
A plan stores only strings and names, so it pickles into the AOTAutograd cache;
the function is compiled from its source once per process (no sympy, and no
planning, at runtime). Anything that cannot be planned yields an
UnplannableView carrying the reason, and the runtime goes to the fallback point.
"""

from __future__ import annotations

# [stack: traced-base-steps]
import contextlib
# [/stack]
import dataclasses
# [stack: synthetic-base-indices]
import re
from collections.abc import Callable
# [/stack]
from collections.abc import Sequence
from typing import Any, TYPE_CHECKING

import sympy

# [stack: traced-base-steps]
import torch
# [/stack]
from torch import Tensor
from torch._C import _functionalization
# [stack: traced-base-steps]
from torch._subclasses.functional_tensor import FunctionalTensor
from torch.fx.experimental.symbolic_shapes import statically_known_true
from torch.utils._python_dispatch import _disable_current_modes
# [/stack]

# [stack: no-grad-views]
from .autograd_chain import mixed_no_grad_steps
# [/stack]
from .fallback import FallbackReason
# [stack: multi-output-views]
from .multi_output import (
    is_multi_output_view_meta,
    MULTI_OUTPUT_VIEW_OPS,
    OP_ARGS_START,
    OUT_INDEX_POSITION,
    pieces_of,
)
# [/stack]
from .render import ArgumentRenderer, check_against_hints, resolve_constant, UnrenderableArgument
from .symbols import locate_symbols, RuntimeSource, SymbolLocator
from .view_meta_args import (
    arguments_readable,
    unreadable_reason,
    UnreadableViewMetaArguments,
    unreplayable_reason,
    view_meta_arguments,
)


if TYPE_CHECKING:
    from .replay import Regenerator
    # [stack: symbol-outputs]
    from .symbol_outputs import SymbolOutputs
    # [/stack]


@dataclasses.dataclass(frozen=True)
class UnplannableView:
    """A view chain that cannot be replayed; the runtime falls back with this reason."""

    reason: FallbackReason
    detail: str


@dataclasses.dataclass
class ViewReplayPlan:
    """A view chain whose symbolic arguments are resolved from runtime values.

    Only ``source`` and ``constants`` are pickled; the replay function is
    compiled from them on first use in each process.
    """

    # Names of the ViewMeta classes, in order (for logs and reprs).
    view_metas: tuple[str, ...]
    # Source of ``def replay(base, target, inputs=None, groups=None, outputs=None)``.
    source: str
    # Python name in ``source`` -> path of the object under ``torch``.
    constants: dict[str, str]
    # Indices of the graph inputs that the replay reads; the runtime wrapper
    # keeps them alive for the epilogue (see inputs_read_by_replay).
    input_indices: tuple[int, ...]
    # [stack: symbol-outputs]
    # Indices of the graph's user outputs that the replay reads (Note [Symbol outputs]).
    output_indices: tuple[int, ...] = ()
    # [/stack]
    _fn: Regenerator | None = dataclasses.field(default=None, repr=False, compare=False)

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["_fn"] = None
        return state

    @property
    def replay(self) -> Regenerator:
        if self._fn is None:
            scope: dict[str, object] = {
                name: resolve_constant(qualname) for name, qualname in self.constants.items()
            }
            scope["_apply"] = _functionalization.apply_view_meta_sequence
            scope["_memo"] = {}
            scope["_remember"] = _remember
            # [stack: no-grad-views]
            scope["_no_grad"] = torch.no_grad
            # [/stack]
            # [stack: multi-output-views]
            scope["_pieces"] = pieces_of
            # [/stack]
            # [stack: symbol-outputs]
            # Not imported at module level: schemas imports this package.
            from ..schemas import TensorAlias

            scope["_unalias"] = lambda o: o.alias if type(o) is TensorAlias else o
            # [/stack]
            code = compile(self.source, "<view_replay plan>", "exec")
            exec(code, scope)
            self._fn = scope["replay"]  # type: ignore[assignment]
        return self._fn  # type: ignore[return-value]


# Distinct symbol values whose ViewMetas a plan keeps (per process).
MEMO_SIZE = 64


def _remember(memo: dict[tuple[int, ...], Any], key: tuple[int, ...], value: Any) -> Any:
    if len(memo) >= MEMO_SIZE:
        memo.clear()
    memo[key] = value
    return value


# [stack: multi-output-views]
def render_pieces_call(key_parts: Sequence[str], compute: str, claim: int | None) -> str:
    """Plan source: ``t`` = the pieces of this step's multi-output call (``pieces_of``).

    ``claim``: the index of the piece when the piece itself is the output (see
    Note [Multi-output views])."""
    return f"t = _pieces(groups, ({', '.join(key_parts)},), {compute}, {claim})"


# [/stack]
# [stack: traced-base-steps]
# Note [Planning on the traced base]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Where needed, the sequence is replayed step by step on the traced base before
# it is planned: the step results give the arguments that cannot be read off the
# ViewMeta itself (_unsafe_view's size, Note [Reading ViewMeta arguments]) and
# show which full slices are identities (Note [Identity slices]).
def replay_on_traced_base(view_metas: Sequence[Any], base: Tensor | None) -> list[Tensor] | None:
    """The result of each step of ``view_metas`` replayed on the traced (fake) ``base``.

    ViewMeta.forward() reads the ViewMeta's own data, unlike as_tuple() (Note
    [Reading ViewMeta arguments]). Returns None without a base.
    """
    if base is None or not any(
        type(vm).__name__ == _SLICE or not arguments_readable(vm) for vm in view_metas
    ):
        return None  # only _unsafe_view's size and identity slices need the step results
    if isinstance(base, FunctionalTensor):
        base = torch._from_functional_tensor(base.elem)
    results: list[Tensor] = []
    shape_env = _shape_env_of(base)
    # The fake base dispatches to its own FakeTensorMode; the functionalization
    # mode of the trace must not see these ops. Sizes that the replay makes up
    # (a slice by an unbacked symbol) are discarded with the results: they must
    # not become pending unbacked symbols of the graph.
    with contextlib.ExitStack() as stack:
        stack.enter_context(_disable_current_modes())
        stack.enter_context(torch.no_grad())
        if shape_env is not None:
            stack.enter_context(shape_env.ignore_fresh_unbacked_symbols())
        t = base
        for vm in view_metas:
            t = _functionalization.apply_view_meta_sequence(t, [vm])
            results.append(t)
    return results


def _shape_env_of(t: Tensor) -> Any:
    for size in (*t.size(), *t.stride(), t.storage_offset()):
        if isinstance(size, torch.SymInt):
            return size.node.shape_env
    fake_mode = getattr(t, "fake_mode", None)
    return getattr(fake_mode, "shape_env", None)


# Note [Identity slices]
# ~~~~~~~~~~~~~~~~~~~~~~
# Eager indexing skips a slice that keeps the whole dimension (``x[:, -1]``
# is one select: SelectBackward0). Traced with a symbolic size, the same slice
# is recorded (the trace cannot tell that end >= size without a guard), so a
# replay of the ViewMetas would add a SliceBackward0 that eager does not have.
# A slice step with start 0 and step 1 whose traced result has statically the
# same sizes as its input is such an identity: planning drops it, unless it is
# the last step (the output must still be a view of its own, as eager's
# ``x[:]`` is). An explicit ``narrow(d, 0, size)`` loses its SliceBackward0 the
# same way: same values, gradients and aliasing, one node fewer than eager.
_SLICE = "slice_Tensor_ViewMeta"
# slice_Tensor_ViewMeta.as_tuple(): (has_symbolic_inputs, reapply_views, InverseReturnMode, dim, start, end, step)
_SLICE_START, _SLICE_STEP = 4, 6


def is_identity_slice(name: str, args: tuple[object, ...], before: Tensor, after: Tensor) -> bool:
    """Whether a step is a slice that keeps every element of its input (Note [Identity slices])."""
    if name != _SLICE:
        return False
    start, step = args[_SLICE_START], args[_SLICE_STEP]
    # Plain ints only: comparing a SymInt would install a guard.
    if not (start is None or type(start) is int and start == 0) or not (type(step) is int and step == 1):
        return False
    return before.dim() == after.dim() and all(
        statically_known_true(a == b) for a, b in zip(before.size(), after.size())
    )


# [/stack]
def plan_view_replay(
    view_metas: Sequence[Any],
    *,
    base: Tensor | None,
    target: Tensor,
    inputs: Sequence[object],
    # [stack: symbol-outputs]
    outputs: Sequence[object] = (),
    symbol_outputs: SymbolOutputs | None = None,
    # [/stack]
    # [stack: mutated-input-aliases]
    target_is_view_of_base: bool = True,
    # [/stack]
    # [stack: no-grad-views]
    no_grad_steps: int = 0,
    # [/stack]
) -> ViewReplayPlan | UnplannableView:
    """Plan the replay of a ViewMeta sequence (see :func:`needs_replay_plan`)."""
    from . import config

    names = tuple(type(vm).__name__ for vm in view_metas)
    if not config.replay_symbolic_views and any(vm.has_symbolic_inputs for vm in view_metas):
        return UnplannableView(FallbackReason.SYMBOLIC_REPLAY_DISABLED, f"view chain {names}")
    unreplayable = [reason for name in names if (reason := unreplayable_reason(name))]
    if unreplayable:
        return UnplannableView(FallbackReason.UNREADABLE_VIEW_META, f"view chain {names}: {unreplayable[0]}")
    results: list[Tensor] | None = None
    # [stack: traced-base-steps]
    try:
        results = replay_on_traced_base(view_metas, base)
    except Exception as e:  # noqa: BLE001 - any failure means: the chain cannot be planned
        return UnplannableView(
            FallbackReason.REPLAY_ERROR,
            f"view chain {names} on the traced base: {type(e).__name__}: {e}",
        )
    # [/stack]

    renderer = ArgumentRenderer()
    body: list[str] = []
    pending: list[str] = []  # ViewMetas of the segment being built, not yet applied
    segments: list[str] = []  # ViewMeta lists, built once per symbol values (_metas)
    # [stack: multi-output-views]
    # Group key of the current multi-output prefix: see Note [Multi-output views].
    key_parts: list[str] = ["id(base)"]
    # [/stack]
    constants: dict[str, str] = {}
    replayed: list[str] = []  # names of the steps kept (Note [Identity slices])
    # [stack: no-grad-views]
    no_grad_statements = 0  # leading statements of body that run under no_grad
    # [/stack]
    try:
        for i, vm in enumerate(view_metas):
            # [stack: no-grad-views]
            if i == no_grad_steps and i:
                # Note [Views taken under no_grad]: the steps before i ran under no_grad.
                if pending:
                    body.append(f"t = _apply(t, _metas[{len(segments)}])")
                    segments.append(f"[{', '.join(pending)}]")
                    pending = []
                no_grad_statements = len(body)
            # [/stack]
            args = view_meta_arguments(vm, None if results is None else results[i])
            # [stack: traced-base-steps]
            if i + 1 < len(view_metas) and results is not None and is_identity_slice(
                names[i], args, results[i - 1] if i else base, results[i]
            ):
                continue
            # [/stack]
            replayed.append(names[i])
            # [stack: multi-output-views]
            first_expr = len(renderer.symbolic_exprs)
            # [/stack]
            # The first element is has_symbolic_inputs: the rebuilt ViewMeta is concrete.
            rendered = renderer.render_args((False,) + tuple(args[1:]))
            # [stack: multi-output-views]
            step_exprs = renderer.symbolic_exprs[first_expr:]
            if is_multi_output_view_meta(vm):
                if pending:
                    body.append(f"t = _apply(t, _metas[{len(segments)}])")
                    segments.append(f"[{', '.join(pending)}]")
                    pending = []
                op_args = renderer.render(tuple(args[OP_ARGS_START:]))
                constants[f"_op{i}"] = MULTI_OUTPUT_VIEW_OPS[names[i]]
                key_parts += [repr(f"{names[i]}{op_args}"), *step_exprs]
                out_index = args[OUT_INDEX_POSITION]
                claim = out_index if i == len(view_metas) - 1 else None
                body.append(
                    render_pieces_call(key_parts, f"lambda t=t: _op{i}(t, *{op_args})", claim)
                    + f"[{out_index}]"
                )
                key_parts.append(repr(out_index))
                continue
            key_parts += [repr(f"{names[i]}{rendered}"), *step_exprs]
            # [/stack]
            constants[f"_vm{i}"] = f"_C._functionalization.{names[i]}"
            pending.append(f"_vm{i}({rendered})")
    except UnreadableViewMetaArguments as e:
        return UnplannableView(FallbackReason.UNREADABLE_VIEW_META, f"view chain {names}: {e}")
    except UnrenderableArgument as e:
        return UnplannableView(FallbackReason.UNSUPPORTED_VIEW_STEP, f"view chain {names}: {e}")
    if pending:
        body.append(f"t = _apply(t, _metas[{len(segments)}])")
        segments.append(f"[{', '.join(pending)}]")
    return assemble_plan(
        tuple(replayed),
        body,
        renderer,
        constants,
        base=base,
        target=target,
        inputs=inputs,
        # [stack: symbol-outputs]
        outputs=outputs,
        symbol_outputs=symbol_outputs,
        # [/stack]
        # [stack: mutated-input-aliases]
        target_is_view_of_base=target_is_view_of_base,
        # [/stack]
        memoized=segments,
        # [stack: no-grad-views]
        no_grad_statements=no_grad_statements,
        # [/stack]
    )


def assemble_plan(
    names: tuple[str, ...],
    body: list[str],
    renderer: ArgumentRenderer,
    constants: dict[str, str],
    *,
    base: Tensor | None,
    target: Tensor,
    inputs: Sequence[object],
    # [stack: symbol-outputs]
    outputs: Sequence[object] = (),
    symbol_outputs: SymbolOutputs | None = None,
    # [/stack]
    # [stack: mutated-input-aliases]
    target_is_view_of_base: bool = True,
    # [/stack]
    memoized: Sequence[str] = (),
    # [stack: no-grad-views]
    no_grad_statements: int = 0,
    # [/stack]
) -> ViewReplayPlan | UnplannableView:
    """Bind the rendered steps' symbols and wrap them into
    ``replay(base, target, inputs=None, groups=None, outputs=None)``.

    ``body`` is a list of statements that turn ``t`` (initially the base) into
    the view; it may read the free symbols of ``renderer`` and ``_metas[k]``,
    the value of the expression ``memoized[k]``. Those expressions depend only
    on the symbols, so they are evaluated once per distinct symbol values
    (rebuilding ViewMetas costs more than the view ops they replay).
    """
    locators, unbound = locate_symbols(
        renderer.symbols,
        base=base,
        target=target,
        inputs=inputs,
        # [stack: symbol-outputs]
        outputs=outputs,
        arguments=[original for _, original in renderer.rendered],
        symbol_outputs=symbol_outputs,
        # [/stack]
        # [stack: mutated-input-aliases]
        target_is_view_of_base=target_is_view_of_base,
        # [/stack]
    )
    if unbound:
        return UnplannableView(
            FallbackReason.UNBOUND_SYMBOL,
            f"view chain {names}: no runtime source for {sorted(map(str, unbound))}",
        )
    ordered = sorted(locators.items(), key=lambda kv: str(kv[0]))
    lines = ["def replay(base, target, inputs=None, groups=None, outputs=None):"]
    lines += [f"    {sym} = {loc.python_expr()}" for sym, loc in ordered]
    if memoized:
        key = "".join(f"{sym}, " for sym, _ in ordered)
        lines.append(f"    _metas = _memo.get(({key}))")
        lines.append("    if _metas is None:")
        lines.append(f"        _metas = _remember(_memo, ({key}), ({', '.join(memoized)},))")
    lines.append("    t = base")
    # [stack: no-grad-views]
    if no_grad_statements:
        # Note [Views taken under no_grad]
        lines.append("    with _no_grad():")
        lines += [f"        {statement}" for statement in body[:no_grad_statements]]
        body = body[no_grad_statements:]
    # [/stack]
    lines += [f"    {statement}" for statement in body]
    lines.append("    return t")
    problem = check_against_hints([sym for sym, _ in ordered], renderer)
    if problem is not None:
        return UnplannableView(FallbackReason.PLAN_CHECK_FAILED, f"view chain {names}: {problem}")
    return ViewReplayPlan(
        view_metas=names,
        source="\n".join(lines) + "\n",
        constants={**constants, **renderer.global_names},
        input_indices=_indices_read(ordered, RuntimeSource.INPUT),
        # [stack: symbol-outputs]
        output_indices=_indices_read(ordered, RuntimeSource.OUTPUT),
        # [/stack]
    )


def _indices_read(locators: Sequence[tuple[sympy.Symbol, SymbolLocator]], source: RuntimeSource) -> tuple[int, ...]:
    return tuple(sorted({loc.index for _, loc in locators if loc.source is source}))  # type: ignore[type-var]


def needs_replay_plan(view_meta_sequence: Any) -> bool:
    """Whether a sequence must be replayed through a plan rather than as recorded."""
    for vm in view_meta_sequence.sequence:
        if vm.has_symbolic_inputs:
            return True  # its ViewMetas only fit the traced sizes
        # [stack: multi-output-views]
        if is_multi_output_view_meta(vm):
            return True  # one call per group (Note [Multi-output views])
        # [/stack]
    return False


def _unreadable_view_metas(view_meta_sequence: Any) -> list[str]:
    return [
        type(vm).__name__ for vm in view_meta_sequence.sequence if not arguments_readable(vm)
    ]


# [stack: traced-base-steps]
def _may_hold_identity_slice(view_meta_sequence: Any) -> bool:
    return any(type(vm).__name__ == _SLICE for vm in view_meta_sequence.sequence[:-1])


# [/stack]
# [stack: autograd-base-in-chain]
# Note [Outputs whose autograd base is inside the chain]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A ViewMeta sequence starts at the functional base of the output's storage; an
# output aliasing an intermediate is regenerated off its autograd ``_base``. The
# two differ where the chain holds an op that autograd does not track as a view:
# ``_unsafe_view`` (``x @ w`` with a 3-D ``x``, a copying ``reshape``), whose
# result is an autograd root of its own (UnsafeViewBackward0, its own version
# counter). Replaying the whole sequence off that base replays the
# ``_unsafe_view`` once more: the output becomes a view of a fresh
# ``_unsafe_view`` tensor, not of the base. Eager's ``y[:, -1]._base`` is ``y``;
# regenerated, ``y.mul_(3)`` no longer bumps the output's version, and backward
# through the output silently drops the factor 3 (stock torch, static shapes:
# ``y = (x * 2).transpose(1, 2).reshape(b, t, h * d); return y, y[:, -1]``; and
# ``y = x @ w; return y[0], y[1].t()`` gets two bases where eager has one).
# The base's own sequence is a prefix of the output's (the output was viewed off
# it), so the output is planned from the rest of the chain, static or symbolic.
# A base whose metadata was mutated in place has another sequence than the one
# the output was viewed off: nothing is dropped there, and the metadata check
# decides.
def autograd_base_prefix(view_metas: Sequence[Any], base: Tensor | None) -> int:
    """How many leading ViewMetas of ``view_metas`` made ``base``, the output's autograd
    base, off the storage's functional base (0: none, or not a proper prefix)."""
    if not isinstance(base, FunctionalTensor) or not torch._is_functional_tensor(base.elem):
        return 0
    if torch._functionalize_has_metadata_mutation(base.elem):  # type: ignore[attr-defined]
        return 0
    base_metas = _functionalization.get_view_meta_sequence(base.elem)
    if not 0 < len(base_metas) < len(view_metas):
        return 0
    if any(type(a) is not type(b) for a, b in zip(base_metas, view_metas)):
        return 0
    return len(base_metas)


# [/stack]
# [stack: no-grad-views]
class MixedGradModeViewError(RuntimeError):
    """An output viewed with grad mode on off a view taken under no_grad, whose chain cannot be
    planned (Note [Views taken under no_grad]): raised at compile time."""


# [/stack]
# What the output-alias metadata holds for view replay (OutputAliasInfo.replay_plan).
ReplayPlan = ViewReplayPlan | UnplannableView | None


def plan_replay(
    view_meta_sequence: Any,
    out: Tensor,
    *,
    base: Tensor | None,
    inputs: Sequence[object],
    # [stack: symbol-outputs]
    # The graph's user outputs, whose values the plan may read too; a symbol that
    # no value carries is requested from symbol_outputs (Note [Symbol outputs]).
    outputs: Sequence[object] = (),
    symbol_outputs: SymbolOutputs | None = None,
    # [/stack]
    # [stack: mutated-input-aliases]
    # False for an alias of an input whose data the graph mutates (Note [Aliases
    # of inputs mutated by the graph] in replay.py).
    target_is_view_of_base: bool = True,
    # [/stack]
) -> ReplayPlan:
    """Compile-time hook: the replay plan of an output's ViewMetaSequence, if it needs one.

    The result is the output's ``OutputAliasInfo.replay_plan``. ``base`` is the
    (functional) tensor the output will be regenerated from at runtime;
    ``inputs`` are the graph's flat (functional) inputs, whose values the plan
    may read. Sequences that need a plan (:func:`needs_replay_plan`) get one;
    the others get None: the runtime replays their ViewMetas as they are (and
    output_alias_info_runtime_safe keeps unreadable ones out of the cache).
    """
    sequence = view_meta_sequence.sequence
    sources = {
        "inputs": inputs,
        # [stack: symbol-outputs]
        "outputs": outputs,
        "symbol_outputs": symbol_outputs,
        # [/stack]
        # [stack: mutated-input-aliases]
        "target_is_view_of_base": target_is_view_of_base,
        # [/stack]
    }
    # [stack: autograd-base-in-chain]
    prefix = autograd_base_prefix(sequence, base)
    # [/stack]
    # [stack: no-grad-views]
    no_grad_steps = mixed_no_grad_steps(out, len(sequence) - prefix)
    if no_grad_steps:
        plan = plan_view_replay(sequence[prefix:], base=base, target=out, no_grad_steps=no_grad_steps, **sources)
        if isinstance(plan, UnplannableView):
            raise MixedGradModeViewError(
                f"view_replay cannot regenerate an output viewed with grad mode on off a view taken "
                f"under torch.no_grad() (Note [Views taken under no_grad]): its chain cannot be "
                f"planned, and replaying it in one grad mode would differ from eager "
                f"({plan.reason.name}: {plan.detail})"
            )
        return plan
    # [/stack]
    # [stack: autograd-base-in-chain]
    if prefix:
        # Note [Outputs whose autograd base is inside the chain]: the ViewMetas
        # that made the base are not replayed.
        return plan_view_replay(sequence[prefix:], base=base, target=out, **sources)
    # [/stack]
    if needs_replay_plan(view_meta_sequence):
        return plan_view_replay(sequence, base=base, target=out, **sources)
    # [stack: traced-base-steps]
    # A static sequence gets a plan too if it holds a ViewMeta whose arguments
    # cannot be pickled safely (Note [Reading ViewMeta arguments]) or an identity
    # slice to drop (Note [Identity slices]), and the plan could be made; a
    # sequence holding a ViewMeta whose forward() must not run keeps the
    # UnplannableView (the output falls back).
    if not (_unreadable_view_metas(view_meta_sequence) or _may_hold_identity_slice(view_meta_sequence)):
        return None
    plan = plan_view_replay(sequence, base=base, target=out, **sources)
    if isinstance(plan, ViewReplayPlan):
        if len(plan.view_metas) == len(sequence) and not _unreadable_view_metas(view_meta_sequence):
            return None  # nothing to drop, nothing to hide from the cache
        return plan
    if any(unreplayable_reason(type(vm).__name__) for vm in sequence):
        return plan
    # [/stack]
    return None  # replayed as recorded here; kept out of the cache


def inputs_read_by_replay(replay_plan: ReplayPlan) -> tuple[int, ...]:
    """Runtime-wrapper hook: indices of graph inputs that an output's replay plan reads."""
    return replay_plan.input_indices if isinstance(replay_plan, ViewReplayPlan) else ()


# [stack: synthetic-base-indices]
def remap_plan_inputs(replay_plan: ReplayPlan, new_index: Callable[[int], int | None]) -> ReplayPlan:
    """Hook for AOTAutograd's rewrites of the graph's inputs (deduplicated arguments,
    synthetic bases): ``replay_plan``, reading input ``new_index(i)`` where it read input ``i``.

    ``new_index`` gives None for an input that is no longer a runtime input (merged into a
    synthetic base): such a plan cannot read its symbols, and the output falls back.
    """
    if not isinstance(replay_plan, ViewReplayPlan) or not replay_plan.input_indices:
        return replay_plan
    mapping = {i: new_index(i) for i in replay_plan.input_indices}
    if any(j is None for j in mapping.values()):
        return UnplannableView(
            FallbackReason.UNBOUND_SYMBOL,
            f"view chain {replay_plan.view_metas}: its symbols are read off graph inputs "
            f"{sorted(i for i, j in mapping.items() if j is None)}, merged into a synthetic base",
        )
    if all(i == j for i, j in mapping.items()):
        return replay_plan
    return dataclasses.replace(
        replay_plan,
        # The plan's source reads inputs only as SymbolLocator.python_expr renders them.
        source=re.sub(
            r"\binputs\[(\d+)\]", lambda m: f"inputs[{mapping[int(m.group(1))]}]", replay_plan.source
        ),
        input_indices=tuple(sorted(set(mapping.values()))),  # type: ignore[type-var]
        _fn=None,
    )


# [/stack]
def output_alias_info_runtime_safe(out_info: Any) -> Any:
    """Cache hook: ``out_info`` (an OutputAliasInfo), or a copy of it that pickles safely.

    A sequence with symbolic ViewMetas holds SymInts, which do not pickle, and
    one with a ViewMeta whose arguments are pickled through a dangling
    reference would store garbage (Note [Reading ViewMeta arguments]); a
    sequence replayed through a plan needs nothing but the plan. The copy
    drops the sequence and keeps the plan, or the reason it has none; other
    outputs pickle as they are.
    """
    sequence, plan = out_info.view_meta_sequence, out_info.replay_plan
    if sequence is None:
        return out_info
    unreadable = _unreadable_view_metas(sequence)
    if plan is None and not unreadable and not any(vm.has_symbolic_inputs for vm in sequence.sequence):
        return out_info
    if plan is None and unreadable:
        plan = UnplannableView(
            FallbackReason.UNREADABLE_VIEW_META,
            f"{sequence!r} was replayed as recorded, but cannot be cached: "
            f"{unreadable_reason(unreadable[0])}",
        )
    elif plan is None:
        plan = UnplannableView(FallbackReason.NO_VIEW_META, f"{sequence!r} has symbolic arguments but no plan")
    return dataclasses.replace(out_info, view_meta_sequence=None, replay_plan=plan)
