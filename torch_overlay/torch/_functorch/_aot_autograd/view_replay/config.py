"""
Configuration flags for view replay of aliased outputs.

See Note [View replay for aliased outputs] in ``__init__.py``.
Flags follow the style of ``torch._functorch.config``: set them directly
(``view_replay.config.strict = True``) or scope them with
``view_replay.config.patch(strict=True)``.
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


if TYPE_CHECKING:
    from torch.utils._config_typing import *  # noqa: F403


install_config_module(sys.modules[__name__])
