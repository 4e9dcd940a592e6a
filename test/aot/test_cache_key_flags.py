"""view_replay's flags are part of the AOTAutograd cache key (#14; PR cache-key-flags).

Before, a process that compiled with ``replay_symbolic_views=False`` filled the cache, and a new
process with the flag back on got the cached metadata: AsStridedBackward0 and the fallback
SYMBOLIC_REPLAY_DISABLED on an autograd cache hit. Each flag that decides what the compiled
metadata holds is flipped here between two processes that share one cache directory. Patched
torch only: the flags are the overlay's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

from torch.testing._internal.common_utils import run_tests, TestCase

from view_replay_testing import PATCHED


SCRIPT = textwrap.dedent(
    """
    import json, sys, torch
    from torch._dynamo.utils import counters
    from torch._functorch._aot_autograd import view_replay
    torch._functorch.config.enable_autograd_cache = True
    flag, value = sys.argv[1], sys.argv[2] == "True"
    setattr(view_replay.config, flag, value)

    def fn(x):
        y = x * 2
        return x[: x.shape[0] // 2].t(), y.unbind(1)  # unbind(0) would specialize x.shape[0]
    x = torch.randn(6, 4, requires_grad=True)
    outs = torch.compile(fn, backend="inductor", dynamic=True)(x)
    sliced, pieces = outs
    (sliced.sum() + sum(p.sum() for p in pieces)).backward()
    print("RESULT " + json.dumps({
        "hit": counters["aot_autograd"]["autograd_cache_hit"],
        "saved": counters["aot_autograd"]["autograd_cache_saved"],
        "sliced": type(sliced.grad_fn).__name__,
        "piece": type(pieces[0].grad_fn).__name__,
        "fallbacks": dict(counters["view_replay_fallback"]),
    }))
    """
)

DEFAULTS = {"replay_symbolic_views": True, "hide_multi_output_view_aliasing": False, "replay_subclass_views": True}


@unittest.skipUnless(PATCHED, "the view_replay flags are the overlay's (stock torch has none)")
class TestCacheKeyFlags(TestCase):
    def _run(self, cache_dir: str, flag: str, value: bool) -> dict:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache_dir)
        proc = subprocess.run(
            [sys.executable, "-c", SCRIPT, flag, str(value)], env=env, capture_output=True, text=True, timeout=900
        )
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        return json.loads(next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))[7:])

    def test_flipping_a_flag_misses_the_cache(self) -> None:
        with tempfile.TemporaryDirectory() as cache_dir:
            first = self._run(cache_dir, "replay_symbolic_views", True)
            self.assertEqual((first["hit"], first["saved"]), (0, 1))
            self.assertEqual((first["sliced"], first["piece"]), ("TBackward0", "UnbindBackward0"))
            self.assertEqual(first["fallbacks"], {})
            for flag, default in DEFAULTS.items():
                with self.subTest(flag=flag):
                    flipped = self._run(cache_dir, flag, not default)
                    # A miss: compiled anew with the flag's value, and saved under its own key.
                    self.assertEqual((flipped["hit"], flipped["saved"]), (0, 1))
                    if flag == "replay_symbolic_views":
                        self.assertEqual(flipped["sliced"], "AsStridedBackward0")
                        self.assertEqual(flipped["fallbacks"], {"SYMBOLIC_REPLAY_DISABLED": 1})
                    if flag == "hide_multi_output_view_aliasing":
                        self.assertEqual(flipped["piece"], "CompiledFunctionBackward")
            # Back to the defaults: the first entry is served, with its replay.
            again = self._run(cache_dir, "replay_symbolic_views", True)
            self.assertEqual(again["hit"], 1)
            self.assertEqual((again["sliced"], again["piece"]), ("TBackward0", "UnbindBackward0"))
            self.assertEqual(again["fallbacks"], {})


if __name__ == "__main__":
    run_tests()
