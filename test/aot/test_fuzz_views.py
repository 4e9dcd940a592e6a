"""Fixed-seed fuzzing of view replay (tools/viewreplay/fuzz.py): random programs of view ops
(every dense ViewMeta op, multi-output ones included), pointwise ops and in-place mutations of
inputs and intermediates, run eagerly and compiled (aot_eager, static and dynamic, two sizes
each; a small inductor slice) in strict mode, compared end to end. See fuzz.py for the oracle,
the accepted fallbacks and the exclusions.

The budget here is fixed (seeds, counts) so that CI is deterministic; a failure prints the
minimal program (hypothesis shrinks it). More programs: ``python -m viewreplay.fuzz --long``.
Patched torch only: the stock side has no view_replay overlay (its deviations are the bugs the
series fixes, documented by the other test modules).
"""

from __future__ import annotations

import unittest

from torch.testing._internal.common_utils import run_tests, TestCase

from view_replay_testing import PATCHED


# (hypothesis seed, programs) per test; each program runs static and dynamic, at two sizes.
AOT_EAGER_BUDGET = ((20250101, 110), (20250102, 110), (20250103, 110))
INDUCTOR_BUDGET = (20250104, 3)


def _run(seed: int, n: int, backend: str, dynamic_modes: tuple[bool, ...]) -> None:
    from hypothesis import given, HealthCheck, note, Phase, settings
    from hypothesis import seed as hseed

    from viewreplay.fuzz import check_program, programs

    @hseed(seed)
    @settings(
        max_examples=n,
        deadline=None,
        database=None,
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    @given(programs(max_steps=6))
    def one(program) -> None:
        note(str(program))
        check_program(program, backend=backend, dynamic_modes=dynamic_modes)

    one()


@unittest.skipUnless(PATCHED, "the view_replay overlay is absent (stock torch): nothing to fuzz")
class TestFuzzViews(TestCase):
    def test_aot_eager_0(self) -> None:
        _run(*AOT_EAGER_BUDGET[0], "aot_eager", (False, True))

    def test_aot_eager_1(self) -> None:
        _run(*AOT_EAGER_BUDGET[1], "aot_eager", (False, True))

    def test_aot_eager_2(self) -> None:
        _run(*AOT_EAGER_BUDGET[2], "aot_eager", (False, True))

    def test_inductor_slice(self) -> None:
        _run(*INDUCTOR_BUDGET, "inductor", (True,))


if __name__ == "__main__":
    run_tests()
