"""The view-op sweep: every dense ViewMeta op of torch 2.13, alone and in chains of two,
on an input and on an intermediate, with arguments that depend on symbolic sizes.

Shared by ``test/aot/test_symbolic_replay.py`` and ``viewreplay sweep`` (which
runs ``python -m viewreplay_harness.sweep`` under stock and patched torch and compares
the AsStridedBackward0 counts).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from typing import Any

import torch

from .cases import autograd_nodes, view_replay_installed


# Three sizes per case, all run through one dynamic=True compilation.
SIZES: tuple[tuple[int, int], ...] = ((6, 4), (8, 5), (10, 7))

# ViewMetas of 2.13 that the sweep does not cover, and why.
EXCLUDED_VIEW_METAS: dict[str, str] = {
    "_fw_primal_ViewMeta": "forward-mode AD internals, not a user view",
    "_make_dual_ViewMeta": "forward-mode AD internals, not a user view",
    "_indices_ViewMeta": "sparse tensors",
    "_values_ViewMeta": "sparse tensors",
    "indices_ViewMeta": "sparse tensors",
    "values_ViewMeta": "sparse tensors",
    "ccol_indices_ViewMeta": "sparse tensors",
    "col_indices_ViewMeta": "sparse tensors",
    "crow_indices_ViewMeta": "sparse tensors",
    "row_indices_ViewMeta": "sparse tensors",
    "_sparse_broadcast_to_ViewMeta": "sparse tensors",
    "_nested_get_values_ViewMeta": "nested tensor internals",
    "_nested_view_from_buffer_ViewMeta": "nested tensor internals",
    "_nested_view_from_jagged_ViewMeta": "nested tensor internals",
    "_test_autograd_multiple_dispatch_view_ViewMeta": "test-only operator",
    "lift_fresh_ViewMeta": "tracing internals (lifting constants), not a user view",
    "slice_inverse_ViewMeta": "only the inverse of slice during functionalization, not a user view",
    "resize__ViewMeta": "resize_ is not a view of a base (it may reallocate storage)",
    "_unsafe_view_ViewMeta": "_unsafe_view does not alias in eager autograd (no view is recorded)",
    "detach__ViewMeta": "eager raises for detach_() on a view, and detach_() of a base is not an alias",
}


@dataclasses.dataclass(frozen=True)
class ViewOp:
    fn: Callable[[torch.Tensor], Any]
    # The ViewMeta this op is there to cover (None for helpers of chains).
    view_meta: str | None
    input_kind: str = "float"  # "float" (n, m), "complex" (n, m), "pairs" (n, m, 2)
    multi_output: bool = False
    # In-place view ops: eager allows them on views of intermediates only.
    intermediate_only: bool = False
    # For an in-place view op, its out-of-place twin: the regenerated output is
    # a fresh view, so its autograd node is the twin's (TBackward0, not TBackward1).
    functional_twin: Callable[[torch.Tensor], Any] | None = None


def _views(t: torch.Tensor) -> torch.Tensor:
    return t[1:]


OPS: dict[str, ViewOp] = {
    "alias": ViewOp(lambda t: torch.ops.aten.alias(t), "alias_ViewMeta"),
    "as_strided": ViewOp(
        lambda t: t.as_strided((t.shape[0] // 2, 2), (t.stride(0), 1), 1), "as_strided_ViewMeta"
    ),
    "conj": ViewOp(lambda t: t.conj(), "_conj_ViewMeta", input_kind="complex"),
    "neg_view": ViewOp(lambda t: torch._neg_view(t[: t.shape[0] // 2]), "_neg_view_ViewMeta"),
    "detach": ViewOp(lambda t: t.detach()[: t.shape[0] - 1], "detach_ViewMeta"),
    "diagonal": ViewOp(lambda t: t.diagonal(offset=1), "diagonal_ViewMeta"),
    "expand": ViewOp(lambda t: t.unsqueeze(0).expand(3, *t.shape), "expand_ViewMeta"),
    "permute": ViewOp(lambda t: t.permute(1, 0), "permute_ViewMeta"),
    "reshape_alias": ViewOp(
        lambda t: torch.ops.aten._reshape_alias(t, (t.shape[0] * t.shape[1],), (1,)),
        "_reshape_alias_ViewMeta",
    ),
    "select": ViewOp(lambda t: t[t.shape[0] - 1], "select_int_ViewMeta"),
    "slice": ViewOp(lambda t: t[: t.shape[0] // 2], "slice_Tensor_ViewMeta"),
    "slice_step": ViewOp(lambda t: t[1 : t.shape[0] - 1 : 2], None),
    "narrow": ViewOp(lambda t: t.narrow(-1, 1, t.shape[-1] - 2), None),
    "split": ViewOp(lambda t: t.split(t.shape[0] // 2), "split_Tensor_ViewMeta", multi_output=True),
    "chunk": ViewOp(lambda t: t.chunk(2, dim=1), None, multi_output=True),
    "split_with_sizes": ViewOp(
        lambda t: t.split([2, t.shape[0] - 2]), "split_with_sizes_ViewMeta", multi_output=True
    ),
    "unbind": ViewOp(lambda t: t.unbind(0), "unbind_int_ViewMeta", multi_output=True),
    "squeeze": ViewOp(lambda t: t.unsqueeze(1).squeeze(), "squeeze_ViewMeta"),
    "squeeze_dim": ViewOp(lambda t: t.unsqueeze(1).squeeze(1), "squeeze_dim_ViewMeta"),
    "squeeze_dims": ViewOp(lambda t: t.unsqueeze(1).squeeze((1,)), "squeeze_dims_ViewMeta"),
    "t": ViewOp(lambda t: t.t(), "t_ViewMeta"),
    "transpose": ViewOp(lambda t: t.transpose(0, -1), "transpose_int_ViewMeta"),
    "unfold": ViewOp(lambda t: t.unfold(0, 2, 1), "unfold_ViewMeta"),
    "unsqueeze": ViewOp(lambda t: t.unsqueeze(1), "unsqueeze_ViewMeta"),
    "view": ViewOp(lambda t: t.view(t.shape[1], t.shape[0]), "view_ViewMeta"),
    "view_flat": ViewOp(lambda t: t.view(-1), None),
    "view_as_real": ViewOp(lambda t: torch.view_as_real(t), "view_as_real_ViewMeta", input_kind="complex"),
    "view_as_complex": ViewOp(
        lambda t: torch.view_as_complex(t), "view_as_complex_ViewMeta", input_kind="pairs"
    ),
    "view_dtype": ViewOp(lambda t: t.view(torch.int32), "view_dtype_ViewMeta"),
    # In-place view ops, on a view of an intermediate: eager's in-place nodes (Note [In-place
    # view ops replayed in place]); as_strided_ is replayed as its out-of-place twin.
    "t_": ViewOp(
        lambda t: _views(t).t_(), "t__ViewMeta", intermediate_only=True,
    ),
    "transpose_": ViewOp(
        lambda t: _views(t).transpose_(0, 1), "transpose__ViewMeta", intermediate_only=True,
    ),
    "unsqueeze_": ViewOp(
        lambda t: _views(t).unsqueeze_(0), "unsqueeze__ViewMeta", intermediate_only=True,
    ),
    "squeeze_": ViewOp(
        lambda t: _views(t).unsqueeze(1).squeeze_(), "squeeze__ViewMeta", intermediate_only=True,
    ),
    "squeeze__dim": ViewOp(
        lambda t: _views(t).unsqueeze(1).squeeze_(1), "squeeze__dim_ViewMeta", intermediate_only=True,
    ),
    "squeeze__dims": ViewOp(
        lambda t: _views(t).unsqueeze(1).squeeze_((1,)), "squeeze__dims_ViewMeta", intermediate_only=True,
    ),
    "as_strided_": ViewOp(
        lambda t: _views(t).as_strided_((2, 2), (1, 2)), "as_strided__ViewMeta", intermediate_only=True,
        functional_twin=lambda t: _views(t).as_strided((2, 2), (1, 2)),
    ),
}

# Chains of two: a first op producing a 2-D or 1-D view, then a second op.
CHAIN_FIRST = ("slice", "narrow", "t", "view", "permute", "select", "unsqueeze", "diagonal")
CHAIN_SECOND = (
    "slice", "slice_step", "select", "t", "view_flat", "unsqueeze", "expand",
    "narrow", "unfold", "transpose", "squeeze_dim", "alias",
)


@dataclasses.dataclass(frozen=True)
class ViewProgram:
    name: str
    fn: Callable[..., Any]
    view_meta: str | None
    input_kind: str
    multi_output: bool
    # The eager program whose autograd nodes the compiled outputs must have
    # (``fn`` itself, or its out-of-place twin for in-place view ops).
    node_reference: Callable[..., Any]


def _on_input(op: Callable[[torch.Tensor], Any]) -> Callable[[torch.Tensor], Any]:
    def program(x: torch.Tensor) -> Any:
        return op(x)

    return program


def _on_intermediate(op: Callable[[torch.Tensor], Any]) -> Callable[[torch.Tensor], Any]:
    # Returns the intermediate too, so the views are regenerated off it.
    def program(x: torch.Tensor) -> Any:
        base = x * 2
        out = op(base)
        return (base, *out) if isinstance(out, (tuple, list)) else (base, out)

    return program


def _chain(first: Callable[[torch.Tensor], Any], second: Callable[[torch.Tensor], Any]):
    return lambda t: second(first(t))


def make_inputs(program: ViewProgram, size: tuple[int, int]) -> list[torch.Tensor]:
    n, m = size
    gen = torch.Generator().manual_seed(n * 100 + m)
    if program.input_kind == "complex":
        x = torch.randn(n, m, dtype=torch.complex64, generator=gen)
    elif program.input_kind == "pairs":
        x = torch.randn(n, m, 2, generator=gen)
    else:
        x = torch.randn(n, m, generator=gen)
    return [x.requires_grad_(True)]


def _eager_accepts(program: ViewProgram) -> bool:
    try:
        for size in SIZES:
            program.fn(*make_inputs(program, size))
    except RuntimeError:
        return False
    return True


def _build_programs() -> dict[str, ViewProgram]:
    programs: list[ViewProgram] = []
    for name, op in OPS.items():
        wheres = (("intermediate", _on_intermediate),)
        if not op.intermediate_only:
            wheres = (("input", _on_input),) + wheres
        for where, wrap in wheres:
            programs.append(
                ViewProgram(
                    f"{name}-{where}", wrap(op.fn), op.view_meta, op.input_kind, op.multi_output,
                    wrap(op.functional_twin or op.fn),
                )
            )
    for a in CHAIN_FIRST:
        for b in CHAIN_SECOND:
            fn = _chain(OPS[a].fn, OPS[b].fn)
            for where, wrap in (("input", _on_input), ("intermediate", _on_intermediate)):
                programs.append(ViewProgram(f"{a}+{b}-{where}", wrap(fn), None, "float", False, wrap(fn)))
    # Chains that eager rejects (e.g. view(-1) of a transposed view) are not programs.
    return {p.name: p for p in programs if _eager_accepts(p)}


PROGRAMS: dict[str, ViewProgram] = _build_programs()


def dense_view_metas() -> set[str]:
    """Every ViewMeta class of this torch's functionalization."""
    return {n for n in dir(torch._C._functionalization) if n.endswith("_ViewMeta")}


def covered_view_metas() -> set[str]:
    return {p.view_meta for p in PROGRAMS.values() if p.view_meta is not None}


def recorded_view_metas(program: ViewProgram, size: tuple[int, int]) -> set[str]:
    """Names of the ViewMetas that functionalization records for the program's outputs."""
    inputs = [torch._to_functional_tensor(t.detach()) for t in make_inputs(program, size)]
    torch._enable_functionalization(reapply_views=True)
    try:
        outs = program.fn(*inputs)
    finally:
        torch._disable_functionalization()
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    return {
        type(vm).__name__
        for o in outs
        for vm in torch._C._functionalization.get_view_meta_sequence(o)
    }


def as_strided_counts(backend: str = "aot_eager") -> dict[str, int]:
    """For each program, AsStridedBackward0 nodes of the compiled outputs beyond eager's, over all sizes."""
    import torch._dynamo

    counts: dict[str, int] = {}
    for name, program in PROGRAMS.items():
        torch._dynamo.reset()
        compiled = torch.compile(program.fn, backend=backend, dynamic=True)
        total = 0
        for size in SIZES:
            outs = compiled(*make_inputs(program, size))
            outs = outs if isinstance(outs, (tuple, list)) else (outs,)
            ref = program.node_reference(*make_inputs(program, size))
            ref = ref if isinstance(ref, (tuple, list)) else (ref,)
            total += autograd_nodes(outs).count("AsStridedBackward0") - autograd_nodes(ref).count(
                "AsStridedBackward0"
            )
        counts[name] = total
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m viewreplay_harness.sweep",
        description="Compile every sweep program with dynamic=True and print, as JSON, "
        "the AsStridedBackward0 nodes each adds over eager.",
    )
    parser.add_argument("--backend", default="aot_eager")
    args = parser.parse_args(argv)
    counts = as_strided_counts(args.backend)
    json.dump(
        {
            "torch": torch.__version__,
            "view_replay": view_replay_installed(),
            "backend": args.backend,
            "counts": counts,
        },
        sys.stdout,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
