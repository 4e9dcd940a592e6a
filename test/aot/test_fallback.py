"""The single as_strided() fallback point: counted, logged, traced, and strict mode raises.

On stock torch the same regenerations happen silently (documented by the
stock branch of each test); the patched wheel records every one.
"""

import json
import os
import subprocess
import sys
import textwrap
import unittest

import pytest
import torch
import torch._dynamo
from torch._functorch._aot_autograd.functional_utils import gen_alias_from_base
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.testing._internal.common_utils import run_tests, TestCase

from view_replay_testing import CompileTestCase, autograd_nodes, fallback_counts, PATCHED, strict_view_replay

if PATCHED:
    from torch._functorch._aot_autograd.view_replay import (
        config as view_replay_config,
        FallbackReason,
        ViewReplayFallbackError,
    )
    from torch._functorch._aot_autograd.view_replay.fallback import log as fallback_log


def g(x):
    return x.view(x.shape)


def _alias_without_view_info(base, size, stride, offset):
    """A tensor on ``base``'s storage that is not an autograd view (no _base, no view function)."""
    return torch.empty(0, dtype=base.dtype).set_(base.untyped_storage(), offset, size, stride)


@pytest.mark.fallback_allowed  # the fallback point's own tests (conftest.py)
class TestFallbackPoint(CompileTestCase):
    def _compile_g_without_replay(self):
        # Forces a fallback: view replay switched off upstream-style.
        return torch.compile(g, backend="aot_eager")

    def test_forced_fallback_counted_and_logged(self) -> None:
        x = torch.randn(3, 4, requires_grad=True)
        with torch._functorch.config.patch(view_replay_for_aliased_outputs=False):
            compiled = self._compile_g_without_replay()
            if not PATCHED:
                out = compiled(x)
                # Stock: as_strided(), and nothing records why.
                self.assertEqual(type(out.grad_fn).__name__, "AsStridedBackward0")
                self.assertEqual(fallback_counts(), {})
                return
            # The "view_replay" artifact logger (TORCH_LOGS="view_replay").
            with self.assertLogs(fallback_log.name, level="DEBUG") as logs:
                out = compiled(x)
        # Without ViewMetas the output's recorded view function is replayed;
        # autograd kept none for this graph output, so it is an as_strided().
        self.assertEqual(type(out.grad_fn).__name__, "AsStridedBackward0")
        self.assertEqual(fallback_counts(), {"VIEW_FUNC_AS_STRIDED": 1})
        self.assertEqual(len(logs.records), 1)
        self.assertIn("as_strided fallback (VIEW_FUNC_AS_STRIDED)", logs.output[0])
        self.assertIn(FallbackReason.VIEW_FUNC_AS_STRIDED.value, logs.output[0])
        # Values and gradient are still right.
        self.assertEqual(out, x)
        out.sum().backward()
        self.assertEqual(x.grad, torch.ones_like(x))

    @unittest.skipUnless(PATCHED, "strict mode exists only in the patched wheel")
    def test_strict_mode_raises_on_forced_fallback(self) -> None:
        x = torch.randn(3, 4, requires_grad=True)
        with torch._functorch.config.patch(view_replay_for_aliased_outputs=False):
            compiled = self._compile_g_without_replay()
            with view_replay_config.patch(strict=True):
                with self.assertRaisesRegex(ViewReplayFallbackError, "VIEW_FUNC_AS_STRIDED"):
                    compiled(x)
        # Counted before raising.
        self.assertEqual(fallback_counts(), {"VIEW_FUNC_AS_STRIDED": 1})

    def test_output_without_view_meta_goes_through_fallback(self) -> None:
        # An output that shares the base's storage but records neither
        # ViewMetas nor a view function: only as_strided() can regenerate it.
        base = torch.randn(4, 5, requires_grad=True)
        with torch.no_grad():
            target = _alias_without_view_info(base, (5, 3), (1, 5), 5)
        out = gen_alias_from_base(base, target, True, None, replay_views=True)
        self.assertEqual(out.size(), target.size())
        self.assertEqual(out.stride(), target.stride())
        self.assertEqual(out.storage_offset(), target.storage_offset())
        self.assertEqual(type(out.grad_fn).__name__, "AsStridedBackward0")
        if PATCHED:
            self.assertEqual(fallback_counts(), {"NO_VIEW_META": 1})
            with view_replay_config.patch(strict=True):
                with self.assertRaisesRegex(ViewReplayFallbackError, "NO_VIEW_META"):
                    gen_alias_from_base(base, target, True, None, replay_views=True)
        else:
            self.assertEqual(fallback_counts(), {})

    def test_complex_to_real_fallback_keeps_dtype(self) -> None:
        base = torch.randn(4, 3, dtype=torch.complex64, requires_grad=True)
        with torch.no_grad():
            target = _alias_without_view_info(torch.view_as_real(base), (3, 3, 2), (6, 2, 1), 6)
        out = gen_alias_from_base(base, target, True, None, replay_views=True)
        self.assertEqual(out.dtype, torch.float32)
        self.assertEqual(out.size(), target.size())
        self.assertEqual(out.stride(), target.stride())
        self.assertEqual(out.storage_offset(), target.storage_offset())
        self.assertEqual(out, target)
        if PATCHED:
            self.assertEqual(fallback_counts(), {"NO_VIEW_META": 1})

    @unittest.skipUnless(PATCHED, "the fallback point exists only in the patched wheel")
    def test_base_restriding_goes_through_fallback(self) -> None:
        # Trace-time regeneration off a synthetic base whose metadata differs
        # from the view's recorded base: the restriding as_strided() is recorded.
        with FakeTensorMode():
            recorded_base = torch.empty(4, 6)
            target = recorded_base[1:]
            other_base = torch.empty(6, 4).t()
            out = gen_alias_from_base(other_base, target, False, None, replay_views=True)
        self.assertEqual(out.shape, target.shape)
        self.assertEqual(fallback_counts(), {"BASE_METADATA_MISMATCH": 1})

    @unittest.skipUnless(PATCHED, "the view_replay artifact exists only in the patched wheel")
    def test_torch_logs_env_and_structured_trace(self) -> None:
        # TORCH_LOGS is parsed at import: run a fresh interpreter.
        script = textwrap.dedent(
            """
            import torch
            from torch._dynamo.utils import counters
            def g(x):
                return x.view(x.shape)
            with torch._functorch.config.patch(view_replay_for_aliased_outputs=False):
                torch.compile(g, backend="aot_eager")(torch.randn(2, 2, requires_grad=True))
            print("COUNTS", dict(counters["view_replay_fallback"]))
            """
        )
        import tempfile

        with tempfile.TemporaryDirectory() as trace_dir:
            env = dict(os.environ, TORCH_LOGS="view_replay", TORCH_TRACE=trace_dir)
            proc = subprocess.run(
                [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
            )
            self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
            self.assertIn("COUNTS {'VIEW_FUNC_AS_STRIDED': 1}", proc.stdout)
            self.assertIn("as_strided fallback (VIEW_FUNC_AS_STRIDED)", proc.stderr)
            traces = ""
            for name in os.listdir(trace_dir):
                with open(os.path.join(trace_dir, name)) as f:
                    traces += f.read()
        artifacts = [
            json.loads(line[line.index("{"):])
            for line in traces.splitlines()
            if '"view_replay_fallback"' in line
        ]
        self.assertEqual(len(artifacts), 1, traces[-2000:])
        payload_lines = traces.split('"view_replay_fallback"', 1)[1]
        self.assertIn("VIEW_FUNC_AS_STRIDED", payload_lines)


class TestFallbackKeepsNegativeBit(CompileTestCase):
    def test_synthetic_base_regenerates_a_negative_view(self) -> None:
        # Found by the fuzzer. Aliased inputs, one mutated, make a synthetic base; the output,
        # a _neg_view of one of them, is regenerated off it with as_strided(), which keeps the
        # base's (absent) negative bit. Stock returns 2.0 where eager returns -2.0.
        def fn(x, a, b):
            v = torch._neg_view(a)
            x.add_(1)
            return (v,)

        def inputs():
            x = torch.tensor([1.0])
            return x, x[0], x.unsqueeze(0).expand(2, 1)

        (ref,) = fn(*inputs())
        self.assertEqual(ref.resolve_neg().item(), -2.0)
        compiled = torch.compile(fn, backend="aot_eager")
        if PATCHED:
            (out,) = compiled(*inputs())
            self.assertEqual(out.is_neg(), ref.is_neg())
            self.assertEqual(out.resolve_neg(), ref.resolve_neg())
            # Regenerated off a itself, after the write-back (Note [Outputs aliasing inputs
            # merged into a synthetic base]): no fallback any more.
            self.assertEqual(fallback_counts(), {})
            return
        try:
            (out,) = compiled(*inputs())
        except AssertionError as e:
            # Under this TestCase stock's own ViewMeta replay of the synthetic base asserts.
            self.assertIn("incorrect out shape after application of ViewMeta sequence", str(e))
        else:
            self.assertEqual(out.resolve_neg().item(), 2.0)  # the bug: the negation is lost


class TestReplayNodes(TestCase):
    def test_dynamic_input_alias_replays_real_view(self) -> None:
        torch._dynamo.reset()
        x = torch.randn(6, 4, requires_grad=True)
        with strict_view_replay():
            out = torch.compile(g, backend="aot_eager", dynamic=True)(x)
        expected = "ViewBackward0" if PATCHED else "AsStridedBackward0"
        self.assertEqual(autograd_nodes([out]), [expected, "AccumulateGrad"])


if __name__ == "__main__":
    run_tests()
