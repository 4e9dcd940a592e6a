"""Views made by custom autograd.Functions (Note [Views made by custom autograd.Functions]).

Stock torch keeps such an output inside the compiled function only when its own grad_fn is the
Function's node and it aliases an input; otherwise it is regenerated off its base by replaying
the plain views, and the Function's backward is silently lost (wrong gradient). Patched torch
returns every output whose view chain goes through a Function's node from the compiled
function itself."""

from __future__ import annotations

import unittest

import torch
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
)

from view_replay_testing import CompileTestCase, PATCHED, strict_view_replay
from viewreplay_harness.parity import differences


class ViewAs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return g * 5


class SliceF(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x[1:]

    @staticmethod
    def backward(ctx, g):
        out = g.new_zeros(g.shape[0] + 1, *g.shape[1:])
        out[1:] = g * 7
        return out


def function_view(x):
    return (ViewAs.apply(x),)


def view_after_function(x):
    return ViewAs.apply(x)[1:], x.t()


def function_view_of_shared_intermediate(x):
    z = x * 2
    return SliceF.apply(z), z.t()


def view_after_function_of_intermediate(x):
    return (SliceF.apply(x * 2).t(),)


# name -> (program, whether stock's gradient is wrong, whether stock differs from eager otherwise)
PROGRAMS = {
    "function_view": (function_view, False, False),
    "view_after_function": (view_after_function, True, True),
    "function_view_of_shared_intermediate": (function_view_of_shared_intermediate, True, True),
    # Stock returns it as a plain output of the compiled function (_unsafe_view): no _base.
    "view_after_function_of_intermediate": (view_after_function_of_intermediate, False, True),
}


def _inputs():
    leaf = torch.randn(4, 3, generator=torch.Generator().manual_seed(0), requires_grad=True)
    return [leaf], [leaf]


class TestCustomFunctionViews(CompileTestCase):
    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    @parametrize("name", list(PROGRAMS))
    def test_gradient(self, name: str, dynamic: bool, backend: str) -> None:
        fn, stock_wrong, _ = PROGRAMS[name]
        compiled = torch.compile(fn, backend=backend, dynamic=dynamic)

        def loss(f):
            inputs, leaves = _inputs()
            sum(o.sum() * (k + 1) for k, o in enumerate(f(*inputs))).backward()
            return leaves[0].grad

        with strict_view_replay():
            got = loss(compiled)
        if PATCHED or not stock_wrong:
            self.assertEqual(got, loss(fn))
        else:
            self.assertNotEqual(got, loss(fn))  # the Function's backward is lost

    @parametrize("dynamic", [False, True])
    @parametrize("name", list(PROGRAMS))
    def test_eager_parity_aot_eager(self, name: str, dynamic: bool) -> None:
        # The views after the Function's node run inside the compiled function: their nodes are
        # folded into CompiledFunctionBackward, as every compiled op's (not compared here).
        fn, _, stock_differs = PROGRAMS[name]
        compiled = torch.compile(fn, backend="aot_eager", dynamic=dynamic)
        with strict_view_replay():
            found = [d for d in differences(fn, compiled, _inputs) if "view nodes" not in d]
        if PATCHED or not stock_differs:
            self.assertEqual(found, [])
        else:
            self.assertNotEqual(found, [])

    @unittest.expectedFailure
    def test_inductor_keeps_the_view_of_the_input(self) -> None:
        # Open: inductor returns a custom-Function view of an input as a plain tensor on the
        # input's storage (upstream alike for SliceF.apply(x)): its _base is None, it shares no
        # version counter with the input, and in-place on it is allowed where eager raises.
        compiled = torch.compile(view_after_function, backend="inductor")
        with strict_view_replay():
            self.assertEqual([d for d in differences(view_after_function, compiled, _inputs)
                              if "view nodes" not in d], [])


instantiate_parametrized_tests(TestCustomFunctionViews)

if __name__ == "__main__":
    run_tests()
