"""
Version counters of the tensors that in-place foreach ops write while AOTAutograd traces.

Note [Version counters of in-place foreach ops]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Eager bumps the version counter of each tensor that an in-place foreach op
(``torch._foreach_add_(tensors, 1)``, ``_foreach_mul_``, any ``aten::_foreach_*``
overload with a mutable Tensor[] argument, ``out=`` too) writes, once per
tensor, as it does for ``add_``; autograd reads the counter to rebase the
views of a tensor changed in place and to refuse a stale saved tensor or
no_grad view. For ``add_`` the bump is ADInplaceOrView's, which runs on the
FunctionalTensors that AOTAutograd traces; no op taking a mutable Tensor[]
has an ADInplaceOrView kernel, and eager's bump comes from the backend
kernels (per tensor), which the FunctionalTensors never reach:
functionalization replaces their inner tensors and the outer tensors that
autograd sees keep their versions. Three silent differences followed, stock
2.14.1 and 2.13.0 alike, aot_eager and inductor, static and dynamic:

  - views taken under torch.no_grad() and changed in place after they were
    taken are stale in eager:
        with torch.no_grad():
            views = [flat[:4].view(2, 2), flat[4:]]
            torch._foreach_add_(views, 1)
        return views
    and reading their grad_fn (backward, ``is_leaf``, ``repr``) raises "A view
    was created in no_grad mode and its base or another view of its base has
    been modified inplace with grad mode enabled". The metadata run saw fresh
    views: stock regenerated them in grad mode and backward sent a gradient
    into ``flat`` (``[1, 1, 1, 1, 2, 2]`` for ``views[0].sum() + 2 *
    views[1].sum()``); regenerated under no_grad (Note [Views taken under
    no_grad]) they were leaves and ``flat.grad`` stayed None;
  - views changed with grad mode on kept the grad_fn they had before the op:
        z = x * 2; v = [z[:2], z[2:]]; torch._foreach_mul_(v, 3)
        return v[0] + 1, v[1] * 1
    gave ``x.grad`` 2 where eager gives 6 (the joint graph's backward skipped
    the mul);
  - a tensor saved for backward and then changed:
        y = x * 1; z = y.sin(); torch._foreach_add_([y], 1); return z
    eager's backward raises "one of the variables needed for gradient
    computation has been modified by an inplace operation", the compiled one
    used the changed ``y`` (``x.grad`` cos(x + 1)).

:func:`bump_foreach_versions`, which FunctionalTensorMode.__torch_dispatch__
calls after it ran such an op, bumps the version of each FunctionalTensor the
op wrote, before autograd rebases them, as eager's kernels do. Every
functionalized trace then holds eager's autograd state: the joint graph's
views carry eager's rebased grad_fn, its backward raises on a changed saved
tensor at compile time (as upstream does for ``add_``), and the metadata run's
stale no_grad view raises where AOTAutograd reads the output's grad_fn.
:func:`traced_output_grad_fn` turns that into :class:`ModifiedNoGradViewError`
at compile time, naming the output (for a view changed by ``add_`` too, where
upstream raised eager's bare error from its metadata collection). A stale
no_grad view used with grad mode on inside the function raises eager's own
error at that op, as eager does.
Scope:
  - The compiled function refuses the program, where eager returns the views
    and raises only when their grad_fn is read: a regenerated view would be
    fresh, and returning it stale takes a version counter moved behind the
    base's back. Views taken outside the compiled function (inputs) keep
    eager's behaviour: the runtime writes the mutation back in place.
  - Other ops with a mutable Tensor[] argument are left alone: the fused
    optimizers (``_fused_adam_``; eager's CPU kernels bump nothing),
    ``_amp_foreach_non_finite_check_and_unscale_``, the ``out=`` overloads of
    ``split_copy`` and the like. So is pre-dispatch functionalization
    (export), whose mode runs above autograd.
Cost: tracing only: FunctionalTensorMode tests each op's name, and reads the
schema of a foreach op once; nothing at runtime.

Layering: outside view_replay (it needs no view replay); compile time: runs while
AOTAutograd traces. Imports nothing of the overlay.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import Tensor
from torch._ops import OpOverload
from torch._subclasses.functional_tensor import FunctionalTensor


class ModifiedNoGradViewError(RuntimeError):
    """A traced output is a view taken under no_grad whose base, or another view of its
    base, was changed in place after it was taken (Note [Version counters of in-place
    foreach ops]): raised at compile time."""


@functools.cache
def _written_tensor_lists(func: OpOverload) -> tuple[tuple[int, str], ...]:
    """(position, name) of each Tensor[] argument that ``func``'s schema marks as written."""
    return tuple(
        (position, arg.name)
        for position, arg in enumerate(func._schema.arguments)
        if arg.alias_info is not None and arg.alias_info.is_write and isinstance(arg.type, torch.ListType)
    )


def bump_foreach_versions(func: OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """FunctionalTensorMode hook, after it ran the foreach op ``func``: bump the version of
    each FunctionalTensor that ``func`` wrote, as eager's kernels do (Note [Version counters
    of in-place foreach ops])."""
    for position, name in _written_tensor_lists(func):
        written = kwargs[name] if name in kwargs else args[position] if position < len(args) else ()
        traced = [t for t in written if isinstance(t, FunctionalTensor) and not t.is_inference()]
        if traced:
            torch.autograd.graph.increment_version(traced)


def _taken_under_no_grad(out: Tensor) -> bool:
    return out._is_view() and (
        torch._C._autograd._get_creation_meta(out) == torch._C._autograd.CreationMeta.NO_GRAD_MODE
    )


def traced_output_grad_fn(out: Tensor, desc: Any) -> Any:
    """Compile-time hook: the grad_fn of the traced output ``out`` (``desc`` names it), read
    under the caller's FunctionalTensorMode; ModifiedNoGradViewError where reading it raises
    eager's error because ``out`` is a view taken under no_grad and changed in place after
    (Note [Version counters of in-place foreach ops])."""
    try:
        return out.grad_fn
    except RuntimeError as e:
        if not _taken_under_no_grad(out):
            raise
        raise ModifiedNoGradViewError(
            f"torch.compile cannot return {desc.expr()}: it is a view taken under torch.no_grad() "
            "whose base, or another view of its base, was modified in place after the view was "
            "taken, so eager raises when its grad_fn is read or backward runs through it (Note "
            "[Version counters of in-place foreach ops]); take the view after the in-place op, "
            f"or off a detach()ed base. Eager's error: {e}"
        ) from e
