# Owner(s): ["oncall: pt2"]
"""
Tests for the outer view replay of tensor-subclass outputs: a TwoTensor output
that aliases its input is regenerated with the outer view ops (eager's nodes,
the subclass's own view handling), not with as_strided().
"""

import torch
import torch._dynamo
from torch._dynamo.utils import counters
from torch._functorch._aot_autograd import view_replay
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)
from torch.testing._internal.two_tensor import TwoTensor


INPUT_VIEWS = {
    "view": (lambda x: x.view(-1), "ViewBackward0"),
    "slice_t": (lambda x: x[1:].t(), "TBackward0"),
    "slice_symbolic": (lambda x: x[: x.shape[0] // 2], "SliceBackward0"),
}


class TestSubclassOuterViews(TestCase):
    def setUp(self):
        super().setUp()
        torch._dynamo.reset()
        counters.clear()

    @parametrize("dynamic", [False, True])
    @parametrize("name", sorted(INPUT_VIEWS))
    def test_two_tensor_output_aliasing_input(self, name, dynamic):
        fn, expected_node = INPUT_VIEWS[name]
        x = TwoTensor(torch.randn(6, 4), torch.randn(6, 4)).requires_grad_()
        xe = TwoTensor(x.a.detach().clone(), x.b.detach().clone()).requires_grad_()
        with view_replay.config.patch(strict=True):
            out = torch.compile(fn, backend="aot_eager", dynamic=dynamic)(x)
        ref = fn(xe)
        self.assertEqual(out.grad_fn.name(), expected_node)
        self.assertEqual(out.a, ref.a)
        self.assertEqual(out.b, ref.b)
        self.assertEqual(out.a.stride(), ref.a.stride())
        self.assertEqual(out.a.untyped_storage().data_ptr(), x.a.untyped_storage().data_ptr())
        out.sum().backward()
        ref.sum().backward()
        self.assertEqual(x.grad.a, xe.grad.a)
        self.assertEqual(dict(counters["view_replay_fallback"]), {})


instantiate_parametrized_tests(TestSubclassOuterViews)


if __name__ == "__main__":
    run_tests()
