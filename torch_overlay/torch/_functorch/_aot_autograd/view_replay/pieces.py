"""
The multi-output view calls of one runtime call (Note [Multi-output views] in multi_output.py).

Layering: runtime. Imports nothing of view_replay.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from torch import Tensor


@dataclasses.dataclass
class MultiOutputCall:
    """One regenerated multi-output view call, and the pieces handed out as outputs."""

    pieces: tuple[Tensor, ...]
    claimed: set[int] = dataclasses.field(default_factory=set)


# The multi-output view calls of one runtime call: group key -> the calls made so far.
MultiOutputGroups = dict[tuple[object, ...], list[MultiOutputCall]]


def pieces_of(
    groups: MultiOutputGroups,
    key: tuple[object, ...],
    compute: Callable[[], tuple[Tensor, ...]],
    claim: int | None,
) -> tuple[Tensor, ...]:
    """The pieces of a multi-output view call of group ``key``, made once per group and runtime call.

    ``claim`` is the index of the piece when it is itself an output: a piece is handed out as
    an output once, and an output claiming a piece that another output already has comes from
    a separate call in user code (Dynamo returns one tensor returned twice once), so it gets a
    call of its own: eager's two tensors, not one tensor twice.
    """
    calls = groups.setdefault(key, [])
    for call in calls:
        if claim is None or claim not in call.claimed:
            break
    else:
        call = MultiOutputCall(compute())
        calls.append(call)
    if claim is not None:
        call.claimed.add(claim)
    return call.pieces
