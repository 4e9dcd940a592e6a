# Owner(s): ["oncall: pt2"]
"""
Tests for replay plans (view_replay/spec.py, codegen.py): a plan is data (steps
and the locators of its symbols), compiled once per plan and process into a
function that reads its symbols off the runtime values, and its result is
checked against the graph's output on its whole layout (Check.LAYOUT), except
for an alias of an input the graph mutates (Check.SIZE).
"""

import pickle

import torch
import torch._dynamo
from torch._dynamo.utils import counters
from torch._functorch._aot_autograd import view_replay
from torch._functorch._aot_autograd.view_replay.codegen import compiled_plan
from torch._functorch._aot_autograd.view_replay.spec import (
    Const,
    Expr,
    MetadataField,
    ReplayPlan,
    RuntimeSource,
    Seq,
    SymbolBinding,
    SymbolLocator,
    ViewMetaStep,
    ViewReplay,
)
from torch.testing._internal.common_utils import run_tests, TestCase


IRM = Const("_C._functionalization.InverseReturnMode.ViewOrScatterInverse")


def slice_plan(start):
    """x[start : size(0) // 2] of the base, its end read off the base's size."""
    step = ViewMetaStep("slice_Tensor_ViewMeta", Seq((False, True, IRM, 0, start, Expr("s0 // 2"), 1)))
    locator = SymbolLocator(RuntimeSource.BASE, MetadataField.SIZE, dim=0)
    return ReplayPlan((step,), (SymbolBinding("s0", locator),))


class TestReplayPlans(TestCase):
    def setUp(self):
        super().setUp()
        torch._dynamo.reset()
        counters.clear()

    def test_plan_compiles_once_and_replays(self):
        plan = slice_plan(0)
        self.assertEqual(pickle.loads(pickle.dumps(plan)), plan)
        fn = compiled_plan(plan)
        self.assertIs(compiled_plan(slice_plan(0)), fn)  # one function per plan and process
        for n in (6, 10):
            x = torch.randn(n, 3, requires_grad=True)
            out = fn(x, None, view_replay.RegenerationCall({}, ()))
            self.assertEqual(out, x[: n // 2])
            self.assertEqual(out.grad_fn.name(), "SliceBackward0")

    def test_a_plan_is_checked_on_its_layout(self):
        x = torch.randn(6, 3, requires_grad=True)
        # The plan replays x[1:3]; the graph's output is x[0:2]: same size, other offset.
        regenerator = view_replay.Regenerator(ViewReplay(slice_plan(1)), None, True)
        with view_replay.config.patch(strict=True):
            with self.assertRaisesRegex(view_replay.ViewReplayFallbackError, "METADATA_MISMATCH"):
                regenerator(x, x[0:2].detach(), view_replay.RegenerationCall({}, ()))

    def test_alias_of_a_mutated_input_keeps_eager_layout(self):
        def fn(a):
            a.mul_(2)
            return a[1:]

        x, x_ref = torch.randn(2, 8), torch.randn(2, 8)
        x_ref.copy_(x)
        with view_replay.config.patch(strict=True):
            out = torch.compile(fn, backend="aot_eager")(x.t()[1:])
        ref = fn(x_ref.t()[1:])
        self.assertEqual((out.storage_offset(), out.stride()), (ref.storage_offset(), ref.stride()))
        self.assertEqual(out, ref)


if __name__ == "__main__":
    run_tests()
