# Owner(s): ["oncall: pt2"]
"""
Tests for the regenerators of aliased outputs (view_replay/replay.py, Note
[Regenerators]): the runtime wrapper builds one regenerator per aliased output
when it is built, from the output's ViewReplay decided at compile time, and a
regenerator reduces to its data (Note [Regenerators as source]).
"""

import pickle

import torch
import torch._dynamo
from torch._functorch._aot_autograd import view_replay
from torch.testing._internal.common_utils import run_tests, TestCase


def fn(x):
    y = x * 2
    return x[:2].t(), y.view(-1), y


class TestRegenerators(TestCase):
    def _compile_recording(self):
        import torch._functorch._aot_autograd.runtime_wrappers as rw

        made = []
        make_regenerator = rw.make_regenerator

        def recording_make_regenerator(info):
            made.append(make_regenerator(info))
            return made[-1]

        rw.make_regenerator = recording_make_regenerator
        self.addCleanup(setattr, rw, "make_regenerator", make_regenerator)
        torch._dynamo.reset()
        return torch.compile(fn, backend="aot_eager"), made

    def test_one_regenerator_per_output(self):
        compiled, made = self._compile_recording()
        with view_replay.config.patch(strict=True):
            for _ in range(3):
                x = torch.randn(4, 3, requires_grad=True)
                outs = compiled(x)
                self.assertEqual(outs, fn(x))
                self.assertEqual(outs[0].grad_fn.name(), "TBackward0")
                self.assertIs(outs[1]._base, outs[2])
        # Two aliased outputs, one graph: two regenerators, none made per call.
        self.assertEqual(len(made), 2)
        self.assertTrue(all(isinstance(r.view_replay, view_replay.ViewReplay) for r in made))

    def test_regenerator_reduces_to_its_data(self):
        compiled, made = self._compile_recording()
        compiled(torch.randn(4, 3, requires_grad=True))
        regenerator = made[0]
        clone = pickle.loads(pickle.dumps(regenerator))
        self.assertEqual(clone.view_replay, regenerator.view_replay)
        x = torch.randn(4, 3, requires_grad=True)
        out = clone(x, fn(x)[0], view_replay.RegenerationCall({}, ()))
        self.assertEqual(out, x[:2].t())
        self.assertEqual(out.grad_fn.name(), "TBackward0")


if __name__ == "__main__":
    run_tests()
