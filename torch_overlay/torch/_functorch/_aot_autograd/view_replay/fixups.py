"""
The fixups the runtime wrapper makes to what a compiled forward returns and saves.

Note [Runtime fixups]
~~~~~~~~~~~~~~~~~~~~~
Some returns and saved tensors of a compiled forward are not yet what eager's
would be when the compiled function hands them on, and are fixed up at runtime
(each fixup's own Note says why). Whether a graph needs a fixup is decided at
compile time, from its ViewAndMutationMeta; the objects here gather a graph's
fixups, built once when the runtime wrapper is built, so that each site of the
runtime wrapper (the generated code and the reference method alike) calls one
of them in one line, and a new fixup changes this package, not the wrapper:
  - ReturnFixups, in the runtime wrapper's epilogue (a graph without a
    backward) or in the autograd.Function's forward (a graph with one): the
    returns, before the aliased outputs are regenerated off them.
  - SavedTensorFixups, in _AutogradSavedState.save_from_forward: the tensors
    the autograd.Function's forward saves for the backward, before it saves
    them, and the tensors it saves besides them (SavedTensorFixups.witnesses).
Cost: one object per compiled graph; per call, only the fixups the graph needs.

Layering: runtime. Imports the runtime hooks of the modules the fixups belong to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from torch import Tensor

from ..saved_input_versions import share_input_version_counters
from .fresh_bases import copy_input_bases, regeneration_bases
from .fresh_views import detach_returned_views
from .function_views import FunctionViews
from .grad_free_views import distinct_grad_free_bases
from .saved_tensors import share_returned_version_counters
from .version_witnesses import version_witnesses


class ReturnFixups:
    """The fixups of the returns of one compiled graph (Note [Runtime fixups]), resolved once
    from its ViewAndMutationMeta; false where there is none."""

    __slots__ = ("_metadata", "_first_output", "_fresh_views", "_grad_free_bases", "_function_views", "_input_bases", "inputs_read")

    def __init__(
        self, metadata: Any, first_output: int, active: bool, function_views: FunctionViews | None = None
    ) -> None:
        # The graph's ViewAndMutationMeta, which the fixups' hooks read.
        self._metadata = metadata
        # Where the user outputs start among the returns the fixups are given (the
        # intermediate bases follow them).
        self._first_output = first_output
        # Fresh outputs the graph may return as views: Note [Fresh outputs the graph
        # returns as views].
        self._fresh_views = active and bool(metadata.mutated_fresh_outputs)
        # Intermediate bases without grad that may be another return: Note [Views of
        # outputs that do not require grad].
        self._grad_free_bases = active and bool(metadata.grad_free_intermediate_bases)
        # Custom-Function views replayed off their bases inside the autograd.Function: Note
        # [Custom-Function views returned as views].
        self._function_views = function_views if function_views else None
        # The returns that outputs are regenerated off, copied where the graph returned an
        # input for one (Note [Bases the graph returns as an input]): set by in_epilogue.
        self._input_bases: tuple[int, ...] = ()
        # The indices of the call's inputs the fixups read.
        self.inputs_read: tuple[int, ...] = ()

    @classmethod
    def in_epilogue(cls, metadata: Any, trace_joint: bool) -> ReturnFixups:
        """The fixups the runtime wrapper's epilogue makes to the user outputs and intermediate
        bases: none for a graph with a backward, whose autograd.Function makes them."""
        fixups = cls(metadata, 0, not trace_joint)
        if not trace_joint:  # inside the Function the SavedTensorFixups copy them, before saving
            fixups._input_bases = regeneration_bases(metadata)
            fixups.inputs_read = tuple(range(len(metadata.input_info))) if fixups._input_bases else ()
        return fixups

    @classmethod
    def in_function(cls, metadata: Any) -> ReturnFixups:
        """The fixups the autograd.Function's forward makes to its returns (the mutated inputs
        first)."""
        return cls(metadata, metadata.num_mutated_inp_runtime_indices, True, FunctionViews(metadata))

    def __bool__(self) -> bool:
        return self._fresh_views or self._grad_free_bases or self._function_views is not None or bool(self._input_bases)

    def __call__(self, returns: Sequence[Any], inputs: Mapping[int, Any] | Sequence[Any]) -> list[Any]:
        """Runtime hook: ``returns`` with the fixups made (a new list where there are any),
        given the call's ``inputs``: the runtime wrapper's captured inputs by index, or the
        autograd.Function's arguments."""
        if not self:
            return returns  # type: ignore[return-value]
        fixed = list(returns)
        if self._fresh_views:
            detach_returned_views(fixed, self._first_output, self._metadata)
        if self._grad_free_bases:
            distinct_grad_free_bases(fixed, self._first_output + self._metadata.num_outputs, self._metadata)
        if self._input_bases:  # the runtime wrapper's captured inputs, by index
            copy_input_bases(fixed, self._first_output, self._input_bases, cast(Mapping[int, Any], inputs).values())
        if self._function_views is not None:
            # Only inside the Function, whose inputs are its arguments.
            self._function_views.regenerate(cast(Sequence[Any], inputs), fixed)
        return fixed


class SavedTensorFixups:
    """The fixups of the tensors one compiled autograd.Function's forward saves for its
    backward (Note [Runtime fixups]), resolved once from its ViewAndMutationMeta."""

    __slots__ = ("_metadata", "_input_bases")

    def __init__(self, metadata: Any) -> None:
        # The graph's ViewAndMutationMeta, which the fixups' hooks read.
        self._metadata = metadata
        # The returns that outputs are regenerated off, copied where the graph returned an
        # input for one, before the tensors are saved: Note [Bases the graph returns as an
        # input].
        self._input_bases = regeneration_bases(metadata)

    def __call__(
        self, saved: list[Tensor], raw: Sequence[Tensor], fw_outs: list[Any], args: Sequence[Any]
    ) -> list[Tensor]:
        """Runtime hook: ``saved`` (the tensors about to be saved with a version check;
        ``raw`` as the compiled forward returned them) with the fixups made, given the
        forward's returns ``fw_outs`` and its arguments ``args``."""
        inputs_returned = (
            copy_input_bases(fw_outs, self._metadata.num_mutated_inp_runtime_indices, self._input_bases, args)
            if self._input_bases
            else []
        )
        saved = share_returned_version_counters(saved, fw_outs, self._metadata, inputs_returned)
        if self._metadata.saved_input_aliases:
            share_input_version_counters(saved, raw, args, self._metadata.saved_input_aliases)
        return saved

    def witnesses(self, fw_outs: Sequence[Any]) -> list[Tensor]:
        """Runtime hook: the tensors saved first, for their version counters only (Note
        [Version witnesses]), given the forward's returns ``fw_outs``."""
        return version_witnesses(fw_outs, self._metadata)
