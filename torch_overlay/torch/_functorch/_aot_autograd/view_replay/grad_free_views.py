"""
Outputs that alias another output, where neither requires grad.

Note [Views of outputs that do not require grad]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
AOTAutograd regenerates an output that aliases a graph intermediate only when
the output and the intermediate both require grad (Note [AOT Autograd:
outputs aliasing inputs or intermediates!]). Otherwise the output is an
OutputType.non_alias, and the runtime returns the tensor the graph computed.
Eager's outputs share the intermediate's version counter:
    y = x * 2; return y[0], y             # y[0]._base is y
    y = x * 2; return y[:-1], y[1:]       # both views of the hidden y
(x need not require grad). Compiled code does not give that:
  - inductor returns each view as a separate tensor on ``y``'s buffer, with no
    ``_base`` and a version counter of its own;
  - aot_eager returns the graph's views, but where the graph mutated ``y``
    through a view, ``y`` comes back detached (Note [Fresh outputs the graph
    returns as views]). ``y[0]`` then keeps the hidden intermediate as its
    ``_base``, and so does ``v[0]`` for a mutated ``v = x @ w3d``, whose
    ``_unsafe_view`` functionalization treats as a view.
So an in-place change of one output is not seen through the other by
autograd. A tensor that autograd saves off ``y[0]`` after the call
(``z = (w * y0).sum()``) is then used with the changed values where eager's
``z.backward()`` raises "modified by an inplace operation"; with overlapping
views (``y[:-1]``, ``y[1:]``) the changed values are really read. Stock 2.14.1
and 2.13.0, both backends, with and without a backward.

:func:`regenerate_without_grad` decides at compile time that such an output
is regenerated off its base by view replay, like an output that requires
grad: eager's ``_base`` and view chain, and a shared version counter.
  - A base that is a user output: OutputType.alias_of_intermediate_base_is_user_output.
  - A hidden intermediate that another output aliases: the intermediate
    becomes an intermediate base (OutputType.alias_of_intermediate_save_as_output).
    Inference graphs return intermediate bases too
    (graph_capture_wrappers.fn_input_mutations_to_outputs), and in graphs with
    a backward the autograd.Function marks those that do not require grad
    non-differentiable (ViewAndMutationMeta.grad_free_intermediate_bases):
    they stay without grad and get no gradient.
Scope:
  - Only where neither requires grad. A view taken under no_grad of an
    intermediate that requires grad keeps upstream's classification.
  - A hidden intermediate that only one output aliases stays hidden, as
    upstream keeps it for outputs that require grad (Note [Intermediate Bases
    Optimization]): no other output shares its version counter.
  - A hidden intermediate in a graph with tensor subclasses stays hidden:
    upstream refuses intermediate bases in their inference graphs (the dense
    forward's metadata, collected again, follows the subclass graph's). So
    does one in export (aot_export_module, torch.export), whose graph
    outputs are the user's.
A hidden intermediate may be an alias of another return that is no view:
    y = x * 2; return y.detach()[1:], y   # the first output's _base is y.detach()
and a backend may return one tensor for both (inductor returns ``y``'s buffer
as ``y`` and as the intermediate base). Marked non-differentiable, that tensor
would take ``y``'s grad away (``y.requires_grad`` False, no gradient), and two
such bases that eager keeps apart (``y.detach()[1:], y.detach()[:2]``) would
become one. :func:`distinct_grad_free_bases` returns each intermediate base
without grad that is the very tensor of another return through ``detach()``:
a tensor of its own, on the same storage and with the same version counter, as
eager's ``y.detach()`` is. Which returns a backend merges is known at runtime
only.
Cost: one view replay per such output and call, as for an output that requires
grad, and one more graph output per hidden intermediate; per call, one identity
scan of the returns per intermediate base without grad.

Layering: runtime (the compile-time check reads traced values only).
"""

from __future__ import annotations

from typing import Any, TYPE_CHECKING

from torch import Tensor
from torch.utils._python_dispatch import is_traceable_wrapper_subclass


if TYPE_CHECKING:
    from .scope import GraphScope


def _has_subclass(scope: GraphScope) -> bool:
    return any(is_traceable_wrapper_subclass(t) for t in (*scope.inputs, *scope.outputs))


def regenerate_without_grad(out: Tensor, scope: GraphScope, num_aliased_outs: int, hidden_bases: bool) -> bool:
    """Compile-time hook: whether ``out``, a traced output of the graph ``scope`` that
    ``num_aliased_outs`` outputs alias (itself included), is regenerated off its ``_base``
    although neither requires grad: where the base is a user output, or, where
    ``hidden_bases`` allows intermediate bases without grad, where it is a hidden intermediate
    that another output aliases in a graph without subclasses (Note [Views of outputs that do
    not require grad])."""
    base = out._base
    if base is None or out.requires_grad or base.requires_grad:
        return False
    if any(base is o for o in scope.outputs):
        return True
    return hidden_bases and num_aliased_outs > 1 and not _has_subclass(scope)


def distinct_grad_free_bases(returns: list[Any], first_base: int, metadata: Any) -> None:
    """Runtime hook: replace, in ``returns`` (whose intermediate bases start at
    ``first_base``), each intermediate base without grad that is the very tensor of another
    return by its ``detach()`` (Note [Views of outputs that do not require grad]).
    ``metadata`` is the graph's ViewAndMutationMeta."""
    for i in metadata.grad_free_intermediate_bases:
        j = first_base + i
        base = returns[j]
        if isinstance(base, Tensor) and any(r is base for k, r in enumerate(returns) if k != j):
            returns[j] = base.detach()
