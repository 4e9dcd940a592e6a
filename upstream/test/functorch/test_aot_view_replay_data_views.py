# Owner(s): ["oncall: pt2"]
"""
Tests that outputs viewed off ``.data`` come back with eager's version counters: ``x.data``
has a counter of its own where ``x.detach()`` shares ``x``'s, so an in-place change of
``x.data[1:]`` does not make a backward that saved ``x`` raise (Note [Views through .data]).
"""

import torch
import torch._dynamo
from torch._functorch._aot_autograd.view_replay import config as view_replay_config
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)


PROGRAMS = {
    "data_slice": lambda x: (x.sin(), x.data[1:]),
    "slice_data": lambda x: (x.sin(), x[1:].data),
    "data": lambda x: (x.sin(), x.data),
    "detach_slice": lambda x: (x.sin(), x.detach()[1:]),
    "data_data": lambda x: (x.sin(), x.data[1:].data),
    "detach_data": lambda x: (x.sin(), x.detach().data[1:]),
    "data_detach": lambda x: (x.sin(), x.data.detach()[1:]),
    "one_data_two_views": lambda x: (lambda d: (x.sin(), d[1:], d[:2]))(x.data),
    "two_datas": lambda x: (x.sin(), x.data[1:], x.data[:2]),
    "intermediate_data": lambda x: (lambda y: (y, y.data[1:]))(x * 2),
    "intermediate_detach": lambda x: (lambda y: (y, y.detach()[1:]))(x * 2),
    "saved_intermediate_data": lambda x: (lambda y: (y.sin(), y.data[1:]))(x * 2),
    "saved_intermediate_detach": lambda x: (lambda y: (y.sin(), y.detach()[1:]))(x * 2),
    "aliased_intermediate_data": lambda x: (lambda y: (y.sin(), y[1:], y.data[1:]))(x * 2),
}


def _base_class(t, inputs, outs):
    if t._base is None:
        return None
    if any(t._base is i for i in inputs):
        return "input"
    for i, o in enumerate(outs):
        if t._base is o:
            return f"output{i}"
    return f"hidden(view={t._base._is_view()})"


def _observe(fn, x, mutated, through):
    outs = fn(x)
    meta = [(o._is_view(), _base_class(o, [x], outs), o.requires_grad) for o in outs]
    shared = [
        (i, j) for i in range(len(outs)) for j in range(i)
        if outs[i]._base is not None and outs[i]._base is outs[j]._base
    ]
    values = [o.detach().clone() for o in outs]
    try:
        outs[mutated].add_(1)
        other = outs[through]
        (other.sum() if other.requires_grad else (x * other.sum()).sum()).backward()
        result = ("grad", x.grad.clone())
    except RuntimeError as e:
        result = ("error", "modified by an inplace operation" in str(e))
    return meta, shared, values, result


class TestDataViews(TestCase):
    def setUp(self):
        super().setUp()
        self._strict = view_replay_config.strict
        view_replay_config.strict = True

    def tearDown(self):
        view_replay_config.strict = self._strict
        super().tearDown()

    def _check(self, program, backend, dynamic):
        fn = PROGRAMS[program]
        n = len(fn(torch.ones(4, requires_grad=True)))
        for mutated in range(1, n):
            for through in (t for t in range(n) if t != mutated):
                torch._dynamo.reset()
                compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
                expected = _observe(fn, torch.arange(1.0, 5.0, requires_grad=True), mutated, through)
                found = _observe(compiled, torch.arange(1.0, 5.0, requires_grad=True), mutated, through)
                self.assertEqual(found, expected, msg=f"out{mutated}.add_(1), backward through out{through}")

    @parametrize("dynamic", [False, True])
    @parametrize("program", list(PROGRAMS))
    def test_aot_eager(self, program, dynamic):
        self._check(program, "aot_eager", dynamic)

    @parametrize("program", ["data_slice", "one_data_two_views", "saved_intermediate_data"])
    def test_inductor(self, program):
        self._check(program, "inductor", False)

    def test_view_of_a_returned_data_tensor_raises(self):
        def fn(x):
            d = x[1:].data
            return x.sin(), d, d[1:]

        with self.assertRaisesRegex(Exception, "view of a `.data` tensor that is itself returned"):
            torch.compile(fn, backend="aot_eager")(torch.ones(4, requires_grad=True))


instantiate_parametrized_tests(TestDataViews)

if __name__ == "__main__":
    run_tests()
