"""Returned tensors whose in-place change eager's backward sees through a tensor it saved.

``v = x * 2; a, b = v.split(2); return b, v, a.sin()``: eager's SinBackward0 saves ``a``, a
view of ``v``, so ``v.mul_(3)`` then backward through the sin raises. The partitioner saves
``cos(a)`` instead, so stock 2.14.1 and 2.13.0 (aot_eager and inductor, static and dynamic)
silently return the gradient of the forward's values; the same where ``v`` is an intermediate
that only views of it leave (``return v[:2], v[2:].sin()``), and for the hidden state of an MLP
(``h = x @ w; return gelu(h).sum(-1), h[:, -1]``). Fuzz --long run 7's finding.
Patched: the forward saves a detached alias of the returned tensor, whose version the backward
checks (PR version-witnesses, Note [Version witnesses]).

Each program is checked for full eager parity (viewreplay_harness.parity): values, layout,
flags, view nodes, base and version-counter classes, backward, and in-place on each output
then backward through each other one.
"""

from __future__ import annotations

import torch
from torch.testing._internal.common_utils import instantiate_parametrized_tests, parametrize, run_tests

from view_replay_testing import CompileTestCase, fallback_counts, PATCHED, stock_213_cache_off, strict_view_replay
from viewreplay_harness.parity import differences


def piece_of_an_output(x):
    v = x * 2
    a, b = v.split(2)
    return b, v, a.sin()


def slice_of_an_intermediate(x):
    v = x * 2
    return v[:2], v[2:].sin()


def view_of_an_intermediate(x):
    v = x * 2
    return v.view(-1), v[2:].sin()


def hidden_state_of_an_mlp(x):
    # GELU saves h; the partitioner saves what its backward computes from h instead.
    h = x @ torch.linspace(-1, 1, 18).view(3, 6)
    return torch.nn.functional.gelu(h).sum(-1), h[:, -1]


def detached_sin_of_an_output(x):
    # The sin's node is not in the graph's backward: nothing to witness (eager never raises).
    v = x * 2
    return v, v[1:].sin().detach() + x[1:]


def constant_multiple_of_an_output(x):
    # mul by a constant saves nothing.
    v = x * 2
    return v, v * 2


def sin_of_an_output_and_another_output(x):
    # Eager's backward through x * 3 never reaches the sin; the compiled backward is one node.
    v = x * 2
    return v, v[:2].sin(), x * 3


# The (in-placed output, output whose backward eager refuses) of each witnessed program.
WITNESSED = {
    "piece_of_an_output": (piece_of_an_output, 1, 2),
    "slice_of_an_intermediate": (slice_of_an_intermediate, 0, 1),
    "view_of_an_intermediate": (view_of_an_intermediate, 0, 1),
    "hidden_state_of_an_mlp": (hidden_state_of_an_mlp, 1, 0),
}
UNWITNESSED = {
    "detached_sin_of_an_output": detached_sin_of_an_output,
    "constant_multiple_of_an_output": constant_multiple_of_an_output,
}


def _inputs():
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(0), requires_grad=True)
    return [x], [x]


class TestVersionWitnesses(CompileTestCase):
    @parametrize("backend", ["aot_eager", "inductor"])
    @parametrize("dynamic", [False, True])
    @parametrize("program", list(WITNESSED))
    def test_parity(self, program: str, dynamic: bool, backend: str) -> None:
        fn, i, j = WITNESSED[program]
        compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
        with strict_view_replay(), stock_213_cache_off(backend):
            found = differences(fn, compiled, _inputs)
            if backend == "inductor":
                # Inductor's sin, gelu and matmul differ from eager's in the last bits: compare
                # the values with a tolerance.
                self.assertEqual(compiled(*_inputs()[0]), fn(*_inputs()[0]))
                found = [line for line in found if not line.endswith(" values")]
        if PATCHED:
            self.assertEqual(found, [])
            self.assertEqual(fallback_counts(), {})
        else:
            # The backward silently computes with the forward's values.
            self.assertIn(f"out{i}.mul_(3), backward through out{j}: eager ('backward', 'RuntimeError'), "
                          "compiled grads", found)

    @parametrize("program", list(UNWITNESSED))
    def test_nothing_to_witness(self, program: str) -> None:
        fn = UNWITNESSED[program]
        with strict_view_replay():
            self.assertEqual(differences(fn, torch.compile(fn, backend="aot_eager"), _inputs), [])

    def test_backward_that_eager_does_not_run_through_the_saving_node(self) -> None:
        # The accepted difference (Note [Version witnesses], scope): stock computes eager's
        # gradient here, where the partitioner saves cos(v[:2]); patched raises, as stock does
        # wherever the partitioner saves v itself.
        fn = sin_of_an_output_and_another_output
        with strict_view_replay():
            found = differences(fn, torch.compile(fn, backend="aot_eager"), _inputs)
        if PATCHED:
            self.assertEqual(found, ["out0.mul_(3), backward through out2: eager grads, "
                                     "compiled ('backward', 'RuntimeError')"])
        else:
            self.assertEqual(found, ["out0.mul_(3), backward through out1: eager ('backward', 'RuntimeError'), "
                                     "compiled grads"])

    def test_without_a_backward(self) -> None:
        compiled = torch.compile(piece_of_an_output, backend="aot_eager")
        x = torch.randn(4, 3)
        with torch.no_grad():
            self.assertEqual(compiled(x), piece_of_an_output(x))


instantiate_parametrized_tests(TestVersionWitnesses)

if __name__ == "__main__":
    run_tests()
