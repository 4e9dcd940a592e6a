"""Bases of aliased outputs that inductor returns as a graph input.

Eager's ``(x * 1).chunk(3)`` are views of a fresh tensor: an in-place change of ``x`` after the
call does not change them, nor does an in-place change of one of them change ``x``. Inductor's
``joint_graph.remove_no_ops`` replaces the no-op by ``x`` (``x * 1``, ``x + 0``, ``x / 1`` from
2.14; ``x * ones_like(x)``, ``x + zeros_like(x)``, ``x - zeros_like(x)``, ``x / ones_like(x)`` on
both pins), and the graph returns ``x`` itself (or a tensor on ``x``'s storage) as the base
AOTAutograd regenerates the outputs from. Stock: the outputs alias ``x`` (tensors on its storage,
or views of it), static and dynamic, with and without requires_grad. Patch
fresh-intermediate-bases returns a copy of such a base (Note [Bases the graph returns as an
input]): eager parity (viewreplay_harness.parity), outputs on a storage of their own.
``x.clone()`` is never dropped and aot_eager drops nothing: stock is right there.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch._dynamo
from torch.testing._internal.common_utils import instantiate_parametrized_tests, parametrize, run_tests

from view_replay_testing import CompileTestCase, fallback_counts, PATCHED, strict_view_replay, TORCH_2_14
from viewreplay_harness.parity import differences, inplace_then_backward


def scalar_chunk_view_t(x):  # the repro
    return tuple(p.view(2, -1).t() for p in (x * 1).chunk(3))


def scalar_add_split(x):
    return (x + 0).split(2)


def ones_unbind(x):
    return (x * torch.ones_like(x)).unflatten(0, (2, 3)).unbind(0)


def zeros_slices(x):
    y = x - torch.zeros_like(x)
    return y[:3], y[3:]


def ones_div_t_view(x):
    y = x / torch.ones_like(x)
    return y.t(), y.view(-1)


def user_output_base(x):  # y is a user output that another output aliases
    y = x + torch.zeros_like(x)
    return y, y[1:].t()


def view_of_input(x):  # the graph returns a view of x, another tensor on its storage
    y = x.view(-1) * torch.ones_like(x).view(-1)
    return y[:12], y[12:]


def clone_split(x):  # not dropped: stock is right
    return x.clone().split(2)


# name: (program, backend, dynamic); each test compiles its program once.
PROGRAMS: dict[str, tuple[Callable[..., Any], str, bool]] = {
    "scalar_chunk_view_t_static": (scalar_chunk_view_t, "inductor", False),
    "scalar_chunk_view_t_dynamic": (scalar_chunk_view_t, "inductor", True),
    "scalar_chunk_view_t_aot_eager": (scalar_chunk_view_t, "aot_eager", True),
    "scalar_add_split": (scalar_add_split, "inductor", False),
    "ones_unbind": (ones_unbind, "inductor", True),
    "zeros_slices": (zeros_slices, "inductor", False),
    "ones_div_t_view": (ones_div_t_view, "inductor", True),
    "user_output_base": (user_output_base, "inductor", True),
    "view_of_input": (view_of_input, "inductor", False),
    "clone_split": (clone_split, "inductor", True),
}


def stock_aliases_input(name: str) -> bool:
    """Whether stock's outputs alias ``x``. Upstream 2.14 extended remove_no_ops from
    zeros/ones tensors to scalar operands (2.13 keeps ``x * 1``)."""
    fn, backend, _ = PROGRAMS[name]
    if backend != "inductor" or fn is clone_split:
        return False
    return TORCH_2_14 or not name.startswith("scalar_")


def _input_maker(requires_grad: bool) -> Callable[[], tuple[list[torch.Tensor], list[torch.Tensor]]]:
    def make() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        x = torch.arange(24.0).view(6, 4).requires_grad_(requires_grad)
        return [x], [x]

    return make


def _aliasing(compiled: Callable[..., Any], requires_grad: bool) -> tuple[bool, bool, bool]:
    """Whether an output shares x's storage, whether ``x.add_(100)`` after the call changes an
    output, and whether an output changed in place (under no_grad, which eager allows) changes x."""
    (x,), _ = _input_maker(requires_grad)()
    outs = compiled(x)
    shares = any(o.untyped_storage()._cdata == x.untyped_storage()._cdata for o in outs)
    before = [o.detach().clone() for o in outs]
    with torch.no_grad():
        x.add_(100)
    changed = any(not torch.equal(b, o.detach()) for b, o in zip(before, outs))
    x_before = x.detach().clone()
    with torch.no_grad():
        outs[-1].mul_(2)
    return shares, changed, not torch.equal(x_before, x.detach())


class TestFreshIntermediateBases(CompileTestCase):
    @parametrize("name", list(PROGRAMS))
    def test_outputs_alias_no_input(self, name: str) -> None:
        fn, backend, dynamic = PROGRAMS[name]
        compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
        bug = stock_aliases_input(name) and not PATCHED
        for requires_grad in (False, True):
            with self.subTest(requires_grad=requires_grad):
                self.assertEqual(_aliasing(compiled, requires_grad), (bug, bug, bug))
                if PATCHED:
                    with strict_view_replay():
                        self.assertEqual(differences(fn, compiled, _input_maker(requires_grad)), [])
        if PATCHED:
            self.assertEqual(fallback_counts(), {})

    def test_repro_bases_and_nodes(self) -> None:
        # The program, patched: views of one fresh tensor, with eager's view nodes.
        if not PATCHED:
            self.skipTest("stock: test_outputs_alias_no_input documents the bug")
        compiled = torch.compile(scalar_chunk_view_t, backend="inductor", dynamic=True)
        x = torch.randn(6, 4, requires_grad=True)
        outs, eager = compiled(x), scalar_chunk_view_t(x)
        self.assertTrue(all(o._is_view() and o._base is outs[0]._base for o in outs))
        self.assertIsNot(outs[0]._base, x)
        self.assertFalse(outs[0]._base.is_leaf)
        self.assertEqual([o.grad_fn.name() for o in outs], [o.grad_fn.name() for o in eager])
        with torch.no_grad():
            x.add_(100)
        self.assertEqual(outs, eager)

    @parametrize("dynamic", [False, True])
    def test_backward_reads_the_intermediate(self, dynamic: bool) -> None:
        # The backward of y * y reads y, which the dropped no-op makes x.
        def simplified(x):
            y = x * torch.ones_like(x)
            return y[:3], y[3:], y * y

        def twin(x):
            y = x * 2
            return y[:3], y[3:], y * y

        compiled = torch.compile(simplified, backend="inductor", dynamic=dynamic)
        make = _input_maker(True)
        if PATCHED:
            # The alias structure and in-place outcomes of the program without the no-op (whose
            # one backward node raises on an in-place change of any output it saved).
            with strict_view_replay():
                found = differences(simplified, compiled, make)
                twin_found = differences(twin, torch.compile(twin, backend="inductor", dynamic=dynamic), make)
            self.assertEqual(found, twin_found)
            # out0.mul_(3) changes y, which y * y saved: eager raises, so does the compiled backward.
            self.assertEqual(inplace_then_backward(simplified, make, 0, 2).error, ("backward", "RuntimeError"))
            self.assertEqual(inplace_then_backward(compiled, make, 0, 2).error, ("backward", "RuntimeError"))
        # After x.add_(100), the compiled backward may read x where eager's reads y: then it
        # raises (eager computes), and never computes with the changed values.
        (x,), _ = make()
        outs = compiled(x)
        with torch.no_grad():
            x.add_(100)
        try:
            outs[2].sum().backward()
        except RuntimeError as e:
            self.assertIn("modified by an inplace operation", str(e))
        else:
            self.assertEqual(x.grad, 2 * torch.arange(24.0).view(6, 4))


instantiate_parametrized_tests(TestFreshIntermediateBases)


if __name__ == "__main__":
    run_tests()
