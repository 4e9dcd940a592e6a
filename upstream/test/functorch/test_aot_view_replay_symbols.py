# Owner(s): ["oncall: pt2"]
"""
Tests for binding the free symbols of a view chain to runtime values
(view_replay/symbols.py): each symbol is read off the base, an input or the
graph's output for the alias, as the symbol itself or an affine function of it.
"""

import torch
from torch._functorch._aot_autograd.view_replay.symbols import (
    locate_symbols,
    MetadataField,
    RuntimeSource,
)
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext
from torch.testing._internal.common_utils import run_tests, TestCase


class TestLocateSymbols(TestCase):
    def setUp(self):
        super().setUp()
        self.mode = FakeTensorMode(shape_env=ShapeEnv())
        context = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.DYNAMIC])
        self.x = self.mode.from_tensor(torch.randn(6, 4), symbolic_context=context)
        self.s0, self.s1 = (size.node.expr for size in self.x.shape)

    def _fake(self, *sizes):
        with self.mode:
            return torch.empty(*sizes)

    def test_input_size(self):
        found, unbound = locate_symbols({self.s0}, base=None, target=self._fake(3), inputs=[7, self.x])
        self.assertEqual(unbound, set())
        locator = found[self.s0]
        self.assertEqual((locator.source, locator.field, locator.index, locator.dim),
                         (RuntimeSource.INPUT, MetadataField.SIZE, 1, 0))
        self.assertEqual(locator.python_expr(), "inputs[1].size(0)")

    def test_base_is_tried_first(self):
        found, _ = locate_symbols({self.s1}, base=self.x, target=self._fake(3), inputs=[self.x])
        self.assertEqual(found[self.s1].python_expr(), "base.size(1)")

    def test_affine_value_of_the_target(self):
        target = self._fake(2 * self.x.shape[0] + 1)
        found, unbound = locate_symbols({self.s0}, base=None, target=target, inputs=[])
        self.assertEqual(unbound, set())
        self.assertEqual(found[self.s0].python_expr(), "((target.size(0) - (1)) // 2)")
        self.assertEqual(eval(found[self.s0].python_expr(), {"target": torch.empty(13)}), 6)

    def test_the_symbol_itself_is_preferred(self):
        target = self._fake(2 * self.x.shape[0] + 1, self.x.shape[0])
        found, _ = locate_symbols({self.s0}, base=None, target=target, inputs=[])
        self.assertEqual(found[self.s0].python_expr(), "target.size(1)")

    def test_symbol_without_a_source_is_unbound(self):
        found, unbound = locate_symbols({self.s0, self.s1}, base=None, target=self._fake(self.x.shape[0]), inputs=[])
        self.assertEqual(set(found), {self.s0})
        self.assertEqual(unbound, {self.s1})


if __name__ == "__main__":
    run_tests()
