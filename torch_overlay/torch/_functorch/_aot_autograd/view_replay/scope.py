"""
What planning reads: the graph's traced values, once per graph and once per output.

Note [Planning scopes]
~~~~~~~~~~~~~~~~~~~~~~
Planning an output's regeneration reads the traced graph: its inputs and user
outputs (whose runtime values carry a plan's symbols), which inputs the graph
mutates, and, per output, the traced output, the tensor it is regenerated from
and what its regeneration is checked against. collect_metadata_analysis builds
one :class:`GraphScope` per graph and asks it for one :class:`OutputScope` per
aliased output; the planners take that object instead of threading its parts
through every layer.

Note [Outputs that are one tensor]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Ops that return their input object in eager (``flatten()`` of a 1-D tensor,
``contiguous()`` of a contiguous one, ``to()`` of the same dtype and device,
an in-place op) do the same under functionalization, so the traced graph
returns one FunctionalTensor at several output positions. Eager returns one
tensor there too. Where that tensor is an alias, upstream regenerates each
position on its own: with ``y = x[1:]; return y, y.flatten()`` (x 1-D) the
compiled function returned two views of x, ``out[0] is out[1]`` False where
eager's is True, and an in-place op on one no longer showed in the other's
autograd history (stock 2.14.1 and 2.13.0, aot_eager and inductor, static and
dynamic). Planning gives such outputs ``ViewReplay.same_object``, the first
position; at runtime the first regeneration is kept in the call's
RegenerationCall and returned at every later position. Outputs that are not
aliases are one tensor already: the compiled function returns the graph's
tensor itself.

Layering: planning (compile time).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

from torch import Tensor
from torch.multiprocessing.reductions import StorageWeakRef

from .saved_tensors import eager_saved_storages
from .spec import Check
from .symbol_outputs import SymbolOutputs


@dataclasses.dataclass(frozen=True, eq=False)
class GraphScope:
    """The traced values of one graph that plans may read (Note [Planning scopes])."""

    # The graph's flat traced (functional) inputs.
    inputs: Sequence[object]
    # The graph's traced user outputs.
    outputs: Sequence[object]
    # Per input: whether the graph mutates its metadata.
    metadata_mutated: tuple[bool, ...]
    # Per input: whether the graph mutates its data.
    data_mutated: tuple[bool, ...]
    # The SymInt outputs that the graph's plans request (Note [Symbol outputs]).
    symbol_outputs: SymbolOutputs
    # Whether some output requires grad: the graph has a backward, which may save
    # intermediates (Note [Saved tensors on the storage of a returned tensor]).
    has_backward: bool

    @staticmethod
    def of(inputs: Sequence[object], outputs: Sequence[object], input_info: Sequence[Any]) -> GraphScope:
        """Compile-time hook: the scope of a graph, from collect_metadata_analysis's traced
        inputs, outputs and InputAliasInfos."""
        return GraphScope(
            inputs=inputs,
            outputs=outputs,
            metadata_mutated=tuple(bool(info.mutates_metadata) for info in input_info),
            data_mutated=tuple(bool(info.mutates_data) for info in input_info),
            symbol_outputs=SymbolOutputs(outputs),
            has_backward=any(isinstance(o, Tensor) and o.requires_grad for o in outputs),
        )

    @functools.cached_property
    def _backward_saved_storages(self) -> frozenset[StorageWeakRef]:
        # The walk stops at the nodes that inputs the graph does not mutate had before the run.
        mutated = [i for i, m in zip(self.inputs, self.data_mutated) if m and isinstance(i, Tensor)]
        untouched = frozenset(
            i.grad_fn for i, m in zip(self.inputs, self.data_mutated) if not m and isinstance(i, Tensor)
        )
        roots = [o for o in (*self.outputs, *mutated) if isinstance(o, Tensor)]
        return eager_saved_storages(roots, untouched)

    def backward_saves(self, out: Tensor) -> bool:
        """Whether eager's backward saves a tensor on the storage of the traced ``out`` (Note
        [Saved tensors on the storage of a returned tensor]); walked once per graph, on the
        first question."""
        return self.has_backward and StorageWeakRef(out.untyped_storage()) in self._backward_saved_storages

    @functools.cached_property
    def _repeated_outputs(self) -> dict[int, int]:
        first: dict[int, int] = {}
        repeated: dict[int, int] = {}
        for position, out in enumerate(self.outputs):
            if isinstance(out, Tensor) and first.setdefault(id(out), position) != position:
                repeated[id(out)] = first[id(out)]
        return repeated

    def same_object(self, out: Tensor) -> int | None:
        """The position of the first user output that is the traced ``out`` itself, where the
        graph returns it more than once (Note [Outputs that are one tensor]); else None."""
        return self._repeated_outputs.get(id(out))

    def output(self, out: Tensor, input_index: int | None) -> OutputScope:
        """The scope of the aliased output ``out``: of input ``input_index``, or (None) of an
        intermediate, its autograd base."""
        data_mutated = input_index is not None and self.data_mutated[input_index]
        check = Check.SIZE if data_mutated else Check.LAYOUT
        if input_index is None:
            return OutputScope(self, out, out._base, Check.INTERMEDIATE, base_restrided=False)
        base = self.inputs[input_index]
        base = base if isinstance(base, Tensor) else None
        return OutputScope(self, out, base, check, base_restrided=self.metadata_mutated[input_index])


@dataclasses.dataclass(frozen=True, eq=False)
class OutputScope:
    """What planning one output's regeneration reads (Note [Planning scopes])."""

    graph: GraphScope
    # The traced output.
    output: Tensor
    # The traced tensor it is regenerated from at runtime.
    base: Tensor | None
    # What the regenerated view is checked against.
    # SIZE for an alias of an input the graph mutates (Note [Aliases of inputs mutated by the
    # graph]).
    check: Check
    # The base is an input whose metadata the graph mutates: the runtime restrides it
    # before regenerating the output, so no chain recorded off the traced base applies.
    base_restrided: bool
