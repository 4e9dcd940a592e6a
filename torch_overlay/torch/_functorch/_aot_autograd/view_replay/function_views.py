"""
Custom-Function views that the compiled autograd.Function returns as views of their bases.

Note [Custom-Function views returned as views]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
An output whose view chain goes through a custom autograd.Function's node is
returned by the compiled autograd.Function itself (OutputType.custom_function_view,
Note [Views made by custom autograd.Functions]); autograd makes it a view of its
base only if the compiled forward returns a view. aot_eager does; inductor
returns a fresh tensor on the base's buffer (``reinterpret_tensor``): no
``_base``, a version counter of its own, and in-place on it is allowed where
eager raises "a view created inside a custom Function". Stock 2.14.1 and
2.13.0, inductor, static and dynamic:

    class SliceF(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x): return x[1:]
        @staticmethod
        def backward(ctx, g): ...
    def f(x): return SliceF.apply(x), x.t()      # x requires grad
    a, b = torch.compile(f)(x)                  # eager: a._base is x, b._base is x
    a.mul_(3)                                   # eager raises; compiled returns

and ``z = x * 2; return SliceF.apply(z), z.t()`` returns ``SliceF.apply(z)`` with a
version counter apart from ``z``'s, so ``b.mul_(3)`` then backward through it
gives a gradient where eager raises.

At compile time (plan.plan_function_views) such an output whose ``_base`` the
compiled forward has in hand gets a FunctionViewBase and a ViewReplay: a graph
input the graph does not mutate, a user output that aliases nothing, or an
intermediate base. A hidden intermediate that no intermediate base holds yet
(``SliceF.apply(x * 2).t()``) becomes one for it
(plan.returns_function_view_base; graph capture returns it after the bases of
the outputs before it, plan.saves_function_view_base). At runtime :class:`FunctionViews` replays the output's view
chain off that base inside the autograd.Function's forward (under no_grad, so
no view node is recorded), before the Function wraps its outputs: the output is
then eager's view of eager's base, with its creation meta, and its backward is
still the compiled Function's. The replay is checked as every regeneration is,
with the one as_strided() fallback point (Note [View replay fallback]).
Scope:
  - Graphs whose inputs are deduplicated or merged into a synthetic base keep
    upstream's behaviour: their runtime metadata is rebuilt without this field.
  - Graphs without a backward keep it: there is no autograd.Function, and the
    runtime wrapper returns the graph's output as it is.
  - Graphs with effect tokens keep it: the tokens shift the forward's arguments
    and returns, which the base positions do not count.
Cost: one view replay per such output and call; a hidden base is one more
output of the forward (and tangent of the backward).

Layering: runtime. Imports the runtime pieces (call, replay) and the data (spec).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor

from .call import RegenerationCall
from .replay import make_regenerator, Regenerator
from .spec import BaseHolder, FunctionViewBase


class FunctionViews:
    """The custom-Function views one compiled autograd.Function's forward returns as views
    of their bases (Note [Custom-Function views returned as views]), resolved once when the
    runtime wrapper is built from its ViewAndMutationMeta."""

    __slots__ = ("_first_output", "_views")

    def __init__(self, metadata: Any) -> None:
        # The forward returns the mutated inputs, then the user outputs, then the
        # intermediate bases; effect tokens would shift its arguments: none are replayed.
        self._first_output: int = metadata.num_mutated_inp_runtime_indices
        self._views: tuple[tuple[int, bool, int, Regenerator], ...] = () if metadata.tokens else tuple(
            (i, *_base_position(info.function_view_base, len(metadata.output_info)), make_regenerator(info, _InForward))
            for i, info in enumerate(metadata.output_info)
            if info.function_view_base is not None
        )

    def __bool__(self) -> bool:
        return bool(self._views)

    def regenerate(self, args: Sequence[Any], raw_returns: list[Any]) -> None:
        """Runtime hook: replace, in ``raw_returns``, each custom-Function view by its view
        replayed off its base, read from the forward's ``args`` or returns."""
        if not self._views:
            return
        outputs = raw_returns[self._first_output :]
        call = RegenerationCall(args, outputs)
        for i, in_args, index, regenerate in self._views:
            base = args[index] if in_args else outputs[index]
            raw_returns[self._first_output + i] = regenerate(base, outputs[i], call)


def _base_position(base: FunctionViewBase, num_outputs: int) -> tuple[bool, int]:
    """Whether the base is among the forward's arguments, and its index there or among the
    returns that follow the mutated inputs."""
    if base.holder is BaseHolder.INPUT:
        return True, base.index
    return False, base.index + (num_outputs if base.holder is BaseHolder.INTERMEDIATE_BASE else 0)


class _InForward(Regenerator):
    """A regeneration inside the autograd.Function's forward, which runs under no_grad: the
    Function, not the regenerator, decides whether the output requires grad."""

    __slots__ = ()

    def __call__(self, base: Tensor, target: Tensor, call: RegenerationCall) -> Tensor:
        return self._regenerate(base, target, call)
