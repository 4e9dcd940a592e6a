"""The project's seed cases (viewreplay_harness.cases), on stock and patched torch.

Stock 2.13.0 regenerates ``g`` (an output aliasing its input) with as_strided()
under dynamic shapes; patched torch replays ViewBackward0. ``f`` and ``h`` are
regenerated without as_strided() by both; ``h``'s 50 pieces are hidden from
autograd by stock and regenerated with one unbind (one UnbindBackward0) by
patched torch.
"""

from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)

from view_replay_testing import PATCHED, strict_view_replay, fallback_counts
from viewreplay_harness.cases import probe, SEED_CASES


SEEDS = {case.name: case for case in SEED_CASES}


class TestSeedCases(TestCase):
    @parametrize("dynamic", [False, True])
    @parametrize("name", ["f", "g", "h"])
    def test_seed_case_aot_eager(self, name: str, dynamic: bool) -> None:
        with strict_view_replay():
            record = probe(SEEDS[name], backend="aot_eager", dynamic=dynamic)
        self.assertTrue(record["values_equal"])
        self.assertTrue(record["grad_equal"])
        if name == "g" and dynamic and not PATCHED:
            # The bug: the input alias falls back to as_strided().
            self.assertEqual(record["grad_fns"], ["AsStridedBackward0"])
            self.assertEqual(record["as_strided_nodes"], 1)
            return
        # h: stock hides the pieces' aliasing; patched regenerates them with one unbind.
        h_fn = "UnbindBackward0" if PATCHED else "CompiledFunctionBackward"
        expected = {"f": ["ViewBackward0"], "g": ["ViewBackward0"], "h": [h_fn]}
        self.assertEqual(record["grad_fns"], expected[name])
        self.assertEqual(record["as_strided_nodes"], 0)
        if PATCHED:
            self.assertEqual(record["fallbacks"], {})

    @parametrize("name", ["f", "g"])
    def test_seed_case_inductor_dynamic(self, name: str) -> None:
        # Stock: both of f's intermediate aliases and g's input alias fall back.
        with strict_view_replay():
            record = probe(SEEDS[name], backend="inductor", dynamic=True)
        self.assertTrue(record["values_equal"])
        self.assertTrue(record["grad_equal"])
        expected = "ViewBackward0" if PATCHED else "AsStridedBackward0"
        self.assertEqual(record["grad_fns"], [expected])
        self.assertEqual(record["as_strided_nodes"], 0 if PATCHED else {"f": 2, "g": 1}[name])
        if PATCHED:
            self.assertEqual(fallback_counts(), {})


instantiate_parametrized_tests(TestSeedCases)

if __name__ == "__main__":
    run_tests()
