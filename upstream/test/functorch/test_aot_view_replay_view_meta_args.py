# Owner(s): ["oncall: pt2"]
"""
Tests for reading ViewMeta arguments (view_replay/view_meta_args.py, Note
[Reading ViewMeta arguments]): the classes whose as_tuple() would read
references are known by name, and _unsafe_view's size is read off a result.
"""

import torch
from torch._C import _functionalization
from torch._functorch._aot_autograd.view_replay.view_meta_args import (
    arguments_readable,
    unreadable_reason,
    unreplayable_reason,
    UnreadableViewMetaArguments,
    view_meta_arguments,
    view_op_of,
)
from torch.testing._internal.common_utils import run_tests, TestCase


def _view_metas(fn, x):
    """The ViewMetas functionalization records for ``fn(x)``."""
    base = torch._to_functional_tensor(x)
    torch._enable_functionalization(reapply_views=True)
    try:
        out = fn(base)
    finally:
        torch._disable_functionalization()
    return _functionalization.get_view_meta_sequence(out)


class TestViewMetaArguments(TestCase):
    def test_view_op_of(self):
        self.assertIs(view_op_of("slice_Tensor_ViewMeta"), torch.ops.aten.slice.Tensor)
        self.assertIs(view_op_of("squeeze__dim_ViewMeta"), torch.ops.aten.squeeze_.dim)
        self.assertIs(view_op_of("t_ViewMeta"), torch.ops.aten.t.default)
        self.assertIsNone(view_op_of("no_such_op_ViewMeta"))

    def test_reasons(self):
        self.assertIsNone(unreadable_reason("slice_Tensor_ViewMeta"))
        self.assertIn("destroyed temporary", unreadable_reason("_unsafe_view_ViewMeta"))
        self.assertIsNone(unreplayable_reason("_unsafe_view_ViewMeta"))
        self.assertIn("names no aten op", unreplayable_reason("no_such_op_ViewMeta"))

    def test_readable_arguments_are_as_tuple(self):
        (vm,) = _view_metas(lambda t: t[1:5:2], torch.randn(6, 4))
        self.assertTrue(arguments_readable(vm))
        self.assertEqual(view_meta_arguments(vm, None), vm.as_tuple())
        self.assertEqual(view_meta_arguments(vm, None)[3:], (0, 1, 5, 2))

    def test_unsafe_view_size_is_read_off_the_result(self):
        (vm,) = _view_metas(lambda t: torch.ops.aten._unsafe_view(t, [8, 3]), torch.randn(6, 4))
        self.assertEqual(type(vm).__name__, "_unsafe_view_ViewMeta")
        self.assertFalse(arguments_readable(vm))
        with self.assertRaisesRegex(UnreadableViewMetaArguments, "destroyed temporary"):
            view_meta_arguments(vm, None)
        self.assertEqual(view_meta_arguments(vm, torch.empty(8, 3)), (False, [8, 3]))


if __name__ == "__main__":
    run_tests()
