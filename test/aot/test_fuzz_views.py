"""Fixed-seed fuzzing of view replay (tools/viewreplay_harness/fuzz.py): random programs of view ops
(every dense ViewMeta op, multi-output ones included), pointwise ops and in-place mutations of
inputs and intermediates, run eagerly and compiled (aot_eager, static and dynamic, two sizes
each; a small inductor slice) in strict mode, compared end to end. See fuzz.py for the oracle,
the accepted fallbacks and the exclusions.

The budget is fixed (seeds, counts) so that CI is deterministic; a failure names the minimal
program (hypothesis shrinks it), to be kept in test_fuzz_regressions.py once fixed. More
programs: ``python -m viewreplay_harness.fuzz --long``. Patched torch only: the stock side has no
view_replay overlay (its deviations are the bugs the series fixes, documented by the other test
modules).
"""

from __future__ import annotations

import unittest

from torch.testing._internal.common_utils import run_tests, TestCase

from view_replay_testing import PATCHED


# (first hypothesis seed, programs) per test; each program runs static and dynamic, two sizes each.
AOT_EAGER_BUDGET = ((20261202, 100), (20261302, 100), (20261402, 100))
INDUCTOR_BUDGET = (20261502, 4)


@unittest.skipUnless(PATCHED, "the view_replay overlay is absent (stock torch): nothing to fuzz")
class TestFuzzViews(TestCase):
    def _fuzz(self, seed: int, n: int, backend: str, dynamic_modes: tuple[bool, ...]) -> None:
        from viewreplay_harness.fuzz import fuzz

        report = fuzz(n, seed, backend=backend, dynamic_modes=dynamic_modes, chunk=n)
        if report.failures:
            failures = "\n\n".join(f"{program}{error}" for program, error in report.failures)
            self.fail(f"minimal failing program(s):\n{failures}")
        self.assertEqual(report.programs, n)

    def test_aot_eager_0(self) -> None:
        self._fuzz(*AOT_EAGER_BUDGET[0], "aot_eager", (False, True))

    def test_aot_eager_1(self) -> None:
        self._fuzz(*AOT_EAGER_BUDGET[1], "aot_eager", (False, True))

    def test_aot_eager_2(self) -> None:
        self._fuzz(*AOT_EAGER_BUDGET[2], "aot_eager", (False, True))

    def test_inductor_slice(self) -> None:
        self._fuzz(*INDUCTOR_BUDGET, "inductor", (True,))


if __name__ == "__main__":
    run_tests()
