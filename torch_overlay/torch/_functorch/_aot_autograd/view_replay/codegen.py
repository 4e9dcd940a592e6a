"""
Compiling replay plans into Python functions.

Note [Compiling replay plans]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A :class:`~spec.ReplayPlan` is data: steps with their arguments (literals,
constants under ``torch``, and symbolic expressions as Python source over the
plan's symbols) and the locators of those symbols. :func:`compiled_plan` turns
it into one function ``replay(base, target, call)`` that reads each symbol off
the runtime values (the base, the graph's output for the alias, the call's
inputs and outputs), evaluates the arguments with plain integer arithmetic and
replays the steps on the base. Consecutive ViewMeta steps form one segment,
applied with one ``apply_view_meta_sequence``; the segments' ViewMetas are
built once per distinct symbol values and remembered (rebuilding ViewMetas
costs more than the view ops they replay).
A multi-output step calls its op once per group and runtime call
(pieces.pieces_of, Note [Multi-output views]); so does a ``.data`` step (Note
[Views through .data] in data_views.py).
The plan's leading no_grad steps run under ``torch.no_grad()`` (Note [Views
taken under no_grad]).

The function is compiled once per plan and process (a cache keyed by the
plan), when the runtime wrapper is built: at compile time, and when a cached
graph is loaded. No sympy and no planning run at runtime, and the plan itself
stays data (nothing compiled is stored in it, so nothing needs stripping to
pickle it).

Layering: runtime. Imports the data (spec) and the runtime modules (call,
pieces); never a planning module.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch._C import _functionalization

from .call import ViewFn
from .pieces import pieces_of
from .spec import (
    Arg,
    Const,
    Expr,
    MetadataField,
    OpStep,
    ReplayPlan,
    resolve_path,
    RuntimeSource,
    Seq,
    Step,
    SymbolLocator,
    DataStep,
    ViewMetaStep,
)


# Distinct symbol values whose ViewMetas a compiled plan keeps.
MEMO_SIZE = 64


class _Globals:
    """The globals a plan's source names: objects under ``torch``, by path."""

    def __init__(self) -> None:
        self.paths: dict[str, str] = {}

    def name(self, path: str) -> str:
        for name, known in self.paths.items():
            if known == path:
                return name
        name = f"_c{len(self.paths)}"
        self.paths[name] = path
        return name


def arg_source(arg: Arg, names: Callable[[str], str]) -> str:
    """The Python source of an argument; ``names`` gives the global name of a constant's path."""
    if isinstance(arg, Expr):
        return f"({arg.source})"
    if isinstance(arg, Const):
        return names(arg.path)
    if isinstance(arg, Seq):
        items = ", ".join(arg_source(a, names) for a in arg.items)
        if arg.is_list:
            return f"[{items}]"
        return f"({items},)" if items else "()"
    return repr(arg)


def expr_sources(arg: Arg) -> list[str]:
    """The symbolic expressions of an argument, in order."""
    if isinstance(arg, Expr):
        return [f"({arg.source})"]
    if isinstance(arg, Seq):
        return [e for a in arg.items for e in expr_sources(a)]
    return []


def locator_source(locator: SymbolLocator) -> str:
    """The expression, over ``replay(base, target, call)``'s arguments, that reads a symbol."""
    holder = {
        RuntimeSource.BASE: "base",
        RuntimeSource.TARGET: "target",
        RuntimeSource.INPUT: f"call.inputs[{locator.index}]",
        # An aliased output leaves the autograd.Function wrapped in a TensorAlias.
        RuntimeSource.OUTPUT: f"_unalias(call.outputs[{locator.index}])",
    }[locator.source]
    if locator.field is MetadataField.VALUE:
        value = f"call.outputs[{locator.index}]" if locator.source is RuntimeSource.OUTPUT else holder
    elif locator.field is MetadataField.STORAGE_OFFSET:
        value = f"{holder}.storage_offset()"
    else:
        value = f"{holder}.{locator.field.value}({locator.dim})"
    if (locator.scale, locator.shift) == (1, 0):
        return value
    return f"(({value} - ({locator.shift})) // {locator.scale})"


class _Body:
    """The statements that turn ``t`` (the base) into the view, built step by step."""

    def __init__(self, names: _Globals) -> None:
        self.names = names
        self.statements: list[str] = []
        self.segments: list[str] = []  # ViewMeta lists, built once per symbol values
        self.pending: list[str] = []  # ViewMetas of the segment being built
        self.key = ["id(base)"]  # group key of the steps so far (Note [Multi-output views])

    def flush(self) -> None:
        if self.pending:
            self.statements.append(f"t = _apply(t, _metas[{len(self.segments)}])")
            self.segments.append(f"[{', '.join(self.pending)}]")
            self.pending = []

    def add(self, step: Step) -> None:
        if isinstance(step, DataStep):
            self.flush()
            # Note [Views through .data]: one ``.data`` tensor per group and runtime call.
            self.key.append(repr(f"data{step.group}"))
            self.statements.append(f"t = _pieces(call.groups, ({', '.join(self.key)},), lambda t=t: (_data(t),), None)[0]")
            return
        args = arg_source(step.args, self.names.name)
        if isinstance(step, ViewMetaStep):
            self.pending.append(f"{self.names.name('_C._functionalization.' + step.view_meta)}({args})")
            self.key += [repr(step.view_meta + args), *expr_sources(step.args)]
            return
        self.flush()
        op = self.names.name(f"ops.{step.op}")
        self.key += [repr(step.op + args), *expr_sources(step.args)]
        if isinstance(step, OpStep):
            self.statements.append(f"t = {op}(t, *{args})")
            return
        claim = step.index if step.claims else None
        self.statements.append(
            f"t = _pieces(call.groups, ({', '.join(self.key)},), lambda t=t: {op}(t, *{args}), {claim})"
            f"[{step.index}]"
        )
        self.key.append(repr(step.index))


def plan_source(plan: ReplayPlan) -> tuple[str, dict[str, str]]:
    """The source of ``replay(base, target, call)`` for ``plan``, and the paths (under
    ``torch``) of the globals it names."""
    names = _Globals()
    body = _Body(names)
    no_grad_statements = 0
    for i, step in enumerate(plan.steps):
        if i == plan.no_grad_steps and i:
            body.flush()
            no_grad_statements = len(body.statements)
        body.add(step)
    body.flush()
    lines = ["def replay(base, target, call):"]
    lines += [f"    {b.name} = {locator_source(b.locator)}" for b in plan.symbols]
    if body.segments:
        key = "".join(f"{b.name}, " for b in plan.symbols)
        lines.append(f"    _metas = _memo.get(({key}))")
        lines.append("    if _metas is None:")
        lines.append(f"        _metas = _remember(_memo, ({key}), ({', '.join(body.segments)},))")
    lines.append("    t = base")
    if no_grad_statements:
        # Note [Views taken under no_grad]
        lines.append("    with _no_grad():")
        lines += [f"        {s}" for s in body.statements[:no_grad_statements]]
    lines += [f"    {s}" for s in body.statements[no_grad_statements:]]
    lines.append("    return t")
    return "\n".join(lines) + "\n", names.paths


def _remember(memo: dict[tuple[int, ...], Any], key: tuple[int, ...], value: Any) -> Any:
    if len(memo) >= MEMO_SIZE:
        memo.clear()
    memo[key] = value
    return value


@functools.cache
def compiled_plan(plan: ReplayPlan) -> ViewFn:
    """``replay(base, target, call)`` for ``plan``, compiled once per plan and process."""
    # Not imported at module level: schemas imports this package.
    from ..schemas import TensorAlias

    source, paths = plan_source(plan)
    scope: dict[str, object] = {name: resolve_path(path) for name, path in paths.items()}
    scope.update(
        _apply=_functionalization.apply_view_meta_sequence,
        _memo={},
        _remember=_remember,
        _pieces=pieces_of,
        _no_grad=torch.no_grad,
        _data=torch._C._autograd._get_data_attr,
        _unalias=lambda o: o.alias if type(o) is TensorAlias else o,
    )
    exec(compile(source, "<view_replay plan>", "exec"), scope)  # noqa: S102 - source made by plan_source
    return scope["replay"]  # type: ignore[return-value]
