"""
Reading the arguments of recorded ViewMetas without the unsafe accessor.

Note [Reading ViewMeta arguments]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A ViewMeta's arguments are exposed by ``as_tuple()`` (and pickled through the
same C++ ``to_serializable_tuple()``). In 2.13 that accessor is unsafe for some
classes: their ``SerializableTuple`` declares an element as a reference
(``const std::vector<c10::SymInt>&`` for ``_unsafe_view``, ``const
std::vector<int64_t>&`` for ``resize_``, ``const at::Tensor&`` for the
arguments of type Tensor of generated classes), and ``to_serializable_tuple()``
returns ``std::make_tuple(...)`` converted to that type: the reference binds
to the temporary tuple's member, which is destroyed before the caller reads it.
``as_tuple()`` then reads freed memory: garbage sizes, or a segfault. Fixed
upstream after 2.13 (pytorch/pytorch#184774, owning element types and a
static_assert). The class's own ``forward()`` reads its owning data member,
so ``apply_view_meta_sequence`` is safe; only the accessor is not.

``_unsafe_view`` is common: ``x @ w`` with a 3-D ``x`` (mm, then
``_unsafe_view``), and ``reshape``/``flatten`` of a non-contiguous tensor
(clone, then ``_unsafe_view``). So planning never calls ``as_tuple()`` on a
class whose tuple does not own its data (:func:`arguments_readable`):

* ``_unsafe_view``'s only argument is the size of its result, which planning
  reads off the step's result, replayed on the traced base (plan.py);
* ``resize_`` is unplannable (reason UNREADABLE_VIEW_META): its forward() is
  safe, so in the compiling process its sequence is replayed as recorded,
  but it never enters the cache;
* the generated classes of ops with Tensor arguments (``_make_dual``,
  ``slice_inverse``, the nested-tensor views) hold those arguments as
  references in their data members too, bound to tensors gone once the op
  returned: even forward() reads freed memory (:func:`unreplayable_reason`).
  Their sequences are neither planned nor replayed: the output falls back
  (UNREADABLE_VIEW_META).

The same bug hits stock 2.13 when the AOTAutograd cache pickles a static
sequence holding such a ViewMeta: the cache entry stores garbage sizes, and
the warm process fails. Minimal repro (inductor, autograd cache on, run twice
with the same TORCHINDUCTOR_CACHE_DIR; the second run raises "invalid shape
dimension ..." or crashes)::

    torch._functorch.config.enable_autograd_cache = True
    def f(x, w):
        y = x @ w               # x: (2, 4, 8), w: (8, 8): mm + _unsafe_view
        return y[0], y[1].t()   # outputs aliasing y: [_unsafe_view, select, ...]
    outs = torch.compile(f, backend="inductor")(x, w)
    sum(o.sum() for o in outs).backward()

Hence ``output_alias_info_runtime_safe`` (plan.py) never lets such a
sequence be pickled: the cache keeps its replay plan instead.

Which generated classes own their data follows from the codegen (it decays
ArrayRef arguments to std::vector members but spelled Tensor arguments as
references) and is read off each op's schema here; ``test/aot/
test_view_meta_args.py`` checks every ViewMeta class of 2.13 against it
(repeated reads in subprocesses, values and replay).

Layering: planning (compile time). Imports nothing of the overlay.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import Tensor


# Classes written by hand in ATen (FunctionalizeFallbackKernel.h): both declare
# a reference element in their SerializableTuple.
_HANDWRITTEN = frozenset({"_unsafe_view_ViewMeta", "resize__ViewMeta"})

# The class whose only argument planning reads off the step's result instead.
_UNSAFE_VIEW = "_unsafe_view_ViewMeta"


class UnreadableViewMetaArguments(Exception):
    """The ViewMeta's arguments cannot be read safely (Note [Reading ViewMeta arguments])."""


def view_op_of(class_name: str) -> torch._ops.OpOverload | None:
    """The aten op overload a ViewMeta class records (``squeeze__dim_ViewMeta`` -> aten.squeeze_.dim)."""
    stem = class_name.removesuffix("_ViewMeta")
    candidates = [(stem, "default")]
    candidates += [
        (stem[:k], stem[k + 1 :]) for k in range(1, len(stem)) if stem[k] == "_"
    ]
    for op_name, overload in candidates:
        packet = getattr(torch.ops.aten, op_name, None)
        if isinstance(packet, torch._ops.OpOverloadPacket) and overload in packet.overloads():
            return getattr(packet, overload)
    return None


def _tensor_arguments(class_name: str) -> list[str] | None:
    """Names of the Tensor arguments of the op a class records (None: no such op)."""
    op = view_op_of(class_name)
    if op is None:
        return None
    return [a.name for a in op._schema.arguments[1:] if "Tensor" in str(a.type)]


@functools.cache
def unreplayable_reason(class_name: str) -> str | None:
    """Why even ``forward()`` of this ViewMeta class must not run, or None if it may.

    Generated classes of ops with Tensor arguments hold those as references,
    bound to tensors that are gone once the op returned: ``forward()`` reads
    freed memory too (a segfault in test_view_meta_args.py's audit).
    """
    if class_name in _HANDWRITTEN:
        return None
    tensor_args = _tensor_arguments(class_name)
    if tensor_args is None:
        return f"{class_name} names no aten op whose schema could be checked"
    if tensor_args:
        return f"{class_name} holds its Tensor arguments {tensor_args} as references, which dangle"
    return None


@functools.cache
def unreadable_reason(class_name: str) -> str | None:
    """Why ``as_tuple()`` of this ViewMeta class is unsafe, or None if its tuple owns its data."""
    if class_name in _HANDWRITTEN:
        return f"{class_name}'s serializable tuple holds a reference to a destroyed temporary"
    return unreplayable_reason(class_name)


def arguments_readable(view_meta: Any) -> bool:
    """Whether ``view_meta.as_tuple()`` reads only data the ViewMeta owns."""
    return unreadable_reason(type(view_meta).__name__) is None


def view_meta_arguments(view_meta: Any, result: Tensor | None) -> tuple[object, ...]:
    """The argument tuple of ``view_meta``, as ``as_tuple()`` gives it, read safely.

    ``result`` is the step's result, replayed on the traced base: ``_unsafe_view``'s
    size is read off it. Raises UnreadableViewMetaArguments when neither is possible.
    """
    name = type(view_meta).__name__
    reason = unreadable_reason(name)
    if reason is None:
        return view_meta.as_tuple()
    if name == _UNSAFE_VIEW and result is not None:
        # (has_symbolic_inputs, size): the size the step produced.
        return (view_meta.has_symbolic_inputs, list(result.size()))
    raise UnreadableViewMetaArguments(reason)
