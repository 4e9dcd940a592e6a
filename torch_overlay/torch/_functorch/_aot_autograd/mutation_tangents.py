"""
The traced tangent of a mutated tensor-subclass input that is the backward's only tangent.

Note [The only tangent is a mutated subclass input's]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The compiled autograd.Function returns the new value of each input it mutates,
and the backward takes a tangent for it. Upstream traces that tangent as a plain
tensor when the input is a tensor subclass (other than NJT), Note [AOTAutograd
Tangent Subclassness for mutated inputs]: autograd gives an output that received
no gradient a plain tensor of zeros, so a backward that starts from another
output brings a plain tangent. When gradient does flow through the mutated
input, it is the subclass's gradient, and the backward raises "we guessed its
metadata incorrectly" where eager computes. With TwoTensor ``x``,
    def f(x): x.add_(1); return x[1:], x.t()
returns two views of ``x``, which are regenerated outside the Function; backward
through either one reaches the Function through the input's new value only, and
raises (stock 2.14.1 and 2.13.0, aot_eager and inductor, static and dynamic).

A tangent can be autograd's plain zeros only if the Function's backward runs
from another of its differentiable outputs. When the input's new value is the
backward's only tangent, there is none: the backward runs only when that value
received a gradient, a tensor of the input's own kind. So
:func:`sole_mutation_tangent` traces the tangent as the subclass itself, as
upstream traces every output's tangent and as
``disable_guess_zero_tangent_for_mutated_input_subclass`` does for all of them.
Scope: a graph with any other tangent (another mutated input requiring grad, an
output that is not an alias, an intermediate base) keeps upstream's guess, and
with it the upstream error when a backward reaches the Function otherwise than
through the tangent guessed plain (pytorch#172556): a plain guess there is right
for a backward that starts from another output and wrong for one through the
input, and which of them comes is decided after the compile.
Cost: none at runtime; the traced tangent is the input instead of a plain copy.

Layering: outside view_replay (it needs no view replay); compile time: reads
traced values and their descriptors. Imports nothing of the overlay.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from .descriptors import AOTInput, InputMutationAOTOutput, TangentAOTInput


def sole_mutation_tangent(
    f_tangents: list[object],
    f_tangents_descs: Sequence[TangentAOTInput],
    flat_f_args: Sequence[object],
    flat_f_args_descs: Sequence[AOTInput],
) -> list[object]:
    """Compile-time hook on the traced tangents: where the only one is a mutated subclass
    input's, traced plain by upstream's guess, the input itself (Note [The only tangent is
    a mutated subclass input's]); otherwise ``f_tangents`` unchanged."""
    if len(f_tangents) != 1 or not isinstance(f_tangents_descs[0].output, InputMutationAOTOutput):
        return f_tangents
    inp = flat_f_args[list(flat_f_args_descs).index(f_tangents_descs[0].output.mutated_input)]
    if not is_traceable_wrapper_subclass(inp) or is_traceable_wrapper_subclass(f_tangents[0]):
        return f_tangents
    return [inp]
