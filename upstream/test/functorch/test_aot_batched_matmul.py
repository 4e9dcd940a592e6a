# Owner(s): ["oncall: pt2"]
"""
Tests that matmul's decomposition ends a batched product in _unsafe_view, as
at::matmul does: its result is not an autograd view, in eager or compiled.
"""

import torch
import torch._dynamo
from torch._decomp.decompositions import matmul as matmul_decomposition
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)


SHAPES = [((2, 3, 4), (2, 4, 5)), ((2, 2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (2, 4, 5)), ((3, 4), (2, 4, 5))]


def product_and_a_use(a, b):
    o = a @ b
    return o, o.sin()  # SinBackward0 saves o


class TestBatchedMatmul(TestCase):
    def test_decomposition_is_not_a_view(self):
        for sa, sb in SHAPES:
            a = torch.randn(sa, requires_grad=True)
            b = torch.randn(sb, requires_grad=True)
            eager, decomposed = torch.matmul(a, b), matmul_decomposition(a, b)
            self.assertEqual(decomposed.grad_fn.name(), eager.grad_fn.name())
            self.assertFalse(decomposed._is_view())

    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    def test_compiled_product_is_not_a_view(self, dynamic, backend):
        torch._dynamo.reset()
        compiled = torch.compile(product_and_a_use, backend=backend, dynamic=dynamic)
        for sa, sb in SHAPES[:2]:
            a = torch.randn(sa, requires_grad=True)
            b = torch.randn(sb, requires_grad=True)
            o, s = compiled(a, b)
            self.assertFalse(o._is_view())
            self.assertEqual(o, a.detach() @ b.detach())
            o.detach_()  # eager allows it: o is no view
            if backend == "inductor":
                # inductor saves its own alias of o's buffer: the backward sees o's in-place
                # changes with version-witnesses, a later PR
                continue
            with self.assertRaisesRegex(RuntimeError, "modified by an inplace operation"):
                o2, s2 = compiled(a, b)
                o2.mul_(2)
                s2.sum().backward()


instantiate_parametrized_tests(TestBatchedMatmul)


if __name__ == "__main__":
    run_tests()
