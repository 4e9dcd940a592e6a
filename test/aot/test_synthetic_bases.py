"""Aliases of intermediates next to synthetic-base inputs (patch synthetic-base-indices), stock vs patched.

An input mutated while another input is a view of it makes AOTAutograd merge the two into a
synthetic base. 2.13's create_synthetic_base_metadata() then remapped the base_idx of every
aliased output through the map of the inputs, also for outputs aliasing an intermediate, whose
base_idx indexes the forward's outputs: the output was regenerated off the wrong tensor. Stock
raises; the previous patched wheel fell back to as_strided() on that tensor, with the right
values but the output's gradient sent to the wrong tensor (found by the fuzzer).
"""

from __future__ import annotations

import torch
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
)

from view_replay_testing import CompileTestCase, fallback_counts, PATCHED


def program(x, a, w):
    y = w.unsqueeze(0).expand(2, *w.shape).flatten(0, 1)  # a copy: y is an intermediate
    v = y[y.shape[0] - 1]  # an alias of the intermediate y
    torch.ops.aten.alias(x)
    x.add_(1)  # x mutated while a, an input, is a view of x: a synthetic base
    torch.ops.aten.alias(a)  # (without these two unused aliases the indices happen to agree)
    return v, y


def make_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    x = torch.randn(1, 2)
    a = x.unsqueeze(0).expand(2, *x.shape)
    w = torch.randn(2, 1, requires_grad=True)
    return x, a, w


class TestSyntheticBaseIndices(CompileTestCase):
    @parametrize("dynamic", [False, True])
    def test_alias_of_intermediate_next_to_synthetic_base(self, dynamic: bool) -> None:
        compiled = torch.compile(program, backend="aot_eager", dynamic=dynamic)
        eager_in, compiled_in = make_inputs(), make_inputs()
        ref = program(*eager_in)
        if not PATCHED:
            # Stock regenerates v off the wrong tensor: its ViewMetas do not fit it (static:
            # "shape '[4, 1]' is invalid for input of size 1"), or the index is out of range.
            with self.assertRaises(IndexError if dynamic else RuntimeError):
                compiled(*compiled_in)
            return
        out = compiled(*compiled_in)
        for o, r in zip(out, ref):
            self.assertEqual(o, r)
            self.assertEqual(o.stride(), r.stride())
            self.assertEqual(o.storage_offset(), r.storage_offset())
        self.assertEqual(compiled_in[0], eager_in[0])
        (ref[0].sum() + 2 * ref[1].sum()).backward()
        (out[0].sum() + 2 * out[1].sum()).backward()
        # v's gradient reaches w through y's storage: [4, 5], not [4, 4].
        self.assertEqual(compiled_in[2].grad, eager_in[2].grad)
        if PATCHED:
            self.assertEqual(type(out[0].grad_fn).__name__, "SelectBackward0")
            # The synthetic base rebuilds the merged inputs in the graph, not a fallback (Note
            # [Outputs aliasing inputs merged into a synthetic base]); v replays its view chain.
            self.assertEqual(fallback_counts(), {})

    @parametrize("requires_grad", [False, True])
    def test_view_of_an_output_next_to_synthetic_base(self, requires_grad: bool) -> None:
        # Upstream's test_synthetic_base_with_no_grad_alias_of_output, with and without grad: the
        # base_idx of d.view(-1) indexes the outputs (its base is the user output d), 3 here,
        # beyond the two inputs. Stock 2.14.1 and 2.13.0 raise IndexError with grad (in
        # create_synthetic_base_metadata); the patched wheel raised it without grad too, once it
        # regenerated d.view(-1) off d (patch views-of-outputs-without-grad).
        def fn(x, y):
            y.mul_(2)  # x and y overlap: merged into a synthetic base
            a, b, c = x + 1, x + 2, x + 3
            d = x + 4 + y
            return a, b, c, d, d.view(-1)

        def inputs():
            base = torch.ones(8, requires_grad=requires_grad).clone()
            return base, (base[0:6], base[2:8])

        (eager_base, eager_in), (base, compiled_in) = inputs(), inputs()
        compiled = torch.compile(fn, backend="aot_eager")
        if requires_grad and not PATCHED:
            with self.assertRaisesRegex(Exception, "list index out of range"):
                compiled(*compiled_in)
            return
        out, ref = compiled(*compiled_in), fn(*eager_in)
        self.assertEqual(out, ref)
        self.assertEqual(base, eager_base)
        self.assertIs(out[4]._base, out[3])
        self.assertEqual(ref[4]._base is ref[3], True)
        if requires_grad:
            sum(o.sum() for o in out).backward()
            sum(o.sum() for o in ref).backward()
            self.assertEqual(compiled_in[0].grad, eager_in[0].grad)


class TestRemapPlanInputs(CompileTestCase):
    def test_plan_reads_the_remapped_input(self) -> None:
        if not PATCHED:
            self.skipTest("remap_view_replay_inputs is part of the view_replay overlay")
        from torch._functorch._aot_autograd.view_replay import (
            FallbackReason,
            RegenerationCall,
            remap_view_replay_inputs,
            ViewReplay,
        )
        from torch._functorch._aot_autograd.view_replay.codegen import compiled_plan
        from torch._functorch._aot_autograd.view_replay.spec import (
            Const,
            Expr,
            Fallback,
            MetadataField,
            ReplayPlan,
            RuntimeSource,
            Seq,
            SymbolBinding,
            SymbolLocator,
            ViewMetaStep,
        )

        # x[: n] with n = the value of input 2 (a SymInt input).
        irm = Const("_C._functionalization.InverseReturnMode.ViewOrScatterInverse")
        step = ViewMetaStep("slice_Tensor_ViewMeta", Seq((False, True, irm, 0, 0, Expr("n"), 1)))
        locator = SymbolLocator(RuntimeSource.INPUT, MetadataField.VALUE, index=2)
        view_replay = ViewReplay(ReplayPlan((step,), (SymbolBinding("n", locator),)))

        moved = remap_view_replay_inputs(view_replay, {2: 0}.get)
        self.assertEqual(view_replay.route.symbols[0].locator.index, 2)  # the original is left alone
        self.assertEqual(moved.route.symbols[0].locator.index, 0)
        x = torch.arange(6)
        self.assertEqual(compiled_plan(moved.route)(x, None, RegenerationCall({0: 4}, ())), x[:4])
        self.assertIs(remap_view_replay_inputs(view_replay, {2: 2}.get), view_replay)
        merged = remap_view_replay_inputs(view_replay, lambda i: None).route
        self.assertIsInstance(merged, Fallback)
        self.assertEqual(merged.reason, FallbackReason.UNBOUND_SYMBOL)
        self.assertIn("synthetic base", merged.detail)


instantiate_parametrized_tests(TestSyntheticBaseIndices)

if __name__ == "__main__":
    run_tests()
