# Owner(s): ["oncall: pt2"]
"""
Tests for the precompiled regenerators of aliased outputs: the runtime wrapper
binds one regenerator per aliased output when it is generated, not one per call.
"""

import torch
import torch._dynamo
from torch._functorch._aot_autograd import view_replay
from torch.testing._internal.common_utils import run_tests, TestCase


class TestPrecompiledRegenerators(TestCase):
    """The runtime wrapper binds one regenerator per aliased output, made once."""

    def test_one_regenerator_per_output(self):
        import torch._functorch._aot_autograd.runtime_wrappers as rw

        def fn(x):
            y = x * 2
            return x[: x.shape[0] // 2].t(), y.view(-1), y

        made = []
        make_regenerator = rw.make_regenerator

        def recording_make_regenerator(*args, **kwargs):
            made.append(make_regenerator(*args, **kwargs))
            return made[-1]

        rw.make_regenerator = recording_make_regenerator
        try:
            torch._dynamo.reset()
            compiled = torch.compile(fn, backend="aot_eager", dynamic=True)
            with view_replay.config.patch(strict=True):
                for n in (6, 7, 8):
                    x = torch.randn(n, 3, requires_grad=True)
                    outs = compiled(x)
                    self.assertEqual(outs[0], fn(x)[0])
                    self.assertEqual(outs[0].grad_fn.name(), "TBackward0")
                    self.assertIs(outs[1]._base, outs[2])
        finally:
            rw.make_regenerator = make_regenerator
        # Two aliased outputs, one graph: two regenerators, none made per call.
        self.assertEqual(len(made), 2)


if __name__ == "__main__":
    run_tests()
