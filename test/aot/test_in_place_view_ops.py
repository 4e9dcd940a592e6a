"""In-place view ops on a view, as the last ops on a returned output:

    def f(x):   # x: a non-leaf (3, 4) tensor
        y = x[1:]
        y.unsqueeze_(0)
        return y

Eager's ``y.grad_fn`` is UnsqueezeBackward1 (the in-place node), then SliceBackward0. Stock
2.14.1 and 2.13.0 (aot_eager and inductor, static and dynamic) replayed the recorded
``unsqueeze_`` ViewMeta out of place: UnsqueezeBackward0. Patched: the plan calls the in-place
op on the regenerated view (Note [In-place view ops replayed in place] in
view_replay/plan.py), so the node chain, the values, the layout, the gradient and the base's
version equal eager's. A view taken off the output after its in-place op (``y[0].t()``
beside ``y``) is replayed out of place: its deeper node is UnsqueezeBackward0 where eager's
is UnsqueezeBackward1, and ``y`` keeps eager's node (test_view_of_the_output).
"""

from __future__ import annotations

import torch
import torch._dynamo
from torch.testing._internal.common_utils import instantiate_parametrized_tests, parametrize, run_tests

from view_replay_testing import CompileTestCase, PATCHED, strict_view_replay


def _unsqueeze(x):
    y = x[1:]
    y.unsqueeze_(0)
    return y


def _transpose(x):
    y = x.view(4, 3)
    y.transpose_(0, 1)
    return y


def _t(x):
    y = x[:, 1:]
    y.t_()
    return y


def _squeeze_dim(x):
    y = x[:, :1]
    y.squeeze_(1)
    return y


def _two_in_place_ops(x):
    y = x.unsqueeze(0)[:, 1:]
    y.squeeze_(0)
    y.unsqueeze_(-1)
    return y


def _view_of_the_output(x):
    y = x[1:]
    y.unsqueeze_(0)
    return y, y[0].t()


PROGRAMS = {
    fn.__name__.lstrip("_"): fn
    for fn in (_unsqueeze, _transpose, _t, _squeeze_dim, _two_in_place_ops, _view_of_the_output)
}
MODES = {"aot_eager": ("aot_eager", False), "aot_eager_dynamic": ("aot_eager", True), "inductor": ("inductor", False)}


def node_chain(t: torch.Tensor) -> list[str]:
    """The node names from ``t.grad_fn`` down its first edges."""
    names, node = [], t.grad_fn
    while node is not None:
        names.append(node.name())
        node = node.next_functions[0][0] if node.next_functions else None
    return names


@instantiate_parametrized_tests
class TestInPlaceViewOps(CompileTestCase):
    def _run(self, program: str, mode: str):
        fn = PROGRAMS[program]
        backend, dynamic = MODES[mode]
        values = torch.randn(3, 4)
        leaves = [values.clone().requires_grad_(True) for _ in range(2)]
        x, xe = leaves[0] * 1, leaves[1] * 1
        with strict_view_replay():
            outs = torch.compile(fn, backend=backend, dynamic=dynamic)(x)
        refs = fn(xe)
        return (outs if isinstance(outs, tuple) else (outs,)), (refs if isinstance(refs, tuple) else (refs,)), x, xe, leaves

    @parametrize("mode", list(MODES))
    @parametrize("program", list(PROGRAMS))
    def test_as_in_eager(self, program: str, mode: str) -> None:
        outs, refs, x, xe, leaves = self._run(program, mode)
        for out, ref in zip(outs, refs):
            self.assertEqual(out, ref)
            self.assertEqual((out.stride(), out.storage_offset()), (ref.stride(), ref.storage_offset()))
        self.assertEqual(x._version, xe._version if PATCHED else 0)
        chains, eager_chains = node_chain(outs[0]), node_chain(refs[0])
        self.assertEqual(chains == eager_chains, PATCHED, f"{chains} vs eager's {eager_chains}")
        if len(outs) > 1:
            # Replayed out of place, on stock and patched alike.
            self.assertEqual(node_chain(outs[1])[:3], ["TBackward0", "SelectBackward0", "UnsqueezeBackward0"])
            self.assertEqual(node_chain(refs[1])[:3], ["TBackward0", "SelectBackward0", "UnsqueezeBackward1"])
        sum(o.sum() * (k + 1) for k, o in enumerate(outs)).backward()
        sum(r.sum() * (k + 1) for k, r in enumerate(refs)).backward()
        self.assertEqual(leaves[0].grad, leaves[1].grad)


if __name__ == "__main__":
    run_tests()
