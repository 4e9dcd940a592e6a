# Owner(s): ["oncall: pt2"]
"""
Tests that view_replay's compile-time flags are part of the AOTAutograd cache key.
"""

import torch
import torch._dynamo
from torch._dynamo.utils import counters
from torch._functorch._aot_autograd import view_replay
from torch.testing._internal.common_utils import run_tests, TestCase


class TestCacheKeyFlags(TestCase):
    """view_replay's compile-time flags are part of the AOTAutograd cache key."""

    def test_flipping_a_flag_misses_the_cache(self):
        from torch._inductor.utils import fresh_cache

        def fn(x):
            return x[: x.shape[0] // 2].t()

        def run():
            torch._dynamo.reset()
            counters.clear()
            x = torch.randn(6, 4, requires_grad=True)
            out = torch.compile(fn, backend="inductor", dynamic=True)(x)
            out.sum().backward()
            return counters["aot_autograd"]["autograd_cache_hit"], out.grad_fn.name()

        with fresh_cache(), torch._functorch.config.patch(enable_autograd_cache=True):
            self.assertEqual(run(), (0, "TBackward0"))
            self.assertEqual(run(), (1, "TBackward0"))
            with view_replay.config.patch(replay_symbolic_views=False):
                self.assertEqual(run(), (0, "AsStridedBackward0"))
            self.assertEqual(run(), (1, "TBackward0"))


if __name__ == "__main__":
    run_tests()
