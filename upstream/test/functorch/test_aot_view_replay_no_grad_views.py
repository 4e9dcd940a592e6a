# Owner(s): ["oncall: pt2"]
"""
Tests for outputs that are views taken under torch.no_grad() inside the
compiled region (Note [Views taken under no_grad] in
view_replay/autograd_chain.py): eager returns a leaf without grad_fn that
requires grad and views its base; views taken off it with grad mode on have no
edge towards the base. Regenerated in the caller's grad mode, they got a
grad_fn and sent a gradient into their base. A no_grad view inside a
subclass output that is no view (DTensor.from_local's) is not counted as an
intermediate base of the dense graph (Note [Subclass outputs aliasing an
intermediate]).
"""

import torch
import torch._dynamo
import torch.distributed as dist
from torch.distributed.tensor import DTensor, init_device_mesh, Replicate
from torch._functorch._aot_autograd import view_replay
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)
from torch.testing._internal.distributed.fake_pg import FakeStore


def no_grad_view(x):
    with torch.no_grad():
        y = x[1:]
    return y, x.t()


def grad_mode_view_of_a_no_grad_view(x):
    z = x * 2
    with torch.no_grad():
        a = z[1:]
    return a.t(), z[0]


class TestNoGradViews(TestCase):
    def setUp(self):
        super().setUp()
        torch._dynamo.reset()

    def _run(self, fn, x):
        x = x.detach().requires_grad_()
        outs = fn(x)
        sum(o.sum() * (k + 1) for k, o in enumerate(outs)).backward()
        return outs, x.grad

    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    def test_no_grad_view_is_a_leaf_view(self, dynamic, backend):
        x = torch.randn(4, 3)
        compiled = torch.compile(no_grad_view, backend=backend, dynamic=dynamic)
        with view_replay.config.patch(strict=True):
            (y, _), grad = self._run(compiled, x)
        (ref, _), ref_grad = self._run(no_grad_view, x)
        self.assertEqual(grad, ref_grad)
        self.assertTrue(y.is_leaf and y.requires_grad and y.grad_fn is None and y._is_view())
        with self.assertRaisesRegex(RuntimeError, "no_grad mode"):
            y.add_(1)

    @parametrize("dynamic", [False, True])
    def test_grad_mode_view_of_a_no_grad_view(self, dynamic):
        fn = grad_mode_view_of_a_no_grad_view
        x = torch.randn(4, 3)
        compiled = torch.compile(fn, backend="aot_eager", dynamic=dynamic)
        with view_replay.config.patch(strict=True):
            (out, _), grad = self._run(compiled, x)
        (ref, _), ref_grad = self._run(fn, x)
        self.assertEqual(grad, ref_grad)
        self.assertEqual(out.grad_fn.name(), "TBackward0")
        self.assertEqual(out.grad_fn.next_functions, ref.grad_fn.next_functions)


class TestNoGradViewsInsideSubclassOutputs(TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
        cls.mesh = init_device_mesh("cpu", (2,))

    @classmethod
    def tearDownClass(cls):
        dist.destroy_process_group()
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        torch._dynamo.reset()

    def _from_local_of_an_intermediate(self, x, w):
        tmp = (x * w).to_local() + 2
        return DTensor.from_local(tmp, self.mesh, [Replicate()], run_check=False)

    @parametrize("grad_input", [0, 1])
    @parametrize("dynamic", [False, True])
    def test_from_local_of_an_intermediate(self, dynamic, grad_input):
        values = torch.randn(4, 3), torch.randn(4, 3)

        def inputs():
            ts = [DTensor.from_local(v.clone(), self.mesh, [Replicate()], run_check=False) for v in values]
            ts[grad_input].requires_grad_()
            return ts

        fn = self._from_local_of_an_intermediate
        compiled_inputs, eager_inputs = inputs(), inputs()
        out = torch.compile(fn, backend="aot_eager", dynamic=dynamic, fullgraph=True)(*compiled_inputs)
        ref = fn(*eager_inputs)
        out.to_local().sum().backward()
        ref.to_local().sum().backward()
        self.assertEqual(out.to_local(), ref.to_local())
        self.assertFalse(out._is_view())
        self.assertEqual(compiled_inputs[grad_input].grad.to_local(), eager_inputs[grad_input].grad.to_local())


instantiate_parametrized_tests(TestNoGradViews)
instantiate_parametrized_tests(TestNoGradViewsInsideSubclassOutputs)

if __name__ == "__main__":
    run_tests()
