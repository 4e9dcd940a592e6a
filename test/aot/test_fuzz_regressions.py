"""Minimised programs found by the view-replay fuzzer (tools/viewreplay/fuzz.py), each kept as an
explicit regression test. An open overlay bug is marked ``@unittest.expectedFailure`` with a
comment naming the bug, so that CI stays green and the test flips when it is fixed.

Patched torch only (the oracle runs strict mode, which exists only with the overlay).
"""

from __future__ import annotations

import unittest

from torch.testing._internal.common_utils import run_tests, TestCase

from view_replay_testing import PATCHED


def _check(program) -> None:
    from viewreplay.fuzz import check_program

    check_program(program)


@unittest.skipUnless(PATCHED, "the view_replay overlay is absent (stock torch): nothing to check")
class TestFuzzRegressions(TestCase):
    def test_upstream_guard_error_with_expanded_aliased_inputs_is_excluded(self) -> None:
        # Found by the fuzzer (seed 2); NOT an overlay bug: stock 2.13.0 raises the same
        # IndexError in Dynamo's produce_guards_verbose at the second size with dynamic=True.
        # The oracle excludes it (fuzz.KNOWN_UPSTREAM_ERRORS); this test keeps that exclusion
        # working and narrow.
        from viewreplay.fuzz import InputSpec, Program, Step

        program = Program(
            inputs=(
                InputSpec((2, 1), requires_grad=False),
                InputSpec((), requires_grad=False, of=0, view="expand"),
                InputSpec((), requires_grad=False, of=0, view="expand"),
            ),
            steps=(Step("view", "split", 0),),
            outputs=(1,),
        )
        _check(program)


if __name__ == "__main__":
    run_tests()
