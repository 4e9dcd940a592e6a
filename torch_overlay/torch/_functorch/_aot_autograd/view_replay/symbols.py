"""
Binding of the free symbols of a view chain to runtime values.

At compile time every free symbol that appears in the arguments of an aliased
output's view chain is given a :class:`SymbolLocator`: the Python expression
that reads its value at runtime off the tensors the regeneration already has in
hand (the aliased base, the graph's output, the graph's inputs). The locators
are rendered into the replay function's source once; nothing here runs per call.

See Note [Symbolic view replay] in ``plan.py``.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence

import sympy

import torch
from torch import Tensor


class RuntimeSource(enum.Enum):
    """A value available to the regeneration of one aliased output at runtime."""

    # The tensor the output is regenerated from (an input, or an intermediate
    # base returned by the graph: this covers unbacked symbols).
    BASE = "base"
    # The graph's own output for this alias (has the output's concrete sizes).
    TARGET = "target"
    # One of the graph's inputs (tensor metadata or a SymInt input's value).
    INPUT = "input"


class MetadataField(enum.Enum):
    SIZE = "size"
    STRIDE = "stride"
    STORAGE_OFFSET = "storage_offset"
    VALUE = "value"


@dataclasses.dataclass(frozen=True)
class SymbolLocator:
    """Where a free symbol's value is read at runtime.

    The value read is ``scale * symbol + shift``: the symbol is ``(value - shift) // scale``
    (a size of ``2*s0 + 1`` gives ``s0``). The metadata check of the replayed view catches a
    value that is no such multiple.
    """

    source: RuntimeSource
    field: MetadataField
    # Index into the graph's inputs, for RuntimeSource.INPUT.
    input_index: int | None = None
    # Dimension, for SIZE and STRIDE.
    dim: int | None = None
    scale: int = 1
    shift: int = 0

    def python_expr(self) -> str:
        """The expression, over ``base``, ``target`` and ``inputs``, that reads the symbol."""
        if self.source is RuntimeSource.INPUT:
            holder = f"inputs[{self.input_index}]"
        else:
            holder = self.source.value
        if self.field is MetadataField.VALUE:
            value = holder
        elif self.field is MetadataField.STORAGE_OFFSET:
            value = f"{holder}.storage_offset()"
        else:
            value = f"{holder}.{self.field.value}({self.dim})"
        if (self.scale, self.shift) == (1, 0):
            return value
        return f"(({value} - ({self.shift})) // {self.scale})"

    def describe(self) -> str:
        return self.python_expr()


def _affine_symbol(value: object) -> tuple[sympy.Symbol, int, int] | None:
    """(symbol, scale, shift) if ``value`` is a SymInt ``scale * symbol + shift`` with integer
    scale (not 0) and shift: exactly one symbol, which the value determines."""
    if not isinstance(value, torch.SymInt):
        return None
    expr = value.node.expr
    if isinstance(expr, sympy.Symbol):
        return expr, 1, 0
    if len(expr.free_symbols) != 1:
        return None
    (sym,) = expr.free_symbols
    try:
        poly = sympy.Poly(expr, sym)
    except sympy.PolynomialError:
        return None
    if poly.degree() != 1 or not all(c.is_integer for c in poly.all_coeffs()):
        return None
    scale, shift = (int(c) for c in poly.all_coeffs())
    return (sym, scale, shift) if scale != 0 else None


def _tensor_candidates(
    t: Tensor, source: RuntimeSource, input_index: int | None
) -> list[tuple[object, SymbolLocator]]:
    candidates: list[tuple[object, SymbolLocator]] = []
    for dim, size in enumerate(t.size()):
        candidates.append(
            (size, SymbolLocator(source, MetadataField.SIZE, input_index, dim))
        )
    if t.layout == torch.strided:
        for dim, stride in enumerate(t.stride()):
            candidates.append(
                (stride, SymbolLocator(source, MetadataField.STRIDE, input_index, dim))
            )
        candidates.append(
            (
                t.storage_offset(),
                SymbolLocator(source, MetadataField.STORAGE_OFFSET, input_index),
            )
        )
    return candidates


def locate_symbols(
    symbols: set[sympy.Symbol],
    *,
    base: Tensor | None,
    target: Tensor,
    inputs: Sequence[object],
) -> tuple[dict[sympy.Symbol, SymbolLocator], set[sympy.Symbol]]:
    """Find a runtime locator for each symbol.

    Sources are tried in order: the base, the graph inputs (SymInt inputs and
    tensor metadata), then the graph's output itself; values that are the symbol
    first, then values that are an affine function of it. Returns the locators
    found and the symbols left without one.
    """
    candidates: list[tuple[object, SymbolLocator]] = []
    if base is not None:
        candidates += _tensor_candidates(base, RuntimeSource.BASE, None)
    for i, inp in enumerate(inputs):
        if isinstance(inp, Tensor):
            candidates += _tensor_candidates(inp, RuntimeSource.INPUT, i)
        elif isinstance(inp, torch.SymInt):
            candidates.append(
                (inp, SymbolLocator(RuntimeSource.INPUT, MetadataField.VALUE, i))
            )
    candidates += _tensor_candidates(target, RuntimeSource.TARGET, None)

    # A value that is the symbol itself is preferred to one that is an affine function of it.
    found: dict[sympy.Symbol, SymbolLocator] = {}
    for plain in (True, False):
        for value, locator in candidates:
            affine = _affine_symbol(value)
            if affine is None or affine[0] not in symbols or affine[0] in found:
                continue
            sym, scale, shift = affine
            if plain == ((scale, shift) == (1, 0)):
                found[sym] = dataclasses.replace(locator, scale=scale, shift=shift)
    return found, symbols - found.keys()
