"""Eager parity of aliased outputs: what a user observes of a call's outputs beyond their values.

Eager is the oracle. Besides values and layout, a user observes which tensor an output is a
view of (``_base``), which outputs and inputs share a version counter (an in-place op on one
is seen by autograd through the others), and the view nodes of its backward. This module
describes those, for tests and the fuzzer to compare eager with compiled:

* :func:`alias_structure` partitions the outputs and inputs by the root of their autograd
  view chain, by version counter and by object, each tensor named by the first of its class
  (``out1``, ``in0``);
* :func:`view_node_chain` lists the view nodes of an output's backward, up to the first node
  that is no view's;
* :func:`inplace_then_backward` runs a program, applies an in-place op to one output and
  back-propagates through another: the gradients, or the type of the error and at which step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.autograd.graph import increment_version


# Backward nodes of view ops: view_node_chain follows them from an output towards its root.
VIEW_NODES = frozenset({
    "AliasBackward0", "AsStridedBackward0", "DiagonalBackward0", "ExpandBackward0",
    "NarrowBackward0", "PermuteBackward0", "SelectBackward0", "SliceBackward0",
    "SplitBackward0", "SplitWithSizesBackward0", "SqueezeBackward0", "SqueezeBackward1",
    "SqueezeBackward2", "TBackward0", "TransposeBackward0", "UnbindBackward0",
    "UnfoldBackward0", "UnsqueezeBackward0", "ViewAsComplexBackward0", "ViewAsRealBackward0",
    "ViewBackward0", "NegViewBackward0", "ConjBackward0", "UnflattenBackward0",
    "ReshapeAliasBackward0",
})


@dataclasses.dataclass(frozen=True)
class AliasStructure:
    """Three partitions of the outputs, then the inputs, each tensor named by the first tensor
    of its class (``out0``, ``in1``): by the root of the autograd view chain (``_base``, or
    the tensor itself), by version counter, and by object."""

    bases: tuple[str, ...]
    version_counters: tuple[str, ...]
    # The partition by object: each tensor named by the first that *is* it (``y, y.flatten()``
    # of a 1-D ``y`` are one tensor in eager).
    objects: tuple[str, ...]


def _tensors(outs: Sequence[Any], inputs: Sequence[Any]) -> list[tuple[str, torch.Tensor]]:
    named = [(f"out{i}", o) for i, o in enumerate(outs)] + [(f"in{i}", t) for i, t in enumerate(inputs)]
    return [(name, t) for name, t in named if isinstance(t, torch.Tensor)]


def alias_structure(outs: Sequence[Any], inputs: Sequence[Any]) -> AliasStructure:
    """The alias structure of ``outs`` and ``inputs`` (non-tensors are skipped).

    Two tensors are in one base class when their view chains end at the same tensor (one
    the caller may never see: an output that is the only view of an intermediate is a class
    of its own whether or not the intermediate is its ``_base``). Version counters are probed
    by bumping each tensor's counter (no data is written): the tensors whose ``_version``
    moves share it.
    """
    tensors = _tensors(outs, inputs)
    first_of_root: dict[int, str] = {}
    bases = tuple(
        first_of_root.setdefault(id(t if t._base is None else t._base), name) for name, t in tensors
    )
    counters: list[str] = []
    for name, t in tensors:
        before = [u._version for _, u in tensors]
        increment_version(t)
        sharing = [n for (n, u), v in zip(tensors, before) if u._version != v]
        counters.append(sharing[0] if sharing else name)
    first_of_object: dict[int, str] = {}
    objects = tuple(first_of_object.setdefault(id(t), name) for name, t in tensors)
    return AliasStructure(bases, tuple(counters), objects)


def view_node_chain(t: torch.Tensor) -> tuple[str, ...]:
    """The view nodes of ``t``'s backward, from ``t`` towards its root, then the first other node."""
    chain: list[str] = []
    node = t.grad_fn
    while node is not None:
        chain.append(type(node).__name__)
        if chain[-1] not in VIEW_NODES or not node.next_functions:
            break
        node = node.next_functions[0][0]
    return tuple(chain)


@dataclasses.dataclass(frozen=True)
class InplaceOutcome:
    """What ``out[i].mul_(3)`` then backward through ``out[j]`` gave."""

    # "inplace" or "backward": the step that raised, with the error's type; None if none did.
    error: tuple[str, str] | None
    # The gradients of the leaves, in order (None where a leaf got none).
    grads: tuple[torch.Tensor | None, ...]
    # The error's message (not compared).
    message: str = dataclasses.field(default="", compare=False)


def inplace_then_backward(
    fn: Callable[..., Any], make_inputs: Callable[[], tuple[list[Any], list[torch.Tensor]]], i: int, j: int
) -> InplaceOutcome:
    """Run ``fn`` on fresh inputs (``make_inputs`` gives the inputs and the leaves they are made
    of), multiply output ``i`` by 3 in place, and back-propagate output ``j``'s sum."""
    inputs, leaves = make_inputs()
    outs = fn(*inputs)
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    try:
        outs[i].mul_(3)
    except RuntimeError as e:
        return InplaceOutcome(("inplace", type(e).__name__), (), str(e))
    try:
        outs[j].sum().backward()
    except RuntimeError as e:
        return InplaceOutcome(("backward", type(e).__name__), (), str(e))
    return InplaceOutcome(None, tuple(leaf.grad for leaf in leaves))


def weighted_backward(
    fn: Callable[..., Any], make_inputs: Callable[[], tuple[list[Any], list[torch.Tensor]]]
) -> InplaceOutcome:
    """Run ``fn`` on fresh inputs and back-propagate the sum of its differentiable outputs,
    output ``k`` weighted by ``k + 1``: the gradients of the leaves (or the error)."""
    inputs, leaves = make_inputs()
    outs = fn(*inputs)
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    terms = [o.sum() * (k + 1) for k, o in enumerate(outs) if isinstance(o, torch.Tensor) and o.requires_grad]
    try:
        if terms:
            sum(terms).backward()
    except RuntimeError as e:
        return InplaceOutcome(("backward", type(e).__name__), ())
    return InplaceOutcome(None, tuple(leaf.grad for leaf in leaves))


def _dense(t: torch.Tensor) -> torch.Tensor:
    """``t``'s values as a plain tensor: a DTensor's full tensor (comparison ops do not take one)."""
    full_tensor = getattr(t, "full_tensor", None)
    return full_tensor() if callable(full_tensor) else t


def same_outcome(eager: InplaceOutcome, compiled: InplaceOutcome, *, tol: float = 1e-5) -> bool:
    """Whether the two outcomes agree: the same error, or gradients equal within ``tol``.

    No gradient and a gradient of zeros agree: a compiled function's backward gives every
    input that requires grad a gradient, zeros where none flows (stock alike: ``def f(a, b):
    return b * 2, a + a``, backward through the second output gives ``b`` zeros, eager
    None)."""
    if eager.error != compiled.error or len(eager.grads) != len(compiled.grads):
        return False
    for a, b in zip(eager.grads, compiled.grads):
        if a is None or b is None:
            present = b if a is None else a
            if present is not None and bool(_dense(present).any()):
                return False
        elif not torch.allclose(_dense(a), _dense(b), rtol=tol, atol=tol):
            return False
    return True


def _layout(t: torch.Tensor) -> tuple[object, ...]:
    strides = tuple(None if n == 1 else s for n, s in zip(t.size(), t.stride())) if t.numel() else ()
    return (t.dtype, tuple(t.size()), strides, t.storage_offset() if t.numel() else 0)


def _flags(t: torch.Tensor) -> tuple[bool, bool, bool]:
    return (t.requires_grad, t.is_leaf, t._is_view())


def differences(
    fn: Callable[..., Any],
    compiled: Callable[..., Any],
    make_inputs: Callable[[], tuple[list[Any], list[torch.Tensor]]],
) -> list[str]:
    """Where ``compiled`` differs from eager ``fn`` on fresh inputs from ``make_inputs``: one
    line per difference (values, layout, flags, view nodes of an output; the alias structure;
    the outcome of an in-place op on each output then backward through each other one)."""
    found: list[str] = []
    runs = []
    for f in (fn, compiled):
        inputs, _ = make_inputs()
        outs = f(*inputs)
        runs.append((outs if isinstance(outs, (tuple, list)) else (outs,), inputs))
    (eager, eager_in), (comp, comp_in) = runs
    if len(eager) != len(comp):
        return [f"{len(eager)} outputs in eager, {len(comp)} compiled"]
    for k, (e, c) in enumerate(zip(eager, comp)):
        if not isinstance(e, torch.Tensor):
            continue
        if _layout(e) != _layout(c):
            found.append(f"out{k} layout: eager {_layout(e)}, compiled {_layout(c)}")
        elif not torch.equal(_dense(e.detach()), _dense(c.detach())):
            found.append(f"out{k} values")
        if _flags(e) != _flags(c):
            found.append(f"out{k} (requires_grad, is_leaf, _is_view): eager {_flags(e)}, compiled {_flags(c)}")
        ce, cc = view_node_chain(e)[:-1], view_node_chain(c)[:-1]
        if ce != cc:
            found.append(f"out{k} view nodes: eager {ce}, compiled {cc}")
    se, sc = alias_structure(eager, eager_in), alias_structure(comp, comp_in)
    if se.bases != sc.bases:
        found.append(f"bases: eager {se.bases}, compiled {sc.bases}")
    if se.version_counters != sc.version_counters:
        found.append(f"version counters: eager {se.version_counters}, compiled {sc.version_counters}")
    if se.objects != sc.objects:
        found.append(f"objects: eager {se.objects}, compiled {sc.objects}")
    ge, gc = weighted_backward(fn, make_inputs), weighted_backward(compiled, make_inputs)
    if not same_outcome(ge, gc):
        found.append(f"backward through every output: eager {ge.error or 'grads'}, compiled {gc.error or 'grads'}"
                     f"{'' if ge.error or gc.error else ' (differ)'}")
    tensors = [k for k, e in enumerate(eager) if isinstance(e, torch.Tensor) and e.requires_grad]
    for i in tensors:
        for j in tensors:
            if i != j:
                oe = inplace_then_backward(fn, make_inputs, i, j)
                oc = inplace_then_backward(compiled, make_inputs, i, j)
                if not same_outcome(oe, oc):
                    found.append(f"out{i}.mul_(3), backward through out{j}: eager {oe.error or 'grads'}, "
                                 f"compiled {oc.error or 'grads'}{'' if oe.error or oc.error else ' (differ)'}")
    return found
