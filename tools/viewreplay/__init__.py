"""Tooling for the view-replay patch queue against its pinned PyTorch releases.

The package applies/reverts the repository's patch series and overlay on a
torch tree, keeps each ``pins/VERSION/pin.toml`` in sync with its upstream
wheel, builds the custom torch wheel, and makes a git checkout that stands in
for a PyTorch source checkout. Every command works on one pin (``--pin``;
default: the newest).
"""


class ViewReplayError(Exception):
    """A refusal or failure that the CLI reports as an error and exit code 1."""
