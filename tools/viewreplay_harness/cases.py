"""Seed programs of the view-replay project and a probe of how torch.compile regenerates their outputs.

Importable under stock and patched torch alike: the report runs
``python -m viewreplay_harness.cases`` in each venv, and the tests import the programs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Iterable
from typing import Any


def f(x):  # two outputs alias one intermediate
    out = x.mul(2)
    return out.view(out.shape), out.view(out.shape)


def g(x):  # output aliases the input
    return x.view(x.shape)


def h(x):  # 50 outputs from one multi-output view of an intermediate
    return (x * x).unbind(0)


@dataclasses.dataclass(frozen=True)
class SeedCase:
    name: str
    fn: Callable[..., Any]
    shape: tuple[int, ...]


SEED_CASES = (
    SeedCase("f", f, (4, 3)),
    SeedCase("g", g, (4, 3)),
    SeedCase("h", h, (50, 3)),
)


def autograd_nodes(outputs: Iterable[Any]) -> list[str]:
    """Names of every autograd node reachable from ``outputs``, each node once."""
    seen: set[int] = set()
    names: list[str] = []
    stack = [o.grad_fn for o in outputs if getattr(o, "grad_fn", None) is not None]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names.append(type(node).__name__)
        stack.extend(next_fn for next_fn, _ in node.next_functions)
    return names


def view_replay_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch._functorch._aot_autograd.view_replay") is not None


def probe(case: SeedCase, *, backend: str, dynamic: bool) -> dict[str, Any]:
    """Compile ``case`` fresh, run it once forward and backward, and describe its outputs."""
    import torch
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    x = torch.randn(case.shape, requires_grad=True)
    compiled = torch.compile(case.fn, backend=backend, dynamic=dynamic)
    outs = compiled(x)
    outs = outs if isinstance(outs, tuple) else (outs,)
    ref = case.fn(x.detach().clone())
    ref = ref if isinstance(ref, tuple) else (ref,)
    values_equal = all(torch.equal(o, r) for o, r in zip(outs, ref))
    nodes = autograd_nodes(outs)
    sum(o.sum() for o in outs).backward()
    grad_equal = torch.equal(x.grad, _eager_grad(case, x))
    return {
        "case": case.name,
        "backend": backend,
        "dynamic": dynamic,
        "grad_fns": sorted({type(o.grad_fn).__name__ for o in outs}),
        "as_strided_nodes": nodes.count("AsStridedBackward0"),
        "fallbacks": dict(counters["view_replay_fallback"]),
        "values_equal": values_equal,
        "grad_equal": grad_equal,
    }


def _eager_grad(case: SeedCase, x: Any) -> Any:
    xe = x.detach().clone().requires_grad_(True)
    outs = case.fn(xe)
    outs = outs if isinstance(outs, tuple) else (outs,)
    sum(o.sum() for o in outs).backward()
    return xe.grad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m viewreplay_harness.cases",
        description="Run the seed cases under the current torch and print one JSON record per case.",
    )
    parser.add_argument("--backend", action="append", default=None, help="torch.compile backend (repeatable; default aot_eager)")
    args = parser.parse_args(argv)
    import torch

    records = []
    for backend in args.backend or ["aot_eager"]:
        for dynamic in (False, True):
            for case in SEED_CASES:
                records.append(probe(case, backend=backend, dynamic=dynamic))
    json.dump(
        {"torch": torch.__version__, "view_replay": view_replay_installed(), "records": records},
        sys.stdout,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
