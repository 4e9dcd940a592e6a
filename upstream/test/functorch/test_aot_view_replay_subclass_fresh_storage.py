# Owner(s): ["oncall: pt2"]
"""
Tests that a subclass output autograd tracks as a view of an input or an
intermediate is classified as its alias even where the subclass gives it a
fresh outer storage (DTensor's unbind/split/chunk): it comes back as eager's
view, with eager's base, version counter and in-place errors (Note [Subclass
views on a fresh outer storage]).
"""

import torch
import torch._dynamo
import torch.distributed as dist
from torch._dynamo.utils import counters
from torch._functorch._aot_autograd import view_replay
from torch.distributed.tensor import DeviceMesh, distribute_tensor, Replicate, Shard
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)


PIECES = {
    "unbind": (lambda x: x.unbind(1), "UnbindBackward0"),
    "split": (lambda x: x.split(2, 1), "SplitBackward0"),
    "intermediate_unbind": (lambda x: (x * 2).unbind(1), "UnbindBackward0"),
}
PLACEMENTS = {"shard0": Shard(0), "replicate": Replicate()}


class TestSubclassFreshStorageViews(TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
        cls.mesh = DeviceMesh("cpu", [0])

    @classmethod
    def tearDownClass(cls):
        dist.destroy_process_group()
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        torch._dynamo.reset()
        counters.clear()

    def _input(self, placement):
        leaf = distribute_tensor(torch.arange(24.0).reshape(6, 4), self.mesh, [PLACEMENTS[placement]])
        leaf.requires_grad_()
        return leaf, leaf * 1

    @parametrize("dynamic", [False, True])
    @parametrize("placement", sorted(PLACEMENTS))
    @parametrize("name", sorted(PIECES))
    def test_pieces_are_views_of_their_base(self, name, placement, dynamic):
        fn, node = PIECES[name]
        leaf, x = self._input(placement)
        with view_replay.config.patch(strict=True):
            pieces = torch.compile(fn, backend="aot_eager", dynamic=dynamic)(x)
        eager_leaf, eager_x = self._input(placement)
        refs = fn(eager_x)
        for piece, ref in zip(pieces, refs, strict=True):
            self.assertEqual(piece.grad_fn.name(), node)
            self.assertEqual(piece.full_tensor(), ref.full_tensor())
            self.assertEqual(piece.placements, ref.placements)
        # Eager: the pieces of one call share their base (x, or the intermediate).
        self.assertEqual(len({id(p._base) for p in pieces}), 1)
        if not name.startswith("intermediate"):
            self.assertIs(pieces[0]._base, x)
        # As in eager, in-place on a piece of a multi-output view raises.
        with self.assertRaisesRegex(RuntimeError, "multiple views"):
            pieces[0].mul_(3)
        sum(p.sum() * (k + 1) for k, p in enumerate(pieces)).backward()
        sum(r.sum() * (k + 1) for k, r in enumerate(refs)).backward()
        self.assertEqual(leaf.grad.full_tensor(), eager_leaf.grad.full_tensor())
        self.assertEqual(dict(counters["view_replay_fallback"]), {})

    def test_backward_after_inplace_on_the_base_raises_as_eager(self):
        leaf, x = self._input("shard0")
        pieces = torch.compile(PIECES["unbind"][0], backend="aot_eager")(x)
        x.mul_(2)
        with self.assertRaisesRegex(RuntimeError, "multiple views"):
            pieces[0].sum().backward()


instantiate_parametrized_tests(TestSubclassFreshStorageViews)


if __name__ == "__main__":
    run_tests()
