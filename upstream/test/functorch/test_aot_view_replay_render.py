# Owner(s): ["oncall: pt2"]
"""
Tests for rendering view-op arguments as plan data (view_replay/render.py):
literals, SymInt expressions over their free symbols, constants resolved under
torch, and the compile-time check of the rendered arguments against the hints.
"""

import torch
from torch._C import _functionalization
from torch._functorch._aot_autograd.view_replay.render import (
    ArgumentRenderer,
    check_against_hints,
    evaluate,
    UnrenderableArgument,
)
from torch._functorch._aot_autograd.view_replay.spec import Const, Expr, Seq
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext
from torch.testing._internal.common_utils import run_tests, TestCase


class TestArgumentRenderer(TestCase):
    def setUp(self):
        super().setUp()
        context = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC])
        x = FakeTensorMode(shape_env=ShapeEnv()).from_tensor(torch.randn(6), symbolic_context=context)
        self.n = x.shape[0]

    def test_literals_and_constants(self):
        renderer = ArgumentRenderer()
        mode = _functionalization.InverseReturnMode.NeverView
        rendered = renderer.render_args((False, None, 3, [1, 2], (), torch.float16, mode))
        self.assertEqual(
            rendered,
            Seq((False, None, 3, Seq((1, 2), is_list=True), Seq(()), Const("float16"),
                 Const("_C._functionalization.InverseReturnMode.NeverView"))),
        )
        self.assertEqual(renderer.symbols, set())
        self.assertEqual(evaluate(rendered, {}), (False, None, 3, (1, 2), (), torch.float16, mode))

    def test_symint_renders_its_expression(self):
        renderer = ArgumentRenderer()
        rendered = renderer.render_args((0, self.n // 2, 2 * self.n + 1))
        self.assertEqual(renderer.symbols, {self.n.node.expr})
        self.assertEqual([type(a) for a in rendered.items], [int, Expr, Expr])
        self.assertEqual(evaluate(rendered, {str(self.n.node.expr): 7}), (0, 3, 15))
        self.assertIsNone(check_against_hints(renderer))

    def test_check_against_hints_catches_a_wrong_rendering(self):
        renderer = ArgumentRenderer()
        renderer.render_args((self.n,))
        renderer.rendered[0] = (Seq((7,)), renderer.rendered[0][1])
        problem = check_against_hints(renderer)
        self.assertIn("evaluate to (7,), expected (6,)", problem)

    def test_unsupported_argument(self):
        with self.assertRaisesRegex(UnrenderableArgument, "unsupported view argument"):
            ArgumentRenderer().render_args((torch.ones(1),))


if __name__ == "__main__":
    run_tests()
