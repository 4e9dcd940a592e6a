"""Fuzzing of view replay: small random programs of view ops, pointwise ops and in-place
mutations, run eagerly and through ``torch.compile``, compared end to end.

A program is data (:class:`Program`: input specs, a list of :class:`Step` and the indices of
the values it returns), so it prints as Python source (:meth:`Program.source`), replays
(:func:`check_program`) and shrinks (hypothesis minimises the choices that produced it).

Generation (:func:`programs`) simulates the program eagerly, step by step, on the inputs of the
first size, and only offers the view and pointwise ops that apply to the value at hand (each op
is tried on a detached alias). The view ops cover every dense ViewMeta op of
``sweep.OPS`` (multi-output ones included: the first and last piece become values); see
``VIEW_OPS``. ``UNSAFE_VIEW_OPS`` make values that eager computes through ``_unsafe_view``
(matmul of a 3-D value with a 2-D weight, reshape/flatten of a non-contiguous value); most of
the time a view of such a value is returned, so outputs alias an intermediate whose view chain
starts with ``_unsafe_view``. A second simulation at the second size (:func:`second_size`)
keeps their shapes valid at both sizes.

The generators of issue #36 (:data:`NEW_KIND_OPS`, each a step kind that gives programs the
feature :data:`NEW_KIND_FEATURES` names, for acceptance entries; ``--kinds`` picks them):
complex and dtype views (``dtype_view``: view_as_complex/view_as_real, ``.real``/``.imag``,
``view(dtype)`` of the same element size), ops that return their self in eager (``self_op``:
flatten() of a 1-D value, contiguous(), to() of the same dtype, reshape to the same shape,
view_as itself; the value and the result are both returned), ``_foreach_add_``/``_foreach_mul_``
on views of a flat buffer, taken with or without grad (``foreach``), views of ``.data`` and
``detach()`` and in-place on them (``data_view``), batched matmul and its views (``bmm``), and
starts that are unbacked symbols (``unbacked``: an int64 input whose ``tolist()`` gives a, b,
compiled with ``capture_scalar_outputs``). Each is offered only where it applies at both sizes.

Oracle (:func:`check_program`): for each of ``dynamic=False`` and ``dynamic=True`` (one compiled
function each, run at two sizes; static recompiles), eager and compiled run on equal fresh
inputs and must agree on

* whether they raise, and the type of the error (see Note [Eager errors] below);
* every output's values, dtype, size, observable strides (size-1 dims and empty tensors are
  ignored), storage offset, ``_is_view()``, ``requires_grad``, ``is_leaf``;
* which outputs share storage with which inputs and which other outputs, and which outputs
  *are* (``is``) which inputs;
* the inputs after the call (mutations: values and metadata);
* the gradients of every leaf after backward through a weighted sum of the differentiable
  outputs (or the type of the error backward raises);
* the alias structure (``parity.alias_structure``): for every output and input, which tensor is
  the root of its autograd view chain (``_base``) and which tensors share its version counter;
* in-place on each output, then backward through each other differentiable output, on fresh
  inputs (``parity.inplace_then_backward``): eager's gradients, or an error of eager's type at
  eager's step. Not checked for a run that fell back (an accepted fallback's ``as_strided()``
  output is the deficiency the entry accepts), nor where EXCLUSIONS drop output identity or
  intermediate aliases, nor after an in-place metadata change of an intermediate (EXCLUSIONS).

On stock torch (no overlay) :func:`check_program` runs the same comparison without strict
mode, to triage a finding (patched-only, or upstream's as well).

Strict mode (``view_replay.config.strict``) is on: a fallback raises
``ViewReplayFallbackError``. A fallback whose reason is in :data:`ACCEPTED_FALLBACKS` and
whose program has the feature the entry names is accepted: the program is rerun (fresh
compilation) with strict mode off and compared as above, and every fallback of the rerun
(``counters["view_replay_fallback"]``) must be accepted too. Any other fallback fails the case.

Note [Eager errors]
~~~~~~~~~~~~~~~~~~~
Generation keeps programs whose eager run raises at an in-place step (in-place on a leaf that
requires grad, on a piece of unbind/split, on an expanded view, ...): the program ends at that
step. The compiled call must then raise too, an error of the same type (Dynamo's wrappers are
unwrapped to the underlying exception). A compiled call that succeeds where eager raises is a
failure: compiled code must not accept what eager rejects. The same holds for ``backward()``.

Known, accepted differences (excluded from the comparison), see :data:`EXCLUSIONS`.

The acceptance tables (:data:`ACCEPTED_FALLBACKS`, :data:`EXCLUSIONS`, :data:`EAGER_ONLY_ERRORS`,
:data:`EAGER_ONLY_BACKWARD_ERRORS`, :data:`KNOWN_UPSTREAM_ERRORS`, :data:`REFUSALS`,
:data:`INPLACE_THEN_BACKWARD_GAPS`) are data: they live, each
entry with its explanation and repro, in ``fuzz_acceptance.toml`` next to this module, read
once at import (:func:`load_acceptance`).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import time
import tomllib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from .parity import alias_structure, inplace_then_backward, InplaceOutcome, same_outcome


# ---------------------------------------------------------------------------------------------
# What is accepted (fuzz_acceptance.toml)
# ---------------------------------------------------------------------------------------------

ACCEPTANCE_FILE = Path(__file__).with_name("fuzz_acceptance.toml")


@dataclasses.dataclass(frozen=True)
class EagerOnlyError:
    """An eager error that compiled code does not raise: ``message`` is a substring of it."""

    message: str
    repro: str


@dataclasses.dataclass(frozen=True)
class EagerOnlyBackwardError:
    """An error of eager's backward that compiled code does not raise: ``pattern`` is a regex
    over it."""

    pattern: str
    repro: str


@dataclasses.dataclass(frozen=True)
class KnownUpstreamError:
    """A compiled-only error that stock torch raises identically: ``type_name`` is in the MRO of
    the root error's type, ``pattern`` a regex over the formatted traceback."""

    type_name: str
    pattern: str
    repro: str


@dataclasses.dataclass(frozen=True)
class InplaceThenBackwardGap:
    """An in-place-then-backward run where eager's backward raises ``pattern`` (a regex) and
    compiled code (stock identically) computes the gradient of the forward's values, in
    programs with ``feature`` (Program.features) whose in-placed output aliases an input."""

    feature: str
    pattern: str
    repro: str


@dataclasses.dataclass(frozen=True)
class Acceptance:
    """The tables of fuzz_acceptance.toml (see its comments for each one's meaning)."""

    # Fallback reason -> {program feature that explains it: why it is accepted}.
    accepted_fallbacks: Mapping[str, Mapping[str, str]]
    # Accepted differences that the oracle does not check -> why.
    exclusions: Mapping[str, str]
    eager_only_errors: tuple[EagerOnlyError, ...]
    eager_only_backward_errors: tuple[EagerOnlyBackwardError, ...]
    known_upstream_errors: tuple[KnownUpstreamError, ...]
    # Compiled-only errors that the series raises where stock returns a wrong result (the same
    # fields as known_upstream_errors).
    refusals: tuple[KnownUpstreamError, ...]
    inplace_then_backward_gaps: tuple[InplaceThenBackwardGap, ...]


def _str_table(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError(f"{where} must be a table of strings")
    return dict(value)


def _entries(data: dict[str, Any], table: str, fields: tuple[str, ...], where: str) -> list[tuple[str, ...]]:
    """The rows of the array of tables ``table``, each as the tuple of its ``fields``."""
    rows = data.get(table)
    if not isinstance(rows, list):
        raise ValueError(f"{where}: [[{table}]] is missing")
    out = []
    for i, row in enumerate(rows):
        if set(row) != set(fields) or not all(isinstance(row[f], str) for f in fields):
            raise ValueError(f"{where}: {table}[{i}] must have exactly the string fields {fields}")
        out.append(tuple(row[f] for f in fields))
    return out


def load_acceptance(path: Path = ACCEPTANCE_FILE) -> Acceptance:
    """Read and check fuzz_acceptance.toml (ValueError where it is malformed)."""
    with path.open("rb") as f:
        data = tomllib.load(f)
    where = path.name
    fallbacks = data.get("accepted_fallbacks")
    if not isinstance(fallbacks, dict):
        raise ValueError(f"{where}: the [accepted_fallbacks.REASON] tables are missing")
    return Acceptance(
        accepted_fallbacks={
            reason: _str_table(feats, f"{where}: [accepted_fallbacks.{reason}]")
            for reason, feats in fallbacks.items()
        },
        exclusions=_str_table(data.get("exclusions"), f"{where}: [exclusions]"),
        eager_only_errors=tuple(
            EagerOnlyError(*row) for row in _entries(data, "eager_only_errors", ("message", "repro"), where)
        ),
        eager_only_backward_errors=tuple(
            EagerOnlyBackwardError(*row)
            for row in _entries(data, "eager_only_backward_errors", ("pattern", "repro"), where)
        ),
        known_upstream_errors=tuple(
            KnownUpstreamError(*row)
            for row in _entries(data, "known_upstream_errors", ("type", "pattern", "repro"), where)
        ),
        refusals=tuple(
            KnownUpstreamError(*row) for row in _entries(data, "refusals", ("type", "pattern", "repro"), where)
        ),
        inplace_then_backward_gaps=tuple(
            InplaceThenBackwardGap(*row)
            for row in _entries(data, "inplace_then_backward_gaps", ("feature", "pattern", "repro"), where)
        ),
    )


ACCEPTANCE = load_acceptance()
# The tables under their historical names (the tests' comments cite them).
ACCEPTED_FALLBACKS = ACCEPTANCE.accepted_fallbacks
EXCLUSIONS = ACCEPTANCE.exclusions
EAGER_ONLY_ERRORS: tuple[str, ...] = tuple(e.message for e in ACCEPTANCE.eager_only_errors)
EAGER_ONLY_BACKWARD_ERRORS: tuple[str, ...] = tuple(
    e.pattern for e in ACCEPTANCE.eager_only_backward_errors
)
KNOWN_UPSTREAM_ERRORS = ACCEPTANCE.known_upstream_errors
REFUSALS = ACCEPTANCE.refusals
INPLACE_THEN_BACKWARD_GAPS = ACCEPTANCE.inplace_then_backward_gaps


# ---------------------------------------------------------------------------------------------
# Programs as data
# ---------------------------------------------------------------------------------------------

# View ops: name -> source template over {x}. Multi-output ops yield their first and last piece.
VIEW_OPS: dict[str, str] = {
    "alias": "torch.ops.aten.alias({x})",
    # No storage_offset() argument: Dynamo graph-breaks on it and its resume function then
    # hits an upstream bug (KNOWN_UPSTREAM_ERRORS: the InternalTorchDynamoError entry).
    "as_strided": "{x}.as_strided(({x}.shape[0] // 2,), ({x}.stride(0),))",
    "conj": "{x}.conj()",
    "neg_view": "torch._neg_view({x})",
    "detach": "{x}.detach()",
    "diagonal": "{x}.diagonal()",
    "diagonal_1": "{x}.diagonal(offset=1, dim1=-1, dim2=0)",
    "expand": "{x}.unsqueeze(0).expand(2, *{x}.shape)",
    "permute": "{x}.permute(*reversed(range({x}.dim())))",
    # _reshape_alias is reshape's internal op: its callers guarantee a viewable (contiguous)
    # self, and eager does not check it (an expanded self gives an out-of-bounds view).
    "reshape_alias": "torch.ops.aten._reshape_alias({x}.contiguous(), ({x}.numel(),), (1,))",
    "select": "{x}[{x}.shape[0] - 1]",
    "select_last_dim": "{x}.select(-1, 0)",
    "slice": "{x}[: {x}.shape[0] // 2]",
    "slice_1": "{x}[:, 1:]",
    "slice_step": "{x}[1::2]",
    "narrow": "{x}.narrow(-1, 1, {x}.shape[-1] - 1)",
    "split": "{x}.split(2)",
    "split_sym": "{x}.split({x}.shape[0] // 2)",
    "chunk": "{x}.chunk(2, dim=-1)",
    "split_with_sizes": "{x}.split([1, {x}.shape[0] - 1])",
    "unbind": "{x}.unbind(0)",
    "unbind_last": "{x}.unbind(-1)",
    "squeeze": "{x}.squeeze()",
    "squeeze_dim": "{x}.unsqueeze(1).squeeze(1)",
    "squeeze_dims": "{x}.unsqueeze(0).squeeze((0,))",
    "t": "{x}.t()",
    "transpose": "{x}.transpose(0, -1)",
    "unfold": "{x}.unfold(0, 2, 1)",
    "unsqueeze": "{x}.unsqueeze(1)",
    "view": "{x}.view({x}.shape[-1], -1)",
    "view_flat": "{x}.view(-1)",
    "view_split": "{x}.view(2, -1)",
    "view_as_real": "torch.view_as_real({x})",
    "view_as_complex": "torch.view_as_complex({x}.unflatten(-1, (-1, 2)))",
    "view_dtype": "{x}.view(torch.int32)",
    "view_dtype_back": "{x}.view(torch.float32)",
    "reshape": "{x}.reshape(-1)",
    "contiguous": "{x}.contiguous()",
    "real": "{x}.real",
}
# Views that eager's autograd does not track as views (no _base): see EXCLUSIONS.
UNTRACKED_VIEWS = {"view_dtype", "view_dtype_back", "detach"}
# View ops that can return their self (real and conj of a real tensor, contiguous of a
# contiguous one): see EXCLUSIONS, "identity of outputs".
SELF_RETURNING_VIEWS = {"real", "conj", "contiguous"}
MULTI_OUTPUT = {"split", "split_sym", "chunk", "split_with_sizes", "unbind", "unbind_last"}

# Pointwise (fresh-storage) ops over {x} (and {y}, another value).
POINTWISE_OPS: dict[str, str] = {
    "mul": "{x} * 2",
    "add_y": "{x} + {y}",
    "sin": "{x}.sin()",
    "clone": "{x}.clone()",
    # .clone(), not "* 1": inductor from 2.14 returns the input itself for x * 1 (EXCLUSIONS).
    "resolve": "{x}.resolve_conj().resolve_neg().clone()",
}

# Fresh-storage ops that eager computes through ``_unsafe_view`` (issue #13): functionalization
# records the result as an ``_unsafe_view`` of the copy (mm's output, or reshape's clone), so
# views of it returned as outputs alias an intermediate whose ViewMeta chain starts with
# ``_unsafe_view``. Offered only where they apply (see :func:`_unsafe_view_applies`, at both
# sizes): matmul of a value of 3 or more dims with a 2-D weight (eager folds it into
# mm + ``_unsafe_view``): {y}, a 2-D value (e.g. a weight input, see :func:`programs`) whose
# first dim equals {x}'s last at both sizes, or a weight made from {x} itself; reshape/flatten
# of a non-contiguous value (clone + ``_unsafe_view``): {x} as it is (after a transpose, an
# expand, ...), or made non-contiguous in the same expression.
UNSAFE_VIEW_OPS: dict[str, str] = {
    "matmul": "{x} @ {y}",
    "matmul_self": "{x} @ {x}.flatten(0, -3)[0].t()",
    "reshape_copy": "{x}.reshape({x}.shape[-1], -1)",
    "reshape_copy_flat": "{x}.reshape(-1)",
    "flatten_copy": "{x}.flatten()",
    "flatten_copy_01": "{x}.flatten(0, 1)",
    "transpose_reshape": "{x}.transpose(0, -1).reshape(-1)",
    "permute_reshape": "{x}.permute(*reversed(range({x}.dim()))).reshape({x}.shape[0], -1)",
    "expand_flatten": "{x}.unsqueeze(0).expand(2, *{x}.shape).flatten(0, 1)",
}
MATMUL_OPS = {"matmul", "matmul_self"}
# Views of an UNSAFE_VIEW_OPS result that a program returns right away (see programs()).
UNSAFE_VIEW_OUTPUT_VIEWS = (
    "select", "select_last_dim", "slice", "slice_1", "slice_step", "narrow", "split", "split_sym",
    "chunk", "unbind", "t", "transpose", "permute", "view", "view_flat", "view_split",
    "diagonal", "unsqueeze", "expand",
)

# In-place mutations of {x}: data, and metadata (in-place view ops).
MUTATION_OPS: dict[str, str] = {
    "add_": "{x}.add_(1)",
    "mul_": "{x}.mul_(2)",
    "copy_": "{x}.copy_({y})",
    "nograd_add_": "with torch.no_grad(): {x}.add_(1)",
    "t_": "{x}.t_()",
    "transpose_": "{x}.transpose_(0, -1)",
    "unsqueeze_": "{x}.unsqueeze_(0)",
    "squeeze_": "{x}.squeeze_()",
    "as_strided_": "{x}.as_strided_((2, 2), (1, 2))",
    "requires_grad_": "{x}.requires_grad_()",
}
METADATA_MUTATIONS = {"t_", "transpose_", "unsqueeze_", "squeeze_", "as_strided_"}

# Input views: how an input that is a view of another tensor is made from its base.
INPUT_VIEWS: dict[str, str] = {
    "slice": "{x}[1:]",
    "transpose": "{x}.transpose(0, -1)",
    "expand": "{x}.unsqueeze(0).expand(2, *{x}.shape)",
    "select": "{x}[0]",
}

# Generators of issue #36. Each is a step kind of its own, and gives programs a feature of its
# own (NEW_KIND_FEATURES) that acceptance entries can name. Their templates are over {x} (and
# {y}) like the tables above; {n} and {n1} name the values the step makes (FOREACH_OPS,
# UNBACKED_OPS: a step of several statements). Each is offered only where it applies at both
# sizes (see _new_step_applies).
#
# Complex and dtype views: view_as_complex of a float value whose last dim is 2 (or made of
# pairs), view_as_real/.real/.imag of a complex value, and view(dtype) of the same element
# size. "complex" and "pairs" make fresh values to view: a complex one (torch.complex of x and
# 2x), and a float one whose last dim is 2 at both sizes (second_size grows a last dim of 2).
DTYPE_VIEW_OPS: dict[str, str] = {
    "complex": "torch.complex({x}, {x} * 2)",
    "pairs": "torch.stack([{x}, {x}.cos()], -1)",
    "view_as_complex": "torch.view_as_complex({x})",
    "view_as_complex_pairs": "torch.view_as_complex({x}.unflatten(-1, (-1, 2)))",
    "view_as_real": "torch.view_as_real({x})",
    "view_int32": "{x}.view(torch.int32)",
    "view_float32": "{x}.view(torch.float32)",
    "view_float64": "{x}.view(torch.float64)",
    "view_complex64": "{x}.view(torch.complex64)",
    "real": "{x}.real",
    "imag": "{x}.imag",
}
# The dtype each DTYPE_VIEW_OPS op is offered on (view(dtype): the same element size).
DTYPE_VIEW_SOURCES: dict[str, torch.dtype] = {
    "complex": torch.float32, "pairs": torch.float32, "view_as_complex": torch.float32,
    "view_as_complex_pairs": torch.float32, "view_as_real": torch.complex64,
    "view_int32": torch.float32, "view_float32": torch.int32, "view_float64": torch.complex64,
    "view_complex64": torch.float64, "real": torch.complex64, "imag": torch.complex64,
}
FRESH_DTYPE_OPS = {"complex", "pairs"}
# view(dtype) results: autograd does not track them as views (as UNTRACKED_VIEWS).
UNTRACKED_DTYPE_VIEWS = {"view_int32", "view_float32", "view_float64", "view_complex64"}

# Ops that return their self in eager (flatten() of a 1-D value, contiguous() of a contiguous
# one, to() of its dtype), or a view of the same shape (reshape to the same shape, view_as
# itself); the program returns both the value and the op's result.
SELF_OPS: dict[str, str] = {
    "flatten_1d": "{x}.flatten()",
    "contiguous_self": "{x}.contiguous()",
    "to_same_dtype": "{x}.to({x}.dtype)",
    "reshape_same": "{x}.reshape({x}.shape)",
    "view_as_self": "{x}.view_as({x})",
}
# SELF_OPS that return the very tensor.
SELF_IDENTITY_OPS = {"flatten_1d", "contiguous_self", "to_same_dtype"}

# In-place foreach ops on a list of two views of a flat buffer of a contiguous value (the
# views optionally taken under no_grad: eager raises when a stale one's grad_fn is read).
_FOREACH_VIEWS = "_f = {x}.view(-1); v{n}, v{n1} = _f[:2].view(1, 2), _f[2:]"
FOREACH_OPS: dict[str, str] = {
    "foreach_add_": _FOREACH_VIEWS + "\ntorch._foreach_add_([v{n}, v{n1}], 1)",
    "foreach_mul_": _FOREACH_VIEWS + "\ntorch._foreach_mul_([v{n}, v{n1}], 2)",
    "nograd_foreach_add_": "with torch.no_grad(): " + _FOREACH_VIEWS
    + "\ntorch._foreach_add_([v{n}, v{n1}], 1)",
    "nograd_foreach_mul_": "with torch.no_grad(): " + _FOREACH_VIEWS
    + "\ntorch._foreach_mul_([v{n1}, v{n}], 2)",
}
NOGRAD_FOREACH_OPS = {"nograd_foreach_add_", "nograd_foreach_mul_"}

# Views of .data and detach() (untracked by autograd), and in-place on them.
DATA_VIEW_OPS: dict[str, str] = {
    "data_slice": "{x}.data[1:]",
    "detach_slice": "{x}.detach()[1:]",
    "data_slice_add_": "{x}.data[1:].add_(1)",
    "detach_slice_mul_": "{x}.detach()[1:].mul_(2)",
}

# Batched matmul: 3-D x 3-D and 4-D x 3-D ({y}: a batched operand input, see
# _draw_input_specs), or operands made from {x} itself (a 3-D value).
BMM_OPS: dict[str, str] = {
    "bmm": "{x} @ {y}",
    "bmm_self": "{x} @ {x}.transpose(-2, -1)",
    "bmm_4d_self": "{x}.unsqueeze(1) @ {x}.transpose(-2, -1)",
}

# Starts that are unbacked symbols: {y} is a small int64 input (INDEX_VALUES) whose tolist()
# gives a, b; the program checks them (torch._check) and slices {x} at a + b, or from a.
# Compiled with torch._dynamo.config.capture_scalar_outputs=True (check_program).
_UNBACKED_PRELUDE = (
    "_a, _b = {y}.tolist(); torch._check(_a >= 0); torch._check(_b >= 0); "
    "torch._check(_a + _b < {x}.shape[0]); "
)
UNBACKED_OPS: dict[str, str] = {
    "narrow_ab": _UNBACKED_PRELUDE + "v{n} = {x}.narrow(0, _a + _b, 1)",
    "slice_a": _UNBACKED_PRELUDE + "v{n} = {x}[_a:]",
}
# The values of an int64 input at each size (a, b): a + b < the first dim it slices.
INDEX_VALUES = ((1, 0), (1, 2))

NEW_KIND_OPS: dict[str, dict[str, str]] = {
    "dtype_view": DTYPE_VIEW_OPS,
    "self_op": SELF_OPS,
    "foreach": FOREACH_OPS,
    "data_view": DATA_VIEW_OPS,
    "bmm": BMM_OPS,
    "unbacked": UNBACKED_OPS,
}
# The feature (Program.features) each new kind gives a program.
NEW_KIND_FEATURES: dict[str, str] = {
    "dtype_view": "dtype_view",
    "self_op": "self_returning_op",
    "foreach": "foreach_views",
    "data_view": "data_view",
    "bmm": "batched_matmul",
    "unbacked": "unbacked_start",
}
# Steps of the new kinds that write to {x}'s storage (an eager error there ends the program).
MUTATING_NEW_OPS = {*FOREACH_OPS, "data_slice_add_", "detach_slice_mul_"}


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """One graph input: a fresh leaf of ``shape``, or a view (``view``) of the ``of``-th input."""

    shape: tuple[int, ...] = (4, 4)
    requires_grad: bool = True
    of: int | None = None
    view: str | None = None
    # "int64": a (2,) index input with INDEX_VALUES (for UNBACKED_OPS), not a leaf.
    dtype: str = "float32"


@dataclasses.dataclass(frozen=True)
class Step:
    """``kind`` is "view", "pointwise", "unsafe_view" or "mutation", or a kind of NEW_KIND_OPS;
    ``op`` a key of its table (VIEW_OPS, POINTWISE_OPS, UNSAFE_VIEW_OPS, MUTATION_OPS,
    NEW_KIND_OPS[kind]); ``x``/``y`` value indices."""

    kind: str
    op: str
    x: int
    y: int | None = None


@dataclasses.dataclass(frozen=True)
class Program:
    inputs: tuple[InputSpec, ...]
    steps: tuple[Step, ...]
    outputs: tuple[int, ...]

    # -- source ---------------------------------------------------------------------------
    def num_values(self) -> int:
        n = len(self.inputs)
        for s in self.steps:
            n += _values_added(s)
        return n

    def statements(self) -> list[str]:
        lines: list[str] = []
        n = len(self.inputs)
        for s in self.steps:
            lines.append(_render_step(s, n))
            n += _values_added(s)
        return lines

    def source(self, name: str = "program") -> str:
        args = ", ".join(f"v{i}" for i in range(len(self.inputs)))
        body = [f"    {line}" for stmt in self.statements() for line in stmt.split("\n")]
        outs = ", ".join(f"v{i}" for i in self.outputs)
        body.append(f"    return ({outs},)")
        return f"def {name}({args}):\n" + "\n".join(body) + "\n"

    def function(self) -> Callable[..., Any]:
        scope: dict[str, Any] = {"torch": torch}
        exec(compile(self.source(), "<fuzz program>", "exec"), scope)  # noqa: S102
        return scope["program"]

    def features(self) -> set[str]:
        """Features that explain accepted fallbacks (ACCEPTED_FALLBACKS)."""
        feats: set[str] = set()
        # Values that alias an input: inputs, and views of them.
        input_alias = set(range(len(self.inputs)))
        untracked_views: set[int] = set()  # results of UNTRACKED_VIEWS and views of them
        unsafe_view_values: set[int] = set()  # results of UNSAFE_VIEW_OPS and views of them
        self_returned: set[int] = set()  # results of SELF_RETURNING_VIEWS
        # Alias groups: value -> the value whose storage it views.
        root = {i: i if spec.of is None else spec.of for i, spec in enumerate(self.inputs)}
        # Values that exist at the first Dynamo graph break (requires_grad_): the graph
        # after it takes them as inputs.
        at_break: int | None = None
        n = len(self.inputs)
        for s in self.steps:
            k = _values_added(s)
            if s.kind in NEW_KIND_FEATURES:
                feats.add(NEW_KIND_FEATURES[s.kind])
            if s.kind == "foreach" and s.op in NOGRAD_FOREACH_OPS:
                feats.add("nograd_foreach_views")
            is_alias = s.kind == "view" and s.op not in ("contiguous", "reshape") or s.kind in (
                "dtype_view", "self_op", "foreach", "data_view", "unbacked"
            ) and s.op not in FRESH_DTYPE_OPS
            for v in range(n, n + k):
                root[v] = root[s.x] if is_alias else v
            if is_alias and s.x in input_alias:
                input_alias.update(range(n, n + k))
            if s.kind == "mutation" and s.op == "requires_grad_" and at_break is None:
                at_break = n
            elif s.kind == "mutation" and at_break is not None:
                if sum(root[v] == root[s.x] for v in range(at_break)) >= 2:
                    feats.add("mutated_aliased_inputs")
            if s.kind == "view" and s.op in SELF_RETURNING_VIEWS:
                feats.add("self_returning_view")
                self_returned.update(range(n, n + k))
            if s.kind == "self_op" and s.op in SELF_IDENTITY_OPS:
                self_returned.update(range(n, n + k))
            if s.kind == "mutation" and s.op in METADATA_MUTATIONS and s.x in self_returned:
                feats.add("metadata_mutation_of_self_returning_view")
            if s.kind == "mutation" and s.op in METADATA_MUTATIONS and s.x not in input_alias:
                feats.add("intermediate_metadata_mutation")
            if s.kind == "mutation" and s.op == "copy_" and s.y is not None and root[s.y] == root[s.x]:
                feats.add("copy_from_an_alias")
            if s.kind == "unsafe_view":
                feats.add("unsafe_view_producer")
            if s.kind == "view" and s.x in untracked_views:
                feats.add("view_of_untracked_view")
            if s.kind == "view" and s.op in UNTRACKED_VIEWS and s.x in unsafe_view_values:
                feats.add("untracked_view_of_unsafe_view")
            if s.kind == "unsafe_view" or s.kind == "view" and s.x in unsafe_view_values:
                unsafe_view_values.update(range(n, n + k))
            if s.kind == "mutation" and s.op in METADATA_MUTATIONS and s.x in unsafe_view_values:
                feats.add("unsafe_view_metadata_mutation")
            if s.kind == "mutation" and s.op not in METADATA_MUTATIONS and s.x in input_alias:
                feats.add("input_data_mutation")
            if s.op in MUTATING_NEW_OPS and s.x in input_alias:
                feats.add("input_data_mutation")
            if s.kind in ("dtype_view", "self_op", "data_view", "unbacked") and s.x in untracked_views:
                feats.add("view_of_untracked_view")
            # x.data[1:], x.detach()[1:] are views of an untracked view (x.data, x.detach()):
            # so are views of them.
            if s.kind == "view" and (s.op in UNTRACKED_VIEWS or s.x in untracked_views) or (
                s.kind in ("dtype_view", "data_view") and s.op in UNTRACKED_DTYPE_VIEWS | set(DATA_VIEW_OPS)
                or s.kind in ("self_op", "dtype_view", "data_view", "unbacked")
                and s.x in untracked_views and s.op not in FRESH_DTYPE_OPS
            ):
                untracked_views.update(range(n, n + k))
            if s.kind == "mutation" and s.op in METADATA_MUTATIONS and s.x in input_alias:
                feats.add("input_metadata_mutation")
            if s.kind == "mutation" and s.op in METADATA_MUTATIONS and s.x in untracked_views:
                feats.add("untracked_view_metadata_mutation")
            if (s.kind == "mutation" or s.op in MUTATING_NEW_OPS) and s.x in input_alias and any(
                i.of is not None for i in self.inputs
            ):
                feats.add("mutated_aliased_inputs")
            n += k
        return feats

    def __str__(self) -> str:
        return f"inputs={list(self.inputs)}\n{self.source()}"


def _values_added(step: Step) -> int:
    if step.kind == "mutation":
        return 0
    if step.kind == "view" and step.op in MULTI_OUTPUT or step.kind == "foreach":
        return 2
    return 1


def _render_step(s: Step, n: int) -> str:
    """The statement(s) of step ``s`` whose first new value is v{n} (several: lines)."""
    if s.kind in ("foreach", "unbacked"):
        return NEW_KIND_OPS[s.kind][s.op].format(x=f"v{s.x}", y=f"v{s.y}", n=n, n1=n + 1)
    table = {"view": VIEW_OPS, "pointwise": POINTWISE_OPS, "unsafe_view": UNSAFE_VIEW_OPS,
             "mutation": MUTATION_OPS, **NEW_KIND_OPS}[s.kind]
    expr = table[s.op].format(x=f"v{s.x}", y=f"v{s.y}")
    if s.kind == "mutation":
        return expr
    if s.kind == "view" and s.op in MULTI_OUTPUT:
        return f"_p = {expr}; v{n}, v{n + 1} = _p[0], _p[-1]"
    return f"v{n} = {expr}"


def second_size(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The second size a program runs at: every dim but size-1 ones grows by 2 (same parity)."""
    return tuple(d if d <= 1 else d + 2 for d in shape)


def make_inputs(
    program: Program, size_index: int = 0, seed: int = 0
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Fresh inputs (and the leaves they are made from) for one run at size 0 or 1."""
    gen = torch.Generator().manual_seed(seed * 7919 + size_index)
    inputs: list[torch.Tensor] = []
    leaves: list[torch.Tensor] = []
    for spec in program.inputs:
        if spec.dtype == "int64":
            t = torch.tensor(INDEX_VALUES[size_index], dtype=torch.int64)
        elif spec.of is None:
            shape = spec.shape if size_index == 0 else second_size(spec.shape)
            t = torch.randn(shape, generator=gen).requires_grad_(spec.requires_grad)
            leaves.append(t)
        else:
            base = inputs[spec.of]
            t = eval(INPUT_VIEWS[spec.view].format(x="base"), {"base": base})  # noqa: S307
        inputs.append(t)
    return inputs, leaves


# ---------------------------------------------------------------------------------------------
# Generation (hypothesis)
# ---------------------------------------------------------------------------------------------

MAX_NUMEL = 256
MAX_DIM = 4


def _try_expr(template: str, x: torch.Tensor, y: torch.Tensor | None = None, *, limit: bool = True) -> Any:
    """The value of ``template`` on (x, y), or None if it raises or (``limit``) exceeds
    MAX_DIM/MAX_NUMEL."""
    try:
        with torch.no_grad():
            out = eval(template.format(x="x", y="y"), {"torch": torch, "x": x, "y": y})  # noqa: S307
    except Exception:  # noqa: BLE001
        return None
    outs = out if isinstance(out, (tuple, list)) else (out,)
    if not outs or limit and any(o.dim() > MAX_DIM or o.numel() > MAX_NUMEL for o in outs):
        return None
    return out


def _unsafe_view_applies(op: str, sized: Sequence[tuple[torch.Tensor, torch.Tensor | None]]) -> bool:
    """Whether UNSAFE_VIEW_OPS[op] applies to (x, y) at every size in ``sized`` (detached
    aliases of the values, first size first; the size limits hold at the first): matmul needs
    x of 3 or more dims (mm + _unsafe_view; 2-D is a plain mm) and, for ``matmul``, a 2-D y;
    reshape/flatten must copy (a view of x is VIEW_OPS's)."""
    for i, (x, y) in enumerate(sized):
        if op in MATMUL_OPS and x.dim() < 3 or op == "matmul" and (y is None or y.dim() != 2):
            return False
        out = _try_expr(UNSAFE_VIEW_OPS[op], x, y, limit=i == 0)
        if not isinstance(out, torch.Tensor):
            return False
        if op not in MATMUL_OPS and out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr():
            return False
    return True


def _draw_input_specs(draw: Any, max_inputs: int, new_kinds: Sequence[str] = ()) -> list[InputSpec]:
    """The graph inputs: fresh leaves, 2-D weights that follow one, and views of an earlier input;
    for the ``new_kinds`` that need them, batched matmul operands and an int64 index input."""
    from hypothesis import strategies as st

    dims = st.integers(min_value=1, max_value=5)
    n_inputs = draw(st.integers(1, max_inputs))
    specs: list[InputSpec] = []
    for i in range(n_inputs):
        # Fresh inputs of 2 or more dims that a 2-D weight input can follow (UNSAFE_VIEW_OPS:
        # matmul); its first dim equals their last, at both sizes (second_size). A weight
        # requires grad, as a parameter does.
        weighable = [j for j in range(i) if specs[j].of is None and len(specs[j].shape) >= 2]
        if i > 0 and draw(st.integers(0, 3)) == 0:
            of = draw(st.integers(0, i - 1))
            view = draw(st.sampled_from(sorted(INPUT_VIEWS)))
            specs.append(InputSpec(shape=(), requires_grad=specs[of].requires_grad, of=of, view=view))
        elif weighable and draw(st.integers(0, 2)) == 0:
            j = draw(st.sampled_from(weighable))
            shape = (specs[j].shape[-1], draw(dims))
            specs.append(InputSpec(shape=shape, requires_grad=True))
        else:
            ndim = draw(st.integers(1, 3))
            shape = tuple(draw(dims) for _ in range(ndim))
            specs.append(InputSpec(shape=shape, requires_grad=draw(st.booleans())))
    # Input views that eager cannot make at either size are replaced by fresh leaves.
    try:
        for k in (0, 1):
            make_inputs(Program(tuple(specs), (), ()), k)
    except Exception:  # noqa: BLE001
        specs = [dataclasses.replace(s, of=None, view=None, shape=(3, 4)) if s.of is not None else s
                 for s in specs]
    if "bmm" in new_kinds and draw(st.integers(0, 3)) == 0:
        # Batched matmul operands (BMM_OPS "bmm"): (b, m, k) or (b, 1, m, k), and (b, k, n);
        # equal dims stay equal at the second size.
        b, m, k, n = (draw(st.integers(1, 3)) for _ in range(4))
        lhs = (b, 1, m, k) if draw(st.booleans()) else (b, m, k)
        specs.append(InputSpec(shape=lhs, requires_grad=draw(st.booleans())))
        specs.append(InputSpec(shape=(b, k, n), requires_grad=draw(st.booleans())))
    if "unbacked" in new_kinds and draw(st.integers(0, 2)) == 0:
        specs.append(InputSpec(shape=(2,), requires_grad=False, dtype="int64"))
    return specs


class _Simulation:
    """A program being generated: its steps so far, run eagerly on the inputs of the first size
    (``values``), and on those of the second (``values1``), so that UNSAFE_VIEW_OPS are only
    offered where their shapes hold at both sizes; ``values1`` is None once a step raised there
    only. ``returned``: views of UNSAFE_VIEW_OPS results, which the program returns."""

    def __init__(self, specs: Sequence[InputSpec]) -> None:
        inputs, _ = make_inputs(Program(tuple(specs), (), ()), 0)
        self.values: list[torch.Tensor] = list(inputs)
        self.scope: dict[str, Any] = {"torch": torch}
        for i, v in enumerate(self.values):
            self.scope[f"v{i}"] = v
        inputs1, _ = make_inputs(Program(tuple(specs), (), ()), 1)
        self.values1: list[torch.Tensor] | None = list(inputs1)
        self.scope1: dict[str, Any] = {"torch": torch}
        for i, v in enumerate(inputs1):
            self.scope1[f"v{i}"] = v
        self.steps: list[Step] = []
        self.returned: list[int] = []
        # int64 index inputs: only UNBACKED_OPS read them (no other step takes or returns them).
        self.reserved = {i for i, spec in enumerate(specs) if spec.dtype == "int64"}

    def eligible(self) -> list[int]:
        """The values other steps may take (not the index inputs)."""
        return [i for i in range(len(self.values)) if i not in self.reserved]

    def sizes(self) -> list[list[torch.Tensor]]:
        """The values at each size they are still simulated at, first size first."""
        return [self.values] if self.values1 is None else [self.values, self.values1]

    def add(self, step: Step) -> bool | None:
        """Run ``step`` at both sizes: True if it is kept, False if skipped, None if it is
        kept and ends the program (an eager error, Note [Eager errors])."""
        line = _render_step(step, len(self.values))
        try:
            exec(line, self.scope)  # noqa: S102
        except Exception:  # noqa: BLE001
            if step.kind != "mutation" and step.op not in MUTATING_NEW_OPS:
                return False
            self.steps.append(step)
            return None
        self.steps.append(step)
        if self.values1 is not None:
            try:
                exec(line, self.scope1)  # noqa: S102
            except Exception:  # noqa: BLE001
                self.values1 = None
        for _ in range(_values_added(step)):
            self.values.append(self.scope[f"v{len(self.values)}"])
            if self.values1 is not None:
                self.values1.append(self.scope1[f"v{len(self.values1)}"])
        return True


def _unsafe_view_candidates(sim: _Simulation) -> dict[str, list[tuple[int, int | None]]]:
    """UNSAFE_VIEW_OPS op -> the (x, y) value indices it applies to, at every simulated size."""
    sizes = sim.sizes()
    applies: dict[str, list[tuple[int, int | None]]] = {}
    eligible = sim.eligible()
    for op in UNSAFE_VIEW_OPS:
        for x in eligible:
            for y in (eligible if "{y}" in UNSAFE_VIEW_OPS[op] else (None,)):
                if _unsafe_view_applies(op, [
                    (v[x].detach(), None if y is None else v[y].detach()) for v in sizes
                ]):
                    applies.setdefault(op, []).append((x, y))
    return applies


def _draw_unsafe_view(draw: Any, sim: _Simulation) -> None:
    """Add an UNSAFE_VIEW_OPS step and, most of the time, a returned view of its result.

    The op first (among those that apply to some value), then x (and y) where it applies:
    matmul needs a 3-D value and a matching weight, which are rare."""
    from hypothesis import strategies as st

    applies = _unsafe_view_candidates(sim)
    values = sim.values
    # Mostly values that require grad: outputs aliasing an intermediate are
    # regenerated from it in the autograd.Function's runtime wrapper.
    if draw(st.integers(0, 3)) != 0:
        grad = {op: [(x, y) for x, y in xys if values[x].requires_grad
                     or y is not None and values[y].requires_grad] for op, xys in applies.items()}
        applies = {op: xys for op, xys in grad.items() if xys} or applies
    if not applies:
        return
    # matmul thrice: it applies to few values, reshape/flatten of a copy to most.
    weighted = [op for op in sorted(applies) for _ in range(3 if op in MATMUL_OPS else 1)]
    op = draw(st.sampled_from(weighted))
    x, y = draw(st.sampled_from(applies[op]))
    if sim.add(Step("unsafe_view", op, x, y)) is not True:
        return
    # Return a view of the result (an output aliasing an intermediate whose view
    # chain starts with _unsafe_view), most of the time.
    u = len(values) - 1
    if draw(st.integers(0, 3)) == 0:
        return
    views = [op for op in UNSAFE_VIEW_OUTPUT_VIEWS
             if _try_expr(VIEW_OPS[op], values[u].detach()) is not None]
    if views and sim.add(Step("view", draw(st.sampled_from(views)), u)):
        sim.returned.append(len(values) - 1)


def _draw_step(draw: Any, values: Sequence[torch.Tensor], kind: str, eligible: Sequence[int]) -> Step | None:
    """A "view", "pointwise" or "mutation" step on a value (of ``eligible``), or None if the
    drawn op does not apply to it."""
    from hypothesis import strategies as st

    x = draw(st.sampled_from(eligible))
    xv = values[x]
    if kind == "view":
        ok = [op for op, tpl in VIEW_OPS.items() if _try_expr(tpl, xv.detach()) is not None]
        if not ok:
            return None
        return Step("view", draw(st.sampled_from(ok)), x)
    if kind == "pointwise":
        op = draw(st.sampled_from(sorted(POINTWISE_OPS)))
        y = draw(st.sampled_from(eligible)) if "{y}" in POINTWISE_OPS[op] else None
        if _try_expr(POINTWISE_OPS[op], xv.detach(), None if y is None else values[y].detach()) is None:
            return None
        return Step("pointwise", op, x, y)
    op = draw(st.sampled_from(sorted(MUTATION_OPS)))
    if op == "requires_grad_" and any(
        i != x and v.untyped_storage().data_ptr() == xv.untyped_storage().data_ptr()
        for i, v in enumerate(values)
    ):
        return None  # EXCLUSIONS: "requires_grad_ on a value that has views"
    y = draw(st.sampled_from(eligible)) if "{y}" in MUTATION_OPS[op] else None
    # Shape errors are not interesting; autograd's errors are (Note [Eager errors]).
    probe = xv.detach().clone()
    if _try_expr(MUTATION_OPS[op].replace("with torch.no_grad(): ", ""), probe,
                 None if y is None else values[y].detach()) is None:
        return None
    return Step("mutation", op, x, y)


def _new_step_applies(kind: str, op: str, x: int, y: int | None, sim: _Simulation) -> bool:
    """Whether NEW_KIND_OPS[kind][op] applies to values (x, y) at every simulated size (the
    size limits hold at the first)."""
    for i, values in enumerate(sim.sizes()):
        xv = values[x].detach()
        yv = None if y is None else values[y].detach()
        if kind == "dtype_view" and xv.dtype != DTYPE_VIEW_SOURCES[op]:
            return False
        if kind == "self_op" and (op == "flatten_1d" and xv.dim() != 1
                                  or op == "contiguous_self" and not xv.is_contiguous()):
            return False
        if kind == "bmm" and (xv.dim() != 3 and not (op == "bmm" and xv.dim() == 4)
                              or op == "bmm" and (yv is None or yv.dim() != 3)):
            return False
        if kind == "foreach":
            if not (xv.is_floating_point() and xv.is_contiguous() and 3 <= xv.numel()):
                return False
            continue
        if kind == "unbacked":
            a, b = INDEX_VALUES[i]
            if xv.dim() == 0 or xv.shape[0] <= a + b:
                return False
            continue
        probe = xv.clone() if op in MUTATING_NEW_OPS else xv
        if _try_expr(NEW_KIND_OPS[kind][op], probe, yv, limit=i == 0) is None:
            return False
    return True


def _draw_new_step(draw: Any, sim: _Simulation, new_kinds: Sequence[str]) -> bool | None:
    """Add a step of one of the ``new_kinds`` (NEW_KIND_OPS), and what goes with it: a view of
    a fresh complex/pairs value, a returned view of a batched product, the value and the result
    of a self-returning op as outputs. The result of :meth:`_Simulation.add` (True if nothing
    applies)."""
    from hypothesis import strategies as st

    eligible = sim.eligible()
    # The kind first (among those with an op that applies to some value), then the op.
    by_kind: dict[str, dict[str, list[tuple[int, int | None]]]] = {}
    for kind in sorted(new_kinds):
        for op in NEW_KIND_OPS[kind]:
            ys: Sequence[int | None] = (None,)
            if kind == "bmm" and op == "bmm":
                ys = eligible
            elif kind == "unbacked":
                ys = sorted(sim.reserved)
            xys = [(x, y) for x in eligible for y in ys if _new_step_applies(kind, op, x, y, sim)]
            if xys:
                by_kind.setdefault(kind, {})[op] = xys
    if not by_kind:
        return True
    # The inputs drawn for them (an index input, batched operands) would go unused otherwise:
    # such a kind is taken half the time until a step uses them.
    used = {(s.kind, s.op) for s in sim.steps}
    preferred = [k for k, op in (("unbacked", None), ("bmm", "bmm")) if k in by_kind
                 and (op is None or op in by_kind[k]) and not any(u[0] == k for u in used)]
    if preferred and draw(st.booleans()):
        kind = draw(st.sampled_from(preferred))
        if kind == "bmm":
            by_kind["bmm"] = {"bmm": by_kind["bmm"]["bmm"]}
    else:
        kind = draw(st.sampled_from(sorted(by_kind)))
    applies = by_kind[kind]
    if kind == "self_op" and "flatten_1d" in applies and draw(st.booleans()):
        op = "flatten_1d"  # 1-D values are few; the other ops apply to every value
    else:
        op = draw(st.sampled_from(sorted(applies)))
    x, y = draw(st.sampled_from(applies[op]))
    added = sim.add(Step(kind, op, x, y))
    if added is not True:
        return added
    u = len(sim.values) - 1
    if kind == "self_op":
        sim.returned.extend([x, u])
    elif kind == "dtype_view":
        # A chain of dtype views: always after a fresh complex/pairs value, else half the time
        # (complex -> view(float64) -> view(complex64), view(int32) -> view(float32), ...).
        while op in FRESH_DTYPE_OPS or draw(st.booleans()):
            views = [o for o in sorted(DTYPE_VIEW_OPS)
                     if o not in FRESH_DTYPE_OPS and _new_step_applies(kind, o, u, None, sim)]
            if not views:
                break
            op = draw(st.sampled_from(views))
            added = sim.add(Step(kind, op, u))
            if added is not True:
                return added
            u = len(sim.values) - 1
    elif kind == "bmm" and draw(st.integers(0, 3)) != 0:
        views = [v for v in UNSAFE_VIEW_OUTPUT_VIEWS
                 if _try_expr(VIEW_OPS[v], sim.values[u].detach()) is not None]
        if views and sim.add(Step("view", draw(st.sampled_from(views)), u)):
            sim.returned.append(len(sim.values) - 1)
    return True


def programs(max_steps: int = 6, max_inputs: int = 3, new_kinds: Sequence[str] | None = None) -> Any:
    """A hypothesis strategy of :class:`Program`; ``new_kinds``: the kinds of NEW_KIND_OPS it
    generates (None: all; an empty sequence gives the programs of before issue #36)."""
    from hypothesis import strategies as st

    kinds = tuple(sorted(NEW_KIND_OPS if new_kinds is None else new_kinds))
    unknown = set(kinds) - set(NEW_KIND_OPS)
    if unknown:
        raise ValueError(f"unknown generator kinds {sorted(unknown)}; known: {sorted(NEW_KIND_OPS)}")
    choices = ["view", "view", "view", "pointwise", "unsafe_view", "mutation"]
    if kinds:
        choices += ["new", "new"]

    @st.composite
    def build(draw: Any) -> Program:
        specs = _draw_input_specs(draw, max_inputs, kinds)
        sim = _Simulation(specs)
        n_steps = draw(st.integers(1, max_steps))
        for _ in range(n_steps):
            kind = draw(st.sampled_from(choices))
            if kind == "unsafe_view":
                _draw_unsafe_view(draw, sim)
                continue
            if kind == "new":
                if _draw_new_step(draw, sim, kinds) is None:
                    break
                continue
            step = _draw_step(draw, sim.values, kind, sim.eligible())
            if step is not None and sim.add(step) is None:
                break
        n_out = draw(st.integers(1, 4))
        eligible = sim.eligible()
        outputs = tuple(dict.fromkeys(sim.returned)) + tuple(
            draw(st.sampled_from(eligible)) for _ in range(n_out)
        )
        return Program(tuple(specs), tuple(sim.steps), outputs)

    return build()


# ---------------------------------------------------------------------------------------------
# The oracle
# ---------------------------------------------------------------------------------------------


class Mismatch(AssertionError):
    """Eager and compiled disagree (a finding, or an oracle problem)."""


def _observable_strides(t: torch.Tensor) -> tuple[int | None, ...]:
    if t.numel() == 0:
        return tuple(None for _ in t.stride())
    return tuple(None if size == 1 else stride for size, stride in zip(t.size(), t.stride()))


def _root_error(e: BaseException) -> BaseException:
    """The exception Dynamo/AOTAutograd wrapped, if any. InternalTorchDynamoError keeps it
    only as ``__context__`` (Dynamo re-raises it with the message "TypeName: message")."""
    from torch._dynamo.exc import InternalTorchDynamoError, TorchDynamoException

    seen = set()
    while isinstance(e, TorchDynamoException) and id(e) not in seen:
        seen.add(id(e))
        inner = getattr(e, "inner_exception", None) or e.__cause__
        if inner is None and isinstance(e, InternalTorchDynamoError):
            inner = e.__context__
        if inner is None:
            break
        e = inner
    return e


def _fallback_reason(e: BaseException) -> str | None:
    try:
        from torch._functorch._aot_autograd.view_replay import ViewReplayFallbackError
    except ImportError:
        return None  # stock torch: no view replay, no fallback

    chain: BaseException | None = e
    seen = set()
    while chain is not None and id(chain) not in seen:
        seen.add(id(chain))
        if isinstance(chain, ViewReplayFallbackError):
            m = re.search(r"as_strided\(\) \((\w+)\)", str(chain))
            return m.group(1) if m else "UNKNOWN"
        chain = getattr(chain, "inner_exception", None) or chain.__cause__ or chain.__context__
    m = re.search(r"ViewReplayFallbackError: view replay fell back to as_strided\(\) \((\w+)\)", str(e))
    return m.group(1) if m else None


@dataclasses.dataclass
class RunResult:
    error: BaseException | None = None
    outputs: tuple[torch.Tensor, ...] = ()
    inputs: list[torch.Tensor] = dataclasses.field(default_factory=list)
    leaves: list[torch.Tensor] = dataclasses.field(default_factory=list)
    backward_error: BaseException | None = None


def _run(fn: Callable[..., Any], program: Program, size_index: int, seed: int) -> RunResult:
    inputs, leaves = make_inputs(program, size_index, seed)
    res = RunResult(inputs=inputs, leaves=leaves)
    try:
        out = fn(*inputs)
        # Eager raises lazily for a piece of a multi-output view whose base was modified in
        # place: on the first use of its grad_fn. Compiled code raises while compiling.
        for o in out:
            _ = o.grad_fn
    except Exception as e:  # noqa: BLE001
        res.error = e
        return res
    res.outputs = tuple(out)
    return res


def _backward(res: RunResult) -> None:
    loss = None
    for i, o in enumerate(res.outputs):
        if o.requires_grad and (o.is_floating_point() or o.is_complex()):
            if o.is_complex():
                o = torch.view_as_real(o.resolve_conj())
            term = (o.resolve_neg().float() * (i + 1)).sum()
            loss = term if loss is None else loss + term
    if loss is None:
        return
    try:
        loss.backward()
    except Exception as e:  # noqa: BLE001
        res.backward_error = e


def known_upstream_error(e: BaseException) -> str | None:
    """The KNOWN_UPSTREAM_ERRORS or REFUSALS repro that ``e`` matches, if any."""
    import traceback

    root = _root_error(e)
    text = "".join(traceback.format_exception(root)) + "".join(traceback.format_exception(e))
    for known in (*KNOWN_UPSTREAM_ERRORS, *REFUSALS):
        if known.type_name in {c.__name__ for c in type(root).__mro__} and re.search(known.pattern, text):
            return known.repro
    return None


def _same_error(eager: BaseException, compiled: BaseException) -> bool:
    root = _root_error(compiled)
    return isinstance(root, type(eager))


def _describe(t: torch.Tensor) -> str:
    return (f"size={tuple(t.size())} stride={t.stride()} offset={t.storage_offset()} "
            f"dtype={t.dtype} view={t._is_view()} rg={t.requires_grad} leaf={t.is_leaf}")


def _compare_tensor(
    what: str, r: torch.Tensor, o: torch.Tensor, *, check_is_view: bool = True, check_layout: bool = True
) -> None:
    problems = []
    if r.dtype != o.dtype:
        problems.append("dtype")
    if r.size() != o.size():
        problems.append("size")
    elif check_layout and _observable_strides(r) != _observable_strides(o):
        problems.append("stride")
    if check_layout and r.numel() and r.storage_offset() != o.storage_offset():
        problems.append("storage_offset")
    if r.requires_grad != o.requires_grad:
        problems.append("requires_grad")
    if r.is_leaf != o.is_leaf:
        problems.append("is_leaf")
    if check_is_view and r._is_view() != o._is_view():
        problems.append("_is_view")
    if not problems and r.is_conj() != o.is_conj() and not r.is_complex():
        problems.append("is_conj")
    if not problems:
        rv, ov = r.detach().resolve_conj().resolve_neg(), o.detach().resolve_conj().resolve_neg()
        if not torch.equal(rv, ov) and not (
            rv.is_floating_point() or rv.is_complex()
        ) or (rv.is_floating_point() or rv.is_complex()) and not torch.allclose(
            rv, ov, rtol=1e-5, atol=1e-5, equal_nan=True
        ):
            problems.append("values")
    if problems:
        raise Mismatch(f"{what}: {', '.join(problems)} differ: eager {_describe(r)}; compiled {_describe(o)}")


def _sharing(
    outs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor], *, check_identity: bool = True
) -> list[list[tuple[bool, bool | None]]]:
    """Per output, per input then output: (shares its storage, is it)."""
    everything = list(inputs) + list(outs)
    return [[(_same_storage(o, t), o is t if check_identity else None) for t in everything] for o in outs]


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def compare(
    ref: RunResult,
    res: RunResult,
    *,
    check_is_view: bool = True,
    check_identity: bool = True,
    check_intermediate_aliases: bool = True,
    check_results: bool = True,
) -> None:
    """Raise :class:`Mismatch` where the compiled run ``res`` differs from eager ``ref``.

    ``check_intermediate_aliases=False`` compares, of outputs that alias no input, only
    values, dtype, size and grad flags, and their storage sharing with inputs only (EXCLUSIONS:
    "inductor's copies of reshaped values"). ``check_results=False`` compares only whether and
    what they raise (EXCLUSIONS: "copy_ from an alias of the destination")."""
    if ref.error is not None or res.error is not None:
        if ref.error is None:
            if known_upstream_error(res.error):
                return
            raise Mismatch(f"compiled raised, eager did not: {type(res.error).__name__}: {res.error}") from res.error
        if res.error is None:
            if any(m in str(ref.error) for m in EAGER_ONLY_ERRORS):
                return
            raise Mismatch(f"eager raised, compiled did not: {type(ref.error).__name__}: {ref.error}")
        if not _same_error(ref.error, res.error) and not known_upstream_error(res.error):
            raise Mismatch(
                f"different errors: eager {type(ref.error).__name__}: {ref.error}; compiled "
                f"{type(_root_error(res.error)).__name__}: {res.error}"
            ) from res.error
        return
    if not check_results:
        return
    if len(ref.outputs) != len(res.outputs):
        raise Mismatch(f"{len(ref.outputs)} outputs in eager, {len(res.outputs)} compiled")
    for i, (r, o) in enumerate(zip(ref.outputs, res.outputs)):
        # _is_view of outputs that alias no input is upstream's choice (EXCLUSIONS); aliasing
        # between outputs is still compared by _sharing below.
        # So is _is_view after an in-place metadata change of a dtype view (EXCLUSIONS).
        aliases_input = isinstance(r, torch.Tensor) and any(
            isinstance(t, torch.Tensor) and _same_storage(r, t) for t in ref.inputs
        )
        _compare_tensor(
            f"output {i}", r, o, check_is_view=aliases_input and check_is_view,
            check_layout=aliases_input or check_intermediate_aliases,
        )
    for i, (r, o) in enumerate(zip(ref.inputs, res.inputs)):
        _compare_tensor(f"input {i} after the call", r, o)
    eager_sharing = _sharing(ref.outputs, ref.inputs, check_identity=check_identity)
    compiled_sharing = _sharing(res.outputs, res.inputs, check_identity=check_identity)
    if not check_intermediate_aliases:
        n_inputs = len(ref.inputs)
        eager_sharing = [row[:n_inputs] for row in eager_sharing]
        compiled_sharing = [row[:n_inputs] for row in compiled_sharing]
    if eager_sharing != compiled_sharing:
        raise Mismatch(f"storage sharing / identity differs: eager {eager_sharing}, compiled {compiled_sharing}")
    _backward(ref)
    _backward(res)
    if (ref.backward_error is None) != (res.backward_error is None):
        if res.backward_error is None and any(
            re.search(pattern, str(ref.backward_error)) for pattern in EAGER_ONLY_BACKWARD_ERRORS
        ):
            return
        raise Mismatch(f"backward: eager raised {ref.backward_error!r}, compiled raised {res.backward_error!r}")
    if ref.backward_error is not None:
        if not isinstance(res.backward_error, type(ref.backward_error)):
            raise Mismatch(f"backward errors differ: {ref.backward_error!r} vs {res.backward_error!r}")
        return
    for i, (r, o) in enumerate(zip(ref.leaves, res.leaves)):
        if (r.grad is None) != (o.grad is None):
            raise Mismatch(f"grad of leaf {i}: eager {r.grad is not None}, compiled {o.grad is not None}")
        if r.grad is not None and not torch.allclose(r.grad, o.grad, rtol=1e-4, atol=1e-4, equal_nan=True):
            raise Mismatch(f"grad of leaf {i} differs: eager {r.grad}, compiled {o.grad}")


def compare_alias_structure(ref: RunResult, res: RunResult, *, check_bases: bool = True) -> None:
    """Raise :class:`Mismatch` where the outputs and inputs of ``res`` have other ``_base`` roots
    (unless not ``check_bases``: EXCLUSIONS, "_base of a view of an untracked view") or
    version-counter sharing than eager's ``ref`` (probing bumps their version counters: call
    it last)."""
    eager = alias_structure(ref.outputs, ref.inputs)
    compiled = alias_structure(res.outputs, res.inputs)
    if check_bases and eager.bases != compiled.bases:
        raise Mismatch(f"_base roots (outputs, then inputs) differ: eager {eager.bases}, compiled {compiled.bases}")
    if eager.version_counters != compiled.version_counters:
        raise Mismatch(f"version-counter sharing (outputs, then inputs) differs: eager "
                       f"{eager.version_counters}, compiled {compiled.version_counters}")


def _one_backward_node(eager: InplaceOutcome, compiled: InplaceOutcome) -> bool:
    """EXCLUSIONS, "in-place on a saved output, then backward through another output": the
    compiled backward is one node, which checks every tensor it saved."""
    return (
        eager.error is None
        and compiled.error == ("backward", "RuntimeError")
        and "modified by an inplace operation" in compiled.message
    )


def _known_gap(eager: InplaceOutcome, compiled: InplaceOutcome, feats: set[str], aliases_input: bool) -> bool:
    """INPLACE_THEN_BACKWARD_GAPS: eager's backward raises where compiled code (stock too)
    computes the gradient of the forward's values."""
    return aliases_input and eager.error == ("backward", "RuntimeError") and compiled.error is None and any(
        gap.feature in feats and re.search(gap.pattern, eager.message) for gap in INPLACE_THEN_BACKWARD_GAPS
    )


def compare_inplace_then_backward(
    fn: Callable[..., Any], compiled: Callable[..., Any], program: Program, size_index: int, seed: int
) -> None:
    """For every output ``i`` and every other differentiable output ``j``, on fresh inputs:
    ``out[i].mul_(3)`` then backward through ``out[j]`` must give eager's gradients or an error
    of eager's type at eager's step; raise :class:`Mismatch` otherwise."""
    make = lambda: make_inputs(program, size_index, seed)  # noqa: E731
    ref = _run(fn, program, size_index, seed)
    outs, feats = ref.outputs, program.features()
    differentiable = [j for j, o in enumerate(outs) if o.requires_grad and o.is_floating_point()]
    for i in range(len(outs)):
        for j in differentiable:
            if i == j:
                continue
            eager, comp = inplace_then_backward(fn, make, i, j), inplace_then_backward(compiled, make, i, j)
            aliases_input = any(_same_storage(outs[i], t) for t in ref.inputs if isinstance(t, torch.Tensor))
            if not same_outcome(eager, comp, tol=1e-4) and not _one_backward_node(eager, comp) and not _known_gap(
                eager, comp, feats, aliases_input
            ):
                detail = "gradients differ" if eager.error is None and comp.error is None else (
                    f"eager {eager.error or 'no error'}, compiled {comp.error or 'no error'}")
                raise Mismatch(f"output {i}.mul_(3), then backward through output {j}: {detail}")


def check_program(
    program: Program,
    *,
    backend: str = "aot_eager",
    dynamic_modes: Sequence[bool] = (False, True),
    seed: int = 0,
) -> None:
    """Run ``program`` eagerly and compiled (each dynamic mode, two sizes); raise Mismatch on a difference."""
    import torch._dynamo

    fn = program.function()
    feats = program.features()
    if "metadata_mutation_of_self_returning_view" in feats:
        return  # EXCLUSIONS: "in-place metadata change through a self-returning view"
    if "unbacked_start" in feats:
        # UNBACKED_OPS: a, b of tolist() are unbacked symbols, not a graph break.
        with torch._dynamo.config.patch(capture_scalar_outputs=True):
            _check_program(program, fn, feats, backend=backend, dynamic_modes=dynamic_modes, seed=seed)
    else:
        _check_program(program, fn, feats, backend=backend, dynamic_modes=dynamic_modes, seed=seed)


def _check_program(
    program: Program,
    fn: Callable[..., Any],
    feats: set[str],
    *,
    backend: str,
    dynamic_modes: Sequence[bool],
    seed: int,
) -> None:
    import torch._dynamo
    from torch._dynamo.utils import counters
    try:
        from torch._functorch._aot_autograd.view_replay import config
    except ImportError:
        # Stock torch (no overlay): the same oracle, for triage (a finding of the patched run,
        # reproduced on stock); no strict mode and no fallbacks.
        import contextlib
        import types

        config = types.SimpleNamespace(patch=lambda **_: contextlib.nullcontext())

    # EXCLUSIONS: where identity or intermediate aliases are not compared, neither are bases.
    parity_checked = (
        "self_returning_view" not in feats and "copy_from_an_alias" not in feats
        and "intermediate_metadata_mutation" not in feats
        and (backend != "inductor" or "unsafe_view_producer" not in feats)
    )
    for dynamic in dynamic_modes:
        strict = True
        while True:
            torch._dynamo.reset()
            compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
            retry = False
            for size_index in (0, 1):
                ref = _run(fn, program, size_index, seed)
                before = Counter(counters["view_replay_fallback"])
                with config.patch(strict=strict):
                    res = _run(compiled, program, size_index, seed)
                if not strict and ref.error is None:
                    # The rerun without strict mode must not hide a fallback that is not
                    # accepted (a later one than the fallback that caused the rerun).
                    new = Counter(counters["view_replay_fallback"]) - before
                    unaccepted = sorted(r for r in new if not feats & ACCEPTED_FALLBACKS.get(r, {}).keys())
                    if unaccepted:
                        raise Mismatch(
                            f"dynamic={dynamic} size#{size_index}: unaccepted view-replay fallback "
                            f"{unaccepted} in the rerun without strict mode"
                        )
                reason = _fallback_reason(res.error) if res.error is not None else None
                if reason is not None and ref.error is not None:
                    # Eager raises anyway (Note [Eager errors]): see what compiled does without strict.
                    strict, retry = False, True
                    break
                if reason is not None:
                    if not feats & ACCEPTED_FALLBACKS.get(reason, {}).keys():
                        raise Mismatch(
                            f"dynamic={dynamic} size#{size_index}: unaccepted view-replay fallback "
                            f"{reason}: {_root_error(res.error)}"
                        )
                    strict, retry = False, True
                    break
                try:
                    compare(
                        ref,
                        res,
                        check_is_view="untracked_view_metadata_mutation" not in feats,
                        check_identity="self_returning_view" not in feats,
                        check_intermediate_aliases=backend != "inductor"
                        or "unsafe_view_producer" not in feats,
                        check_results="copy_from_an_alias" not in feats,
                    )
                    if strict and ref.error is None and res.error is None and parity_checked:
                        compare_alias_structure(ref, res, check_bases="view_of_untracked_view" not in feats)
                        with config.patch(strict=True):
                            compare_inplace_then_backward(fn, compiled, program, size_index, seed)
                except Mismatch as e:
                    raise Mismatch(f"dynamic={dynamic} size#{size_index}: {e}") from e
            if not retry:
                break
    torch._dynamo.reset()


# ---------------------------------------------------------------------------------------------
# Runner
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass
class FuzzReport:
    programs: int = 0
    shrink_runs: int = 0
    failures: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (program, error)


def fuzz(
    n_programs: int,
    seed: int,
    *,
    backend: str = "aot_eager",
    dynamic_modes: Sequence[bool] = (False, True),
    max_steps: int = 6,
    chunk: int = 100,
    shrink: bool = True,
    verbose: bool = False,
    job: int = 0,
    jobs: int = 1,
    new_kinds: Sequence[str] | None = None,
) -> FuzzReport:
    """Run this job's share of ``n_programs`` generated programs, in chunks of ``chunk``.

    Chunk ``k`` is one hypothesis run seeded ``seed + k``; job ``job`` of ``jobs`` runs the
    chunks with ``k % jobs == job`` until it has run its share of the programs. A failing chunk
    stops at its first failure, which hypothesis shrinks; the minimal program is recorded and
    the next chunk starts, so a job runs more chunks than its share when some fail."""
    import warnings

    from hypothesis import given, HealthCheck, Phase, settings
    from hypothesis import seed as hseed

    warnings.filterwarnings("ignore")
    report = FuzzReport()
    share = n_programs // jobs + (1 if job < n_programs % jobs else 0)
    k = job
    while report.programs < share:
        size = min(chunk, share - report.programs)
        state: dict[str, Any] = {"failed": False, "last": None}

        @hseed(seed + k)
        @settings(
            max_examples=size,
            deadline=None,
            database=None,
            phases=[Phase.generate, Phase.shrink] if shrink else [Phase.generate],
            suppress_health_check=list(HealthCheck),
            print_blob=False,
            report_multiple_bugs=False,
        )
        @given(programs(max_steps=max_steps, new_kinds=new_kinds))
        def one(program: Program) -> None:
            if not state["failed"]:
                report.programs += 1
            else:
                report.shrink_runs += 1
            try:
                check_program(program, backend=backend, dynamic_modes=dynamic_modes, seed=seed)
            except Exception as e:
                state["failed"] = True
                state["last"] = (str(program), f"{type(e).__name__}: {e}")
                raise

        try:
            one()
        except Exception as e:  # noqa: BLE001
            prog, err = state["last"] or ("?", repr(e))
            report.failures.append((prog, err))
            if verbose:
                print(f"FAILURE (chunk seed {seed + k}):\n{prog}{err}\n", flush=True)
        if verbose:
            prefix = f"[job {job}] " if jobs > 1 else ""
            print(f"{prefix}... {report.programs} programs, {len(report.failures)} failures", flush=True)
        k += jobs
    return report


def _fuzz_job(kwargs: dict[str, Any]) -> FuzzReport:
    import logging

    torch._logging.set_logs(all=logging.CRITICAL)
    return fuzz(**kwargs)


LONG_PROGRAMS = 10_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m viewreplay_harness.fuzz",
        description="Fuzz torch.compile's view replay (patched torch): random programs of view "
        "ops, pointwise ops and mutations, eager vs compiled, strict mode.",
    )
    parser.add_argument("--programs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="aot_eager", choices=["aot_eager", "inductor"])
    parser.add_argument("--long", action="store_true", help=f"run {LONG_PROGRAMS} programs")
    parser.add_argument("--max-steps", type=int, default=6)
    parser.add_argument("--static-only", action="store_true")
    parser.add_argument("--dynamic-only", action="store_true")
    parser.add_argument("--no-shrink", action="store_true")
    parser.add_argument("--jobs", type=int, default=1,
                        help="processes to split the chunks across")
    parser.add_argument("--kinds", default=None,
                        help="comma-separated generators of issue #36 to use (of "
                        f"{', '.join(sorted(NEW_KIND_OPS))}; default all, '' none)")
    args = parser.parse_args(argv)
    new_kinds = None if args.kinds is None else tuple(k for k in args.kinds.split(",") if k)
    if new_kinds is not None and set(new_kinds) - set(NEW_KIND_OPS):
        parser.error(f"unknown --kinds {sorted(set(new_kinds) - set(NEW_KIND_OPS))}")
    if args.jobs < 1 or args.programs < 1:
        parser.error("--jobs and --programs must be at least 1")

    from .cases import view_replay_installed

    if not view_replay_installed():
        print("the view_replay overlay is not installed in this torch: nothing to fuzz", file=sys.stderr)
        return 2
    n = LONG_PROGRAMS if args.long else args.programs
    modes: tuple[bool, ...] = (False, True)
    if args.static_only:
        modes = (False,)
    elif args.dynamic_only:
        modes = (True,)
    import logging

    torch._logging.set_logs(all=logging.CRITICAL)  # Dynamo logs the upstream guard errors loudly
    start = time.monotonic()
    common = dict(n_programs=n, seed=args.seed, backend=args.backend, dynamic_modes=modes,
                  max_steps=args.max_steps, shrink=not args.no_shrink, verbose=True, jobs=args.jobs,
                  new_kinds=new_kinds)
    if args.jobs == 1:
        report = fuzz(**common)
    else:
        import multiprocessing
        import signal

        # SIGTERM leaves through the with-block, whose exit terminates the workers.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
            parts = pool.map(_fuzz_job, [dict(common, job=j) for j in range(args.jobs)], chunksize=1)
        report = FuzzReport(
            programs=sum(p.programs for p in parts),
            shrink_runs=sum(p.shrink_runs for p in parts),
            failures=[f for p in parts for f in p.failures],
        )
    print(f"programs run: {report.programs} (+{report.shrink_runs} shrink runs), "
          f"failures: {len(report.failures)}, {time.monotonic() - start:.0f}s")
    for prog, err in report.failures:
        print(f"--- minimal failing program\n{prog}{err}\n")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
