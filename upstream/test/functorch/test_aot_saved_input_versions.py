# Owner(s): ["oncall: pt2"]
"""
Tests that a tensor the compiled forward saves on an input's storage shares
the input's version counter, as eager's saved view does: an in-place change
of the input, then backward, raises eager's error (Note [Saved views of graph
inputs]).
"""

import torch
import torch._dynamo
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)


INPLACE_ERROR = "one of the variables needed for gradient computation has been modified by an inplace operation"


def batched_product(x, w):
    y = x @ w  # MmBackward0 saves x.view(-1, 4)
    return y[0], y[1].t()


def split_product(x, w):
    q, k, v = (x @ w).split(5, dim=-1)
    return q, k.sin(), v


def product_of_a_row(x, w):
    return x[0] @ w  # MmBackward0 saves x[0]


def elementwise_product(x, w):
    return x * w  # MulBackward0 saves x itself


def mutates_then_multiplies(x, w):
    x[1].add_(1)
    return x[0] @ w


PROGRAMS = {
    "batched_product": (batched_product, 5),
    "split_product": (split_product, 15),
    "product_of_a_row": (product_of_a_row, 5),
    "elementwise_product": (elementwise_product, None),
}


def _inputs(program, n):
    gen = torch.Generator().manual_seed(n)
    width = PROGRAMS[program][1]
    w_shape = (n, 3, 4) if width is None else (4, width)
    x = torch.randn(n, 3, 4, generator=gen, requires_grad=True)
    return x, torch.randn(w_shape, generator=gen, requires_grad=True)


def _backward(fn, x, w, inplace):
    outs = fn(x, w)
    outs = outs if isinstance(outs, tuple) else (outs,)
    if inplace:
        with torch.no_grad():
            x.mul_(2)
    sum(o.sum() for o in outs).backward()
    return x.grad, w.grad


class TestSavedInputVersions(TestCase):
    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    @parametrize("program", list(PROGRAMS))
    def test_inplace_on_the_input_then_backward(self, program, dynamic, backend):
        torch._dynamo.reset()
        fn = PROGRAMS[program][0]
        compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
        for n in (2, 3) if dynamic else (2,):
            expected = _backward(fn, *_inputs(program, n), inplace=False)
            self.assertEqual(_backward(compiled, *_inputs(program, n), inplace=False), expected)
            with self.assertRaisesRegex(RuntimeError, INPLACE_ERROR):
                _backward(fn, *_inputs(program, n), inplace=True)
            with self.assertRaisesRegex(RuntimeError, INPLACE_ERROR):
                _backward(compiled, *_inputs(program, n), inplace=True)

    @parametrize("backend", ["aot_eager", "inductor"])
    def test_input_mutated_by_the_graph(self, backend):
        # Eager saves x[0] after the mutation: backward without a later change works.
        torch._dynamo.reset()
        compiled = torch.compile(mutates_then_multiplies, backend=backend)
        gen = torch.Generator().manual_seed(0)
        x, w = torch.randn(2, 3, 4, generator=gen), torch.randn(4, 5, generator=gen)
        grads = []
        for fn in (mutates_then_multiplies, compiled):
            wi = w.clone().requires_grad_()
            fn(x.clone(), wi).sum().backward()
            grads.append(wi.grad)
        self.assertEqual(grads[1], grads[0])


instantiate_parametrized_tests(TestSavedInputVersions)


if __name__ == "__main__":
    run_tests()
