"""Tooling for the view-replay patch queue against the pinned PyTorch release.

The package applies/reverts the repository's patch series and overlay on a
torch tree, keeps ``pin.toml`` in sync with the pinned wheel, builds the
custom torch wheel, and makes a git checkout that stands in for a PyTorch
source checkout.
"""


class ViewReplayError(Exception):
    """A refusal or failure that the CLI reports as an error and exit code 1."""
