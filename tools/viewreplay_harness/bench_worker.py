"""The measuring side of ``viewreplay bench``: a long-lived worker run under one torch venv.

``viewreplay bench`` (viewreplay/bench.py) starts one worker per venv (stock, patched) with
``python -m viewreplay_harness.bench_worker`` and feeds both, round by round, one JSON
request per stdin line; the worker answers one JSON line per request on its
original stdout (fd 1 is redirected to stderr, so nothing torch prints can
corrupt the protocol). Workloads are done one at a time, in both workers, before
the next one is compiled, so rounds of stock and patched alternate in time and
machine noise hits both alike.

Requests (``cmd``):
  hello                         torch version, whether the view_replay overlay is installed
  warmup   backends             compile a throw-away program on each backend (first-compile imports)
  compile  workload backend     cold compile: torch._dynamo.reset(), a fresh inductor cache dir and
                                cleared in-memory inductor caches; the time of the first forward+backward
  probe    workload backend     per size: autograd nodes, AsStridedBackward0 nodes, backward peak memory
                                (eager and compiled)
  time     workload backend size variant
                                one variant (eager, compiled) of one size: time per iteration of
                                forward+backward (torch.utils.benchmark.Timer) and of backward only
  regen    workload backend     per aliased output: time of the runtime regeneration (the function
                                the runtime wrapper calls, on the captured arguments) and of the
                                eager view chain on the same base
  exit

Every failure of a workload is answered ``{"error": "<Type>: <message>"}``; the
worker itself never dies for it.

Methods (documented in the results' header too):
  * timing: ``torch.set_num_threads(threads)``; gc disabled while timing;
    fwd+bwd = ``outs = fn(*inputs); torch.autograd.grad(outs, leaves, grad_outputs)``
    (no .grad accumulation), ``Timer.blocked_autorange(min_run_time=target_s)``, median of
    the blocks; bwd = the same ``autograd.grad`` call alone, timed with perf_counter_ns
    around each call for about target_s, median of the calls; before each timed call the
    forwards of both variants (eager, then compiled) run untimed, so eager's and compiled's
    backwards follow identical work (see time_bwd). Medians,
    not means: the machine is shared, and a median of blocks shrugs off the spikes.
  * backward peak memory: the backward call under ``torch.profiler`` with
    ``profile_memory=True``; the CPU allocator reports every allocation and free with its
    running total, and the peak is max(running total) minus the total before the first
    event: the most bytes the backward held above its starting level (returned gradients
    included).
  * compile time: the first forward+backward call, cold (see ``compile``), with
    ``TORCHINDUCTOR_COMPILE_THREADS=1`` set by the orchestrator; the AOTAutograd/FX caches are
    on (their default) but always miss (fresh directory), so their write cost counts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch
import torch._dynamo

from .cases import autograd_nodes, f, g, h, view_replay_installed


# ---------------------------------------------------------------------------
# Workloads


@dataclasses.dataclass
class Size:
    label: str
    make_inputs: Callable[[], list[Any]]


@dataclasses.dataclass
class Workload:
    name: str
    description: str
    make_fn: Callable[[], Callable[..., Any]]
    quick_sizes: list[Size]
    sizes: list[Size]
    full_sizes: list[Size]
    dynamic: bool | None = True
    needs_dist: bool = False
    # Gradients of the outputs: contiguous (what a downstream matmul's backward hands back)
    # instead of ones_like (which copies the output's layout, e.g. a transpose's strides).
    contiguous_grads: bool = False
    # For the regeneration micro benchmark: the eager view chain that the compiled
    # function's aliased outputs come from, applied to the aliased base.
    eager_views: Callable[[torch.Tensor], list[torch.Tensor]] | None = None


def _randn(*shape: int, requires_grad: bool = True) -> Callable[[], list[Any]]:
    def make() -> list[Any]:
        gen = torch.Generator().manual_seed(sum(shape) * 31 + len(shape))
        return [torch.randn(*shape, generator=gen).requires_grad_(requires_grad)]

    return make


def _sizes(*shapes: tuple[int, ...]) -> list[Size]:
    return [Size("x".join(map(str, s)), _randn(*s)) for s in shapes]


def slice_t(x: torch.Tensor) -> torch.Tensor:
    return x[: x.shape[0] // 2].t()


def three_views(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    y = x * 2
    n = y.shape[0]
    return y[: n // 2], y.narrow(0, 1, n - 2).t(), y[n - 1]


def _flat_view(x: torch.Tensor) -> torch.Tensor:
    return x.view(-1)


NUM_EXPERTS = 8


def moe_split(x: torch.Tensor, expert: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Tokens split by their experts' counts (.tolist(): unbacked sizes)."""
    counts = (expert[:, None] == torch.arange(NUM_EXPERTS)).sum(0)
    return x.split(counts.tolist())


def _moe_sizes(*shapes: tuple[int, int]) -> list[Size]:
    def make(tokens: int, dim: int) -> Callable[[], list[Any]]:
        def inputs() -> list[Any]:
            (x,) = _randn(tokens, dim)()
            gen = torch.Generator().manual_seed(tokens)
            return [x, torch.randint(0, NUM_EXPERTS, (tokens,), generator=gen)]

        return inputs

    return [Size(f"{t}x{d}", make(t, d)) for t, d in shapes]


class Block(torch.nn.Module):
    """A small pre-attention transformer block; graph break between the q/k/v views and attention."""

    def __init__(self, d_model: int = 64, heads: int = 4) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(0)
        self.heads = heads
        self.qkv = torch.nn.Linear(d_model, 3 * d_model)
        self.proj = torch.nn.Linear(d_model, d_model)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        torch._dynamo.graph_break()
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c)) + x


_MESH: Any = None


def _mesh() -> Any:
    """A world-size-1 gloo process group in this process and its 1-D CPU mesh."""
    global _MESH
    if _MESH is None:
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh

        if not dist.is_initialized():
            dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
        _MESH = init_device_mesh("cpu", (1,))
    return _MESH


def _dtensor(*shape: int) -> Callable[[], list[Any]]:
    def make() -> list[Any]:
        from torch.distributed.tensor import distribute_tensor, Shard

        (x,) = _randn(*shape, requires_grad=False)()
        return [distribute_tensor(x, _mesh(), [Shard(0)]).requires_grad_(True)]

    return make


def _block_sizes(*seq_lens: int) -> list[Size]:
    return [Size(f"2x{t}x64", _randn(2, t, 64)) for t in seq_lens]


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            "f", "two outputs view one intermediate (seed f), dynamic=True",
            lambda: f, _sizes((4, 3)), _sizes((4, 3)), _sizes((4, 3), (256, 256)),
        ),
        Workload(
            "g", "output views the input (seed g), dynamic=True",
            lambda: g, _sizes((4, 3)), _sizes((4, 3)), _sizes((4, 3), (256, 256)),
            eager_views=lambda x: [x.view(x.shape)],
        ),
        Workload(
            "h", "50-way unbind of an intermediate (seed h), dynamic=True",
            lambda: h, _sizes((50, 3)), _sizes((50, 3), (50, 1024)), _sizes((50, 3), (50, 1024), (50, 16384)),
        ),
        Workload(
            "slice_t", "x[: n // 2].t() of an input, dynamic=True",
            lambda: slice_t, _sizes((64, 32)), _sizes((64, 32), (512, 128), (2048, 256)),
            _sizes((64, 32), (512, 128), (2048, 256), (8192, 512)),
            eager_views=lambda x: [x[: x.shape[0] // 2].t()],
        ),
        Workload(
            "slice_t_cgrad", "x[: n // 2].t() of an input, backward with contiguous gradients, dynamic=True",
            lambda: slice_t, _sizes((64, 32)), _sizes((64, 32), (2048, 256)),
            _sizes((64, 32), (512, 128), (2048, 256), (8192, 512)), contiguous_grads=True,
        ),
        Workload(
            "three_views", "three views of one intermediate (slice, narrow+t, select), dynamic=True",
            lambda: three_views, _sizes((16, 8)), _sizes((16, 8), (512, 128)), _sizes((16, 8), (512, 128), (2048, 256)),
        ),
        Workload(
            "dtensor_view", "DTensor (gloo, world size 1, Shard(0)) x.view(-1)",
            lambda: _flat_view, [Size("8x4", _dtensor(8, 4))], [Size("8x4", _dtensor(8, 4))],
            [Size("8x4", _dtensor(8, 4)), Size("512x128", _dtensor(512, 128))],
            dynamic=None, needs_dist=True,
        ),
        Workload(
            "moe_split", f"x.split(counts.tolist()) of an input over {NUM_EXPERTS} experts (unbacked sizes)",
            lambda: moe_split, _moe_sizes((64, 32)), _moe_sizes((64, 32), (1024, 256)),
            _moe_sizes((64, 32), (1024, 256), (4096, 512)), dynamic=None,
        ),
        Workload(
            "block", "transformer block, graph break between q/k/v views and attention, dynamic seq len",
            # dynamic=True: mark_dynamic(x, 1) alone is refused (the resume frame's SDPA guards the length).
            Block, _block_sizes(24), _block_sizes(24, 40), _block_sizes(24, 40, 136),
        ),
    )
}

REGEN_WORKLOADS = ("g", "slice_t")


def sizes_for(workload: Workload, mode: str) -> list[Size]:
    return {"quick": workload.quick_sizes, "default": workload.sizes, "full": workload.full_sizes}[mode]


# ---------------------------------------------------------------------------
# Measurement helpers


def error_text(exc: BaseException) -> str:
    """``Type: first line of the message`` (at most 200 characters)."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:200]


def _flat_outputs(outs: Any) -> list[Any]:
    if isinstance(outs, (tuple, list)):
        return [o for item in outs for o in _flat_outputs(item)]
    return [outs] if isinstance(outs, torch.Tensor) else []


def _grad_outputs(outs: list[torch.Tensor], contiguous: bool) -> list[torch.Tensor]:
    if contiguous:
        return [torch.ones(o.shape, dtype=o.dtype) for o in outs if o.requires_grad]
    return [torch.ones_like(o) for o in outs if o.requires_grad]


@dataclasses.dataclass
class Prepared:
    """One size of a workload, ready to run on one variant (eager or compiled)."""

    fn: Callable[..., Any]
    inputs: list[Any]
    leaves: list[torch.Tensor]
    grad_outputs: list[torch.Tensor]

    def forward(self) -> list[torch.Tensor]:
        return [o for o in _flat_outputs(self.fn(*self.inputs)) if o.requires_grad]

    def backward(self, outs: list[torch.Tensor]) -> Any:
        return torch.autograd.grad(outs, self.leaves, self.grad_outputs, allow_unused=True)

    def step(self) -> Any:
        return self.backward(self.forward())


def backward_peak_bytes(prepared: Prepared) -> int:
    """Peak bytes held by the backward above its starting level (see the module docstring)."""
    from torch._C._profiler import _EventType
    from torch.profiler import profile, ProfilerActivity

    outs = prepared.forward()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        grads = prepared.backward(outs)
    del grads, outs
    events: list[Any] = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        event = stack.pop()
        if event.tag == _EventType.Allocation:
            events.append(event)
        stack.extend(event.children)
    if not events:
        return 0
    events.sort(key=lambda e: e.start_time_ns)
    first = events[0].extra_fields
    start = first.total_allocated - first.alloc_size
    return max(0, max(e.extra_fields.total_allocated for e in events) - start)


def time_fwd_bwd(prepared: Prepared, budget_s: float) -> dict[str, Any]:
    """Median seconds per forward+backward over blocks (torch.utils.benchmark.Timer.blocked_autorange)."""
    from torch.utils.benchmark import Timer

    prepared.step()
    timer = Timer(stmt="step()", globals={"step": prepared.step}, num_threads=torch.get_num_threads())
    m = timer.blocked_autorange(min_run_time=budget_s)
    return {"fwd_bwd_s": m.median, "fwd_bwd_blocks": len(m.times)}


def time_bwd(prepared: Prepared, budget_s: float, forwards: list[Prepared]) -> dict[str, Any]:
    """Median seconds of the backward call alone (forward untimed, gc disabled), over ~budget_s.

    Before each timed backward the forward of every variant in ``forwards`` (which holds
    ``prepared``) runs, in that order, so the backwards of eager and compiled follow the same
    work: otherwise the heavier compiled forward leaves colder caches and a backward with the
    very same autograd nodes as eager's measures slower.
    """
    times: list[int] = []
    mine = next(i for i, p in enumerate(forwards) if p is prepared)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        prepared.step()
        deadline = time.perf_counter() + budget_s
        while len(times) < 5 or (time.perf_counter() < deadline and len(times) < 100_000):
            all_outs = [p.forward() for p in forwards]
            t0 = time.perf_counter_ns()
            prepared.backward(all_outs[mine])
            times.append(time.perf_counter_ns() - t0)
            del all_outs
    finally:
        if gc_was_enabled:
            gc.enable()
    times.sort()
    return {"bwd_s": times[len(times) // 2] / 1e9, "bwd_iterations": len(times)}


class HookTimer:
    """Time spent inside view_replay's functions when AOTAutograd calls them (patched torch only).

    Wraps every view_replay function bound in a ``torch._functorch`` module's globals (the
    hooks the patch series calls: planning, classification, regenerator creation, ...) for
    the duration of a ``with``; only the outermost call of nested hooks counts. It measures
    the overlay's own work in a compile, which a cold-compile A/B of whole compiles cannot
    resolve on a noisy machine.
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0
        self._depth = 0
        self._restore: list[tuple[Any, str, Any]] = []

    def _wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if self._depth:
                return fn(*args, **kwargs)
            self._depth += 1
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0
                self.calls += 1
                self._depth -= 1

        return timed

    def __enter__(self) -> "HookTimer":
        package = "torch._functorch._aot_autograd.view_replay"
        for name, module in list(sys.modules.items()):
            if module is None or not name.startswith("torch._functorch") or name.startswith(package):
                continue
            for attr, value in list(vars(module).items()):
                if callable(value) and getattr(value, "__module__", "").startswith(package) \
                        and not isinstance(value, type):
                    self._restore.append((module, attr, value))
                    setattr(module, attr, self._wrap(value))
        return self

    def __exit__(self, *exc: object) -> None:
        for module, attr, value in self._restore:
            setattr(module, attr, value)
        self._restore.clear()


# The function the runtime called to regenerate an aliased output, its args, its kwargs.
_RegenCall = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]


def _capture_regenerations(workload: Workload, backend: str, sizes: list[Size]) -> list[_RegenCall]:
    """Compile ``workload`` and run it at each size (the last is the one measured); return the
    regeneration calls of the last run, one per aliased output.

    Hooks the function that the runtime wrapper binds when it is generated (compile time):
    ``make_regenerator`` on patched torch (its regenerators are captured), else
    ``gen_alias_from_base``."""
    from torch._functorch._aot_autograd import runtime_wrappers

    calls: list[_RegenCall] = []

    def capturing(real: Callable[..., Any]) -> Callable[..., Any]:
        def capture(*args: Any, **kwargs: Any) -> Any:
            calls.append((real, args, kwargs))
            return real(*args, **kwargs)

        return capture

    if hasattr(runtime_wrappers, "make_regenerator"):
        hooked = "make_regenerator"
        make_regenerator = runtime_wrappers.make_regenerator

        def hook(*args: Any, **kwargs: Any) -> Any:
            return capturing(make_regenerator(*args, **kwargs))
    else:
        hooked = "gen_alias_from_base"
        hook = capturing(runtime_wrappers.gen_alias_from_base)
    original = getattr(runtime_wrappers, hooked)
    torch._dynamo.reset()
    setattr(runtime_wrappers, hooked, hook)
    try:
        compiled_fn = torch.compile(workload.make_fn(), backend=backend, dynamic=workload.dynamic)
        for size in sizes:  # the last size is the one measured
            calls.clear()
            (x,) = size.make_inputs()
            compiled_fn(x)
    finally:
        setattr(runtime_wrappers, hooked, original)
    return calls


# ---------------------------------------------------------------------------
# The worker


class Worker:
    def __init__(self, mode: str, target_s: float, cache_root: str) -> None:
        self.mode = mode
        self.target_s = target_s
        self.cache_root = cache_root
        self.key: tuple[str, str] | None = None
        self.eager: dict[str, Prepared] = {}
        self.compiled: dict[str, Prepared] = {}

    # -- setup of one (workload, backend) --------------------------------

    def _prepare_eager(self, workload: Workload) -> dict[str, Prepared]:
        fn = workload.make_fn()
        prepared = {}
        for size in sizes_for(workload, self.mode):
            inputs = size.make_inputs()
            leaves = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
            if isinstance(fn, torch.nn.Module):
                leaves += list(fn.parameters())
            outs = [o for o in _flat_outputs(fn(*inputs)) if o.requires_grad]
            prepared[size.label] = Prepared(fn, inputs, leaves, _grad_outputs(outs, workload.contiguous_grads))
        return prepared

    def compile(self, name: str, backend: str) -> dict[str, Any]:
        """Cold-compile the workload; keep it for probe/time. Returns the compile time."""
        from torch._inductor.utils import fresh_cache

        workload = WORKLOADS[name]
        self.key = (name, backend)
        self.compiled = {}
        self.eager = {}
        try:
            self.eager = self._prepare_eager(workload)
        except Exception as exc:
            raise RuntimeError(f"eager: {error_text(exc)}") from exc
        torch._dynamo.reset()
        sizes = sizes_for(workload, self.mode)
        with fresh_cache(dir=self.cache_root, delete=False):
            module = workload.make_fn()
            compiled_fn = torch.compile(module, backend=backend, dynamic=workload.dynamic)
            prepared = {}
            for size in sizes:
                eager = self.eager[size.label]
                inputs = size.make_inputs()
                leaves = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
                if isinstance(module, torch.nn.Module):
                    leaves += list(module.parameters())
                prepared[size.label] = Prepared(compiled_fn, inputs, leaves, eager.grad_outputs)
            first = prepared[sizes[0].label]
            with HookTimer() if view_replay_installed() else contextlib.nullcontext() as hooks:
                t0 = time.perf_counter()
                first.step()
                compile_s = time.perf_counter() - t0
            for p in prepared.values():  # compile anything the other sizes need, still cold-cached
                p.step()
        self.compiled = prepared
        if hooks is None:
            return {"compile_s": compile_s}
        return {"compile_s": compile_s, "hooks_s": hooks.seconds, "hook_calls": hooks.calls}

    def _variants(self, name: str, backend: str) -> dict[str, dict[str, Prepared]]:
        """size -> {eager, compiled}; only eager where the compiled program failed."""
        if self.key != (name, backend) or not self.eager:
            raise RuntimeError(f"{name}[{backend}] was not prepared in this worker")
        out: dict[str, dict[str, Prepared]] = {}
        for label, eager in self.eager.items():
            out[label] = {"eager": eager}
            if label in self.compiled:
                out[label]["compiled"] = self.compiled[label]
        return out

    def probe(self, name: str, backend: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for label, variants in self._variants(name, backend).items():
            row: dict[str, Any] = {}
            for variant, prepared in variants.items():
                outs = prepared.forward()
                nodes = autograd_nodes(outs)
                del outs
                row[variant] = {
                    "nodes": len(nodes),
                    "as_strided": nodes.count("AsStridedBackward0"),
                    "peak_bwd_bytes": backward_peak_bytes(prepared),
                }
            out[label] = row
            if "compiled" not in variants:
                continue
            # Values: the compiled outputs must equal eager's (otherwise the timing is meaningless).
            eager, compiled = variants["eager"], variants["compiled"]
            ref = _flat_outputs(eager.fn(*eager.inputs))
            got = _flat_outputs(compiled.fn(*compiled.inputs))
            row["values_equal"] = len(ref) == len(got) and all(
                torch.allclose(a.full_tensor() if hasattr(a, "full_tensor") else a,
                               b.full_tensor() if hasattr(b, "full_tensor") else b, atol=1e-5)
                for a, b in zip(ref, got)
            )
        return out

    def time(self, name: str, backend: str, size: str, variant: str) -> dict[str, Any]:
        """One measurement: seconds per fwd+bwd and per bwd of one variant (eager, compiled) of one size."""
        variants = self._variants(name, backend)
        if variant not in variants.get(size, {}):
            raise RuntimeError(f"{name}[{backend}] has no {variant} program of size {size}")
        forwards = list(variants[size].values())
        prepared = variants[size][variant]
        return {**time_fwd_bwd(prepared, self.target_s), **time_bwd(prepared, self.target_s, forwards)}

    def regen(self, name: str, backend: str) -> dict[str, Any]:
        """Per aliased output: the runtime regeneration vs the eager view chain, on the same base.

        Times the function that the runtime wrapper's alias function calls for the output, with
        the arguments it passed: the regenerator bound per output on patched torch (PR regenerators,
        Note [Regenerators]), functional_utils.gen_alias_from_base on stock torch.
        """
        workload = WORKLOADS[name]
        assert workload.eager_views is not None
        sizes = sizes_for(workload, self.mode)
        calls = _capture_regenerations(workload, backend, sizes)
        if not calls:
            raise RuntimeError("no aliased output was regenerated")
        results = [
            {"output": i, **self._time_regeneration(call, workload.eager_views), "size": sizes[-1].label}
            for i, call in enumerate(calls)
        ]
        torch._dynamo.reset()
        return {"outputs": results}

    def _time_regeneration(
        self, call: _RegenCall, views: Callable[[torch.Tensor], list[torch.Tensor]]
    ) -> dict[str, Any]:
        """One aliased output: the regeneration and the eager view chain, timed on its base."""
        from torch.utils.benchmark import Timer

        real, args, kwargs = call
        base = args[0]
        t_regen = Timer("gen(*args, **kwargs)", globals={"gen": real, "args": args, "kwargs": kwargs}
                        ).blocked_autorange(min_run_time=self.target_s).median
        t_view = Timer("views(base)", globals={"views": views, "base": base}
                       ).blocked_autorange(min_run_time=self.target_s).median
        regenerated = real(*args, **kwargs)
        return {
            "regen_s": t_regen,
            "eager_view_s": t_view,
            "grad_fn": type(regenerated.grad_fn).__name__ if regenerated.grad_fn is not None else None,
        }

    def warmup(self, backends: list[str]) -> dict[str, Any]:
        """Compile a throw-away program on each backend, so that first-compile imports do not count."""
        from torch._inductor.utils import fresh_cache

        for backend in backends:
            torch._dynamo.reset()
            with fresh_cache(dir=self.cache_root, delete=False):
                fn = torch.compile(lambda x: (x * 2).sin()[1:], backend=backend, dynamic=True)
                for n in (5, 7):
                    x = torch.randn(n, 3, requires_grad=True)
                    torch.autograd.grad(fn(x), x, torch.ones(n - 1, 3))
        torch._dynamo.reset()
        _ = torch.profiler  # import the profiler up front
        return {}


def set_view_replay_flag(setting: str) -> None:
    """``FLAG=True|False``: set a boolean flag of view_replay.config (patched torch only)."""
    from torch._functorch._aot_autograd.view_replay import config

    flag, sep, value = setting.partition("=")
    if not sep or value not in ("True", "False") or not isinstance(getattr(config, flag, None), bool):
        raise SystemExit(f"--view-replay-config {setting!r}: expected FLAG=True|False for a boolean "
                         f"flag of view_replay.config")
    setattr(config, flag, value == "True")


def serve(stdin: Any, out: Any, worker: Worker) -> None:
    for line in stdin:
        request = json.loads(line)
        cmd = request["cmd"]
        if cmd == "exit":
            break
        try:
            if cmd == "hello":
                reply: dict[str, Any] = {"torch": torch.__version__, "view_replay": view_replay_installed(),
                                         "threads": torch.get_num_threads()}
            elif cmd == "warmup":
                reply = worker.warmup(request["backends"])
            elif cmd in ("compile", "probe", "regen"):
                reply = getattr(worker, cmd)(request["workload"], request["backend"])
            elif cmd == "time":
                reply = worker.time(request["workload"], request["backend"], request["size"], request["variant"])
            else:
                reply = {"error": f"unknown command {cmd!r}"}
        except Exception as exc:  # noqa: BLE001 - reported as the cell's error
            traceback.print_exc(file=sys.stderr)
            reply = {"error": error_text(exc)}
        out.write(json.dumps(reply) + "\n")
        out.flush()


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m viewreplay_harness.bench_worker")
    parser.add_argument("--mode", choices=("quick", "default", "full"), default="default")
    parser.add_argument("--target-s", type=float, default=0.1, help="seconds per measurement")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--view-replay-config", action="append", default=[], metavar="FLAG=VALUE",
                        help="set a view_replay.config flag (True/False) before anything compiles")
    args = parser.parse_args(argv)
    for setting in args.view_replay_config:
        set_view_replay_flag(setting)
    # The protocol owns the original stdout; anything else printed goes to stderr.
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    torch.set_num_threads(args.threads)
    # moe_split's .tolist() is traced, not a graph break, on both sides.
    torch._dynamo.config.capture_scalar_outputs = True
    with tempfile.TemporaryDirectory(prefix="viewreplay-bench-cache-") as cache_root:
        serve(sys.stdin, protocol, Worker(args.mode, args.target_s, cache_root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
