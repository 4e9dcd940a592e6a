"""Eager parity of tensor-subclass outputs that alias an input or an intermediate: values,
layout, flags, view nodes, base and version-counter classes, backward through every output,
and in-place on each output then backward through each other one (viewreplay_harness.parity).

- DTensor multi-output views (``x.unbind(1)``, ``x.split(2, 1)``, ``x.chunk(2, 1)`` of a
  Shard(0) or Replicate input, or of an intermediate): DTensor gives each piece a fresh outer
  storage, so upstream's storage-based alias analysis calls it an intermediate nothing else
  aliases and returns it as a plain output (stock, both pins: ``_base is None``, no view node,
  in-place on a piece accepted where eager raises; with another view of the input beside
  them, "as_strided not supported with DTensor"). Patched: PR subclass-fresh-storage-views,
  Note [Subclass views on a fresh outer storage].
- TwoTensor views of an input and of an intermediate, single- and multi-output (stock:
  ``AsStridedBackward0``); ``x[:, 0]`` and ``x[:, 1:]`` come back without the full slice that
  dynamo records in front of them (Note [Identity slices]).
- A TwoTensor input mutated in the graph, then aliased by the outputs: test_mutated_subclass_tangents.
- Subclass output sizes specialized while the dense graph is traced (TwoTensor
  ``x.split(2, 1)`` of a (4, 3) input, dynamic shapes): stock 2.13.0 raises a TypeError in
  ``_make_wrapper_subclass``; 2.13.0's form of subclass-intermediate-bases rebuilds the output metadata from the
  trace (Note [Subclass output sizes specialized while tracing]), and 2.14.1 agrees without it.
  The same case in a training graph fails at compile time on both pins, stock and patched
  alike (upstream's partitioner).
"""

from __future__ import annotations

import torch
import torch._dynamo
from torch.distributed.tensor import distribute_tensor, Replicate, Shard
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


DTENSOR_PROGRAMS = {
    "unbind": lambda x: x.unbind(1),
    "split": lambda x: x.split(2, 1),
    "chunk": lambda x: x.chunk(2, 1),
    "unbind_and_view": lambda x: (*x.unbind(1), x.view(-1)),
    "intermediate_unbind": lambda x: (x * 2).unbind(1),
    "intermediate_unbind_and_t": lambda x: (lambda o: (*o.unbind(1), o.t()))(x * 2),
}
PLACEMENTS = {"shard0": Shard(0), "replicate": Replicate()}

TWO_TENSOR_PROGRAMS = {
    "unbind": lambda x: x.unbind(0),
    "split": lambda x: x.split(2, 1),
    "slice_and_t": lambda x: (x[1:], x.t()),
    # Dynamo records the full slice in front of the select and of ``[:, 1:]``; eager does not
    # (Note [Identity slices]).
    "full_slices": lambda x: (x[:, 0], x[:, 1:]),
    "intermediate_unbind_and_t": lambda x: (lambda o: (*o.unbind(0), o.t()))(x * 2),
}


def _unbind_and_split(x):
    return (*x.unbind(0), *x.split(2, 1))


def _two_tensor_inputs(shape: tuple[int, ...], plain: int | None = None):
    """Inputs for ``differences``: a TwoTensor non-leaf of ``shape`` that requires grad and,
    with ``plain``, a plain 1-D tensor of that length without grad after it."""

    def make():
        g = torch.Generator().manual_seed(0)
        leaf = TwoTensor(torch.randn(shape, generator=g), torch.randn(shape, generator=g)).requires_grad_(True)
        extra = [] if plain is None else [torch.randn(plain, generator=g)]
        return [leaf * 1, *extra], [leaf]

    return make


class TestDTensorMultiOutputViews(CompileTestCase):
    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.mesh = world_size_one_mesh()

    def _inputs(self, placement: str):
        def make():
            g = torch.Generator().manual_seed(0)
            leaf = distribute_tensor(torch.randn(6, 4, generator=g), self.mesh, [PLACEMENTS[placement]])
            leaf.requires_grad_(True)
            return [leaf * 1], [leaf]

        return make

    def _check(self, name: str, placement: str, dynamic: bool, backend: str) -> None:
        fn = DTENSOR_PROGRAMS[name]
        compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
        if not PATCHED:
            if name == "unbind_and_view":
                with self.assertRaisesRegex(RuntimeError, "as_strided not supported with DTensor"):
                    differences(fn, compiled, self._inputs(placement))
                return
            found = differences(fn, compiled, self._inputs(placement))
            # The pieces come back as plain outputs: not views, no view node.
            self.assertIn("out0 (requires_grad, is_leaf, _is_view): eager (True, False, True), "
                          "compiled (True, False, False)", found)
            self.assertTrue(any(f.startswith("bases:") for f in found), found)
            return
        with strict_view_replay():
            self.assertEqual(differences(fn, compiled, self._inputs(placement)), [])
        self.assertEqual(fallback_counts(), {})

    @parametrize("dynamic", [False, True])
    @parametrize("placement", list(PLACEMENTS))
    @parametrize("name", list(DTENSOR_PROGRAMS))
    def test_eager_parity(self, name: str, placement: str, dynamic: bool) -> None:
        self._check(name, placement, dynamic, "aot_eager")

    @parametrize("name", ["unbind", "intermediate_unbind_and_t"])
    def test_eager_parity_inductor(self, name: str) -> None:
        self._check(name, "shard0", True, "inductor")


class TestTwoTensorParity(CompileTestCase):
    @parametrize("dynamic", [False, True])
    @parametrize("name", list(TWO_TENSOR_PROGRAMS))
    def test_eager_parity(self, name: str, dynamic: bool) -> None:
        fn = TWO_TENSOR_PROGRAMS[name]
        compiled = torch.compile(fn, backend="aot_eager", dynamic=dynamic)
        if not PATCHED:
            if name.startswith("intermediate"):
                # Stock refuses subclass outputs aliasing one intermediate (test_subclass.py).
                with self.assertRaisesRegex(Exception, "ANY output aliasing"):
                    differences(fn, compiled, _two_tensor_inputs((3, 4)))
                return
            found = differences(fn, compiled, _two_tensor_inputs((3, 4)))
            self.assertIn("out0 view nodes", " ".join(found))
            self.assertIn("AsStridedBackward0", " ".join(found))
            return
        with strict_view_replay():
            self.assertEqual(differences(fn, compiled, _two_tensor_inputs((3, 4))), [])
        self.assertEqual(fallback_counts(), {})

    def test_eager_parity_inductor(self) -> None:
        fn = TWO_TENSOR_PROGRAMS["intermediate_unbind_and_t"]
        compiled = torch.compile(fn, backend="inductor", dynamic=True)
        if not PATCHED:
            with self.assertRaisesRegex(Exception, "ANY output aliasing"):
                differences(fn, compiled, _two_tensor_inputs((3, 4)))
            return
        with strict_view_replay():
            self.assertEqual(differences(fn, compiled, _two_tensor_inputs((3, 4))), [])

    def test_unbind_and_split_dynamic(self) -> None:
        # (3, 4) specializes nothing while tracing; (4, 3) is TestSpecializedOutputSizes.
        compiled = torch.compile(_unbind_and_split, backend="aot_eager", dynamic=True)
        found = differences(_unbind_and_split, compiled, _two_tensor_inputs((3, 4)))
        if PATCHED:
            self.assertEqual(found, [])
        else:
            self.assertIn("AsStridedBackward0", " ".join(found))


# TwoTensor x of shape (4, 3), y a plain (3,) tensor without grad. x.split(2, 1) builds a piece
# (4, s1 - 2) whose contiguity check specializes s1 = 3 while the dense graph is traced, after
# the subclass output metadata recorded s1 (Note [Subclass output sizes specialized while
# tracing], 2.13.0's form of subclass-intermediate-bases). The plain output after the subclass ones checks that
# its index is renumbered too.
SPECIALIZING_PROGRAMS = {
    "split": lambda x, y: x.split(2, 1),
    "unbind_and_split": lambda x, y: (*x.unbind(0), *x.split(2, 1)),
    "split_then_plain": lambda x, y: (*x.split(2, 1), y + 1),
    "plain_view_then_split": lambda x, y: (y[1:], *x.split(2, 1)),
}

_specializing_inputs = _two_tensor_inputs((4, 3), plain=3)


class TestSpecializedOutputSizes(CompileTestCase):
    """Stock 2.13.0 reads symbols the graph does not return (TypeError from
    ``_make_wrapper_subclass``); 2.14.1's trace keeps the symbols."""

    def _check(self, name: str, backend: str) -> None:
        fn = SPECIALIZING_PROGRAMS[name]
        compiled = torch.compile(fn, backend=backend, dynamic=True)
        if not PATCHED and not TORCH_2_14:
            with self.assertRaisesRegex(TypeError, "_make_wrapper_subclass"):
                differences(fn, compiled, _specializing_inputs)
            return
        found = differences(fn, compiled, _specializing_inputs)
        if PATCHED:
            self.assertEqual(found, [])
        else:
            self.assertIn("AsStridedBackward0", " ".join(found))

    @parametrize("name", list(SPECIALIZING_PROGRAMS))
    def test_eager_parity(self, name: str) -> None:
        self._check(name, "aot_eager")

    @parametrize("name", ["unbind_and_split", "split_then_plain"])
    def test_eager_parity_inductor(self, name: str) -> None:
        self._check(name, "inductor")

    @parametrize("name", ["split", "slice"])
    def test_training_graph_upstream_error(self, name: str) -> None:
        # With an output that needs the backward, the joint graph hits the same specialization
        # and the partitioner refuses it, on both pins, stock and patched alike: loud, at
        # compile time (upstream; not fixed here). Without the aliased output
        # (x[:, 2:] * 1, x * 2) both pins compile.
        aliases = {"split": lambda x: x.split(2, 1), "slice": lambda x: (x[:, 2:],)}[name]
        fn = lambda x, y: (*aliases(x), x * 2)  # noqa: E731
        compiled = torch.compile(fn, backend="aot_eager", dynamic=True)
        with self.assertRaisesRegex(Exception, "was invalid, but is output"):
            compiled(*_specializing_inputs()[0])


instantiate_parametrized_tests(TestDTensorMultiOutputViews)
instantiate_parametrized_tests(TestTwoTensorParity)
instantiate_parametrized_tests(TestSpecializedOutputSizes)

if __name__ == "__main__":
    run_tests()
