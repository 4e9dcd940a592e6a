"""The harness that runs inside a torch venv: seed cases, sweep, fuzz, bench worker, eager-parity oracle.

Every module here imports torch. The torch-free patch-queue tooling (the ``viewreplay``
package) never imports this package: it runs these modules as subprocesses under a venv's
interpreter (``python -m viewreplay_harness.cases``, ``.sweep``, ``.bench_worker``). The
harness may import from ``viewreplay`` (e.g. :class:`viewreplay.ViewReplayError`), not the
other way round.
"""
