"""Tensor-subclass inputs mutated in the graph, then aliased by the outputs.

With TwoTensor ``x``, ``x.add_(1); return x[1:], x.t()`` returns two views of ``x``, which are
regenerated outside the compiled autograd.Function; backward through either reaches the
Function through the new value of ``x`` only, whose gradient is a TwoTensor. Upstream traces
that tangent as a plain tensor (it guesses that a mutated subclass input gets autograd's plain
zeros, pytorch#172556), so the backward raises "we guessed its metadata incorrectly" where eager
computes (stock 2.14.1 and 2.13.0, aot_eager and inductor, static and dynamic; with DTensor stock
fails earlier: "as_strided not supported with DTensor", or, for split_and_t, "got mixed
torch.Tensor and DTensor" in backward and "Cannot call numel()" in the compile with dynamic
shapes). DTensor's view(-1) with dynamic shapes does not trace on 2.13.0, stock and patched alike.

Patched: where the input's new value is the backward's only tangent, it is traced as the
subclass itself (PR sole-mutation-tangent, Note [The only tangent is a mutated subclass
input's]). Each program is checked for full eager parity (viewreplay_harness.parity): values,
layout, flags, view nodes, base and version-counter classes, backward, and in-place on each
output then backward through each other one. A graph with another tangent keeps upstream's
guess (``test_another_tangent_keeps_the_guess``).
"""

from __future__ import annotations

import torch
from torch.distributed.tensor import distribute_tensor, Shard
from torch.testing._internal.common_utils import instantiate_parametrized_tests, parametrize, run_tests
from torch.testing._internal.two_tensor import TwoTensor

from view_replay_testing import (
    CompileTestCase,
    fallback_counts,
    PATCHED,
    strict_view_replay,
    TORCH_2_14,
    world_size_one_mesh,
)
from viewreplay_harness.parity import differences


def slice_and_t(x):
    x.add_(1)
    return x[1:], x.t()


def view(x):
    x.add_(1)
    return x.view(-1)


def split_and_t(x):
    x.mul_(2)
    return (*x.split(2, 1), x.t())


def piece_mutated(x):
    x[0].mul_(2)
    return x[1:], x[:, 1:]


def unbind(x):
    x.mul_(2)
    return x.unbind(0)


def returned_and_view(x):
    # The input itself is returned too: an alias of the input, not a tangent.
    x.mul_(2)
    return x, x[0]


def another_tangent(x):
    # x * 2 is a tangent too: autograd gives the mutated input plain zeros when backward
    # starts from it, so upstream's guess stays.
    x.add_(1)
    return x[1:], x * 2


PROGRAMS = {f.__name__: f for f in (slice_and_t, view, split_and_t, piece_mutated, unbind, returned_and_view)}
# Shard(0): no unbind(0).
DTENSOR_PROGRAMS = ["slice_and_t", "view", "split_and_t", "piece_mutated"]
GUESS_ERROR = "backward through every output: eager grads, compiled ('backward', 'RuntimeError')"


def _two_tensor_inputs():
    g = torch.Generator().manual_seed(0)
    leaf = TwoTensor(torch.randn(4, 4, generator=g), torch.randn(4, 4, generator=g)).requires_grad_(True)
    return [leaf * 1], [leaf]


class TestMutatedSubclassTangents(CompileTestCase):
    def _check(self, name: str, make, backend: str, dynamic: bool) -> list[str]:
        fn = PROGRAMS[name]
        with strict_view_replay():
            found = differences(fn, torch.compile(fn, backend=backend, dynamic=dynamic), make)
        if PATCHED:
            self.assertEqual(found, [])
            self.assertEqual(fallback_counts(), {})
        return found

    @parametrize("dynamic", [False, True])
    @parametrize("name", list(PROGRAMS))
    def test_two_tensor(self, name: str, dynamic: bool) -> None:
        found = self._check(name, _two_tensor_inputs, "aot_eager", dynamic)
        if not PATCHED:
            self.assertIn(GUESS_ERROR, found)

    @parametrize("dynamic", [False, True])
    @parametrize("name", ["slice_and_t", "split_and_t"])
    def test_two_tensor_inductor(self, name: str, dynamic: bool) -> None:
        found = self._check(name, _two_tensor_inputs, "inductor", dynamic)
        if not PATCHED:
            self.assertIn(GUESS_ERROR, found)

    @parametrize("dynamic", [False, True])
    @parametrize("name", DTENSOR_PROGRAMS)
    def test_dtensor(self, name: str, dynamic: bool) -> None:
        mesh = world_size_one_mesh()

        def make():
            g = torch.Generator().manual_seed(0)
            leaf = distribute_tensor(torch.randn(4, 4, generator=g), mesh, [Shard(0)]).requires_grad_(True)
            return [leaf * 1], [leaf]

        error = None
        if dynamic and name == "view" and not TORCH_2_14:
            # 2.13.0 cannot trace DTensor's view(-1) with dynamic shapes, stock and patched alike.
            error = "is not tracked with proxy"
        elif not PATCHED and dynamic and name == "split_and_t":
            error = "Cannot call numel"  # stock's compile, both pins
        elif not PATCHED:
            # Stock replays the views with as_strided(); where there is none to replay first,
            # the backward traced with a plain tangent mixes it with DTensors.
            error = "got mixed torch.Tensor and DTensor" if name == "split_and_t" else "as_strided not supported"
        if error is None:
            self._check(name, make, "aot_eager", dynamic)
            return
        with self.assertRaisesRegex(RuntimeError, error):
            self._check(name, make, "aot_eager", dynamic)

    def test_another_tangent_keeps_the_guess(self) -> None:
        # Stock and patched alike: backward through the view of x raises, through x * 2 computes.
        compiled = torch.compile(another_tangent, backend="aot_eager")
        with strict_view_replay():
            found = differences(another_tangent, compiled, _two_tensor_inputs)
        self.assertIn(GUESS_ERROR, found)
        grads = []
        for fn in (another_tangent, compiled):
            (x,), (leaf,) = _two_tensor_inputs()
            fn(x)[1].sum().backward()
            grads.append((leaf.grad.a, leaf.grad.b))
        self.assertEqual(grads[1], grads[0])


instantiate_parametrized_tests(TestMutatedSubclassTangents)

if __name__ == "__main__":
    run_tests()
