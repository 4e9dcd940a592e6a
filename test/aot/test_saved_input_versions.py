"""Saved tensors that alias a graph input: an in-place change of the input, then backward.

``def f(x, w): y = x @ w; return y[0], y[1].t()`` with a (2, 3, 4) ``x``: eager's MmBackward0
saves ``x.view(6, 4)``, which shares ``x``'s version counter, so ``x.mul_(2)`` under no_grad
then backward raises "one of the variables needed for gradient computation has been modified
by an inplace operation". The compiled forward saves the same view of its input, but inductor
returns it as ``reinterpret_tensor`` of the input's buffer, a fresh TensorImpl with a version
counter of its own: stock 2.14.1 and 2.13.0 (inductor, static and dynamic) silently return
``w.grad`` computed from the doubled ``x`` (twice eager's). The same with ``(x @ w).split(...)``
into q/k/v, ``x[0] @ w``, ``x[0].t() @ w.t()`` and ``x.view(-1, 4) @ w``. aot_eager runs the
real view op (a view, sharing the counter) and raises as eager does; so does inductor where the
saved tensor is the input itself (``x * w``) or where the partitioner saves the input and
recomputes the view (``x.t() @ w`` with a 2-D ``x``). Patched: the forward saves those aliases
as views of the input taken through ``detach()``, which share its counter (patch
saved-input-versions, Note [Saved views of graph inputs]).

Inputs the graph mutates keep upstream's behaviour (the Note's scope: the forward saves values
computed from the mutation's new value, which the runtime writes back). Upstream's gap there,
documented and left alone: with ``x[1].add_(1); return x[0] @ w``, a later in-place change of
``x`` is missed where eager raises (aot_eager saves a copy; inductor's backward reads the
changed ``x``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.testing._internal.common_utils import instantiate_parametrized_tests, parametrize, run_tests

from view_replay_testing import CompileTestCase, PATCHED, stock_213_cache_off


INPLACE_ERROR = "one of the variables needed for gradient computation has been modified by an inplace operation"


def batched_product(x, w):
    y = x @ w  # MmBackward0 saves x.view(6, 4)
    return y[0], y[1].t()


def split_product(x, w):
    q, k, v = (x @ w).split(5, dim=-1)
    return q, k.sin(), v


def product_of_a_row(x, w):
    return x[0] @ w  # MmBackward0 saves x[0]


def product_of_a_view(x, w):
    return x.view(-1, 4) @ w


def product_of_a_transposed_row(x, w):
    return x[0].t() @ w.t()


def product_of_a_transpose(x, w):
    return x.t() @ w  # x is 2-D: the partitioner saves x and recomputes the transpose


def elementwise_product(x, w):
    return x * w  # MulBackward0 saves x itself


BATCHED = (lambda n: (n, 3, 4), lambda n: (4, 5))
# name -> (fn, x's shape and w's shape for a size n)
PROGRAMS: dict[str, tuple[Callable[..., Any], tuple[Callable[[int], tuple[int, ...]], ...]]] = {
    "batched_product": (batched_product, BATCHED),
    "split_product": (split_product, (lambda n: (n, 3, 4), lambda n: (4, 15))),
    "product_of_a_row": (product_of_a_row, BATCHED),
    "product_of_a_view": (product_of_a_view, BATCHED),
    "product_of_a_transposed_row": (product_of_a_transposed_row, (lambda n: (n, 3, 4), lambda n: (5, 3))),
    "product_of_a_transpose": (product_of_a_transpose, (lambda n: (n, 3), lambda n: (n, 5))),
    "elementwise_product": (elementwise_product, (lambda n: (n, 3, 4), lambda n: (n, 3, 4))),
}
# Stock inductor saves a reinterpret_tensor of x and misses the in-place change: both pins,
# static and dynamic.
STOCK_WRONG = {"batched_product", "split_product", "product_of_a_row", "product_of_a_view", "product_of_a_transposed_row"}


def _inputs(program: str, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(n)
    x_shape, w_shape = PROGRAMS[program][1]
    x = torch.randn(x_shape(n), generator=gen, requires_grad=True)
    return x, torch.randn(w_shape(n), generator=gen, requires_grad=True)


def _grads(fn: Callable[..., Any], x: torch.Tensor, w: torch.Tensor, inplace: bool) -> tuple[Any, Any]:
    """Call ``fn``, double ``x`` in place under no_grad if ``inplace``, then backward."""
    outs = fn(x, w)
    outs = outs if isinstance(outs, tuple) else (outs,)
    if inplace:
        with torch.no_grad():
            x.mul_(2)
    sum(o.sum() for o in outs).backward()
    return x.grad, w.grad


def mutates_then_takes_a_row(x, w):
    x[1].add_(1)
    return x[0] @ w  # eager saves x[0] after the add


class TestSavedInputVersions(CompileTestCase):
    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    @parametrize("program", list(PROGRAMS))
    def test_inplace_on_the_input_then_backward(self, program: str, dynamic: bool, backend: str) -> None:
        fn = PROGRAMS[program][0]
        compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
        with stock_213_cache_off(backend):
            for n in (2, 3) if dynamic else (2,):
                expected = _grads(fn, *_inputs(program, n), inplace=False)
                self.assertEqual(_grads(compiled, *_inputs(program, n), inplace=False), expected)
                with self.assertRaisesRegex(RuntimeError, INPLACE_ERROR):
                    _grads(fn, *_inputs(program, n), inplace=True)
                if PATCHED or backend == "aot_eager" or program not in STOCK_WRONG:
                    with self.assertRaisesRegex(RuntimeError, INPLACE_ERROR):
                        _grads(compiled, *_inputs(program, n), inplace=True)
                else:
                    # No error: w's gradient is computed from the doubled x.
                    x_grad, w_grad = _grads(compiled, *_inputs(program, n), inplace=True)
                    self.assertEqual(x_grad, expected[0])
                    self.assertEqual(w_grad, 2 * expected[1])

    @parametrize("backend", ["aot_eager", "inductor"])
    def test_input_mutated_by_the_graph(self, backend: str) -> None:
        # Stock and patched alike (the fix leaves inputs the graph mutates alone).
        fn = mutates_then_takes_a_row
        compiled = torch.compile(fn, backend=backend)
        gen = torch.Generator().manual_seed(0)
        x, w = torch.randn(2, 3, 4, generator=gen), torch.randn(4, 5, generator=gen)
        expected = _grads(fn, x.clone(), w.clone().requires_grad_(), inplace=False)[1]
        self.assertEqual(_grads(compiled, x.clone(), w.clone().requires_grad_(), inplace=False)[1], expected)
        with self.assertRaisesRegex(RuntimeError, INPLACE_ERROR):
            _grads(fn, x.clone(), w.clone().requires_grad_(), inplace=True)
        # Upstream's gap: no error; aot_eager saved a copy, inductor reads the doubled input.
        w_grad = _grads(compiled, x.clone(), w.clone().requires_grad_(), inplace=True)[1]
        self.assertEqual(w_grad, 2 * expected if backend == "inductor" else expected)


instantiate_parametrized_tests(TestSavedInputVersions)


if __name__ == "__main__":
    run_tests()
