"""
What the traced graph tells about a view chain, beyond its ViewMetas' arguments.

Planning (plan.py) replays a chain step by step on the traced base where it
needs the step results (Note [Planning on the traced base]), and drops the full
slices that eager's indexing does not record (Note [Identity slices]).
It does not replay the steps that made the output's autograd base (Note
[Outputs whose autograd base is inside the chain]).

Layering: planning (compile time).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor
from torch._C import _functionalization
from torch._subclasses.functional_tensor import FunctionalTensor
from torch.fx.experimental.symbolic_shapes import statically_known_true
from torch.utils._python_dispatch import _disable_current_modes

from .view_meta_args import arguments_readable


# Note [Planning on the traced base]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Where needed, the sequence is replayed step by step on the traced base before
# it is planned: the step results give the arguments that cannot be read off the
# ViewMeta itself (_unsafe_view's size, Note [Reading ViewMeta arguments]) and
# show which full slices are identities (Note [Identity slices]).
def replay_on_traced_base(view_metas: Sequence[Any], base: Tensor | None) -> list[Tensor] | None:
    """The result of each step of ``view_metas`` replayed on the traced (fake) ``base``.

    ViewMeta.forward() reads the ViewMeta's own data, unlike as_tuple() (Note
    [Reading ViewMeta arguments]). Returns None without a base.
    """
    if base is None or not any(
        type(vm).__name__ == SLICE or not arguments_readable(vm) for vm in view_metas
    ):
        return None  # only _unsafe_view's size and identity slices need the step results
    if isinstance(base, FunctionalTensor):
        base = torch._from_functional_tensor(base.elem)
    results: list[Tensor] = []
    shape_env = _shape_env_of(base)
    # The fake base dispatches to its own FakeTensorMode; the functionalization
    # mode of the trace must not see these ops. Sizes that the replay makes up
    # (a slice by an unbacked symbol) are discarded with the results: they must
    # not become pending unbacked symbols of the graph.
    with contextlib.ExitStack() as stack:
        stack.enter_context(_disable_current_modes())
        stack.enter_context(torch.no_grad())
        if shape_env is not None:
            stack.enter_context(shape_env.ignore_fresh_unbacked_symbols())
        t = base
        for vm in view_metas:
            t = _functionalization.apply_view_meta_sequence(t, [vm])
            results.append(t)
    return results


def _shape_env_of(t: Tensor) -> Any:
    for size in (*t.size(), *t.stride(), t.storage_offset()):
        if isinstance(size, torch.SymInt):
            return size.node.shape_env
    fake_mode = getattr(t, "fake_mode", None)
    return getattr(fake_mode, "shape_env", None)


# Note [Identity slices]
# ~~~~~~~~~~~~~~~~~~~~~~
# Eager indexing skips a slice that keeps the whole dimension (``x[:, -1]``
# is one select: SelectBackward0). Traced with a symbolic size, the same slice
# is recorded (the trace cannot tell that end >= size without a guard), so a
# replay of the ViewMetas would add a SliceBackward0 that eager does not have.
# A slice step with start 0 and step 1 whose traced result has statically the
# same sizes as its input is such an identity: planning drops it, unless it is
# the last step (the output must still be a view of its own, as eager's
# ``x[:]`` is). An explicit ``narrow(d, 0, size)`` loses its SliceBackward0 the
# same way: same values, gradients and aliasing, one node fewer than eager. A
# subclass output's outer chain (Note [Subclass view replay]) records the same
# slice as an ``aten.slice.Tensor`` call, dropped the same way.
SLICE = "slice_Tensor_ViewMeta"
# slice_Tensor_ViewMeta.as_tuple(): (has_symbolic_inputs, reapply_views, InverseReturnMode, dim, start, end, step)
_SLICE_START, _SLICE_STEP = 4, 6


def is_identity_slice(name: str, args: tuple[object, ...], before: Tensor, after: Tensor) -> bool:
    """Whether a step is a slice that keeps every element of its input (Note [Identity slices])."""
    return name == SLICE and slice_keeps_every_element(args[_SLICE_START], args[_SLICE_STEP], before, after)


def slice_keeps_every_element(start: object, step: object, before: Tensor, after: Tensor) -> bool:
    """Whether a slice by ``start`` and ``step`` of ``before`` that gave ``after`` is an identity."""
    # Plain ints only: comparing a SymInt would install a guard.
    if not (start is None or type(start) is int and start == 0) or not (type(step) is int and step == 1):
        return False
    return before.dim() == after.dim() and all(
        statically_known_true(a == b) for a, b in zip(before.size(), after.size())
    )


# Note [Outputs whose autograd base is inside the chain]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A ViewMeta sequence starts at the functional base of the output's storage; an
# output aliasing an intermediate is regenerated off its autograd ``_base``. The
# two differ where the chain holds an op that autograd does not track as a view:
# ``_unsafe_view`` (``x @ w`` with a 3-D ``x``, a copying ``reshape``), whose
# result is an autograd root of its own (UnsafeViewBackward0, its own version
# counter). Replaying the whole sequence off that base replays the
# ``_unsafe_view`` once more: the output becomes a view of a fresh
# ``_unsafe_view`` tensor, not of the base. Eager's ``y[:, -1]._base`` is ``y``;
# regenerated, ``y.mul_(3)`` no longer bumps the output's version, and backward
# through the output silently drops the factor 3 (stock torch, static shapes:
# ``y = (x * 2).transpose(1, 2).reshape(b, t, h * d); return y, y[:, -1]``; and
# ``y = x @ w; return y[0], y[1].t()`` gets two bases where eager has one).
# The base's own sequence is a prefix of the output's (the output was viewed off
# it), so the output is planned from the rest of the chain, static or symbolic.
# So it is where an in-place view op made the base (``y = x * 2; y.t_();
# return y, y[0]``: ``y``'s sequence is ``t_``, ``y[0]``'s ``t_, select``).
# A base whose metadata was changed in place after the output was viewed off it
# has another sequence than the one the output was viewed off: where it still
# looks like a prefix, the metadata check of the replayed view decides.
def autograd_base_prefix(view_metas: Sequence[Any], base: Tensor | None) -> int:
    """How many leading ViewMetas of ``view_metas`` made ``base``, the output's autograd
    base, off the storage's functional base (0: none, or not a proper prefix)."""
    if not isinstance(base, FunctionalTensor) or not torch._is_functional_tensor(base.elem):
        return 0
    base_metas = _functionalization.get_view_meta_sequence(base.elem)
    if not 0 < len(base_metas) < len(view_metas):
        return 0
    if any(type(a) is not type(b) for a, b in zip(base_metas, view_metas)):
        return 0
    return len(base_metas)
