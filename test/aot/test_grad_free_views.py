"""Outputs that alias another output, where neither requires grad.

``y = x * 2; return y[0], y`` and ``return y[:-1], y[1:]``: AOTAutograd regenerates an output
aliasing an intermediate only when both require grad; otherwise the compiled graph's tensor is
returned as it is. Stock 2.14.1 and 2.13.0: inductor returns each view as a separate tensor on
``y``'s buffer (no ``_base``, its own version counter), with and without a backward; aot_eager
gets it right unless the graph mutated ``y`` through a view (``y`` comes back detached, PR
fresh-outputs-returned-as-views, and ``y[0]`` keeps the hidden intermediate as its ``_base``; stock returns ``y`` itself as
a view of it). So an in-place change of one output is not seen through the other by autograd: a
tensor saved off ``y[0]`` after the call is used with the changed values where eager's backward
raises. Patched: regenerated off ``y``, or off the hidden intermediate returned as an
intermediate base, by view replay (PR views-of-outputs-without-grad, Note [Views of
outputs that do not require grad]).

Each program is checked for full eager parity (viewreplay_harness.parity), with x (which only
the third output uses) with and without grad: with grad the graph has a backward. Left as
upstream returns them, pinned here on stock and patched alike: views of a hidden intermediate of
a TwoTensor (upstream refuses intermediate bases in subclass inference graphs).
"""
from __future__ import annotations

import torch
from torch.testing._internal.common_utils import instantiate_parametrized_tests, parametrize, run_tests
from torch.testing._internal.two_tensor import TwoTensor

from view_replay_testing import CompileTestCase, fallback_counts, PATCHED, stock_213_cache_off, strict_view_replay
from viewreplay_harness.parity import differences


def view_and_base(x, w):
    y = w * 2
    return y[0], y, x * 2


def mutated_through_a_view(x, w):
    y = w * 2
    y.view(-1).add_(1)
    return y[0].t(), y, x * 2


def mutated_matmul(x, w):
    # _unsafe_view (of x @ w3d) is a view for functionalization, a fresh tensor for eager.
    v = w @ w.flatten(0, -3)[0].t()
    a = v[v.shape[0] - 1]
    v.add_(1)
    return a, v, x * 2


def views_of_a_hidden_intermediate(x, w):
    y = w * 2
    return y[0], y[1], x * 2


def overlapping_views(x, w):
    y = w * 2
    n = y.shape[0]
    return y[: n - 1], y[1:], x * 2


def pieces_of_a_hidden_intermediate(x, w):
    return (*(w * 2).unbind(0), x * 2)


def hidden_intermediate_mutated_through_a_view(x, w):
    y = w * 2
    y.view(-1).add_(1)
    return y[0].t(), y[1:], x * 2


PROGRAMS = {
    "view_and_base": view_and_base,
    "mutated": mutated_through_a_view,
    "matmul": mutated_matmul,
    "hidden_base": views_of_a_hidden_intermediate,
    "overlapping": overlapping_views,
    "pieces": pieces_of_a_hidden_intermediate,
    "hidden_mutated": hidden_intermediate_mutated_through_a_view,
}

# out0 and out1 share a version counter in eager, not in stock's compiled code.
VERSION_COUNTERS = "version counters: eager ('out0', 'out0',"


def _stock_difference(program: str, backend: str) -> str | None:
    """The start of a difference stock 2.14.1 and 2.13.0 show, None where they show none."""
    if backend == "inductor":
        return VERSION_COUNTERS  # out0 is a separate tensor on y's buffer
    if program == "mutated":
        return "out1 (requires_grad, is_leaf, _is_view): eager (False, True, False), compiled (False, True, True)"
    if program == "matmul":
        return VERSION_COUNTERS  # out0 is a view of the hidden intermediate
    return None


def _inputs(x_requires_grad: bool):
    def make():
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(3, generator=gen, requires_grad=x_requires_grad)
        w = torch.randn(3, 3, 3, generator=gen)
        return [x, w], [x]

    return make


class TestGradFreeViews(CompileTestCase):
    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    @parametrize("x_requires_grad", [False, True])
    @parametrize("program", list(PROGRAMS))
    def test_parity(self, program: str, x_requires_grad: bool, dynamic: bool, backend: str) -> None:
        fn = PROGRAMS[program]
        compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
        with strict_view_replay(), stock_213_cache_off(backend):
            found = differences(fn, compiled, _inputs(x_requires_grad))
        expected = _stock_difference(program, backend)
        if PATCHED or expected is None:
            self.assertEqual(found, [])
        else:
            self.assertTrue(any(f.startswith(expected) for f in found), found)
        if PATCHED:
            self.assertEqual(fallback_counts(), {})

    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("program", ["view_and_base", "overlapping"])
    def test_saved_after_the_call_then_inplace(self, program: str, backend: str) -> None:
        # Eager raises; stock inductor returns w.grad computed with the doubled a.
        compiled = torch.compile(PROGRAMS[program], backend=backend)
        a, b, _ = compiled(torch.randn(3), torch.randn(3, 3, 3))
        w = torch.randn(a.shape, requires_grad=True)
        z = (w * a).sum()
        b.mul_(2)  # y (view_and_base), or y[1:], which holds a[1:] (overlapping)
        if PATCHED or backend == "aot_eager":
            with self.assertRaisesRegex(RuntimeError, "modified by an inplace operation"):
                z.backward()
        else:
            z.backward()
            self.assertEqual(w.grad, a)

    @parametrize("backend", ["aot_eager", "inductor"])
    def test_subclass_hidden_intermediate_stays_hidden(self, backend: str) -> None:
        def fn(x):
            y = x * 2
            return y[:-1], y[1:]

        def inputs():
            gen = torch.Generator().manual_seed(0)
            return [TwoTensor(torch.randn(3, 3, generator=gen), torch.randn(3, 3, generator=gen))], []

        compiled = torch.compile(fn, backend=backend)
        with stock_213_cache_off(backend):
            found = differences(fn, compiled, inputs)
        self.assertTrue(any(f.startswith(VERSION_COUNTERS) for f in found), found)


def detached_view_and_base(x):
    y = x * 2
    return y.detach()[1:], y


def two_detached_views(x):
    y = x * 2
    return y.detach()[1:], y.detach()[:2], y * 3


DETACHED_PROGRAMS = {f.__name__: f for f in (detached_view_and_base, two_detached_views)}


class TestDetachedViews(CompileTestCase):
    """Views of ``y.detach()``: the hidden intermediate is an alias of ``y`` (or of the other
    ``detach()``) that is no view, which inductor returns as the same tensor (Note [Views of
    outputs that do not require grad]). Patched before the fix, with inductor and x requiring
    grad: ``y`` came back without grad (marked non-differentiable with the intermediate base),
    a silent wrong gradient; stock returns the views as separate tensors."""

    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    @parametrize("x_requires_grad", [False, True])
    @parametrize("program", list(DETACHED_PROGRAMS))
    def test_parity(self, program: str, x_requires_grad: bool, dynamic: bool, backend: str) -> None:
        fn = DETACHED_PROGRAMS[program]

        def make():
            x = torch.randn(3, 3, generator=torch.Generator().manual_seed(0), requires_grad=x_requires_grad)
            return [x], [x]

        compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
        with strict_view_replay(), stock_213_cache_off(backend):
            found = differences(fn, compiled, make)
        if PATCHED or backend == "aot_eager":
            self.assertEqual(found, [])
        else:
            self.assertTrue(any(f.startswith(VERSION_COUNTERS) for f in found), found)


instantiate_parametrized_tests(TestGradFreeViews)
instantiate_parametrized_tests(TestDetachedViews)

if __name__ == "__main__":
    run_tests()
