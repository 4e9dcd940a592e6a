"""
Binding of the free symbols of a view chain to runtime values.

At compile time every free symbol that appears in the arguments of an aliased
output's view chain is given a :class:`SymbolLocator`: the Python expression
that reads its value at runtime off the values the regeneration already has in
hand (the aliased base, the graph's output for the alias, the graph's inputs).
The locators are rendered into the replay function's source once; nothing here
runs per call.

See Note [Symbolic view replay] in ``plan.py``.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
# [stack: symbol-outputs]
from typing import TYPE_CHECKING
# [/stack]

import sympy

import torch
from torch import Tensor


# [stack: symbol-outputs]
if TYPE_CHECKING:
    from .symbol_outputs import SymbolOutput, SymbolOutputs
# [/stack]


class RuntimeSource(enum.Enum):
    """A value available to the regeneration of one aliased output at runtime."""

    # The tensor the output is regenerated from (an input, or an intermediate
    # base returned by the graph: this covers unbacked symbols).
    BASE = "base"
    # The graph's own output for this alias (has the output's concrete sizes).
    TARGET = "target"
    # One of the graph's inputs (tensor metadata or a SymInt input's value).
    INPUT = "input"
    # [stack: symbol-outputs]
    # One of the graph's user outputs: a sibling piece of a multi-output view,
    # another aliased output, a SymInt output, or a symbol output added for
    # view replay (Note [Symbol outputs]). Read raw, before regeneration.
    OUTPUT = "output"
    # [/stack]


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
    # Index into the graph's inputs (RuntimeSource.INPUT) or user outputs (OUTPUT).
    index: int | None = None
    # Dimension, for SIZE and STRIDE.
    dim: int | None = None
    scale: int = 1
    shift: int = 0

    def python_expr(self) -> str:
        """The expression, over the replay function's arguments, that reads the symbol."""
        if self.source is RuntimeSource.INPUT:
            holder = f"inputs[{self.index}]"
        # [stack: symbol-outputs]
        elif self.source is RuntimeSource.OUTPUT:
            # An aliased output leaves the autograd.Function wrapped in a TensorAlias.
            holder = (
                f"outputs[{self.index}]"
                if self.field is MetadataField.VALUE
                else f"_unalias(outputs[{self.index}])"
            )
        # [/stack]
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


def _affine_symbol(value: object, wanted: set[sympy.Symbol]) -> tuple[sympy.Symbol, int, int] | None:
    """(symbol, scale, shift) if ``value`` is a SymInt ``scale * symbol + shift`` with integer
    scale (not 0) and shift: exactly one symbol, one of ``wanted``, which the value determines.
    Values of other symbols are dismissed before sympy solves anything."""
    if not isinstance(value, torch.SymInt):
        return None
    expr = value.node.expr
    if isinstance(expr, sympy.Symbol):
        return (expr, 1, 0) if expr in wanted else None
    if len(expr.free_symbols) != 1:
        return None
    (sym,) = expr.free_symbols
    if sym not in wanted:
        return None
    try:
        poly = sympy.Poly(expr, sym)
    except sympy.PolynomialError:
        return None
    if poly.degree() != 1 or not all(c.is_integer for c in poly.all_coeffs()):
        return None
    scale, shift = (int(c) for c in poly.all_coeffs())
    return (sym, scale, shift) if scale != 0 else None


def _tensor_candidates(t: Tensor, source: RuntimeSource, index: int | None) -> list[tuple[object, SymbolLocator]]:
    candidates: list[tuple[object, SymbolLocator]] = []
    for dim, size in enumerate(t.size()):
        candidates.append(
            (size, SymbolLocator(source, MetadataField.SIZE, index, dim))
        )
    if t.layout == torch.strided:
        for dim, stride in enumerate(t.stride()):
            candidates.append(
                (stride, SymbolLocator(source, MetadataField.STRIDE, index, dim))
            )
        candidates.append(
            (
                t.storage_offset(),
                SymbolLocator(source, MetadataField.STORAGE_OFFSET, index),
            )
        )
    return candidates


def _value_candidates(values: Sequence[object], source: RuntimeSource) -> list[tuple[object, SymbolLocator]]:
    """Candidates of the graph's inputs or outputs: tensor metadata and SymInts."""
    candidates: list[tuple[object, SymbolLocator]] = []
    for i, value in enumerate(values):
        if isinstance(value, Tensor):
            candidates += _tensor_candidates(value, source, i)
        elif isinstance(value, torch.SymInt):
            candidates.append((value, SymbolLocator(source, MetadataField.VALUE, i)))
    return candidates


# [stack: symbol-outputs]
def symint_leaves(value: object) -> list[torch.SymInt]:
    """The SymInts in ``value``, a view argument (tuple) that may nest lists and tuples."""
    if isinstance(value, torch.SymInt):
        return [value]
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in symint_leaves(v)]
    return []


# [/stack]
def locate_symbols(
    symbols: set[sympy.Symbol],
    *,
    base: Tensor | None,
    target: Tensor,
    inputs: Sequence[object],
    # [stack: symbol-outputs]
    # The graph's user outputs (sizes, SymInt outputs), tried last. A symbol left
    # without a locator is requested from symbol_outputs, if given: the graph then
    # returns one of the view arguments that is an affine function of it (Note
    # [Symbol outputs]).
    outputs: Sequence[object] = (),
    arguments: Sequence[object] = (),
    symbol_outputs: SymbolOutputs | None = None,
    # [/stack]
    # [stack: mutated-input-aliases]
    # False: only the target's sizes are read (Note [Aliases of inputs mutated by
    # the graph] in replay.py).
    target_is_view_of_base: bool = True,
    # [/stack]
) -> tuple[dict[sympy.Symbol, SymbolLocator], set[sympy.Symbol]]:
    """Find a runtime locator for each symbol.

    Sources are tried in order: the base, the graph inputs (SymInt inputs and
    tensor metadata), the graph's output for the alias; values that are the
    symbol first, then values that are an affine function of it. Returns the
    locators found and the symbols left without one.
    """
    candidates: list[tuple[object, SymbolLocator]] = []
    if base is not None:
        candidates += _tensor_candidates(base, RuntimeSource.BASE, None)
    candidates += _value_candidates(inputs, RuntimeSource.INPUT)
    target_candidates = _tensor_candidates(target, RuntimeSource.TARGET, None)
    # [stack: mutated-input-aliases]
    if not target_is_view_of_base:
        target_candidates = [c for c in target_candidates if c[1].field is MetadataField.SIZE]
    # [/stack]
    candidates += target_candidates
    # [stack: symbol-outputs]
    # Other outputs' strides and offsets are not read: one that aliases an input the
    # graph mutates has them relative to the new value (Note [Aliases of inputs mutated
    # by the graph]), and its regeneration checks only its size.
    candidates += [
        c for c in _value_candidates(outputs, RuntimeSource.OUTPUT)
        if c[1].field in (MetadataField.SIZE, MetadataField.VALUE)
    ]
    # [/stack]

    # A value that is the symbol itself is preferred to one that is an affine function of it.
    solved = [(affine, locator) for value, locator in candidates if (affine := _affine_symbol(value, symbols))]
    found: dict[sympy.Symbol, SymbolLocator] = {}
    for plain in (True, False):
        for (sym, scale, shift), locator in solved:
            if sym not in found and plain == ((scale, shift) == (1, 0)):
                found[sym] = dataclasses.replace(locator, scale=scale, shift=shift)
    # [stack: symbol-outputs]
    if symbol_outputs is not None:
        return _request_symbol_outputs(found, symbols, target, arguments, symbol_outputs)
    # [/stack]
    return found, symbols - found.keys()


# [stack: symbol-outputs]
def _request_symbol_outputs(
    found: dict[sympy.Symbol, SymbolLocator],
    symbols: set[sympy.Symbol],
    target: Tensor,
    arguments: Sequence[object],
    symbol_outputs: SymbolOutputs,
) -> tuple[dict[sympy.Symbol, SymbolLocator], set[sympy.Symbol]]:
    """``locate_symbols``' result, the symbols left without a locator read off symbol outputs
    if every one of them can be (Note [Symbol outputs])."""
    requested: dict[sympy.Symbol, tuple[torch.SymInt, SymbolOutput, int, int]] = {}
    for value in symint_leaves(list(arguments)):
        affine = _affine_symbol(value, symbols - found.keys())
        if affine is None or affine[0] in requested:
            continue
        marker = symbol_outputs.find(value, target)
        if marker is not None:
            requested[affine[0]] = (value, marker, affine[1], affine[2])
    if symbols - found.keys() - requested.keys():
        return found, symbols - found.keys() - requested.keys()  # the graph gains no output for nothing
    for sym, (value, marker, scale, shift) in requested.items():
        found[sym] = SymbolLocator(
            RuntimeSource.OUTPUT, MetadataField.VALUE, symbol_outputs.request(value, marker), scale=scale, shift=shift
        )
    return found, set()
# [/stack]
