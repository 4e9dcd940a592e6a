"""Shared helpers of the view-replay AOT tests.

Every test module here runs under stock torch (documenting the bugs) and under
the patched wheel (showing the fixes), of every pin; ``PATCHED`` says which.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch._dynamo
from torch._dynamo.utils import counters

from torch.testing._internal.common_utils import TestCase

from viewreplay_harness.cases import autograd_nodes, view_replay_installed


PATCHED = view_replay_installed()
# Where stock torch changed between the pins, tests gate on this (and say what upstream changed).
TORCH_2_14 = torch.torch_version.TorchVersion(torch.__version__) >= (2, 14)


@contextlib.contextmanager
def strict_view_replay() -> Iterator[None]:
    """Make any as_strided fallback raise (patched torch); a no-op on stock torch."""
    if not PATCHED:
        yield
        return
    from torch._functorch._aot_autograd.view_replay import config

    with config.patch(strict=True):
        yield


def observable_strides(t: torch.Tensor) -> tuple[int | None, ...]:
    """Strides that address memory: those of dimensions of size 1, and all of
    an empty tensor, are arbitrary (eager and compiled may differ there)."""
    if t.numel() == 0:
        return tuple(None for _ in t.stride())
    return tuple(None if size == 1 else stride for size, stride in zip(t.size(), t.stride()))


class CompileTestCase(TestCase):
    """A TestCase that starts each test with no Dynamo cache and no counters."""

    def setUp(self) -> None:
        super().setUp()
        torch._dynamo.reset()
        counters.clear()


@functools.cache
def world_size_one_mesh() -> Any:
    """A DeviceMesh over an in-process gloo group of world size 1, made once per process and
    kept to its end: DTensor ops run on one mesh, then on a new mesh after the group was
    destroyed and made again, break a later compile ("Node tangents_2 was invalid, but is
    output" in the partitioner), so every test module of a process shares this one."""
    import torch.distributed as dist
    from torch.distributed.tensor import DeviceMesh

    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    return DeviceMesh("cpu", [0])


def stock_213_cache_off(backend: str) -> contextlib.AbstractContextManager[None]:
    """Stock 2.13 with inductor: no AOTAutograd cache. Its entries pickle ``_unsafe_view``'s
    ViewMeta through an accessor that reads freed memory (Note [Reading ViewMeta arguments],
    fixed upstream in 2.14), so a function with a matmul's view compiled again in-process (a
    recompile that hits the entry) regenerates its outputs with garbage sizes or segfaults.
    test_view_meta_args documents that bug in a subprocess; elsewhere the cache is off so the
    stock bug a test is about shows alone."""
    if PATCHED or TORCH_2_14 or backend != "inductor":
        return contextlib.nullcontext()
    return torch._functorch.config.patch(enable_autograd_cache=False)


def fallback_counts() -> dict[str, int]:
    return dict(counters["view_replay_fallback"])


def as_tuple(out: Any) -> tuple[Any, ...]:
    return out if isinstance(out, (tuple, list)) else (out,)


def storage_sharing(outs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor]) -> list[list[bool]]:
    """For each output, which inputs and which other outputs share its storage."""
    everything = list(inputs) + list(outs)
    return [
        [o.untyped_storage().data_ptr() == t.untyped_storage().data_ptr() for t in everything]
        for o in outs
    ]


def eager_and_compiled(
    fn: Callable[..., Any], compiled: Callable[..., Any], make_inputs: Callable[[], list[torch.Tensor]]
) -> tuple[tuple[Any, ...], tuple[Any, ...], list[torch.Tensor], list[torch.Tensor]]:
    """Run ``fn`` eagerly and ``compiled`` on equal fresh inputs; return outputs and inputs."""
    eager_inputs = make_inputs()
    compiled_inputs = [t.detach().clone().requires_grad_(t.requires_grad) for t in eager_inputs]
    return (
        as_tuple(fn(*eager_inputs)),
        as_tuple(compiled(*compiled_inputs)),
        eager_inputs,
        compiled_inputs,
    )


def backward_all(outs: Sequence[Any]) -> None:
    """Back-propagate a weighted sum of every differentiable output."""
    loss = None
    for i, o in enumerate(outs):
        if isinstance(o, torch.Tensor) and o.requires_grad:
            if o.is_complex():
                o = torch.view_as_real(o.resolve_conj())
            term = (o.float() * (i + 1)).sum()
            loss = term if loss is None else loss + term
    if loss is not None:
        loss.backward()


__all__ = [
    "CompileTestCase",
    "PATCHED",
    "as_tuple",
    "autograd_nodes",
    "backward_all",
    "eager_and_compiled",
    "fallback_counts",
    "observable_strides",
    "storage_sharing",
    "stock_213_cache_off",
    "strict_view_replay",
    "world_size_one_mesh",
]
