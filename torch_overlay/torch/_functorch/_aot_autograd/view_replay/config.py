"""
Configuration flags for view replay of aliased outputs
(Note [View replay for aliased outputs] in ``__init__.py``). Flags follow the style of ``torch._functorch.config``: set them directly
(``view_replay.config.strict = True``) or scope them with
``view_replay.config.patch(strict=True)``.

Layering: shared (read at compile time and at runtime). Imports nothing of the overlay.
"""

import sys
from typing import TYPE_CHECKING

from torch.utils._config_module import install_config_module


# Raise ViewReplayFallbackError instead of regenerating an aliased output with
# as_strided(). The fallback is still counted and logged before raising.
# Tests run with this on, so that any unexplained as_strided regeneration fails.
strict: bool = False

# Replay view chains whose arguments depend on symbolic sizes (dynamic shapes)
# by binding every free symbol to a runtime value at compile time.
# Off reproduces upstream 2.13 behaviour: such outputs fall back to as_strided().
replay_symbolic_views: bool = True

# Hide the aliasing between the pieces of a multi-output view (unbind, split,
# chunk) from autograd, as upstream does: faster to regenerate, but in-place on
# a piece no longer raises eager's error, and in-place on the base followed by
# backward through a piece gives a wrong gradient. Off (faithful): the pieces
# are regenerated with one call of the op per group. See Note [Multi-output views].
hide_multi_output_view_aliasing: bool = False

# Replay the outer (subclass-level) view chain of traceable wrapper subclass
# outputs (DTensor, TwoTensor, ...). Off reproduces upstream 2.13: as_strided()
# regeneration (DTensor raises). See Note [Subclass view replay].
replay_subclass_views: bool = True


# Every flag but these is part of the AOTAutograd cache key (autograd_cache.py): they decide
# what the compiled metadata holds. strict is read when a fallback happens, at runtime.
_cache_config_ignore_prefix = ["strict", "TYPE_CHECKING"]


if TYPE_CHECKING:
    from torch.utils._config_typing import *  # noqa: F403


install_config_module(sys.modules[__name__])
