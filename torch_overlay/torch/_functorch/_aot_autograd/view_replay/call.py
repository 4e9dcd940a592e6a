"""
What the regenerations of one runtime call share (Note [Regenerators] in replay.py).

Layering: runtime. Imports nothing of view_replay but the runtime pieces (pieces.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from torch import Tensor

from .pieces import MultiOutputGroups


@dataclasses.dataclass(slots=True)
class RegenerationCall:
    """The values that the regenerations of one runtime call share: the runtime wrapper makes
    one per call of the compiled function."""

    # The graph's inputs that the runtime wrapper kept, by flat index; all of them in the
    # autograd.Function's forward (Note [Custom-Function views returned as views]).
    inputs: Mapping[int, object] | Sequence[object]
    # The graph's outputs, raw (before regeneration).
    outputs: Sequence[object]
    # The multi-output view calls made so far (Note [Multi-output views]).
    groups: MultiOutputGroups = dataclasses.field(default_factory=dict)
    # The regenerated outputs that the graph returns at several positions, by the first
    # position (Note [Outputs that are one tensor] in scope.py).
    same_objects: dict[int, Tensor] = dataclasses.field(default_factory=dict)


# regenerate(base, target, call) -> the view of ``base`` that stands for ``target``, the
# graph's own output: a regenerator, a compiled plan, a replay of recorded ViewMetas.
ViewFn = Callable[[Tensor, Tensor, RegenerationCall], Tensor]
