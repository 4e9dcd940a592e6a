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
view-replay patch series); each module says what it does, and fallback.py
holds the single as_strided() fallback point (Note [View replay fallback]).

Outputs without a ViewMeta sequence are replayed with the view function that
autograd recorded for them, if any (Note [Recorded view functions of graph
outputs] in replay.py).
"""

from . import config
# [stack: custom-function-views]
from .autograd_chain import custom_function_in_view_chain
# [/stack]
from .fallback import FallbackReason, ViewReplayFallbackError
# [stack: multi-output-views]
from .multi_output import (
    hide_input_multi_output_aliasing,
    hide_intermediate_alias,
    MultiOutputGroups,
)
# [/stack]
# [stack: symbolic-replay]
from .plan import (
    inputs_read_by_replay,
    output_alias_info_runtime_safe,
    plan_replay,
    # [stack: synthetic-base-indices]
    remap_plan_inputs,
    # [/stack]
    ReplayPlan,
    UnplannableView,
    ViewReplayPlan,
)
# [/stack]
from .replay import (
    # [stack: precompiled-regenerators]
    make_regenerator,
    # [/stack]
    regenerate_alias,
    Regenerator,
)
# [stack: symbol-outputs]
from .symbol_outputs import symbol_output_slice, SymbolOutputs, with_symbol_outputs
# [/stack]
# [stack: subclass-outer-views]
from .subclass import (
    plan_subclass_view_chain,
    # [stack: subclass-intermediate-bases]
    with_dense_intermediate_bases,
    # [/stack]
)
# [/stack]


__all__ = [
    "FallbackReason",
    # [stack: multi-output-views]
    "MultiOutputGroups",
    # [/stack]
    "Regenerator",
    # [stack: symbolic-replay]
    "ReplayPlan",
    "UnplannableView",
    # [/stack]
    "ViewReplayFallbackError",
    # [stack: symbolic-replay]
    "ViewReplayPlan",
    # [/stack]
    "config",
    # [stack: custom-function-views]
    "custom_function_in_view_chain",
    # [/stack]
    # [stack: multi-output-views]
    "hide_input_multi_output_aliasing",
    "hide_intermediate_alias",
    # [/stack]
    # [stack: symbolic-replay]
    "inputs_read_by_replay",
    # [/stack]
    # [stack: precompiled-regenerators]
    "make_regenerator",
    # [/stack]
    # [stack: symbolic-replay]
    "output_alias_info_runtime_safe",
    "plan_replay",
    # [/stack]
    # [stack: subclass-outer-views]
    "plan_subclass_view_chain",
    # [/stack]
    "regenerate_alias",
    # [stack: synthetic-base-indices]
    "remap_plan_inputs",
    # [/stack]
    # [stack: symbol-outputs]
    "symbol_output_slice",
    "SymbolOutputs",
    "with_symbol_outputs",
    # [/stack]
    # [stack: subclass-intermediate-bases]
    "with_dense_intermediate_bases",
    # [/stack]
]
