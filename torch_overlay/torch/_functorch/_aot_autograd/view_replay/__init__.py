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
Note [View replay fallback]). Fixes of AOTAutograd that need no view replay
are modules of their own beside it, not part of this package. It also owns
the fixups the runtime wrapper makes to what a compiled forward returns and
saves, so that its regenerated outputs are eager's (fixups.py, Note [Runtime
fixups]).
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
from .fixups import ReturnFixups, SavedTensorFixups
from .fresh_views import may_return_as_views
from .grad_free_views import regenerate_without_grad
from .data_views import DataViewError, regenerates_saved_data_view
from .multi_output import hide_input_multi_output_aliasing, hide_intermediate_alias
from .merged_inputs import merged_input_view, MergedInputs, overlapping_input_offsets
from .plan import (
    MixedGradModeViewError,
    output_alias_info_runtime_safe,
    plan_merged_inputs,
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
from .saved_tensors import saves_on_returned_storages
from .scope import GraphScope
from .spec import FunctionViewBase, SymbolOutput, ViewReplay
from .subclass import aliased_storage, with_dense_intermediate_bases
from .symbol_outputs import symbol_output_slice, with_symbol_outputs
from .version_witnesses import eager_saved_returns, input_nodes


__all__ = [
    "aliased_storage",
    "FallbackReason",
    "FunctionViewBase",
    "GraphScope",
    "MixedGradModeViewError",
    "RegenerationCall",
    "ReturnFixups",
    "SavedTensorFixups",
    "Regenerator",
    "SymbolOutput",
    "ViewReplay",
    "ViewReplayFallbackError",
    "config",
    "custom_function_in_view_chain",
    "DataViewError",
    "eager_saved_returns",
    "hide_input_multi_output_aliasing",
    "hide_intermediate_alias",
    "input_nodes",
    "inputs_read_by_replay",
    "make_regenerator",
    "may_return_as_views",
    "merged_input_view",
    "MergedInputs",
    "output_alias_info_runtime_safe",
    "overlapping_input_offsets",
    "plan_merged_inputs",
    "plan_function_views",
    "plan_view_replay",
    "regenerate_alias",
    "regenerate_without_grad",
    "regenerates_saved_data_view",
    "remap_view_replay_inputs",
    "returns_function_view_base",
    "saves_function_view_base",
    "saves_on_returned_storages",
    "symbol_output_slice",
    "with_dense_intermediate_bases",
    "with_symbol_outputs",
]
