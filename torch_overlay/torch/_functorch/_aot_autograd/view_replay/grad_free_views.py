"""
Outputs that are views of another output, where neither requires grad.

Note [Views of outputs that do not require grad]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
AOTAutograd regenerates an output that aliases a graph intermediate only when
the output and the intermediate both require grad (Note [AOT Autograd:
outputs aliasing inputs or intermediates!]). Otherwise the output is an
OutputType.non_alias, and the runtime returns the tensor the graph computed.
Where the intermediate is itself a user output, as in
    y = x * 2; return y[0], y        # x need not require grad
eager's ``y[0]._base`` is ``y``, and the two share a version counter.
Compiled code does not give that:
  - inductor returns ``y[0]`` as a separate tensor on ``y``'s buffer, with no
    ``_base`` and a version counter of its own;
  - aot_eager returns the graph's view, but where the graph mutated ``y``
    through a view, ``y`` comes back detached (Note [Fresh outputs the graph
    returns as views]). ``y[0]`` then keeps the hidden intermediate as its
    ``_base``, and so does ``v[0]`` for a mutated ``v = x @ w3d``, whose
    ``_unsafe_view`` functionalization treats as a view.
So ``y.mul_(2)`` does not bump ``y[0]``'s version. A tensor that autograd saves
off ``y[0]`` after the call (``z = (w * y0).sum()``) is then used with the
changed values where eager's ``z.backward()`` raises "modified by an inplace
operation". Stock 2.14.1 and 2.13.0, both backends; also in graphs with a
backward, for the outputs that do not require grad.

:func:`regenerate_off_user_output` decides at compile time that such an
output is an OutputType.alias_of_intermediate_base_is_user_output. It is then
regenerated off the returned output by view replay, like an output that
requires grad: eager's ``_base`` and view chain, and a shared version counter.
Scope:
  - Only a base that is a user output. An intermediate that no output returns
    (``return y[0], y[1]``) would have to become a graph output, and only the
    joint graph returns intermediate bases. Those outputs keep upstream's
    behaviour: with inductor, separate tensors; with aot_eager, views of one
    hidden intermediate.
  - Only where neither requires grad. A view taken under no_grad of an
    intermediate that requires grad keeps upstream's classification.
Cost: one view replay per such output and call, as for an output that requires
grad.

Layering: planning (a compile-time check of traced values).
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor


def regenerate_off_user_output(out: Tensor, user_output_ids: Mapping[int, int]) -> bool:
    """Compile-time hook: whether ``out``, a traced output, is regenerated off its ``_base``
    although neither requires grad. That holds where the base is a user output
    (``user_output_ids`` maps the ids of the traced user outputs to their indices); see
    Note [Views of outputs that do not require grad]."""
    base = out._base
    return (
        base is not None
        and not out.requires_grad
        and not base.requires_grad
        and id(base) in user_output_ids
    )
