# Owner(s): ["oncall: pt2"]
"""
Tests that outputs which are one tensor in eager (an op that returns its input
object, applied to an alias and returned beside it) are one tensor when
compiled (Note [Outputs that are one tensor] in view_replay/scope.py).
"""

import torch
import torch._dynamo
from torch._functorch._aot_autograd import view_replay
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)


def view_and_flatten(x):
    y = x[1:]
    return y, y.flatten()


def view_and_contiguous(x):
    y = x[1:]
    return y.contiguous(), y


def intermediate_view_and_to(x):
    y = (x * 2)[1:]
    return y, y.to(torch.float32), y[1:]


class TestSameObjectOutputs(TestCase):
    def setUp(self):
        super().setUp()
        torch._dynamo.reset()

    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    @parametrize(
        "fn", [view_and_flatten, view_and_contiguous, intermediate_view_and_to], name_fn=lambda f: f.__name__
    )
    def test_one_tensor(self, fn, dynamic, backend):
        x = torch.randn(6, requires_grad=True)
        with view_replay.config.patch(strict=True):
            outs = torch.compile(fn, backend=backend, dynamic=dynamic)(x)
        refs = fn(x)
        self.assertEqual(outs, refs)
        self.assertIs(outs[0], outs[1])
        self.assertIs(refs[0], refs[1])
        self.assertEqual(outs[0].grad_fn.name(), refs[0].grad_fn.name())


instantiate_parametrized_tests(TestSameObjectOutputs)

if __name__ == "__main__":
    run_tests()
