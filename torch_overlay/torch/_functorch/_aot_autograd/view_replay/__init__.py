"""
View replay for aliased outputs of AOTAutograd.

Note [View replay for aliased outputs]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A compiled graph cannot return, from inside its autograd.Function, an output
that aliases a graph input or intermediate: AOTAutograd regenerates such
outputs at runtime, outside the function, as views of the real base. When the
view chain is replayed with the real view ops, the output's backward holds
eager's nodes (ViewBackward0, SliceBackward0, ...); otherwise it holds
AsStridedBackward0, which is slow and unsupported by some tensor subclasses.

This package owns that regeneration (it is installed into torch by the
view-replay patch series), with one as_strided() fallback point (fallback.py,
Note [View replay fallback]).
Each module says its phase in its docstring ("Layering: ..."): the data every
phase shares (spec.py), planning at compile time, and the runtime; imports
point from planning to the runtime and the data, never back.

Layering: the package's face: it re-exports the hooks that upstream files call
and holds no code of its own.
"""

from . import config
from .autograd_chain import custom_function_in_view_chain
from .call import RegenerationCall
from .fallback import FallbackReason, ViewReplayFallbackError
from .data_views import DataViewError, regenerates_saved_data_view
from .fresh_bases import copy_input_bases, regeneration_bases
from .fresh_views import detach_returned_views, may_return_as_views
from .foreach_versions import bump_foreach_versions, ModifiedNoGradViewError, traced_output_grad_fn
from .function_views import FunctionViews
from .grad_free_views import distinct_grad_free_bases, regenerate_without_grad
from .multi_output import hide_input_multi_output_aliasing, hide_intermediate_alias
from .mutation_tangents import sole_mutation_tangent
from .merged_inputs import (
    check_merged_input_layouts,
    merged_input_layouts,
    merged_input_view,
    MergedInputAlias,
    MergedInputLayout,
    overlapping_input_offsets,
    regenerate_merged_input_aliases,
)
from .plan import (
    defer_merged_input_aliases,
    MixedGradModeViewError,
    output_alias_info_runtime_safe,
    plan_function_views,
    plan_view_replay,
    remap_view_replay_inputs,
    returns_function_view_base,
    saves_function_view_base,
)
from .replay import (
    inputs_read_by_replay,
    make_regenerator,
    regenerate_alias,
    Regenerator,
)
from .saved_input_versions import SavedInputAlias, saved_input_aliases, share_input_version_counters
from .saved_tensors import saves_on_returned_storages, share_returned_version_counters
from .scope import GraphScope
from .spec import FunctionViewBase, SymbolOutput, ViewReplay
from .subclass import aliased_storage, with_dense_input_mutations, with_dense_intermediate_bases
from .symbol_outputs import symbol_output_slice, with_symbol_outputs
from .version_witnesses import eager_saved_returns, input_nodes, version_witnesses


__all__ = [
    "aliased_storage",
    "bump_foreach_versions",
    "check_merged_input_layouts",
    "FallbackReason",
    "FunctionViewBase",
    "FunctionViews",
    "GraphScope",
    "MixedGradModeViewError",
    "ModifiedNoGradViewError",
    "RegenerationCall",
    "Regenerator",
    "SymbolOutput",
    "ViewReplay",
    "ViewReplayFallbackError",
    "config",
    "copy_input_bases",
    "custom_function_in_view_chain",
    "DataViewError",
    "defer_merged_input_aliases",
    "detach_returned_views",
    "distinct_grad_free_bases",
    "eager_saved_returns",
    "hide_input_multi_output_aliasing",
    "hide_intermediate_alias",
    "input_nodes",
    "inputs_read_by_replay",
    "make_regenerator",
    "may_return_as_views",
    "merged_input_layouts",
    "merged_input_view",
    "MergedInputAlias",
    "MergedInputLayout",
    "output_alias_info_runtime_safe",
    "overlapping_input_offsets",
    "plan_function_views",
    "plan_view_replay",
    "regenerate_alias",
    "regenerate_merged_input_aliases",
    "regenerate_without_grad",
    "regenerates_saved_data_view",
    "regeneration_bases",
    "remap_view_replay_inputs",
    "returns_function_view_base",
    "saves_function_view_base",
    "SavedInputAlias",
    "saved_input_aliases",
    "share_input_version_counters",
    "saves_on_returned_storages",
    "share_returned_version_counters",
    "sole_mutation_tangent",
    "symbol_output_slice",
    "traced_output_grad_fn",
    "version_witnesses",
    "with_dense_input_mutations",
    "with_dense_intermediate_bases",
    "with_symbol_outputs",
]
