# Owner(s): ["oncall: pt2"]
"""
Tests that whether the forward looks for saved tensors on the storage of a
tensor it returns is decided at compile time (Note [Saved tensors on the
storage of a returned tensor]): a graph whose saved tensors lie on no returned
storage skips the search on every call, and one where a saved tensor does still
makes the backward see an in-place change of the returned tensor.
"""

from unittest import mock

import torch
import torch._dynamo
from torch._functorch._aot_autograd import graph_compile
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)


def saves_a_view_of_an_output(x):
    # b's backward saves a, a view of the matmul that the forward returns
    v = x @ x.flatten(0, -3)[0].t()
    a = v[v.shape[0] - 1]
    return a, x @ a


def saves_inputs_only(x):
    return x.sin() * 2, x.cos()


class TestSavedReturnStorages(TestCase):
    def _decisions(self, fn, backend):
        """What the compile decided for ``fn``, and its outputs."""
        decided = []

        def decide(*args):
            decided.append(saves_on_returned_storages(*args))
            return decided[-1]

        torch._dynamo.reset()
        saves_on_returned_storages = graph_compile.saves_on_returned_storages
        with mock.patch.object(graph_compile, "saves_on_returned_storages", decide), \
                torch._functorch.config.patch(enable_autograd_cache=False):
            outs = torch.compile(fn, backend=backend)(torch.randn(2, 3, 3, requires_grad=True))
        return decided, outs

    @parametrize("backend", ["aot_eager", "inductor"])
    def test_decided_at_compile_time(self, backend):
        decided, _ = self._decisions(saves_inputs_only, backend)
        self.assertEqual(decided, [False])
        decided, (a, b) = self._decisions(saves_a_view_of_an_output, backend)
        self.assertEqual(decided, [True])
        a.mul_(3)
        with self.assertRaisesRegex(RuntimeError, "modified by an inplace operation"):
            b.sum().backward()


instantiate_parametrized_tests(TestSavedReturnStorages)


if __name__ == "__main__":
    run_tests()
