"""
Building replay plans: the one builder behind every planner of view chains.

A planner adds the steps of a view chain in order; :meth:`PlanBuilder.finish`
binds every free symbol of their arguments (symbols.py), checks the arguments
against the symbols' hints and returns the :class:`~spec.ReplayPlan`, or the
:class:`~spec.Fallback` that says why there is none.
A symbol that no value carries is requested from the graph as a SymInt output
(Note [Symbol outputs]).

Layering: planning (compile time).
"""

from __future__ import annotations

import dataclasses

import sympy

import torch

from .fallback import FallbackReason
from .render import ArgumentRenderer, check_against_hints, symint_leaves
from .scope import OutputScope
from .spec import (
    Fallback,
    MetadataField,
    OpStep,
    PiecesStep,
    ReplayPlan,
    RuntimeSource,
    Step,
    SymbolBinding,
    SymbolLocator,
    SymbolOutput,
    ViewMetaStep,
)
from .symbols import affine_symbol, locate_symbols


class PlanBuilder:
    """The steps of one view chain, with their rendered arguments."""

    def __init__(self) -> None:
        self.renderer = ArgumentRenderer()
        self.steps: list[Step] = []

    def view_meta(self, name: str, args: tuple[object, ...]) -> None:
        """A ViewMeta of class ``name`` rebuilt from ``args`` (its as_tuple(); the rebuilt one
        has no symbolic inputs)."""
        self.steps.append(ViewMetaStep(name, self.renderer.render_args((False,) + tuple(args[1:]))))

    def op(self, op: str, args: tuple[object, ...]) -> None:
        """The aten view op ``op`` (path under torch.ops) called on the result so far."""
        self.steps.append(OpStep(op, self.renderer.render_args(args)))

    def pieces(self, op: str, args: tuple[object, ...], index: int, claims: bool) -> None:
        """Piece ``index`` of the multi-output view op ``op`` (Note [Multi-output views])."""
        self.steps.append(PiecesStep(op, self.renderer.render_args(args), index, claims))

    def names(self) -> tuple[str, ...]:
        return ReplayPlan(tuple(self.steps)).names()

    def finish(self, scope: OutputScope, no_grad_steps: int = 0) -> ReplayPlan | Fallback:
        """The plan of the steps so far, its symbols bound for the output of ``scope``."""
        found, unbound = locate_symbols(self.renderer.symbols, scope)
        if unbound:
            found, unbound, whole = _request_symbol_outputs(found, unbound, scope, self.renderer)
            if whole:
                rendered = self.renderer.render_again(whole)
                self.steps = [dataclasses.replace(step, args=args) for step, args in zip(self.steps, rendered)]
                found = {sym: loc for sym, loc in found.items() if sym in self.renderer.symbols}
        if unbound:
            return Fallback(
                FallbackReason.UNBOUND_SYMBOL,
                f"view chain {self.names()}: no runtime source for {sorted(map(str, unbound))}",
            )
        problem = check_against_hints(self.renderer)
        if problem is not None:
            return Fallback(FallbackReason.PLAN_CHECK_FAILED, f"view chain {self.names()}: {problem}")
        symbols = tuple(SymbolBinding(str(s), loc) for s, loc in sorted(found.items(), key=lambda kv: str(kv[0])))
        return ReplayPlan(tuple(self.steps), symbols, no_grad_steps)


def _request_symbol_outputs(
    found: dict[sympy.Symbol, SymbolLocator],
    unbound: set[sympy.Symbol],
    scope: OutputScope,
    renderer: ArgumentRenderer,
) -> tuple[dict[sympy.Symbol, SymbolLocator], set[sympy.Symbol], dict[sympy.Expr, sympy.Symbol]]:
    """``found``, with the ``unbound`` symbols read off symbol outputs if every one of them can
    be (Note [Symbol outputs]): the graph gains no output for a plan that falls back anyway.

    A symbol is read off an argument that is an affine function of it; an argument that holds
    a symbol no such argument gives (``u0 + u1``) is read whole, as a symbol of its own: the
    third result maps such arguments' expressions to their symbols, for the renderer."""
    leaves = symint_leaves([original for _, original in renderer.rendered])
    affine = _affine_requests(leaves, unbound, scope)
    whole = _whole_requests(leaves, unbound - affine.keys(), scope)
    if whole is None:
        return found, unbound - affine.keys(), {}
    symbol_outputs = scope.graph.symbol_outputs
    for sym, (value, marker, scale, shift) in affine.items():
        index = symbol_outputs.request(value, marker)
        found[sym] = SymbolLocator(RuntimeSource.OUTPUT, MetadataField.VALUE, index, scale=scale, shift=shift)
    substitution: dict[sympy.Expr, sympy.Symbol] = {}
    for expr, (value, marker) in whole.items():
        index = symbol_outputs.request(value, marker)
        substitution[expr] = sympy.Symbol(f"symout{index}", integer=True)
        found[substitution[expr]] = SymbolLocator(RuntimeSource.OUTPUT, MetadataField.VALUE, index)
    return found, set(), substitution


def _affine_requests(
    leaves: list[torch.SymInt], unbound: set[sympy.Symbol], scope: OutputScope
) -> dict[sympy.Symbol, tuple[torch.SymInt, SymbolOutput, int, int]]:
    """The unbound symbols that an argument found again in the traced graph is an affine
    function of: that argument, where it is found, and the function's scale and shift."""
    requested: dict[sympy.Symbol, tuple[torch.SymInt, SymbolOutput, int, int]] = {}
    for value in leaves:
        affine = affine_symbol(value, unbound)
        if affine is None or affine[0] in requested:
            continue
        marker = scope.graph.symbol_outputs.find(value, scope.output)
        if marker is not None:
            requested[affine[0]] = (value, marker, affine[1], affine[2])
    return requested


def _whole_requests(
    leaves: list[torch.SymInt], unread: set[sympy.Symbol], scope: OutputScope
) -> dict[sympy.Expr, tuple[torch.SymInt, SymbolOutput]] | None:
    """Every argument that holds one of the ``unread`` symbols, with where it is found again
    in the traced graph; None if one is not found."""
    requested: dict[sympy.Expr, tuple[torch.SymInt, SymbolOutput]] = {}
    for value in leaves:
        expr = value.node.expr
        if expr in requested or not expr.free_symbols & unread:
            continue
        marker = scope.graph.symbol_outputs.find(value, scope.output)
        if marker is None:
            return None
        requested[expr] = (value, marker)
    return requested
