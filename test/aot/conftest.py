"""Strict view replay for every test on patched torch: an ``as_strided()`` regeneration that a
test does not expect raises ``ViewReplayFallbackError`` (view_replay.config.strict). Tests of the
fallback itself (flags that turn replay off, the fallback point's own tests) are marked
``fallback_allowed``; a class-level mark covers its methods."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from view_replay_testing import PATCHED


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fallback_allowed: the test expects as_strided() regenerations")


@pytest.fixture(autouse=True)
def _strict_view_replay(request: pytest.FixtureRequest) -> Iterator[None]:
    if not PATCHED or request.node.get_closest_marker("fallback_allowed"):
        yield
        return
    from torch._functorch._aot_autograd.view_replay import config

    with config.patch(strict=True):
        yield
