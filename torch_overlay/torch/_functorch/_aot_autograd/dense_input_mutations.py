"""
The dense metadata of a subclass graph counts its subclass inputs mutated outside the graph.

Note [Subclass inputs mutated outside the graph]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A subclass input that requires grad and is mutated in the graph is mutated
outside it: the joint forward returns its new inner tensors first, before
the user outputs. The dense metadata re-collected by aot_dispatch_subclass()
sees inner tensors that do not require grad, calls their mutation in-graph
and counts no mutated inputs among the forward outputs. The partitioner
recounts them (Note: [Recomputing subclass mutation handling]); the dense
metadata's forward-output and saved-tensor slices do not, and start that
many outputs early. Two consumers read them: the backward compile restrides
the saved tensors (and with no saved tensor, the tangents) from the strides
of user outputs, so inductor's backward asserts the wrong layout; and the
donated-buffer analysis takes a saved tensor that is a user output for one
it may overwrite. With TwoTensor ``x``,
    def f(x): x.mul_(2); e = x.exp(); return e, x * 4
backward through both outputs rewrites ``e`` in place with inductor (stock
2.14.1 and 2.13.0; eager leaves it alone); with ``(x * 4).t()`` the
backward raises "expected size 4==4, stride 4==1". ``with_dense_input_mutations``
gives the dense inputs that the partitioner counts as mutated outside the
graph (a subclass input's inner tensors and size symbols) their outer input's
classification, as the partitioner's recount does, so the dense metadata
counts them where the joint forward returns them.

Layering: outside view_replay (it needs no view replay); compile time. Imports
nothing of the overlay.
"""

from __future__ import annotations

import dataclasses

from .schemas import PlainTensorMeta, ViewAndMutationMeta
from .subclass_utils import compute_inner_mutated_inp_indices_from_subclass_meta


def with_dense_input_mutations(
    dense_meta: ViewAndMutationMeta, meta: ViewAndMutationMeta
) -> ViewAndMutationMeta:
    """Compile-time hook: ``dense_meta`` (collected on the unwrapped forward) classifying
    the inner tensors of subclass inputs mutated outside the graph as the partitioner does.
    See Note [Subclass inputs mutated outside the graph]."""
    counted = compute_inner_mutated_inp_indices_from_subclass_meta(meta, dense_meta)
    if counted == dense_meta.mutated_inp_runtime_indices:
        return dense_meta
    # The outer input of each dense input, as the partitioner's recount expands them.
    outer_index = [
        i
        for i, m in enumerate(meta.subclass_inp_meta)
        for _ in range(1 if isinstance(m, PlainTensorMeta) else m.arg_count)
    ]
    input_info = list(dense_meta.input_info)
    for i in counted:
        input_info[i] = meta.input_info[outer_index[i]]
    # replace() reruns __post_init__, which recomputes the forward/saved-tensor slices.
    updated = dataclasses.replace(dense_meta, input_info=input_info)
    if updated.mutated_inp_runtime_indices != counted:
        return dense_meta  # not the partitioner's count: keep upstream's
    return updated
