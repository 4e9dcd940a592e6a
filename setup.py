"""Install the patch-queue tooling (the ``viewreplay`` command); it does not depend on torch."""

from setuptools import setup

setup(
    name="torch-viewreplay-tools",
    version="0.1.0",
    description="Apply the view-replay patch series to the pinned PyTorch and build the custom wheel",
    package_dir={"": "tools"},
    packages=["viewreplay"],
    python_requires=">=3.11",
    install_requires=["pyflakes", "wheel"],
    entry_points={"console_scripts": ["viewreplay=viewreplay.cli:main"]},
)
