"""
Rendering of view-op arguments as Python source, for view replay plans.

A replay plan (plan.py, Note [Symbolic view replay]) is the source of one
Python function. :class:`ArgumentRenderer` renders each step's argument tuple
into it: plain values as literals, SymInts as their sympy expressions printed
as integer arithmetic over the free symbols (which it collects, for
symbols.py to bind), enums and dtypes as names of module-level constants
(:func:`resolve_constant` finds them under ``torch`` when the plan is compiled).
:func:`check_against_hints` evaluates the rendered arguments on the symbols'
hints at compile time and compares them with the traced ones.
"""

from __future__ import annotations

from typing import Any

import sympy

import torch
from torch._C import _functionalization
from torch.utils._sympy.printers import PythonPrinter


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


def resolve_constant(path: str) -> object:
    """The object at ``path`` under the ``torch`` module."""
    obj: Any = torch
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _hint(value: object) -> object:
    if isinstance(value, torch.SymInt):
        return value.node.hint
    if isinstance(value, (list, tuple)):
        return type(value)(_hint(v) for v in value)
    return value


def check_against_hints(symbols: list[sympy.Symbol], renderer: ArgumentRenderer) -> str | None:
    """Evaluate the rendered arguments on the symbols' hints; they must equal the original hints.

    Unbacked symbols have no hint; their expressions are checked at runtime by
    the metadata verification instead.
    """
    shape_env = renderer.shape_env
    if shape_env is None:
        return None
    scope: dict[str, object] = {
        name: resolve_constant(path) for name, path in renderer.global_names.items()
    }
    for sym in symbols:
        if sym not in shape_env.backed_var_to_val:
            return None
        scope[str(sym)] = int(shape_env.backed_var_to_val[sym])
    for rendered, original in renderer.rendered:
        try:
            value = eval(rendered, scope)  # noqa: S307 - source rendered by ArgumentRenderer
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
