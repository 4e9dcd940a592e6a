"""torch >= 2.14: compile_to_python, the lowering behind torch.compiler.precompile.

It writes the runtime wrapper, with every global it references, as a standalone Python module:
each global must be a known helper, importable, or writable as source. The patched wheel's
per-output regenerators were closures, so on 2.14.1 every graph whose output aliases an input
failed ("cannot reference <function make_regenerator.<locals>.regenerate ...> by import").
They are objects that reduce to ``Regenerator(...)`` now (Note [Regenerators as
source] in view_replay/replay.py). Stock writes ``gen_alias_from_base(...)`` calls instead.
Both must load the module and give eager's values, sizes, strides and offsets; a regenerated
output must be a real view of its input. The API does not exist before 2.14 (skipped there).
"""

from __future__ import annotations

import unittest

import torch
import torch._functorch.aot_autograd as aot_autograd
from torch.testing._internal.common_utils import instantiate_parametrized_tests, parametrize, run_tests

from view_replay_testing import CompileTestCase, fallback_counts, PATCHED, strict_view_replay


def alias_input(x):
    return x.view(-1), x * 2


def alias_input_chain(x):
    return x.t()[1:].unsqueeze(0), x + 1


def multi_output(x):
    a, b, c = (x * 2).unbind(0)
    return a, b, c


def unsafe_view(x, w):  # mm + _unsafe_view: planned even without symbols
    y = x @ w
    return y[0], y[1].t()


CASES = {
    "alias_input": (alias_input, lambda: [torch.randn(4, 3)], [0]),
    "alias_input_chain": (alias_input_chain, lambda: [torch.randn(4, 3)], [0]),
    "multi_output": (multi_output, lambda: [torch.randn(3, 2)], []),
    "unsafe_view": (unsafe_view, lambda: [torch.randn(2, 4, 8), torch.randn(8, 8)], []),
}


@unittest.skipUnless(hasattr(aot_autograd, "compile_to_python"), "compile_to_python is new in torch 2.14")
class TestCompileToPython(CompileTestCase):
    @parametrize("name", list(CASES))
    def test_standalone_module_matches_eager(self, name: str) -> None:
        fn, make_args, input_aliases = CASES[name]
        args = make_args()
        with strict_view_replay():
            code, cache = aot_autograd.compile_to_python(torch.fx.symbolic_trace(fn), args)
            outs = aot_autograd.load_from_python(code, cache)(list(args))
        ref = fn(*args)
        self.assertEqual(len(outs), len(ref))
        for out, expected in zip(outs, ref):
            self.assertEqual(out, expected)
            self.assertEqual(out.size(), expected.size())
            self.assertEqual(out.stride(), expected.stride())
            self.assertEqual(out.storage_offset(), expected.storage_offset())
        for index in input_aliases:
            self.assertEqual(outs[index].untyped_storage().data_ptr(), args[0].untyped_storage().data_ptr())
            self.assertTrue(outs[index]._is_view())
        if input_aliases:
            # The module regenerates the aliased outputs through view_replay (patched) or
            # gen_alias_from_base (stock), not through a closure it cannot write out.
            self.assertIn("Regenerator(" if PATCHED else "gen_alias_from_base(", code)
        self.assertEqual(fallback_counts(), {})


instantiate_parametrized_tests(TestCompileToPython)


if __name__ == "__main__":
    run_tests()
