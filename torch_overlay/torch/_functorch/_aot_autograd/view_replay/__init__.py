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
view-replay patch series):
  * plan.py     compile time: plans the replay of view chains with symbolic
                arguments (Note [Symbolic view replay]);
  * symbols.py  compile time: binds each free symbol to a runtime value;
  * symbol_outputs.py  the graph returns the symbols that no value carries
                (Note [Symbol outputs]);
  * view_meta_args.py  compile time: reads ViewMeta arguments without 2.13's
                unsafe accessor (Note [Reading ViewMeta arguments]);
  * multi_output.py  pieces of unbind/split/chunk: classification hooks and
                one regeneration per group (Note [Multi-output views]);
  * subclass.py compile time: the outer view chain of tensor-subclass outputs
                (Note [Subclass view replay]);
  * replay.py   runtime: one precompiled regenerator per aliased output,
                which replays, verifies the metadata against the graph's
                output, and otherwise falls back (Note [Precompiled
                regenerators]);
  * fallback.py the single as_strided() fallback point, which counts, logs
                and (in strict mode) raises (Note [View replay fallback]);
  * config.py   flags.

Outputs without a ViewMeta sequence are replayed with the view function that
autograd recorded for them, if any (Note [Recorded view functions of graph
outputs] in replay.py).
"""

from . import config
from .fallback import FallbackReason, ViewReplayFallbackError
from .multi_output import (
    hide_input_multi_output_aliasing,
    hide_intermediate_alias,
    MultiOutputGroups,
)
from .plan import (
    inputs_read_by_replay,
    output_alias_info_runtime_safe,
    plan_replay,
    remap_plan_inputs,
    ReplayPlan,
    UnplannableView,
    ViewReplayPlan,
)
from .replay import make_regenerator, regenerate_alias, Regenerator
from .symbol_outputs import symbol_output_slice, SymbolOutputs, with_symbol_outputs
from .subclass import plan_subclass_view_chain, with_dense_intermediate_bases


__all__ = [
    "FallbackReason",
    "MultiOutputGroups",
    "Regenerator",
    "ReplayPlan",
    "UnplannableView",
    "ViewReplayFallbackError",
    "ViewReplayPlan",
    "config",
    "hide_input_multi_output_aliasing",
    "hide_intermediate_alias",
    "inputs_read_by_replay",
    "make_regenerator",
    "output_alias_info_runtime_safe",
    "plan_replay",
    "plan_subclass_view_chain",
    "regenerate_alias",
    "remap_plan_inputs",
    "symbol_output_slice",
    "SymbolOutputs",
    "with_symbol_outputs",
    "with_dense_intermediate_bases",
]
