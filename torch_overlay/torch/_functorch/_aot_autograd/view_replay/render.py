"""
Rendering of view-op arguments as plan data.

A replay plan (spec.ReplayPlan) holds each step's arguments as data:
:class:`ArgumentRenderer` turns a traced argument tuple into a
:class:`~spec.Seq` of plain values, :class:`~spec.Const` paths (enums, dtypes)
and :class:`~spec.Expr` (a SymInt's sympy expression, printed as Python integer
arithmetic over its free symbols, which the renderer collects for symbols.py
to bind). :func:`check_against_hints` evaluates the rendered arguments on the
symbols' hints at compile time and compares them with the traced ones, so a
plan that would compute other arguments is refused before it is ever used.

Layering: planning (compile time, sympy).
"""

from __future__ import annotations

from typing import Any

import sympy

import torch
from torch._C import _functionalization
from torch.utils._sympy.printers import PythonPrinter

from .spec import Arg, Const, Expr, resolve_path, Seq


class UnrenderableArgument(Exception):
    pass


class ArgumentRenderer:
    """Renders view-op argument tuples as plan data; collects their free symbols."""

    def __init__(self) -> None:
        self.printer = PythonPrinter()
        self.symbols: set[sympy.Symbol] = set()
        self.shape_env: Any = None
        # (rendered, original) of each rendered argument tuple, for the hint check.
        self.rendered: list[tuple[Seq, tuple[object, ...]]] = []
        # SymInt expressions rendered as one symbol each (Note [Symbol outputs]).
        self.whole: dict[sympy.Expr, sympy.Symbol] = {}

    def render_args(self, values: tuple[object, ...]) -> Seq:
        """Render one step's argument tuple and remember it for the hint check."""
        rendered = self.render(values)
        assert isinstance(rendered, Seq)
        self.rendered.append((rendered, values))
        return rendered

    def render_again(self, whole: dict[sympy.Expr, sympy.Symbol]) -> list[Seq]:
        """Render every argument tuple again, each SymInt whose expression is a key of
        ``whole`` as that symbol; the new tuples, in order. The symbols are collected again."""
        originals = [original for _, original in self.rendered]
        self.symbols, self.rendered, self.whole = set(), [], whole
        return [self.render_args(original) for original in originals]

    def render(self, value: object) -> Arg:
        if isinstance(value, torch.SymInt):
            expr = self.whole.get(value.node.expr, value.node.expr)
            self.shape_env = value.node.shape_env
            self.symbols |= expr.free_symbols
            return Expr(self.printer.doprint(expr))
        if isinstance(value, bool) or value is None or isinstance(value, int):
            return value
        if isinstance(value, _functionalization.InverseReturnMode):
            return Const(f"_C._functionalization.InverseReturnMode.{value.name}")
        if isinstance(value, torch.dtype):
            return Const(str(value).removeprefix("torch."))
        if isinstance(value, (list, tuple)):
            return Seq(tuple(self.render(v) for v in value), is_list=isinstance(value, list))
        raise UnrenderableArgument(f"unsupported view argument {value!r} ({type(value).__name__})")


def evaluate(arg: Arg, symbols: dict[str, int]) -> object:
    """The value of a rendered argument for the given symbol values (lists and tuples as tuples)."""
    if isinstance(arg, Expr):
        return eval(arg.source, {}, dict(symbols))  # noqa: S307 - source printed by ArgumentRenderer
    if isinstance(arg, Const):
        return resolve_path(arg.path)
    if isinstance(arg, Seq):
        return tuple(evaluate(a, symbols) for a in arg.items)
    return arg


def _hint(value: object) -> object:
    if isinstance(value, torch.SymInt):
        return value.node.hint
    if isinstance(value, (list, tuple)):
        return tuple(_hint(v) for v in value)
    return value


def check_against_hints(renderer: ArgumentRenderer) -> str | None:
    """Evaluate the rendered arguments on the symbols' hints; they must equal the traced ones.

    Unbacked symbols have no hint; their expressions are checked at runtime by the metadata
    check instead. Returns the problem, if any.
    """
    shape_env = renderer.shape_env
    if shape_env is None:
        return None
    if any(sym not in shape_env.backed_var_to_val for sym in renderer.symbols):
        return None
    hints = {str(sym): int(shape_env.backed_var_to_val[sym]) for sym in renderer.symbols}
    for rendered, original in renderer.rendered:
        try:
            value = evaluate(rendered, hints)
        except Exception as e:  # noqa: BLE001
            return f"rendered arguments {rendered} do not evaluate: {e}"
        if value != _hint(original):
            return f"rendered arguments {rendered} evaluate to {value}, expected {_hint(original)}"
    return None


def symint_leaves(value: object) -> list[torch.SymInt]:
    """The SymInts in ``value``, a view argument (tuple) that may nest lists and tuples."""
    if isinstance(value, torch.SymInt):
        return [value]
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in symint_leaves(v)]
    return []
