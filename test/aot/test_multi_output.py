"""Multi-output views (unbind, split, split_with_sizes, chunk): one regeneration
per group and eager's autograd semantics (patched), versus upstream's hidden
aliasing (stock), which lets in-place on pieces through and gives a silently
wrong gradient after in-place on the base."""

from __future__ import annotations

import unittest

import torch
import torch._dynamo
from torch._dynamo.utils import counters
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)

from view_replay_testing import (
    CompileTestCase,
    autograd_nodes,
    fallback_counts,
    observable_strides,
    PATCHED,
    strict_view_replay,
)

if PATCHED:
    from torch._functorch._aot_autograd.view_replay import config as view_replay_config


def base_and_pieces(x):
    inter = x * 1
    return (inter,) + tuple(inter.unbind(0))


# name -> (program on a (n, m) tensor, eager's backward node of the group)
GROUPS = {
    "unbind": (lambda t: t.unbind(0), "UnbindBackward0"),
    "split": (lambda t: t.split(t.shape[0] // 2), "SplitBackward0"),
    "split_uneven": (lambda t: t.split(4), "SplitBackward0"),
    "chunk_uneven": (lambda t: t.chunk(3, dim=1), "SplitBackward0"),
    "split_with_sizes_symbolic": (lambda t: t.split([2, t.shape[0] - 2]), "SplitWithSizesBackward0"),
    "split_with_sizes_uneven": (lambda t: t.split_with_sizes([1, 2, t.shape[0] - 3]), "SplitWithSizesBackward0"),
}


def _on_input(op):
    return lambda x: tuple(op(x))


def _on_intermediate(op):
    return lambda x: tuple(op(x * 2))


def _on_intermediate_with_base(op):
    def fn(x):
        base = x * 2
        return (base,) + tuple(op(base))

    return fn


def _with_further_views(op):
    # Pieces followed by further views: transposed and sliced pieces.
    return lambda x: tuple(p.unsqueeze(0)[..., 1:].transpose(0, -1) for p in op(x * 2))


WHERE = {
    "input": _on_input,
    "intermediate": _on_intermediate,
    "intermediate_with_base": _on_intermediate_with_base,
    "further_views": _with_further_views,
}


class TestMultiOutputGroups(CompileTestCase):
    @parametrize("dynamic", [False, True])
    @parametrize("where", list(WHERE))
    @parametrize("group", list(GROUPS))
    def test_one_node_per_group_and_eager_gradients(self, group: str, where: str, dynamic: bool) -> None:
        op, node = GROUPS[group]
        fn = WHERE[where](op)
        compiled = torch.compile(fn, backend="aot_eager", dynamic=dynamic)
        for n, m in ((7, 5), (9, 6)):
            x = torch.randn(n, m, requires_grad=True)
            xe = x.detach().clone().requires_grad_(True)
            with strict_view_replay():
                outs = compiled(x)
            refs = fn(xe)
            self.assertEqual(len(outs), len(refs))
            for o, r in zip(outs, refs):
                self.assertEqual(o, r)
                self.assertEqual(observable_strides(o), observable_strides(r))
                if r.numel():
                    self.assertEqual(o.storage_offset(), r.storage_offset())
            nodes = autograd_nodes(outs)
            self.assertEqual(nodes.count("AsStridedBackward0"), 0)
            if PATCHED:
                # Eager's structure: one node of the multi-output op per group.
                self.assertEqual(nodes.count(node), 1)
                self.assertEqual(fallback_counts(), {})
                pieces = [o for o, r in zip(outs, refs) if r._is_view()]
                self.assertTrue(all(p._is_view() for p in pieces))
            else:
                # Upstream hides the aliasing: no node of the op at all.
                self.assertEqual(nodes.count(node), 0)
            weights = [torch.randn_like(r) for r in refs]
            sum((o * w).sum() for o, w in zip(outs, weights)).backward()
            sum((r * w).sum() for r, w in zip(refs, weights)).backward()
            self.assertEqual(x.grad, xe.grad)


class TestMultiOutputSafety(CompileTestCase):
    """The two cases of the issue: eager raises; stock compiled does not."""

    @parametrize("dynamic", [False, True])
    def test_backward_through_piece_after_inplace_on_base(self, dynamic: bool) -> None:
        with self.assertRaisesRegex(RuntimeError, "has been modified inplace") as eager:
            base, y, z = base_and_pieces(torch.ones(2, 2, requires_grad=True))
            base.mul_(3)
            y.sum().backward()
        compiled = torch.compile(base_and_pieces, backend="aot_eager", dynamic=dynamic)
        x = torch.ones(2, 2, requires_grad=True)
        with strict_view_replay():
            base, y, z = compiled(x)
        base.mul_(3)
        if PATCHED:
            with self.assertRaisesRegex(type(eager.exception), "has been modified inplace"):
                y.sum().backward()
        else:
            # The bug: no error, and a wrong gradient (eager's would be [[1, 1], [0, 0]] through y's
            # graph only if the mutation were allowed; compiled silently returns it).
            y.sum().backward()
            self.assertEqual(x.grad, torch.tensor([[1.0, 1.0], [0.0, 0.0]]))

    @parametrize("dynamic", [False, True])
    def test_inplace_on_piece(self, dynamic: bool) -> None:
        with self.assertRaisesRegex(RuntimeError, "is being modified inplace") as eager:
            base, y, z = base_and_pieces(torch.ones(2, 2, requires_grad=True))
            y.mul_(2)
        compiled = torch.compile(base_and_pieces, backend="aot_eager", dynamic=dynamic)
        with strict_view_replay():
            base, y, z = compiled(torch.ones(2, 2, requires_grad=True))
        if PATCHED:
            with self.assertRaisesRegex(type(eager.exception), "is being modified inplace"):
                y.mul_(2)
        else:
            y.mul_(2)  # The bug: allowed.
            self.assertEqual(base, torch.tensor([[2.0, 2.0], [1.0, 1.0]]))

    @unittest.skipUnless(PATCHED, "the flag exists only in the patched wheel")
    def test_hide_flag_restores_upstream_behaviour(self) -> None:
        with view_replay_config.patch(hide_multi_output_view_aliasing=True):
            compiled = torch.compile(base_and_pieces, backend="aot_eager")
            base, y, z = compiled(torch.ones(2, 2, requires_grad=True))
        self.assertFalse(y._is_view())
        self.assertEqual(autograd_nodes([y, z]).count("UnbindBackward0"), 0)
        y.mul_(2)  # hidden aliasing: allowed, as upstream


class TestMultiOutputIdentity(CompileTestCase):
    """A piece returned twice is one tensor; the same piece of two separate calls is two tensors.

    Found by the fuzzer: with one call per group, two separate split() calls of an intermediate
    came back as the same tensor twice (stock returns two: it hides the pieces' aliasing).
    """

    PROGRAMS = {
        # name -> (program, eager's outputs are one object, stock's are one object)
        "piece_twice_of_input": (lambda x: (lambda p: (p[0], p[0]))(x.split(2)), True, True),
        "piece_twice_of_intermediate": (lambda x: (lambda p: (p[0], p[0]))((x * 2).split(2)), True, True),
        "two_calls_on_input": (lambda x: (x.split(2)[0], x.split(2)[0]), False, True),
        "two_calls_on_intermediate": (lambda x: (lambda y: (y.split(2)[0], y.split(2)[0]))(x * 2), False, False),
    }

    @parametrize("dynamic", [False, True])
    @parametrize("name", list(PROGRAMS))
    def test_identity_of_pieces(self, name: str, dynamic: bool) -> None:
        fn, eager_same, stock_same = self.PROGRAMS[name]
        x = torch.randn(4, 3, requires_grad=True)
        xe = x.detach().clone().requires_grad_(True)
        refs = fn(xe)
        self.assertEqual(refs[0] is refs[1], eager_same)
        with strict_view_replay():
            outs = torch.compile(fn, backend="aot_eager", dynamic=dynamic)(x)
        self.assertEqual(outs[0] is outs[1], eager_same if PATCHED else stock_same)
        self.assertEqual(outs[0].untyped_storage().data_ptr(), outs[1].untyped_storage().data_ptr())
        (outs[0].sum() + 2 * outs[1].sum()).backward()
        (refs[0].sum() + 2 * refs[1].sum()).backward()
        self.assertEqual(x.grad, xe.grad)


class TestFiftyWayUnbind(TestCase):
    @parametrize("dynamic", [False, True])
    def test_seed_h(self, dynamic: bool) -> None:
        torch._dynamo.reset()
        counters.clear()
        x = torch.randn(50, 3, requires_grad=True)
        with strict_view_replay():
            outs = torch.compile(lambda t: (t * t).unbind(0), backend="aot_eager", dynamic=dynamic)(x)
        nodes = autograd_nodes(outs)
        self.assertEqual(len(outs), 50)
        self.assertEqual(nodes.count("AsStridedBackward0"), 0)
        self.assertEqual(nodes.count("UnbindBackward0"), 1 if PATCHED else 0)
        sum(o.sum() * i for i, o in enumerate(outs)).backward()
        self.assertEqual(x.grad, 2 * x.detach() * torch.arange(50.0).unsqueeze(1))


instantiate_parametrized_tests(TestMultiOutputGroups)
instantiate_parametrized_tests(TestMultiOutputSafety)
instantiate_parametrized_tests(TestMultiOutputIdentity)
instantiate_parametrized_tests(TestFiftyWayUnbind)

if __name__ == "__main__":
    run_tests()
