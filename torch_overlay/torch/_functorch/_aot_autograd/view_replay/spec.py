"""
What view replay decides about an aliased output, as data.

Note [View replay metadata]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
Everything view replay decides about an aliased output is decided once, when
AOTAutograd collects the graph's metadata, and stored in
``OutputAliasInfo.view_replay`` as a :class:`ViewReplay`: how the output's view
is made at runtime (its ``route``), how the result is checked against the
graph's output, and whether it is made under no_grad. The runtime
(replay.py) only carries the decision out; nothing here is recomputed per call.

The types are frozen dataclasses of plain values (strings, ints, enums,
tuples): they compare, hash, pickle into the AOTAutograd cache and write
themselves out as source for torch.compiler.precompile as they are.
A plan is data too: its steps and the locators of its symbols. codegen.py
compiles it into a Python function, once per process, through a cache keyed by
the plan.

Layering: this module is the data every phase shares. It imports nothing of
view_replay but the fallback reasons.
"""

from __future__ import annotations

import dataclasses
import enum

import torch

from .fallback import FallbackReason


class Check(enum.Enum):
    """How a regenerated view is checked against the graph's own output for the alias."""

    # Size, stride, storage offset and dtype (on the base's storage), and every inner
    # tensor of a subclass.
    LAYOUT = "layout"
    # Size and dtype only: the graph's output views another value than the base, the new
    # value of an input the graph mutates (Note [Aliases of inputs mutated by the graph]).
    SIZE = "size"
    # LAYOUT, for an alias of an intermediate; where the graph's output is not on the base's
    # storage (a copy), size and dtype for a plan that reads nothing off that output's
    # layout, else the graph's output itself (Note [Aliases of intermediates copied by the
    # graph] in replay.py).
    INTERMEDIATE = "intermediate"


@dataclasses.dataclass(frozen=True)
class Fallback:
    """The output is regenerated with as_strided() at the fallback point, for this reason."""

    reason: FallbackReason
    # What the log and the strict-mode error say about this output.
    detail: str


@dataclasses.dataclass(frozen=True)
class RecordedViewMetas:
    """The output's ViewMetaSequence (``OutputAliasInfo.view_meta_sequence``) is replayed
    as it was recorded: a static sequence whose arguments pickle safely."""


@dataclasses.dataclass(frozen=True)
class RecordedViewFunction:
    """No ViewMeta sequence was recorded: the view function autograd recorded for the
    graph's output is replayed where it has one (Note [Recorded view functions of graph
    outputs] in replay.py); the output falls back otherwise."""

    # Why there is no sequence: the reason of the fallback when there is no view function.
    reason: FallbackReason


# -- symbols ----------------------------------------------------------------------------


class RuntimeSource(enum.Enum):
    """A value that the regeneration of one aliased output has in hand at runtime."""

    # The tensor the output is regenerated from (an input, or an intermediate base
    # returned by the graph: this covers unbacked symbols).
    BASE = "base"
    # The graph's own output for this alias (has the output's concrete sizes).
    TARGET = "target"
    # One of the graph's inputs (tensor metadata or a SymInt input's value).
    INPUT = "input"
    # One of the graph's user outputs, read raw, before regeneration (Note [Symbol outputs]).
    OUTPUT = "output"


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
    # Index into the graph's inputs (INPUT) or user outputs (OUTPUT, Note [Symbol outputs]).
    index: int | None = None
    # Dimension, for SIZE and STRIDE.
    dim: int | None = None
    scale: int = 1
    shift: int = 0


@dataclasses.dataclass(frozen=True)
class SymbolBinding:
    """A free symbol of a plan (its name in the plan's expressions) and where it is read."""

    name: str
    locator: SymbolLocator


# -- arguments ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Expr:
    """A symbolic argument: Python integer arithmetic over the plan's symbol names."""

    source: str


def resolve_path(path: str) -> object:
    """The object at ``path`` (dotted) under the ``torch`` module."""
    obj: object = torch
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


@dataclasses.dataclass(frozen=True)
class Const:
    """An argument that is an object under ``torch`` (an enum member, a dtype), by path."""

    path: str


@dataclasses.dataclass(frozen=True)
class Seq:
    """A list or tuple of arguments (a view op's size list, a ViewMeta's argument tuple)."""

    items: tuple[Arg, ...]
    is_list: bool = False


# One argument of a view op or ViewMeta constructor.
Arg = int | bool | None | Expr | Const | Seq


# -- plans ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ViewMetaStep:
    """Rebuild a ViewMeta with concrete arguments and apply it (a functionalization view)."""

    # Class name under torch._C._functionalization, e.g. "slice_Tensor_ViewMeta".
    view_meta: str
    # Its constructor's arguments (has_symbolic_inputs first, False).
    args: Seq


@dataclasses.dataclass(frozen=True)
class OpStep:
    """Call an aten view op on the result so far (a tensor subclass's outer chain, an in-place
    view op: Note [In-place view ops replayed in place] in plan.py)."""

    # Path under torch.ops, e.g. "aten.slice.Tensor".
    op: str
    # Its arguments after self.
    args: Seq


@dataclasses.dataclass(frozen=True)
class PiecesStep:
    """Call a multi-output view op (unbind, split, ...) once per group and runtime call, and
    take one of its pieces (Note [Multi-output views])."""

    # Path under torch.ops, e.g. "aten.unbind.int".
    op: str
    # Its arguments after self.
    args: Seq
    # The piece taken.
    index: int
    # Whether that piece is the output itself, which claims it: two outputs that are the
    # same piece are two tensors, from two calls.
    claims: bool


@dataclasses.dataclass(frozen=True)
class DataStep:
    """Take ``.data`` of the result so far: a tensor on its storage with a version counter of
    its own (Note [Views through .data] in data_views.py)."""

    # The position of the first user output viewed off the same traced ``.data`` tensor: the
    # outputs of one group share one ``.data`` tensor per runtime call, as eager's do.
    group: int

    @property
    def op(self) -> str:
        """What logs call the step (ReplayPlan.names)."""
        return "data"


Step = ViewMetaStep | OpStep | PiecesStep | DataStep


@dataclasses.dataclass(frozen=True)
class ReplayPlan:
    """A view chain replayed with concrete arguments computed from runtime values."""

    # The steps, applied in order to the base.
    steps: tuple[Step, ...]
    # Every free symbol of the steps' arguments, with its locator.
    symbols: tuple[SymbolBinding, ...] = ()
    # How many leading steps run under no_grad (Note [Views taken under no_grad]).
    no_grad_steps: int = 0

    def names(self) -> tuple[str, ...]:
        """The steps' ViewMeta classes or ops, for logs."""
        return tuple(s.view_meta if isinstance(s, ViewMetaStep) else s.op for s in self.steps)

    def reads_target_layout(self) -> bool:
        """Whether a symbol is read off the graph's output's strides or storage offset."""
        return any(
            b.locator.source is RuntimeSource.TARGET and b.locator.field is not MetadataField.SIZE
            for b in self.symbols
        )

    def indices_read(self, source: RuntimeSource) -> tuple[int, ...]:
        """The graph inputs (INPUT) or user outputs (OUTPUT) whose values the plan reads."""
        found = {b.locator.index for b in self.symbols if b.locator.source is source}
        return tuple(sorted(i for i in found if i is not None))


@dataclasses.dataclass(frozen=True)
class RegeneratedOutside:
    """The runtime wrapper passes the graph's output through: the synthetic-base wrapper
    regenerates the output off the real input it aliases (Note [Outputs aliasing inputs
    merged into a synthetic base] in merged_inputs.py)."""


# How an aliased output's view is made at runtime.
Route = ReplayPlan | RecordedViewMetas | RecordedViewFunction | Fallback | RegeneratedOutside


@dataclasses.dataclass(frozen=True)
class ViewReplay:
    """How view replay regenerates one aliased output (``OutputAliasInfo.view_replay``)."""

    route: Route
    # What the regenerated view is checked against.
    check: Check = Check.LAYOUT
    # Regenerate under no_grad: the output is a view taken under no_grad (Note [Views taken
    # under no_grad]).
    no_grad: bool = False
    # Where the graph returns this very tensor more than once (an op that returns self), the
    # position of its first user output: every position returns one regenerated tensor (Note
    # [Outputs that are one tensor] in scope.py). None where it returns it once.
    same_object: int | None = None


class BaseHolder(enum.Enum):
    """Where the compiled autograd.Function's forward holds a custom-Function view's base."""

    # Among the graph's inputs (the forward's arguments).
    INPUT = "input"
    # Among the user outputs it returns.
    USER_OUTPUT = "user_output"
    # Among the intermediate bases it returns.
    INTERMEDIATE_BASE = "intermediate_base"


@dataclasses.dataclass(frozen=True)
class FunctionViewBase:
    """``OutputAliasInfo.function_view_base`` of a custom-Function view that the compiled
    autograd.Function returns as a view of its base (Note [Custom-Function views returned as
    views] in function_views.py)."""

    # Where the compiled forward holds the base.
    holder: BaseHolder
    # Its index there.
    index: int


@dataclasses.dataclass(frozen=True)
class SymbolOutput:
    """``OutputAliasInfo.symbol_output`` of a SymInt output the graph returns for view replay
    only (Note [Symbol outputs])."""

    # The user output whose ViewMeta arguments hold the SymInt, and the SymInt's position
    # among them, with their number.
    output_index: int
    position: int
    num_symints: int
    # The SymInt's expression when the metadata was collected, for logs.
    expr: str
