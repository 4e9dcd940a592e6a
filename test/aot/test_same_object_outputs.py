"""Outputs that are one tensor in eager: ops that return their input object (``flatten()``
of a 1-D tensor, ``contiguous()`` of a contiguous one, ``to()`` of the same dtype, an
in-place op) applied to an alias of an input or of an intermediate, returned beside it.

Stock 2.14.1 and 2.13.0 (aot_eager and inductor, static and dynamic) regenerate each output
position on its own: ``out[0] is out[1]`` is False where eager's is True. Patched: patch
same-object-outputs, Note [Outputs that are one tensor] in view_replay/scope.py; each
position returns the one regenerated tensor, with eager's node, base and version counter.
"""

from __future__ import annotations

import torch
import torch._dynamo
from torch.testing._internal.common_utils import instantiate_parametrized_tests, parametrize, run_tests

from view_replay_testing import CompileTestCase, PATCHED, strict_view_replay
from viewreplay_harness.parity import differences


def _view_and_flatten(v):
    y = v[1:]
    return y, y.flatten()


def _view_and_contiguous(v):
    y = v[1:]
    return y.contiguous(), y


def _view_and_to(v):
    y = v[2:]
    return y, y.to(torch.float32), y.sin()


def _column_and_flatten(v):
    y = v.view(6, 1)[:, 0]
    return y, y.flatten()


def _intermediate_view_and_flatten(v):
    y = (v * 2)[1:]
    return y, y.flatten(), y[1:]


def _piece_and_contiguous(v):
    a, b = v.view(2, 3).unbind(0)
    return a, b, a.contiguous()


def _in_place_on_a_detached_view(v):
    y = v.detach()[1:]
    return y, y.mul_(2)


PROGRAMS = {
    fn.__name__.lstrip("_"): fn
    for fn in (
        _view_and_flatten,
        _view_and_contiguous,
        _view_and_to,
        _column_and_flatten,
        _intermediate_view_and_flatten,
        _piece_and_contiguous,
        _in_place_on_a_detached_view,
    )
}
# Where stock returns one tensor too: it hides multi-output views from autograd and returns
# the graph's own output (aot_eager, which returns one tensor twice; inductor's are two).
STOCK_ONE_TENSOR = {("piece_and_contiguous", "aot_eager"), ("piece_and_contiguous", "aot_eager_dynamic")}
MODES = {"aot_eager": ("aot_eager", False), "aot_eager_dynamic": ("aot_eager", True), "inductor": ("inductor", False)}


def identities(outs, inputs):
    """Which outputs are which outputs or inputs, as objects."""
    return [[o is p for p in (*outs, *inputs)] for o in outs]


@instantiate_parametrized_tests
class TestOutputsThatAreOneTensor(CompileTestCase):
    def _run(self, program: str, mode: str, requires_grad: bool):
        fn = PROGRAMS[program]
        backend, dynamic = MODES[mode]
        values = torch.randn(6)
        compiled_input = values.clone().requires_grad_(requires_grad)
        eager_input = values.clone().requires_grad_(requires_grad)
        with strict_view_replay():
            outs = torch.compile(fn, backend=backend, dynamic=dynamic)(compiled_input)
        return outs, fn(eager_input), compiled_input, eager_input

    @parametrize("mode", list(MODES))
    @parametrize("program", list(PROGRAMS))
    def test_one_tensor_as_in_eager(self, program: str, mode: str) -> None:
        outs, refs, x, xe = self._run(program, mode, requires_grad=True)
        self.assertEqual(outs, refs)
        same = identities(outs, (x,)) == identities(refs, (xe,))
        if not PATCHED:
            self.assertEqual(same, (program, mode) in STOCK_ONE_TENSOR)
            return
        self.assertTrue(same)
        self.assertEqual([type(o.grad_fn).__name__ for o in outs if o.requires_grad][:1],
                         [type(r.grad_fn).__name__ for r in refs if r.requires_grad][:1])
        differentiable = [(o, r) for o, r in zip(outs, refs) if o.requires_grad]
        if differentiable:
            sum(o.sum() * (k + 1) for k, (o, _) in enumerate(differentiable)).backward()
            sum(r.sum() * (k + 1) for k, (_, r) in enumerate(differentiable)).backward()
            self.assertEqual(x.grad, xe.grad)

    @parametrize("mode", ["aot_eager", "inductor"])
    @parametrize("program", list(PROGRAMS))
    def test_full_parity(self, program: str, mode: str) -> None:
        # Everything observable (viewreplay_harness.parity): values, layout, flags, view nodes,
        # bases and version counters, in-place on each output then backward through each other.
        fn = PROGRAMS[program]
        backend, dynamic = MODES[mode]

        def inputs():
            x = torch.randn(6, generator=torch.Generator().manual_seed(0), requires_grad=True)
            return [x], [x]

        with strict_view_replay():
            found = differences(fn, torch.compile(fn, backend=backend, dynamic=dynamic), inputs)
        if PATCHED:
            self.assertEqual(found, [])
        elif (program, mode) not in STOCK_ONE_TENSOR:
            self.assertNotEqual(found, [])

    def test_without_grad(self) -> None:
        outs, refs, x, xe = self._run("view_and_flatten", "aot_eager", requires_grad=False)
        self.assertEqual(identities(outs, (x,)) == identities(refs, (xe,)), PATCHED)

    def test_intermediate_without_grad(self) -> None:
        # Stock returns aliases of an intermediate that need no grad as the graph's own output.
        outs, refs, x, xe = self._run("intermediate_view_and_flatten", "aot_eager", requires_grad=False)
        self.assertEqual(identities(outs, (x,)), identities(refs, (xe,)))


if __name__ == "__main__":
    run_tests()
