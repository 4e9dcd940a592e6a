"""Audit of the ViewMeta classes of torch 2.13 (run as a subprocess by test_view_meta_args.py).

``python view_meta_audit.py CLASS [CLASS ...]`` prints one JSON line per class, as soon as the
class is done, so that a crash (the defect of Note [Reading ViewMeta arguments]) is pinned to
the class being audited. For each class:

* an instance is recorded by running its op under functionalization (``PRODUCERS``) or, for
  ops that dense functionalization does not record (sparse, in-place aliasing, forward AD),
  built from an argument tuple (``BUILT``); classes of neither kind are not instantiated;
* ``readable``: the overlay's classification (``view_meta_args.unreadable_reason``), loaded
  from the repository on stock torch;
* ``reads``: for readable classes, ``as_tuple()`` read ``READS`` times with allocations in
  between: ``stable`` (every read equal), and ``replay_ok``: the ViewMeta rebuilt from the
  tuple replays on a fresh input to the op's own result (values, size, stride, offset);
* ``probe`` (``DEFECT_PROBES``): the defective accessor of the handwritten classes, read on
  purpose after everything else, to document the upstream bug (it may crash the process);
* ``plan`` (patched torch): the overlay plans the one-step chain (never through as_tuple()
  for unreadable classes) and its replay equals the op's result, or it refuses with a reason.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import pathlib
import sys
from collections.abc import Callable
from typing import Any

import torch


F = torch._C._functionalization
READS = 200
IRM = F.InverseReturnMode.ViewOrScatterInverse


def _randn(*shape: int, dtype: torch.dtype = torch.float32) -> Callable[[], torch.Tensor]:
    return lambda: torch.randn(*shape, dtype=dtype)


# class -> (input, op): the op records the class as the last ViewMeta of its result.
PRODUCERS: dict[str, tuple[Callable[[], torch.Tensor], Callable[[torch.Tensor], Any]]] = {
    "_conj_ViewMeta": (_randn(3, 4, dtype=torch.cfloat), lambda x: x.conj()),
    "_neg_view_ViewMeta": (_randn(3, 4), torch._neg_view),
    "_reshape_alias_ViewMeta": (_randn(3, 4), lambda x: torch.ops.aten._reshape_alias(x, [4, 3], [3, 1])),
    "_test_autograd_multiple_dispatch_view_ViewMeta": (
        _randn(3, 4), torch.ops.aten._test_autograd_multiple_dispatch_view
    ),
    "_unsafe_view_ViewMeta": (_randn(3, 4), lambda x: torch.ops.aten._unsafe_view(x, [4, 3])),
    "_values_ViewMeta": (lambda: torch.randn(3, 4).to_sparse(), lambda x: x._values()),
    "alias_ViewMeta": (_randn(3, 4), torch.ops.aten.alias),
    "as_strided_ViewMeta": (_randn(3, 4), lambda x: x.as_strided((2, 2), (1, 2), 1)),
    "as_strided__ViewMeta": (_randn(3, 4), lambda x: x.as_strided_((2, 2), (1, 2), 1)),
    "detach_ViewMeta": (_randn(3, 4), torch.ops.aten.detach),
    "diagonal_ViewMeta": (_randn(3, 4), lambda x: x.diagonal(1)),
    "expand_ViewMeta": (_randn(3, 1), lambda x: x.expand(3, 5)),
    "permute_ViewMeta": (_randn(3, 4, 2), lambda x: x.permute(2, 0, 1)),
    "resize__ViewMeta": (_randn(3, 4), lambda x: x.resize_(2, 3)),
    "select_int_ViewMeta": (_randn(3, 4), lambda x: x.select(1, 2)),
    "slice_Tensor_ViewMeta": (_randn(6, 4), lambda x: x[1:5:2]),
    "slice_inverse_ViewMeta": (_randn(6, 4), lambda x: torch.ops.aten.slice_inverse(x[1:3], x, 0, 1, 3, 1)),
    "split_Tensor_ViewMeta": (_randn(6, 4), lambda x: x.split(2)[-1]),
    "split_with_sizes_ViewMeta": (_randn(6, 4), lambda x: x.split([1, 5])[-1]),
    "squeeze_ViewMeta": (_randn(3, 1, 4), lambda x: x.squeeze()),
    "squeeze__ViewMeta": (_randn(3, 1, 4), lambda x: x.squeeze_()),
    "squeeze__dim_ViewMeta": (_randn(3, 1, 4), lambda x: x.squeeze_(1)),
    "squeeze__dims_ViewMeta": (_randn(3, 1, 4), lambda x: x.squeeze_((1,))),
    "squeeze_dim_ViewMeta": (_randn(3, 1, 4), lambda x: x.squeeze(1)),
    "squeeze_dims_ViewMeta": (_randn(3, 1, 4), lambda x: x.squeeze((1,))),
    "t_ViewMeta": (_randn(3, 4), lambda x: x.t()),
    "t__ViewMeta": (_randn(3, 4), lambda x: x.t_()),
    "transpose__ViewMeta": (_randn(3, 4, 2), lambda x: x.transpose_(0, 2)),
    "transpose_int_ViewMeta": (_randn(3, 4, 2), lambda x: x.transpose(0, 2)),
    "unbind_int_ViewMeta": (_randn(3, 4), lambda x: x.unbind(1)[-1]),
    "unfold_ViewMeta": (_randn(8), lambda x: x.unfold(0, 3, 2)),
    "unsqueeze_ViewMeta": (_randn(3, 4), lambda x: x.unsqueeze(1)),
    "unsqueeze__ViewMeta": (_randn(3, 4), lambda x: x.unsqueeze_(1)),
    "view_ViewMeta": (_randn(3, 4), lambda x: x.view(2, 6)),
    "view_as_complex_ViewMeta": (_randn(3, 2), torch.view_as_complex),
    "view_as_real_ViewMeta": (_randn(3, dtype=torch.cfloat), torch.view_as_real),
    "view_dtype_ViewMeta": (_randn(3, 4), lambda x: x.view(torch.int32)),
}

# class -> (argument tuple, input or None): classes that dense functionalization does not record
# (sparse views, in-place detach, lift_fresh, forward AD, nested values) are built from their
# tuple. Their replay is checked where an input of the right layout can be made.
BUILT: dict[str, tuple[tuple[object, ...], Callable[[], torch.Tensor] | None]] = {
    "_fw_primal_ViewMeta": ((False, True, IRM, 0), _randn(3, 4)),
    "_indices_ViewMeta": ((False, True, IRM), lambda: torch.randn(3, 4).to_sparse()),
    "indices_ViewMeta": ((False, True, IRM), lambda: torch.randn(3, 4).to_sparse().coalesce()),
    "values_ViewMeta": ((False, True, IRM), lambda: torch.randn(3, 4).to_sparse().coalesce()),
    "crow_indices_ViewMeta": ((False, True, IRM), lambda: torch.randn(3, 4).to_sparse_csr()),
    "col_indices_ViewMeta": ((False, True, IRM), lambda: torch.randn(3, 4).to_sparse_csr()),
    "ccol_indices_ViewMeta": ((False, True, IRM), lambda: torch.randn(3, 4).to_sparse_csc()),
    "row_indices_ViewMeta": ((False, True, IRM), lambda: torch.randn(3, 4).to_sparse_csc()),
    "_sparse_broadcast_to_ViewMeta": ((False, True, IRM, [2, 3, 4]), lambda: torch.randn(3, 4).to_sparse()),
    "detach__ViewMeta": ((False, True, IRM), _randn(3, 4)),
    "lift_fresh_ViewMeta": ((False, True, IRM), _randn(3, 4)),
    "_nested_get_values_ViewMeta": ((False, True, IRM), None),
}


def load_classification() -> tuple[Any, bool]:
    """view_meta_args.py from torch (patched: True) or from the repository's overlay (stock: False)."""
    try:
        from torch._functorch._aot_autograd.view_replay import view_meta_args

        return view_meta_args, True
    except ImportError:
        path = (
            pathlib.Path(__file__).resolve().parents[2]
            / "torch_overlay/torch/_functorch/_aot_autograd/view_replay/view_meta_args.py"
        )
        spec = importlib.util.spec_from_file_location("view_meta_args", path)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        return module, False


def record(make: Callable[[], torch.Tensor], op: Callable[[torch.Tensor], Any]) -> Any:
    """The last ViewMeta of ``op(x)`` run under functionalization."""
    fx = torch._to_functional_tensor(make())
    torch._enable_functionalization(reapply_views=True)
    try:
        out = op(fx)
    finally:
        torch._disable_functionalization()
    return F.get_view_meta_sequence(out)[-1]


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.layout != torch.strided or b.layout != torch.strided:
        return a.layout == b.layout and torch.equal(a.to_dense(), b.to_dense())
    return (
        a.dtype == b.dtype
        and a.size() == b.size()
        and a.stride() == b.stride()
        and a.storage_offset() == b.storage_offset()
        and torch.equal(a.resolve_conj().resolve_neg(), b.resolve_conj().resolve_neg())
    )


def churn() -> None:
    # Allocations of the sizes a small tuple's temporaries had: freed memory gets reused.
    junk = [[i] * (i % 7 + 1) for i in range(64)]
    del junk
    torch.empty(16)
    gc.collect(0)


def audit(name: str, classification: Any, patched: bool) -> dict[str, object]:
    result: dict[str, object] = {"class": name, "readable": classification.unreadable_reason(name) is None}
    cls = getattr(F, name)
    if name in PRODUCERS:
        make, op = PRODUCERS[name]
        vm = record(make, op)
        result["instance"] = "recorded"
        if type(vm).__name__ != name:
            result["error"] = f"the producer recorded {type(vm).__name__}"
            return result

        def expected(x: torch.Tensor) -> torch.Tensor:
            return op(x)
    elif name in BUILT:
        args, make_or_none = BUILT[name]
        vm = cls(args)
        result["instance"] = "built"
        if make_or_none is None:
            make = None
        else:
            make = make_or_none

            def expected(x: torch.Tensor) -> torch.Tensor:
                return F.apply_view_meta_sequence(x, [vm])
    else:
        result["instance"] = None
        return result

    if result["readable"]:
        reads = []
        for _ in range(READS):
            reads.append(repr(vm.as_tuple()))
            churn()
        result["stable"] = len(set(reads)) == 1
        if make is not None:
            rebuilt = cls(vm.as_tuple())
            torch.manual_seed(0)
            x = make()
            result["replay_ok"] = same(F.apply_view_meta_sequence(x.clone(), [rebuilt]), expected(x.clone()))
    if make is not None and patched:
        result["plan"] = plan(vm, make, expected)
    return result


def plan(vm: Any, make: Callable[[], torch.Tensor], expected: Callable[[torch.Tensor], torch.Tensor]) -> str:
    """The overlay's plan of the one-step chain: 'ok', 'wrong' or the reason it refuses."""
    from torch._functorch._aot_autograd.view_replay import GraphScope, RegenerationCall
    from torch._functorch._aot_autograd.view_replay.codegen import compiled_plan
    from torch._functorch._aot_autograd.view_replay.plan import plan_view_meta_chain
    from torch._functorch._aot_autograd.view_replay.scope import OutputScope
    from torch._functorch._aot_autograd.view_replay.spec import Check, ReplayPlan

    torch.manual_seed(0)
    x = make()
    target = expected(x.clone())
    if target.layout != torch.strided:
        return "sparse"
    scope = OutputScope(GraphScope.of((), (), ()), target, x.clone(), Check.LAYOUT, base_restrided=False)
    planned = plan_view_meta_chain([vm], scope)
    if not isinstance(planned, ReplayPlan):
        return planned.reason.name
    base = x.clone()
    out = compiled_plan(planned)(base, expected(base.clone()), RegenerationCall({}, ()))
    return "ok" if same(out, target) else "wrong"


# The handwritten classes whose as_tuple() is defective, and the size their producer passes.
DEFECT_PROBES: dict[str, list[int]] = {"_unsafe_view_ViewMeta": [4, 3], "resize__ViewMeta": [2, 3]}


def probe_defect(name: str) -> dict[str, object]:
    """Read the defective accessor (it may crash: this line then never prints)."""
    make, op = PRODUCERS[name]
    vm = record(make, op)
    sizes = []
    for _ in range(20):
        sizes.append(list(vm.as_tuple()[1]))
        churn()
    return {"class": name, "probe": "as_tuple", "all_correct": all(s == DEFECT_PROBES[name] for s in sizes)}


def main(names: list[str]) -> None:
    classification, patched = load_classification()
    for name in names:
        try:
            line = audit(name, classification, patched)
        except Exception as e:  # noqa: BLE001 - reported per class
            line = {"class": name, "error": f"{type(e).__name__}: {e}"}
        print(json.dumps(line), flush=True)
        if name in DEFECT_PROBES:
            print(json.dumps(probe_defect(name)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
