"""Every symbol of a view chain binds (Note [Symbol outputs]): the sibling pieces of
``x.split(c.tolist())`` carry each other's sizes, and a symbol that no value carries
(``x[: t.item()]``, ``x.narrow(0, t.item(), 2)``, ``x[a:b]``) is returned by the graph as
an extra SymInt output and dropped before the caller sees the outputs.

Each case runs against eager: values, strides, storage offsets, the outputs' first
autograd node and the inputs' gradients, twice with other symbol values (the second call
must not recompile). Stock gives CompiledFunctionBackward (split pieces: their aliasing is
hidden) or AsStridedBackward0; patched gives eager's nodes with no fallback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from typing import Any

import torch
import torch._dynamo
from torch._dynamo.utils import counters
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)

from view_replay_testing import as_tuple, CompileTestCase, fallback_counts, PATCHED

NUM_EXPERTS = 4


def split_input(x, counts):
    return x.split(counts.tolist())


def split_intermediate(x, counts):
    return (x * 2).split(counts.tolist())


def split_one_piece(x, counts):
    # u0 from the piece's offset, u1 from its size, u2 from a symbol output
    return x.split(counts.tolist())[1]


def moe_sorted_tokens(x, expert):
    # tokens sorted by expert (an intermediate), split by the experts' counts
    counts = (expert[:, None] == torch.arange(NUM_EXPERTS)).sum(0)
    return x[expert.argsort()].split(counts.tolist())


def moe_input(x, expert):
    counts = (expert[:, None] == torch.arange(NUM_EXPERTS)).sum(0)
    return x.split(counts.tolist())


def head(x, t):
    return x[: t.item()]


def narrow_item(x, t):
    return x.narrow(0, t.item(), 2)


def slice_range(x, t):
    a, b = t.tolist()
    return x[a:b]


def head_transposed(x, t):
    return x[: t.item()].t()


def _two_items(x, t):
    a, b = t.tolist()
    torch._check(a >= 0)
    torch._check(b >= 0)
    torch._check(a + b + 2 <= x.shape[0])
    return a, b


def narrow_two_symbols(x, t):
    # The narrow's start is u0 + u1: no value is an affine function of one symbol; the
    # graph returns the start itself (Note [Symbol outputs]).
    a, b = _two_items(x, t)
    return x.narrow(0, a + b, 2), x[a:]


def slice_sum_end(x, t):
    a, b = _two_items(x, t)
    y = x * 2
    return y[a : a + b], y[a + b :]


def narrow_product(x, t):
    a, b = _two_items(x, t)
    return x.narrow(0, a * b, 2).t()


# name -> (fn, the second argument of each of the two calls, stock's first node)
CASES: dict[str, tuple[Callable[..., Any], tuple[list[int] | int, list[int] | int], str]] = {
    "split_input_unsorted_counts": (split_input, ([5, 1, 4], [2, 2, 6]), "CompiledFunctionBackward"),
    "split_input_sorted_counts": (split_input, ([2, 3, 5], [1, 3, 6]), "CompiledFunctionBackward"),
    "split_intermediate": (split_intermediate, ([3, 3, 4], [4, 0, 6]), "CompiledFunctionBackward"),
    "split_one_piece": (split_one_piece, ([3, 3, 4], [1, 8, 1]), "CompiledFunctionBackward"),
    "moe_sorted_tokens": (
        moe_sorted_tokens,
        ([2, 0, 1, 3, 0, 2, 2, 1, 0, 3], [1, 1, 1, 0, 3, 3, 3, 3, 0, 0]),
        "CompiledFunctionBackward",
    ),
    "moe_input": (moe_input, ([2, 0, 1, 3, 0, 2, 2, 1, 0, 3], [0, 0, 0, 0, 0, 0, 1, 1, 1, 1]), "CompiledFunctionBackward"),
    "head": (head, (4, 7), "AsStridedBackward0"),
    "narrow_item": (narrow_item, (4, 1), "AsStridedBackward0"),
    "slice_range": (slice_range, ([2, 7], [0, 9]), "AsStridedBackward0"),
    "head_transposed": (head_transposed, (6, 2), "AsStridedBackward0"),
    "narrow_two_symbols": (narrow_two_symbols, ([1, 2], [0, 5]), "AsStridedBackward0"),
    "slice_sum_end": (slice_sum_end, ([1, 2], [3, 0]), "SliceBackward0"),
    "narrow_product": (narrow_product, ([2, 3], [0, 5]), "AsStridedBackward0"),
}
INDUCTOR_CASES = (
    "split_input_unsorted_counts", "split_intermediate", "moe_sorted_tokens", "head", "narrow_item", "slice_range",
    "narrow_two_symbols",
)


def _first_node(t: torch.Tensor) -> str:
    return type(t.grad_fn).__name__


class TestSymbolBinding(CompileTestCase):
    def _check(self, name: str, backend: str, dynamic: bool) -> None:
        fn, (first, second), stock_node = CASES[name]
        compiled = torch.compile(fn, backend=backend, fullgraph=True, dynamic=dynamic)
        for call, arg in enumerate((first, second)):
            with self.subTest(call=call):
                x = torch.randn(10, 3, requires_grad=True)
                x_eager = x.detach().clone().requires_grad_()
                with torch._dynamo.config.patch(capture_scalar_outputs=True):
                    outs = as_tuple(compiled(x, torch.tensor(arg)))
                expected = as_tuple(fn(x_eager, torch.tensor(arg)))
                self.assertEqual(len(outs), len(expected))
                for out, ref in zip(outs, expected):
                    self.assertEqual(out, ref)
                    self.assertEqual(out.stride(), ref.stride())
                    self.assertEqual(out.storage_offset(), ref.storage_offset())
                    if PATCHED:  # stock hides the split pieces' aliasing (see the nodes below)
                        self.assertIs(out._base is None, ref._base is None)
                grads = [torch.randn_like(ref) for ref in expected]
                torch.autograd.backward(outs, grads)
                torch.autograd.backward(expected, grads)
                self.assertEqual(x.grad, x_eager.grad)
                nodes = [_first_node(o) for o in outs]
                if PATCHED:
                    self.assertEqual(nodes, [_first_node(r) for r in expected])
                    self.assertEqual(fallback_counts(), {})
                else:
                    self.assertEqual(nodes, [stock_node] * len(outs))
        self.assertEqual(counters["stats"]["unique_graphs"], 1)

    @parametrize("dynamic", [False, True])
    @parametrize("name", list(CASES))
    def test_aot_eager(self, name: str, dynamic: bool) -> None:
        self._check(name, "aot_eager", dynamic)

    @parametrize("dynamic", [False, True])
    @parametrize("name", INDUCTOR_CASES)
    def test_inductor(self, name: str, dynamic: bool) -> None:
        self._check(name, "inductor", dynamic)

    def test_no_grad_inference_graph(self) -> None:
        # The inference graph (no joint trace) returns the symbol outputs too.
        for name in ("split_one_piece", "head", "slice_range"):
            fn, (arg, _), _ = CASES[name]
            with self.subTest(name=name):
                torch._dynamo.reset()
                counters.clear()
                x = torch.randn(10, 3)
                with torch._dynamo.config.patch(capture_scalar_outputs=True):
                    out = torch.compile(fn, backend="aot_eager", fullgraph=True)(x, torch.tensor(arg))
                ref = fn(x, torch.tensor(arg))
                self.assertEqual(out, ref)
                self.assertEqual((out.stride(), out.storage_offset()), (ref.stride(), ref.storage_offset()))
                self.assertIs(out._base, x)
                if PATCHED:
                    self.assertEqual(fallback_counts(), {})


WARM_CACHE_SCRIPT = textwrap.dedent(
    """
    import json, sys, torch
    from torch._dynamo.utils import counters
    torch._functorch.config.enable_autograd_cache = True
    torch._dynamo.config.capture_scalar_outputs = True
    def split_items(x, counts):
        # .tolist() would make the cache bypass the graph (getitem of a list), on stock too
        return x.split([counts[0].item(), counts[1].item(), counts[2].item()])[1]
    def head(x, t):
        return x[: t.item()]
    def narrow_item(x, t):
        return x.narrow(0, t.item(), 2)
    fn = {"split_items": split_items, "head": head, "narrow_item": narrow_item}[sys.argv[1]]
    arg = torch.tensor(json.loads(sys.argv[2]))
    x = torch.randn(10, 3, requires_grad=True)
    x_eager = x.detach().clone().requires_grad_()
    out = torch.compile(fn, backend="inductor", dynamic=True, fullgraph=True)(x, arg)
    ref = fn(x_eager, arg)
    out.sum().backward()
    ref.sum().backward()
    print("RESULT " + json.dumps({
        "grad_fn": type(out.grad_fn).__name__,
        "ok": torch.equal(out, ref) and out.stride() == ref.stride()
        and out.storage_offset() == ref.storage_offset() and torch.equal(x.grad, x_eager.grad),
        "hit": counters["aot_autograd"]["autograd_cache_hit"],
        "saved": counters["aot_autograd"]["autograd_cache_saved"],
        "fallbacks": dict(counters["view_replay_fallback"]),
    }))
    """
)


class TestSymbolOutputsWarmCache(TestCase):
    def _run(self, cache_dir: str, name: str, arg: object) -> dict:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache_dir)
        proc = subprocess.run(
            [sys.executable, "-c", WARM_CACHE_SCRIPT, name, json.dumps(arg)],
            env=env, capture_output=True, text=True, timeout=600,
        )
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))
        return json.loads(line[len("RESULT "):])

    @parametrize("name", ["split_items", "head", "narrow_item"])
    def test_second_process_hits_cache_and_replays(self, name: str) -> None:
        case = "split_one_piece" if name == "split_items" else name
        _, (first, second), stock_node = CASES[case]
        with tempfile.TemporaryDirectory() as cache_dir:
            cold = self._run(cache_dir, name, first)
            warm = self._run(cache_dir, name, second)
        self.assertEqual((cold["hit"], cold["saved"]), (0, 1))
        self.assertEqual(warm["hit"], 1)
        for run in (cold, warm):
            self.assertTrue(run["ok"])
            if PATCHED:
                self.assertEqual(run["grad_fn"], "SplitWithSizesBackward0" if name == "split_items" else "SliceBackward0")
                self.assertEqual(run["fallbacks"], {})
            else:
                self.assertEqual(run["grad_fn"], stock_node)


instantiate_parametrized_tests(TestSymbolBinding)
instantiate_parametrized_tests(TestSymbolOutputsWarmCache)

if __name__ == "__main__":
    run_tests()
