"""
What autograd recorded between a traced output and its ``_base``, read at compile time.

Note [Views made by custom autograd.Functions]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Dynamo traces a custom autograd.Function into the graph, and AOTAutograd runs
it as one (autograd_function_apply), so a traced output whose view chain goes
through the Function's node carries the Function's backward. Functionalization
records the views the Function's forward made as ViewMetas, but no ViewMeta
stands for the Function's node: an output regenerated off its base by replaying
them gets the plain views' backward, and the Function's own backward is
silently lost. Upstream keeps such an output inside the compiled function
(OutputType.custom_function_view) only when its own grad_fn is the Function's
node and it aliases an input; ``ViewAs.apply(x)[1:]`` (a view after the
Function) and ``SliceF.apply(z)`` of an intermediate ``z`` that another output
aliases were regenerated, with a wrong gradient (stock identical):

    class ViewAs(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x): return x.view_as(x)
        @staticmethod
        def backward(ctx, g): return g * 5
    def f(x): return ViewAs.apply(x)[1:]     # x.grad: 1 compiled, 5 eager

:func:`custom_function_in_view_chain` finds the Function's node between the
output and its base; collect_metadata_analysis then classifies the output as a
custom-Function view whatever its storage, and the compiled function returns it
as its own output, whose backward holds the Function's.

Layering: planning (compile time). Imports nothing of the overlay.
"""

from __future__ import annotations

import enum

import torch
from torch import Tensor
from torch._subclasses.functional_tensor import FunctionalTensorMode


# Longest view chain walked; a longer one is treated as holding no custom node.
MAX_VIEW_CHAIN = 64


def is_custom_function_node(node: object) -> bool:
    """Whether an autograd node is a custom autograd.Function's (C++ or Python)."""
    return type(node).__name__ == "CppFunction" or isinstance(
        node, torch.autograd.function.BackwardCFunction
    )


def _base_node(base: Tensor) -> object:
    """The node that a view chain of ``base`` ends at: its grad_fn, or its AccumulateGrad."""
    # Note [Accessing .grad_fn on FunctionalTensor] (collect_metadata_analysis.py)
    with FunctionalTensorMode():
        grad_fn = base.grad_fn
    if grad_fn is not None or not base.requires_grad:
        return grad_fn
    return torch.autograd.graph.get_gradient_edge(base).node


class ChainEnd(enum.Enum):
    """Where the walk from an output's grad_fn towards its base's node stopped."""

    # At the base's node: every view step was recorded with grad mode on.
    BASE = "base"
    # At a None edge: the steps before it were taken under no_grad.
    NO_GRAD = "no_grad"
    # At a custom autograd.Function's node (Note [Views made by custom autograd.Functions]).
    CUSTOM_FUNCTION = "custom_function"
    # Anywhere else (no base, a chain longer than MAX_VIEW_CHAIN).
    UNKNOWN = "unknown"


def _walk_view_chain(out: Tensor, grad_fn: object) -> tuple[int, ChainEnd]:
    """The view nodes walked from ``grad_fn`` (``out``'s) towards ``out._base``'s node, and
    where the walk stopped."""
    stop = _base_node(out._base)
    node = grad_fn
    for walked in range(MAX_VIEW_CHAIN):
        if node is None:
            return walked, ChainEnd.NO_GRAD
        if node is stop:
            return walked, ChainEnd.BASE
        if is_custom_function_node(node):
            return walked, ChainEnd.CUSTOM_FUNCTION
        node = node.next_functions[0][0] if node.next_functions else None
    return MAX_VIEW_CHAIN, ChainEnd.UNKNOWN


def _is_differentiable_view(out: object) -> bool:
    return isinstance(out, Tensor) and out._base is not None and out.requires_grad


def custom_function_in_view_chain(out: object, grad_fn: object) -> bool:
    """Compile-time hook: whether a custom autograd.Function's node lies between the traced
    output ``out`` (whose grad_fn is ``grad_fn``) and its ``_base`` (Note [Views made by
    custom autograd.Functions])."""
    if not _is_differentiable_view(out) or grad_fn is None:
        return False
    return _walk_view_chain(out, grad_fn)[1] is ChainEnd.CUSTOM_FUNCTION


# Note [Views taken under no_grad]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A view taken under torch.no_grad() of a tensor that requires grad is, in
# eager, a leaf without grad_fn that still requires grad (inherited), views its
# base (``_base``, shared version counter), and raises on an in-place op with
# grad mode on; views taken off it with grad mode on have a grad_fn whose edge
# towards the base is None. Upstream regenerated such outputs in the caller's
# grad mode: ``with torch.no_grad(): y = x[1:]; return y, x.t()`` came back
# with SliceBackward0, and backward through y sent a gradient into x (stock
# identical). The regeneration now replays the no_grad part of the chain under
# no_grad: all of it for an output without grad_fn (ViewReplay.no_grad, which
# plan_view_replay sets), and the leading steps of a chain whose later steps
# ran with grad mode on (ReplayPlan.no_grad_steps; refused at compile time when
# such a chain cannot be planned). Such an output is never hidden behind _unsafe_view
# (multi_output.hide_intermediate_alias): it is regenerated off its base.
def no_grad_view_steps(out: object, grad_fn: object, num_steps: int) -> int:
    """How many leading steps of ``out``'s view chain (``num_steps`` long) were taken under
    no_grad (Note [Views taken under no_grad]): 0 for an ordinary view, ``num_steps`` for a
    view without grad_fn."""
    if not _is_differentiable_view(out):
        return 0
    if grad_fn is None:
        return num_steps
    walked, end = _walk_view_chain(out, grad_fn)
    return max(num_steps - walked, 0) if end is ChainEnd.NO_GRAD else 0


def mixed_no_grad_steps(out: Tensor, num_steps: int) -> int:
    """The leading steps of ``out``'s view chain (``num_steps`` long) taken under no_grad,
    when later steps ran with grad mode on; 0 otherwise (Note [Views taken under no_grad])."""
    steps = no_grad_view_steps(out, traced_grad_fn(out), num_steps)
    return steps if steps < num_steps else 0


def traced_grad_fn(out: Tensor) -> object:
    """``out.grad_fn`` of a traced (functional) output (Note [Accessing .grad_fn on
    FunctionalTensor] in collect_metadata_analysis.py)."""
    with FunctionalTensorMode():
        return out.grad_fn


def taken_under_no_grad(out: object) -> bool:
    """Whether the traced output ``out`` is a view taken under no_grad: it has no grad_fn, yet
    requires grad as its base does (Note [Views taken under no_grad])."""
    return _is_differentiable_view(out) and traced_grad_fn(out) is None  # type: ignore[arg-type]


def has_no_grad_steps(out: Tensor) -> bool:
    """Whether part of ``out``'s view chain was taken under no_grad (Note [Views taken
    under no_grad])."""
    return no_grad_view_steps(out, traced_grad_fn(out), 1) > 0
