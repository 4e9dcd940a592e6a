"""
Outputs viewed off ``.data``: which detach of a chain was ``.data``.

Note [Views through .data]
~~~~~~~~~~~~~~~~~~~~~~~~~~
``x.data`` and ``x.detach()`` both give a tensor on ``x``'s storage that autograd does not
track as a view, and functionalization records both as one ``detach`` ViewMeta (Dynamo
traces ``.data`` as ``torch._C._autograd._get_data_attr``, which reaches the functional
tensor as ``aten.detach``). They differ in one thing: ``x.detach()`` shares ``x``'s version
counter, ``x.data`` has one of its own. A regenerated output replays the recorded detach,
so ``x.data[1:]`` came back sharing the input's counter, and in
    def f(x): return x.sin(), x.data[1:]
    y, d = torch.compile(f)(x); d.add_(1); y.sum().backward()
the backward raised "modified by an inplace operation" where eager's runs (stock 2.14.1 and
2.13.0, aot_eager and inductor, static and dynamic; also ``x[1:].data`` and
``y.data[1:]`` of an intermediate ``y`` that the backward saves).

The traced tensors keep the difference: the FunctionalTensor that ``.data`` made has a
counter of its own. The output's root (its autograd ``_base``, or the output itself when
it is no view) is the last tensor of its chain that autograd does not track as a view, so
it is the result of the chain's last detach before the root's own views. At compile time
:func:`data_step` bumps the root's version and looks at the traced tensors eager's
callers can see on that storage (the graph's inputs, its outputs and their bases, the
tensors its backward saves), then restores it: where none but the root's own views
follows, the root has a counter no visible tensor shares, and that detach is planned as a
:class:`~spec.DataStep` (``_get_data_attr`` at runtime); a counter still shared (a
``detach()`` of an input or of a saved intermediate) keeps the recorded detach. Outputs
viewed off one traced ``.data`` tensor (``d = x.data; return d[1:], d[:2]``) form a group
that shares one ``.data`` tensor per runtime call, as eager's share one ``_base``.
Where the root itself is a user output (``d = x.data; return d, d[1:]``) the graph returns
``d`` on its own, and no regenerated view of it could be eager's: that raises
:class:`DataViewError` at compile time. Nothing here runs per call.

Layering: planning (compile time). Imports the data (spec), the scope and the saved-tensor
walk (saved_tensors); the runtime never imports it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import Tensor
from torch._C import _functionalization
from torch._subclasses.functional_tensor import FunctionalTensor
from torch.multiprocessing.reductions import StorageWeakRef

from .saved_tensors import eager_saved_tensors
from .scope import GraphScope, OutputScope
from .spec import DataStep, ReplayPlan, ViewMetaStep

DETACH = "detach_ViewMeta"


class DataViewError(RuntimeError):
    """A view of a ``.data`` tensor that is itself a user output (Note [Views through .data]):
    raised at compile time."""


@dataclasses.dataclass(frozen=True)
class DataPosition:
    """Where a chain took ``.data`` (Note [Views through .data])."""

    # The index, in the output's whole ViewMeta chain, of the detach that was ``.data``.
    index: int
    # The position of the first user output whose root is the same traced tensor.
    group: int


def root_of(t: Tensor) -> Tensor:
    """The last tensor of ``t``'s chain that autograd does not track as a view."""
    return t if t._base is None else t._base


def shares_version_counter(a: Tensor, b: Tensor) -> bool:
    """Whether the traced ``a`` and ``b`` share a version counter: ``a``'s version is bumped,
    ``b``'s read, and ``a``'s restored."""
    before, b_before = a._version, b._version
    torch._C._increment_version([a])
    try:
        return b._version != b_before
    finally:
        torch._C._autograd._unsafe_set_version_counter((a,), (before,))


def _visible(graph: GraphScope, root: Tensor) -> Iterator[Tensor]:
    """The traced tensors on ``root``'s storage that eager's caller can see, but for ``root``
    and its views: the inputs, the user outputs and their bases, the saved tensors."""
    storage = StorageWeakRef(root.untyped_storage())
    tensors = [t for t in (*graph.inputs, *graph.outputs) if isinstance(t, Tensor)]
    candidates = [*tensors, *(t._base for t in tensors if t._base is not None)]
    saved = eager_saved_tensors([t for t in graph.outputs if isinstance(t, Tensor)])
    candidates += [t for t, on in saved if on == storage]
    for t in candidates:
        if t is not root and t._base is not root and StorageWeakRef(t.untyped_storage()) == storage:
            yield t


def has_own_version_counter(graph: GraphScope, root: Tensor) -> bool:
    """Whether no traced tensor that eager's caller can see shares ``root``'s version counter,
    but ``root``'s own views."""
    return not any(shares_version_counter(root, t) for t in _visible(graph, root))


def regenerates_saved_data_view(out: Tensor, graph: GraphScope) -> bool:
    """Compile-time hook: whether ``out``, a view without grad of a hidden intermediate's
    ``.data`` tensor (``y = x * 2; return y.sin(), y.data[1:]``), is regenerated off that
    tensor rather than returned by the graph: a storage the backward saves, so the graph's
    tensor would share the saved tensor's version counter (Note [Views through .data])."""
    root = out._base
    if root is None or not isinstance(root, FunctionalTensor) or not torch._is_functional_tensor(root.elem):
        return False
    made_root = [type(vm).__name__ for vm in _functionalization.get_view_meta_sequence(root.elem)]
    return DETACH in made_root and graph.backward_saves(out) and has_own_version_counter(graph, root)


def _root_length(view_metas: Sequence[Any], output: Tensor) -> int:
    """How many leading ViewMetas of the output's chain made its root."""
    root = root_of(output)
    if root is output or not isinstance(root, FunctionalTensor) or not torch._is_functional_tensor(root.elem):
        return len(view_metas)
    return len(_functionalization.get_view_meta_sequence(root.elem))


def data_position(scope: OutputScope, view_metas: Sequence[Any]) -> DataPosition | None:
    """Compile-time: where the output of ``scope``, whose whole ViewMeta chain is
    ``view_metas``, took ``.data`` (Note [Views through .data]); None where it did not."""
    names = [type(vm).__name__ for vm in view_metas]
    made_root = names[: _root_length(view_metas, scope.output)]
    if DETACH not in made_root:
        return None
    root = root_of(scope.output)
    if not has_own_version_counter(scope.graph, root):
        return None
    outputs = scope.graph.outputs
    group = next(i for i, o in enumerate(outputs) if isinstance(o, Tensor) and root_of(o) is root)
    if outputs[group] is root and root is not scope.output:
        raise DataViewError(
            "view_replay cannot regenerate a view of a `.data` tensor that is itself returned "
            "(Note [Views through .data]): the graph returns that tensor on its own, so the view "
            "would not be eager's view of it; return the `.data` tensor, or its view, not both"
        )
    return DataPosition(len(made_root) - 1 - made_root[::-1].index(DETACH), group)


def with_data_step(plan: ReplayPlan, position: DataPosition, prefix: int) -> ReplayPlan:
    """``plan``, made off the chain after its first ``prefix`` ViewMetas, with ``.data`` taken
    at ``position``: its detach step replaced, or, where the base already holds that detach
    (an intermediate's ``.data`` tensor), ``.data`` taken of the base first."""
    step = DataStep(position.group)
    if position.index < prefix:
        return dataclasses.replace(
            plan, steps=(step, *plan.steps), no_grad_steps=plan.no_grad_steps + bool(plan.no_grad_steps)
        )
    last = max(i for i, s in enumerate(plan.steps) if isinstance(s, ViewMetaStep) and s.view_meta == DETACH)
    return dataclasses.replace(plan, steps=(*plan.steps[:last], step, *plan.steps[last + 1 :]))
