"""Outputs viewed off ``.data``: eager's ``x.data`` has a version counter of its own.

``x.data`` and ``x.detach()`` are both tensors on ``x``'s storage that autograd does not track
as views; ``x.detach()`` shares ``x``'s version counter, ``x.data`` does not. Functionalization
records both as one ``detach``, and the compiled function regenerated ``x.data[1:]`` (and
``x[1:].data``, and ``y.data[1:]`` of an intermediate ``y`` the backward saves) sharing the
counter of the tensor it was taken off: ``d.add_(1)`` then ``y.sum().backward()`` raised
"modified by an inplace operation" where eager's runs (stock 2.14.1 and 2.13.0, aot_eager and
inductor, static and dynamic). Patched: the detach that was ``.data`` is replayed as ``.data``
(PR data-views, Note [Views through .data]); a view of a ``.data`` tensor that is itself
returned raises at compile time.

Each program is checked for full eager parity (viewreplay_harness.parity): values, layout,
flags, view nodes, base and version-counter classes, backward, and in-place on each output
then backward through each other one.
"""

from __future__ import annotations

import torch
from torch.testing._internal.common_utils import instantiate_parametrized_tests, parametrize, run_tests

from view_replay_testing import CompileTestCase, fallback_counts, PATCHED, stock_213_cache_off, strict_view_replay
from viewreplay_harness.parity import differences


def data_slice(x):
    return x.sin(), x.data[1:]


def slice_data(x):
    return x.sin(), x[1:].data


def detach_slice(x):
    # x.detach() shares x's counter: eager's backward raises after d.add_(1), as compiled does.
    return x.sin(), x.detach()[1:]


def one_data_two_views(x):
    d = x.data
    return x.sin(), d[1:], d[:2]


def saved_intermediate_data(x):
    y = x * 2
    return y.sin(), y.data[1:]


def aliased_intermediate_data(x):
    y = x * 2
    return y.sin(), y[1:], y.data[1:]


PROGRAMS = {
    "data_slice": data_slice,
    "slice_data": slice_data,
    "detach_slice": detach_slice,
    "one_data_two_views": one_data_two_views,
    "saved_intermediate_data": saved_intermediate_data,
    "aliased_intermediate_data": aliased_intermediate_data,
}


def _inputs():
    x = torch.arange(1.0, 5.0).requires_grad_()
    return [x], [x]


class TestDataViews(CompileTestCase):
    @parametrize("dynamic", [False, True])
    @parametrize("program", list(PROGRAMS))
    def test_parity(self, program: str, dynamic: bool) -> None:
        self._check(program, dynamic, "aot_eager")

    # Inductor: two programs, static (compile time).
    @parametrize("program", ["data_slice", "saved_intermediate_data"])
    def test_parity_inductor(self, program: str) -> None:
        self._check(program, False, "inductor")

    def _check(self, program: str, dynamic: bool, backend: str) -> None:
        fn = PROGRAMS[program]
        compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
        try:
            with strict_view_replay(), stock_213_cache_off(backend):
                found = differences(fn, compiled, _inputs)
        except Exception as e:  # noqa: BLE001 - stock may fail to compile some of them
            self.assertFalse(PATCHED, e)
            return
        if PATCHED or (program == "saved_intermediate_data" and backend == "aot_eager"):
            # Stock aot_eager returns y.data[1:] as the graph's own tensor, a counter of its own; the
            # series' saved-intermediate-aliases change shared it with the saved y until this fix.
            self.assertEqual(found, [])
        else:
            # Stock: the .data views share the counter of the tensor they were taken off (an
            # in-place change then makes the backward raise); detach_slice comes back no view.
            self.assertNotEqual(found, [])
        if PATCHED:
            self.assertEqual(fallback_counts(), {})

    def test_issue_repro(self) -> None:
        x = torch.arange(1.0, 5.0).requires_grad_()
        y, d = torch.compile(data_slice, backend="aot_eager")(x)
        d.add_(1)
        if PATCHED:
            y.sum().backward()  # eager: x.data has a counter of its own
            self.assertEqual(x.grad, x.detach().cos())
        else:
            with self.assertRaisesRegex(RuntimeError, "modified by an inplace operation"):
                y.sum().backward()

    def test_view_of_a_returned_data_tensor(self) -> None:
        def fn(x):
            d = x[1:].data
            return x.sin(), d, d[1:]

        compiled = torch.compile(fn, backend="aot_eager")
        if PATCHED:
            with self.assertRaisesRegex(Exception, "view of a `.data` tensor that is itself returned"):
                compiled(torch.ones(4, requires_grad=True))
        else:
            compiled(torch.ones(4, requires_grad=True))  # stock: d[1:] shares x's counter, not d's


instantiate_parametrized_tests(TestDataViews)

if __name__ == "__main__":
    run_tests()
