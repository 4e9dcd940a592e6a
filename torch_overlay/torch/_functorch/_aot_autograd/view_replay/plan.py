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

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sympy

import torch
from torch import Tensor
from torch._C import _functionalization
from torch.utils._sympy.printers import PythonPrinter

from .fallback import FallbackReason
from .multi_output import (
    is_multi_output_view_meta,
    MULTI_OUTPUT_VIEW_OPS,
    MultiOutputGroups,
    OP_ARGS_START,
    OUT_INDEX_POSITION,
    pieces_of,
)
from .symbols import locate_symbols, RuntimeSource


@dataclasses.dataclass(frozen=True)
class UnplannableView:
    """A view chain that cannot be replayed; the runtime falls back with this reason."""

    reason: FallbackReason
    detail: str


class ArgumentRenderer:
    """Renders view-op argument tuples as Python source; collects free symbols and globals."""

    def __init__(self) -> None:
        self.printer = PythonPrinter()
        self.symbols: set[sympy.Symbol] = set()
        # Every rendered symbolic expression, in rendering order.
        self.symbolic_exprs: list[str] = []
        self.global_names: dict[str, str] = {}  # python name -> path under ``torch``
        self.shape_env: Any = None
        # (rendered source, original value) of each rendered argument tuple, for
        # the compile-time check against the symbols' hints.
        self.rendered: list[tuple[str, object]] = []

    def render_args(self, values: tuple[object, ...]) -> str:
        """Render one step's argument tuple and remember it for the hint check."""
        rendered = self.render(values)
        self.rendered.append((rendered, values))
        return rendered

    def render(self, value: object) -> str:
        if isinstance(value, torch.SymInt):
            expr = value.node.expr
            self.shape_env = value.node.shape_env
            self.symbols |= expr.free_symbols
            rendered = f"({self.printer.doprint(expr)})"
            self.symbolic_exprs.append(rendered)
            return rendered
        if isinstance(value, bool) or value is None:
            return repr(value)
        if isinstance(value, int):
            return repr(value)
        if isinstance(value, _functionalization.InverseReturnMode):
            name = f"_irm_{value.name}"
            self.global_names[name] = f"_C._functionalization.InverseReturnMode.{value.name}"
            return name
        if isinstance(value, torch.dtype):
            name = f"_dtype_{str(value).removeprefix('torch.')}"
            self.global_names[name] = str(value).removeprefix("torch.")
            return name
        if isinstance(value, (list, tuple)):
            items = ", ".join(self.render(v) for v in value)
            if isinstance(value, list):
                return f"[{items}]"
            return f"({items},)" if items else "()"
        raise UnrenderableArgument(f"unsupported view argument {value!r} ({type(value).__name__})")


class UnrenderableArgument(Exception):
    pass


def _resolve_constant(path: str) -> object:
    """The object at ``path`` under the ``torch`` module."""
    obj: Any = torch
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


# replay(base, target, inputs, groups) -> the regenerated view
ReplayFn = Callable[
    [Tensor, Tensor, Mapping[int, object] | None, MultiOutputGroups | None],
    Tensor,
]


@dataclasses.dataclass
class ViewReplayPlan:
    """A view chain whose symbolic arguments are resolved from runtime values.

    Only ``source`` and ``constants`` are pickled; the replay function is
    compiled from them on first use in each process.
    """

    # Names of the ViewMeta classes, in order (for logs and reprs).
    view_metas: tuple[str, ...]
    # Source of ``def replay(base, target, inputs, groups)``.
    source: str
    # Python name in ``source`` -> path of the object under ``torch``.
    constants: dict[str, str]
    # Indices of the graph inputs that the replay reads; the runtime wrapper
    # keeps them alive for the epilogue (see inputs_read_by_replay).
    input_indices: tuple[int, ...]
    _fn: ReplayFn | None = dataclasses.field(default=None, repr=False, compare=False)

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["_fn"] = None
        return state

    @property
    def replay(self) -> ReplayFn:
        if self._fn is None:
            scope: dict[str, object] = {
                name: _resolve_constant(qualname) for name, qualname in self.constants.items()
            }
            scope["_apply"] = _functionalization.apply_view_meta_sequence
            scope["_pieces"] = pieces_of
            scope["_memo"] = {}
            scope["_remember"] = _remember
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


def _hint(value: object) -> object:
    if isinstance(value, torch.SymInt):
        return value.node.hint
    if isinstance(value, (list, tuple)):
        return type(value)(_hint(v) for v in value)
    return value


def render_pieces_call(key_parts: Sequence[str], compute: str, claim: int | None) -> str:
    """Plan source: ``t`` = the pieces of this step's multi-output call (``pieces_of``).

    ``claim``: the index of the piece when the piece itself is the output (see
    Note [Multi-output views])."""
    return f"t = _pieces(groups, ({', '.join(key_parts)},), {compute}, {claim})"


def plan_view_replay(
    view_metas: Sequence[Any],
    *,
    base: Tensor | None,
    target: Tensor,
    inputs: Sequence[object],
) -> ViewReplayPlan | UnplannableView:
    """Plan the replay of a ViewMeta sequence that has symbolic arguments or a multi-output view."""
    from . import config

    names = tuple(type(vm).__name__ for vm in view_metas)
    if not config.replay_symbolic_views and any(vm.has_symbolic_inputs for vm in view_metas):
        return UnplannableView(FallbackReason.SYMBOLIC_REPLAY_DISABLED, f"view chain {names}")

    renderer = ArgumentRenderer()
    body: list[str] = []
    pending: list[str] = []  # ViewMetas to apply before the next multi-output op
    segments: list[str] = []  # ViewMeta lists, built once per symbol values (_metas)
    # Group key of the current multi-output prefix: see Note [Multi-output views].
    key_parts: list[str] = ["id(base)"]
    constants: dict[str, str] = {}
    try:
        for i, vm in enumerate(view_metas):
            args = vm.as_tuple()
            first_expr = len(renderer.symbolic_exprs)
            # The first element is has_symbolic_inputs: the rebuilt ViewMeta is concrete.
            rendered = renderer.render_args((False,) + tuple(args[1:]))
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
            else:
                constants[f"_vm{i}"] = f"_C._functionalization.{names[i]}"
                pending.append(f"_vm{i}({rendered})")
                key_parts += [repr(f"{names[i]}{rendered}"), *step_exprs]
    except UnrenderableArgument as e:
        return UnplannableView(FallbackReason.UNBOUND_SYMBOL, f"view chain {names}: {e}")
    if pending:
        body.append(f"t = _apply(t, _metas[{len(segments)}])")
        segments.append(f"[{', '.join(pending)}]")
    return assemble_plan(
        names, body, renderer, constants, base=base, target=target, inputs=inputs, memoized=segments
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
    memoized: Sequence[str] = (),
) -> ViewReplayPlan | UnplannableView:
    """Bind the rendered steps' symbols and wrap them into ``replay(base, target, inputs, groups)``.

    ``body`` is a list of statements that turn ``t`` (initially the base) into
    the view; it may read the free symbols of ``renderer`` and ``_metas[k]``,
    the value of the expression ``memoized[k]``. Those expressions depend only
    on the symbols, so they are evaluated once per distinct symbol values
    (rebuilding ViewMetas costs more than the view ops they replay).
    """
    locators, unbound = locate_symbols(renderer.symbols, base=base, target=target, inputs=inputs)
    if unbound:
        return UnplannableView(
            FallbackReason.UNBOUND_SYMBOL,
            f"view chain {names}: no runtime source for {sorted(map(str, unbound))}",
        )
    ordered = sorted(locators.items(), key=lambda kv: str(kv[0]))
    lines = ["def replay(base, target, inputs, groups):"]
    lines += [f"    {sym} = {loc.python_expr()}" for sym, loc in ordered]
    if memoized:
        key = "".join(f"{sym}, " for sym, _ in ordered)
        lines.append(f"    _metas = _memo.get(({key}))")
        lines.append("    if _metas is None:")
        lines.append(f"        _metas = _remember(_memo, ({key}), ({', '.join(memoized)},))")
    lines.append("    t = base")
    lines += [f"    {statement}" for statement in body]
    lines.append("    return t")
    problem = _check_against_hints([sym for sym, _ in ordered], renderer)
    if problem is not None:
        return UnplannableView(FallbackReason.UNBOUND_SYMBOL, f"view chain {names}: {problem}")
    return ViewReplayPlan(
        view_metas=names,
        source="\n".join(lines) + "\n",
        constants={**constants, **renderer.global_names},
        input_indices=tuple(
            sorted({loc.input_index for _, loc in ordered if loc.source is RuntimeSource.INPUT})  # type: ignore[type-var]
        ),
    )


def _check_against_hints(symbols: list[sympy.Symbol], renderer: ArgumentRenderer) -> str | None:
    """Evaluate the rendered arguments on the symbols' hints; they must equal the original hints.

    Unbacked symbols have no hint; their expressions are checked at runtime by
    the metadata verification instead.
    """
    shape_env = renderer.shape_env
    if shape_env is None:
        return None
    scope: dict[str, object] = {
        name: _resolve_constant(path) for name, path in renderer.global_names.items()
    }
    for sym in symbols:
        if sym not in shape_env.backed_var_to_val:
            return None
        scope[str(sym)] = int(shape_env.backed_var_to_val[sym])
    for rendered, original in renderer.rendered:
        try:
            value = eval(rendered, scope)  # noqa: S307 - source rendered by us above
        except Exception as e:  # noqa: BLE001
            return f"rendered arguments {rendered} do not evaluate: {e}"
        expected = _hint(original)
        if _normalize(value) != _normalize(expected):
            return f"rendered arguments {rendered} evaluate to {value}, expected {expected}"
    return None


def _normalize(value: object) -> object:
    if isinstance(value, (list, tuple)):
        return tuple(_normalize(v) for v in value)
    return value


def attach_replay_plan(
    view_meta_sequence: Any,
    out: Tensor,
    *,
    base: Tensor | None,
    inputs: Sequence[object],
) -> None:
    """Compile-time hook: give a ViewMetaSequence its replay plan, if it needs one.

    ``base`` is the (functional) tensor the output will be regenerated from at
    runtime; ``inputs`` are the graph's flat (functional) inputs. Sequences
    with symbolic arguments or a multi-output view get a plan; the others get
    ``replay_plan = None``: the runtime replays their ViewMetas as they are.
    """
    sequence = view_meta_sequence.sequence
    if any(vm.has_symbolic_inputs or is_multi_output_view_meta(vm) for vm in sequence):
        view_meta_sequence.replay_plan = plan_view_replay(
            sequence, base=base, target=out, inputs=inputs
        )
    else:
        view_meta_sequence.replay_plan = None


def inputs_read_by_replay(view_meta_sequence: Any) -> tuple[int, ...]:
    """Runtime-wrapper hook: indices of graph inputs that an output's replay plan reads."""
    plan = getattr(view_meta_sequence, "replay_plan", None)
    return plan.input_indices if isinstance(plan, ViewReplayPlan) else ()


def make_view_meta_sequence_runtime_safe(view_meta_sequence: Any) -> Any:
    """Cache hook: a picklable copy of a symbolic ViewMetaSequence.

    The symbolic ViewMetas and the SymInt metadata key hold SymInts, which do
    not pickle; the replay plan replaces them at runtime.
    """
    safe = object.__new__(type(view_meta_sequence))
    safe.sequence = []
    safe.metadata = None
    safe.replay_plan = getattr(
        view_meta_sequence,
        "replay_plan",
        UnplannableView(FallbackReason.NO_VIEW_META, "symbolic view chain was not planned"),
    )
    return safe
