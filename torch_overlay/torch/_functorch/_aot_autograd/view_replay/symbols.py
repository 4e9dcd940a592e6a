"""
Binding of the free symbols of a view chain to runtime values.

At compile time every free symbol that appears in the arguments of an aliased
output's view chain is given a :class:`~spec.SymbolLocator`: where its value is
read at runtime off the values the regeneration already has in hand (the
aliased base, the graph's output for the alias, the graph's inputs and user
outputs), possibly as an affine function of one of them. The locators are
rendered into the replay function once; nothing here runs per call.

See Note [Symbolic view replay] in ``plan.py``.

Layering: planning (compile time, sympy).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import sympy

import torch
from torch import Tensor

from .scope import OutputScope
from .spec import Check, MetadataField, RuntimeSource, SymbolLocator


def affine_symbol(value: object, wanted: set[sympy.Symbol]) -> tuple[sympy.Symbol, int, int] | None:
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


def locate_symbols(
    symbols: set[sympy.Symbol], scope: OutputScope
) -> tuple[dict[sympy.Symbol, SymbolLocator], set[sympy.Symbol]]:
    """Find a runtime locator for each symbol; return the locators found and the symbols left.

    Sources are tried in order: the base, the graph inputs (SymInt inputs and tensor
    metadata), the graph's output for the alias, the graph's other user outputs; values that
    are the symbol first, then values that are an affine function of it.
    """
    candidates: list[tuple[object, SymbolLocator]] = []
    if scope.base is not None:
        candidates += _tensor_candidates(scope.base, RuntimeSource.BASE, None)
    candidates += _value_candidates(scope.graph.inputs, RuntimeSource.INPUT)
    target = _tensor_candidates(scope.output, RuntimeSource.TARGET, None)
    if scope.check is Check.SIZE:
        # Only the output's sizes are the user's (Note [Aliases of inputs mutated by the graph]).
        target = [c for c in target if c[1].field is MetadataField.SIZE]
    candidates += target
    # Other outputs' strides and offsets are not read: one that aliases an input the graph
    # mutates has them relative to the new value, and its regeneration checks only its size.
    candidates += [
        c for c in _value_candidates(scope.graph.outputs, RuntimeSource.OUTPUT)
        if c[1].field in (MetadataField.SIZE, MetadataField.VALUE)
    ]
    solved = [(affine, locator) for value, locator in candidates if (affine := affine_symbol(value, symbols))]
    found: dict[sympy.Symbol, SymbolLocator] = {}
    for plain in (True, False):  # a value that is the symbol itself first
        for (sym, scale, shift), locator in solved:
            if sym not in found and plain == ((scale, shift) == (1, 0)):
                found[sym] = dataclasses.replace(locator, scale=scale, shift=shift)
    return found, symbols - found.keys()
