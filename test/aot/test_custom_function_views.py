"""Views made by custom autograd.Functions (Note [Views made by custom autograd.Functions]).

Stock torch keeps such an output inside the compiled function only when its own grad_fn is the
Function's node and it aliases an input; otherwise it is regenerated off its base by replaying
the plain views, and the Function's backward is silently lost (wrong gradient). Patched torch
returns every output whose view chain goes through a Function's node from the compiled
function itself, as a view of its base where the forward holds it (Note [Custom-Function views
returned as views]): stock inductor returns even SliceF.apply(x) as a fresh tensor on x's
buffer."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

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


def slice_of_input(x):
    return (SliceF.apply(x),)


def slice_of_input_and_t(x):
    return SliceF.apply(x), x.t()


def view_after_function_of_view(x):
    return (ViewAs.apply(x[1:]).t(),)


@dataclasses.dataclass(frozen=True)
class Program:
    fn: Callable[..., tuple[torch.Tensor, ...]]
    # Stock regenerates the output by replaying the plain views: the Function's backward is
    # lost (a wrong gradient), on both backends.
    stock_wrong_gradient: bool = False
    # The backends where stock differs from eager otherwise.
    stock_differs: frozenset[str] = frozenset()


BOTH = frozenset({"aot_eager", "inductor"})
PROGRAMS = {
    "function_view": Program(function_view),
    "view_after_function": Program(view_after_function, stock_wrong_gradient=True),
    "function_view_of_shared_intermediate": Program(function_view_of_shared_intermediate, stock_wrong_gradient=True),
    # Stock returns it as a plain output of the compiled function (_unsafe_view): no _base.
    # Patched returns the hidden x * 2 as an intermediate base to replay it off.
    "view_after_function_of_intermediate": Program(view_after_function_of_intermediate, stock_differs=BOTH),
    # Upstream keeps these inside the compiled function; inductor returns them as fresh
    # tensors on x's buffer: no _base, their own version counter.
    "slice_of_input": Program(slice_of_input, stock_differs=frozenset({"inductor"})),
    "slice_of_input_and_t": Program(slice_of_input_and_t, stock_differs=frozenset({"inductor"})),
    "view_after_function_of_view": Program(view_after_function_of_view, stock_wrong_gradient=True),
}


def _inputs():
    leaf = torch.randn(4, 3, generator=torch.Generator().manual_seed(0), requires_grad=True)
    return [leaf], [leaf]


def _is_gradient(difference: str) -> bool:
    return difference.startswith("backward through every output")


class TestCustomFunctionViews(CompileTestCase):
    # The views after the Function's node run inside the compiled function: their nodes are
    # folded into CompiledFunctionBackward, as every compiled op's (not compared here).
    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    @parametrize("name", list(PROGRAMS))
    def test_eager_parity(self, name: str, dynamic: bool, backend: str) -> None:
        program = PROGRAMS[name]
        compiled = torch.compile(program.fn, backend=backend, dynamic=dynamic)
        with strict_view_replay():
            found = [d for d in differences(program.fn, compiled, _inputs) if "view nodes" not in d]
        if PATCHED:
            self.assertEqual(found, [])
        elif program.stock_wrong_gradient:
            self.assertTrue(any(_is_gradient(d) for d in found), found)  # the Function's backward is lost
        elif backend in program.stock_differs:
            self.assertTrue(found and not any(_is_gradient(d) for d in found), found)
        else:
            self.assertEqual(found, [])

    def test_inplace_on_a_view_of_a_hidden_intermediate_raises_as_in_eager(self) -> None:
        # Stock returns SliceF.apply(x * 2).t() as a plain output (_unsafe_view; inductor: a
        # fresh buffer), so the in-place change eager refuses goes through.
        compiled = torch.compile(view_after_function_of_intermediate, backend="inductor")
        (x,), _ = _inputs()
        (a,) = compiled(x)
        if PATCHED:
            self.assertIsNotNone(a._base)
            with self.assertRaisesRegex(RuntimeError, "is a view and is being modified inplace"):
                a.mul_(3)
        else:
            self.assertIsNone(a._base)
            a.mul_(3)

    def test_inplace_on_a_view_of_the_input_raises_as_in_eager(self) -> None:
        # Stock with inductor returns SliceF.apply(x) as a fresh tensor on x's buffer, so the
        # in-place change eager refuses goes through.
        compiled = torch.compile(slice_of_input_and_t, backend="inductor")
        (x,), _ = _inputs()
        a, _ = compiled(x)
        if PATCHED:
            self.assertIs(a._base, x)
            with self.assertRaisesRegex(RuntimeError, "is a view and is being modified inplace"):
                a.mul_(3)
        else:
            self.assertIsNone(a._base)
            a.mul_(3)


instantiate_parametrized_tests(TestCustomFunctionViews)

if __name__ == "__main__":
    run_tests()
