"""
Symbols that no graph value carries, returned by the graph as SymInt outputs.

Note [Symbol outputs]
~~~~~~~~~~~~~~~~~~~~~
A replay plan reads each free symbol of a view chain off a runtime value
(symbols.py): the base, an input, the graph's output for the alias, or another
user output (the sibling pieces of ``x.split(c.tolist())`` carry each other's
sizes). Some unbacked symbols are carried by none of them: ``x[: t.item()]``
has a size of its own (a fresh unbacked symbol, the clamped end), and
``x.narrow(0, t.item(), 2)`` and ``x[a:b]`` with ``a, b = t.tolist()`` have a
fresh storage offset. Such a symbol is made available the way AOTAutograd makes
intermediate bases available: the graph returns it.

1. Compile time, run_functionalized_fw_and_collect_metadata: a plan that
   cannot bind a symbol requests (:meth:`SymbolOutputs.request`) a SymInt
   argument of its view chain that is an affine function of that symbol; the
   request gives the index of a new user output, after the user's own. Where
   no argument is one (the start ``u0 + u1`` of ``x.narrow(0, a + b, 2)``
   with ``a, b = t.tolist()``), every argument that holds the symbol is
   requested whole, and the plan reads it as a symbol of its own
   (``symout2``, named for its output) in place of its expression.
   Once every output is analysed, the requested SymInts are appended to the
   traced outputs, each with an OutputAliasInfo of a non-aliased SymInt output
   whose ``symbol_output`` is a :class:`~spec.SymbolOutput` naming it. The
   rest of AOTAutograd treats them as user outputs that are SymInts: no
   tangent, a None gradient, no change to the backward.
2. aot_stage1_graph_capture: :func:`with_symbol_outputs` wraps the traced
   function so that the joint (or inference) trace returns the same values.
   That trace makes fresh unbacked symbols (``u3`` where the first had
   ``u0``), so each value is found by position: the same SymInt argument of
   the same output's ViewMeta sequence. If that trace's sequence differs
   (which tracing the same function should not produce), compilation stops
   with an error that says so: a made-up value could give a view of the
   right size at the wrong place, which a size-only check (Note [Aliases of
   inputs mutated by the graph]) would not catch.
3. Runtime: the regenerators read them as ``call.outputs[i]``, and the runtime
   wrapper then drops them (:func:`symbol_output_slice`): the caller sees the
   user's outputs only. On a warm cache the markers come back with the
   output-alias metadata, so nothing is traced again.

The outputs are appended before any output the dedupe and synthetic-base
wrappers add, and dropped before those wrappers see the outputs.

Layering: planning (compile time), and the two hooks that carry its result
into graph capture and the runtime wrapper.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._C import _functionalization
from torch._subclasses.functional_tensor import FunctionalTensor

from .render import symint_leaves
from .spec import SymbolOutput
from .view_meta_args import arguments_readable


def view_meta_symints(out: object) -> list[torch.SymInt]:
    """The SymInt arguments of ``out``'s ViewMeta sequence, in order; [] if it has none.

    ViewMetas whose arguments cannot be read safely are skipped (Note [Reading
    ViewMeta arguments]); their symbols are never requested.
    """
    if not (isinstance(out, FunctionalTensor) and torch._is_functional_tensor(out.elem)):
        return []
    symints: list[torch.SymInt] = []
    for vm in _functionalization.get_view_meta_sequence(out.elem):
        if arguments_readable(vm):
            symints += symint_leaves(vm.as_tuple())
    return symints


class SymbolOutputs:
    """The SymInt outputs that the plans of one graph request (step 1 of Note [Symbol outputs])."""

    def __init__(self, user_outputs: Sequence[object]) -> None:
        self.user_outputs = user_outputs
        self._requested: dict[str, tuple[int, torch.SymInt, SymbolOutput]] = {}

    def find(self, value: torch.SymInt, owner: torch.Tensor) -> SymbolOutput | None:
        """Where ``value``, a ViewMeta argument of the user output ``owner``, is found again
        when the graph is traced; None if it is not."""
        output_index = next((i for i, o in enumerate(self.user_outputs) if o is owner), None)
        if output_index is None:
            return None
        expr = str(value.node.expr)
        symints = view_meta_symints(owner)
        position = next((i for i, s in enumerate(symints) if str(s.node.expr) == expr), None)
        if position is None:
            return None
        return SymbolOutput(output_index, position, len(symints), expr)

    def request(self, value: torch.SymInt, marker: SymbolOutput) -> int:
        """The index, among the graph's user outputs, of the output that returns ``value``."""
        if marker.expr not in self._requested:
            index = len(self.user_outputs) + len(self._requested)
            self._requested[marker.expr] = (index, value, marker)
        return self._requested[marker.expr][0]

    def outputs(self) -> list[tuple[torch.SymInt, SymbolOutput]]:
        """The SymInts to append to the traced outputs, in order, with their markers."""
        return [(value, marker) for _, value, marker in self._requested.values()]


def _symbol_output_value(outs: Sequence[object], marker: SymbolOutput) -> torch.SymInt:
    symints = view_meta_symints(outs[marker.output_index])
    if len(symints) != marker.num_symints:
        raise RuntimeError(
            f"view_replay: symbol output {marker.expr} (Note [Symbol outputs]) not found in this "
            f"trace of output {marker.output_index}: it has {len(symints)} SymInt view arguments, "
            f"{marker.num_symints} when its metadata was collected"
        )
    return symints[marker.position]


def _symbol_outputs(output_info: Sequence[Any]) -> list[SymbolOutput]:
    return [info.symbol_output for info in output_info if info.symbol_output is not None]


def with_symbol_outputs(flat_fn: Callable[..., Any], output_info: Sequence[Any]) -> Callable[..., Any]:
    """Graph-capture hook: ``flat_fn``, returning also the symbol outputs of ``output_info``."""
    markers = _symbol_outputs(output_info)
    if not markers:
        return flat_fn

    @functools.wraps(flat_fn)
    def flat_fn_with_symbol_outputs(*args: Any) -> Any:
        outs = flat_fn(*args)
        return type(outs)([*outs, *(_symbol_output_value(outs, m) for m in markers)])

    return flat_fn_with_symbol_outputs


def symbol_output_slice(output_info: Sequence[Any]) -> slice | None:
    """Runtime-wrapper hook: where the symbol outputs are among the user outputs, if any."""
    indices = [i for i, info in enumerate(output_info) if info.symbol_output is not None]
    if not indices:
        return None
    if indices != list(range(indices[0], indices[-1] + 1)):
        raise AssertionError(f"view_replay: symbol outputs {indices} are not contiguous")
    return slice(indices[0], indices[-1] + 1)
