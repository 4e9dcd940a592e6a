"""Install the view-replay tooling: two packages under ``tools/``.

``viewreplay`` is the patch-queue tooling (the ``viewreplay`` command); it does not depend on
torch. ``viewreplay_harness`` is the harness that runs inside a torch venv (seed cases, sweep,
fuzz, bench worker, eager-parity oracle); ``viewreplay`` only launches it as subprocesses
(``python -m viewreplay_harness.<module>``) and never imports it.
"""

from setuptools import setup

setup(
    name="torch-viewreplay-tools",
    version="0.1.0",
    description="Apply the view-replay patch series to the pinned PyTorch and build the custom wheel "
    "(viewreplay, torch-free), and the harness that runs inside a torch venv (viewreplay_harness)",
    package_dir={"": "tools"},
    packages=["viewreplay", "viewreplay_harness"],
    package_data={"viewreplay_harness": ["fuzz_acceptance.toml"]},
    python_requires=">=3.11",
    install_requires=["pyflakes", "wheel"],
    entry_points={"console_scripts": ["viewreplay=viewreplay.cli:main"]},
)
