# Owner(s): ["oncall: pt2"]
"""
Tests for binding the free symbols of a view chain to runtime values
(view_replay/symbols.py): each symbol is read off the base, an input or the
graph's output for the alias, as the symbol itself or an affine function of it.
"""

import types

import torch
from torch._functorch._aot_autograd.view_replay.scope import GraphScope
from torch._functorch._aot_autograd.view_replay.spec import MetadataField, RuntimeSource
from torch._functorch._aot_autograd.view_replay.symbols import locate_symbols
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

    def _locate(self, symbols, target, inputs=(), base_input=None):
        """Locate ``symbols`` for the alias ``target`` of input ``base_input`` (None: of an
        intermediate), among the graph's ``inputs``."""
        unmutated = types.SimpleNamespace(mutates_data=False, mutates_metadata=False)
        graph = GraphScope.of(list(inputs), [], [unmutated] * len(inputs))
        return locate_symbols(symbols, graph.output(target, base_input))

    def _where(self, locator):
        return (locator.source, locator.field, locator.index, locator.dim, locator.scale, locator.shift)

    def test_input_size(self):
        found, unbound = self._locate({self.s0}, self._fake(3), inputs=[7, self.x])
        self.assertEqual(unbound, set())
        self.assertEqual(self._where(found[self.s0]), (RuntimeSource.INPUT, MetadataField.SIZE, 1, 0, 1, 0))

    def test_base_is_tried_first(self):
        found, _ = self._locate({self.s1}, self._fake(3), inputs=[self.x], base_input=0)
        self.assertEqual(self._where(found[self.s1]), (RuntimeSource.BASE, MetadataField.SIZE, None, 1, 1, 0))

    def test_affine_value_of_the_target(self):
        target = self._fake(2 * self.x.shape[0] + 1)
        found, unbound = self._locate({self.s0}, target)
        self.assertEqual(unbound, set())
        # s0 = (target.size(0) - 1) // 2
        self.assertEqual(self._where(found[self.s0]), (RuntimeSource.TARGET, MetadataField.SIZE, None, 0, 2, 1))

    def test_the_symbol_itself_is_preferred(self):
        target = self._fake(2 * self.x.shape[0] + 1, self.x.shape[0])
        found, _ = self._locate({self.s0}, target)
        self.assertEqual(self._where(found[self.s0]), (RuntimeSource.TARGET, MetadataField.SIZE, None, 1, 1, 0))

    def test_symbol_without_a_source_is_unbound(self):
        found, unbound = self._locate({self.s0, self.s1}, self._fake(self.x.shape[0]))
        self.assertEqual(set(found), {self.s0})
        self.assertEqual(unbound, {self.s1})


if __name__ == "__main__":
    run_tests()
