"""Tensor-subclass inputs mutated in a compiled training graph, with inductor.

A TwoTensor input that requires grad and is mutated in the graph is mutated outside it: the
forward returns its new inner tensors before the user outputs. The dense metadata that upstream
re-collects for the subclass graph does not count them, so its saved-tensor slice starts two
outputs early (stock 2.14.1 and 2.13.0, inductor, static and dynamic):

- ``x.mul_(2); e = x.exp(); return e, x * 4``: the donated-buffer analysis takes ``e`` (saved
  for the exp's backward) for a buffer the backward may reuse, and backward through both
  outputs overwrites ``e`` in place. A silent wrong value: eager leaves ``e`` alone.
- ``x.mul_(2); return x * 3, (x * 4).t()``: the backward compile restrides the tangents from the
  transposed output, and backward raises "expected size 4==4, stride 4==1".

Patched: PR dense-input-mutations, Note [Subclass inputs mutated outside the graph].
aot_eager neither donates buffers nor restrides: both programs equal eager on stock too.
"""

from __future__ import annotations

import torch
from torch.testing._internal.common_utils import instantiate_parametrized_tests, parametrize, run_tests
from torch.testing._internal.two_tensor import TwoTensor

from view_replay_testing import CompileTestCase, PATCHED


def exp_of_a_mutated_input(x):
    x.mul_(2)
    e = x.exp()
    return e, x * 4


def transposed_output_of_a_mutated_input(x):
    x.mul_(2)
    return x * 3, (x * 4).t()


def _run(fn):
    """The outputs' inner tensors (cloned right after the call), the same after backward
    through all the outputs, and the inner tensors of the leaf's gradient."""
    g = torch.Generator().manual_seed(0)
    leaf = TwoTensor(torch.randn(4, 4, generator=g), torch.randn(4, 4, generator=g)).requires_grad_(True)
    outs = fn(leaf * 1)
    before = [(o.a.clone(), o.b.clone()) for o in outs]
    sum(o.sum() for o in outs).backward()
    return before, [(o.a, o.b) for o in outs], (leaf.grad.a, leaf.grad.b)


class TestSubclassInputMutations(CompileTestCase):
    @parametrize("dynamic", [False, True])
    def test_saved_output_is_not_overwritten(self, dynamic: bool) -> None:
        fn = exp_of_a_mutated_input
        expected_before, expected_after, expected_grad = _run(fn)
        before, after, grad = _run(torch.compile(fn, backend="inductor", dynamic=dynamic))
        self.assertEqual(before, expected_before)
        self.assertEqual(grad, expected_grad)
        if PATCHED:
            self.assertEqual(after, expected_after)
        else:
            # The backward reused the exp's buffer: the first output changed under the user.
            self.assertNotEqual(after[0][0], before[0][0])

    @parametrize("dynamic", [False, True])
    def test_tangents_keep_their_layout(self, dynamic: bool) -> None:
        fn = transposed_output_of_a_mutated_input
        compiled = torch.compile(fn, backend="inductor", dynamic=dynamic)
        if not PATCHED:
            with self.assertRaisesRegex(AssertionError, "expected size 4==4, stride 4==1"):
                _run(compiled)
            return
        self.assertEqual(_run(compiled), _run(fn))

    def test_aot_eager(self) -> None:
        for fn in (exp_of_a_mutated_input, transposed_output_of_a_mutated_input):
            self.assertEqual(_run(torch.compile(fn, backend="aot_eager")), _run(fn))


instantiate_parametrized_tests(TestSubclassInputMutations)

if __name__ == "__main__":
    run_tests()
