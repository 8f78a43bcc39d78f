"""Attention cost as the sequence grows: the math path against the fused kernel.

For each sequence length ``n`` (64, 128, ..., 2048 by default) both ways of computing
scaled dot-product attention in :mod:`transformer_ref.modules` run on the same random
``q, k, v`` of shape ``(batch, heads, n, d_k)`` (self-attention, no mask):

* **math**: :func:`transformer_ref.modules.attention`, ``softmax(Q K^T / sqrt(d_k)) V`` written
  out, which builds the ``(batch, heads, n, n)`` score and weight matrices;
* **fused**: :func:`transformer_ref.modules.fused_attention`, i.e.
  :func:`torch.nn.functional.scaled_dot_product_attention`, whose flash-style kernels (the CPU
  kernel among them) work on blocks of keys and never hold a whole ``n x n`` matrix.

One call is a forward and a backward pass (the gradient of a fixed random ``grad_out`` with
respect to ``q``, ``k`` and ``v``), or the forward pass alone with ``--forward-only``. Before
timing, the two outputs are checked to agree.

**Time.** After one warm-up call per path, each timed sample repeats the call until it lasts
about 50 ms (so that timer resolution does not dominate the small sizes) and reports the time
per call. Samples alternate between the paths, swapping the order each repetition, and the
median over ``--repeats`` samples is printed; the ratio math / fused is therefore measured side
by side and holds up better than the absolute times on a shared machine. With more than one
thread, the small sizes suffer most from other work on the same cores (a thread that waits for
a descheduled one can stretch a 0.5 ms call to tens of ms); ``--threads 1`` is steadier there.

**Peak memory.** The most memory the allocator held during one call, above what it held when
the call started (the inputs and ``grad_out`` are allocated before and not counted; the
gradients and the output are). On CUDA this is ``torch.cuda.max_memory_allocated`` after
``reset_peak_memory_stats``. On the CPU, PyTorch keeps no such counter, so each call runs
once under ``torch.profiler`` with ``profile_memory=True``, which records every allocation
and free of the CPU allocator together with the running total; the peak of that total inside
the call, less its value at the start, is reported. It includes the buffers the fused kernel
allocates internally. The CPU fused kernel gives every thread its own scratch buffers, so its
figure grows with the number of threads (``--threads``) while the math path's does not.

Examples::

    python benchmarks/attention_scaling.py                          # auto device, defaults
    python benchmarks/attention_scaling.py --device cpu --lengths 64,128,256 --repeats 3
    python benchmarks/attention_scaling.py --device cuda --batch 8 --heads 16 --dtype bfloat16
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import torch
from matplotlib.ticker import FuncFormatter, NullLocator
from torch import Tensor
from torch._C._profiler import _EventType
from torch.profiler import ProfilerActivity, profile, record_function

from transformer_ref.modules import attention, fused_attention
from transformer_ref.training.device import device_name, resolve_device

DEFAULT_PLOT = Path(__file__).resolve().parent / "figures" / "attention_scaling.png"
DEFAULT_LENGTHS = "64,128,256,512,1024,2048"
SAMPLE_SECONDS = 0.05
MIB = 2**20
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

Attention = Callable[[Tensor, Tensor, Tensor], Tensor]
PATHS: dict[str, Attention] = {
    "math": lambda q, k, v: attention(q, k, v)[0],
    "fused": fused_attention,
}
LEGEND = {
    "math": "math: softmax(QKᵀ/√d_k)V",
    "fused": "fused: scaled_dot_product_attention",
}


def make_inputs(
    n: int, args: argparse.Namespace, device: torch.device, dtype: torch.dtype
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Seeded ``q, k, v, grad_out``, each ``(batch, heads, n, d_k)``.

    ``q``, ``k`` and ``v`` track gradients unless ``--forward-only`` was given.
    """
    generator = torch.Generator().manual_seed(n)
    shape = (args.batch, args.heads, n, args.d_k)
    q, k, v, grad_out = (
        torch.randn(shape, generator=generator).to(device=device, dtype=dtype) for _ in range(4)
    )
    for t in (q, k, v):
        t.requires_grad_(not args.forward_only)
    return q, k, v, grad_out


def make_call(
    fn: Attention, q: Tensor, k: Tensor, v: Tensor, grad_out: Tensor, backward: bool
) -> Callable[[], None]:
    """One forward (and backward) pass of ``fn`` on fixed inputs."""

    def call() -> None:
        if not backward:
            with torch.no_grad():
                fn(q, k, v)
            return
        fn(q, k, v).backward(grad_out)
        # Dropping the gradients keeps every call alike: none accumulates into the last one.
        for t in (q, k, v):
            t.grad = None

    return call


def check_agreement(q: Tensor, k: Tensor, v: Tensor) -> None:
    """Raise unless both paths give the same output (tolerance for the dtype)."""
    tolerance = 1e-4 if q.dtype == torch.float32 else 2e-2
    with torch.no_grad():
        outputs = [fn(q, k, v).float() for fn in PATHS.values()]
    torch.testing.assert_close(*outputs, atol=tolerance, rtol=tolerance)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def seconds_per_call(call: Callable[[], None], calls: int, device: torch.device) -> float:
    synchronize(device)
    start = time.perf_counter()
    for _ in range(calls):
        call()
    synchronize(device)
    return (time.perf_counter() - start) / calls


def median_ms(
    calls: dict[str, Callable[[], None]], repeats: int, device: torch.device
) -> dict[str, float]:
    """Median milliseconds per call of each path, samples alternating between the paths."""
    for call in calls.values():
        call()  # warm-up: first-call costs (allocations, kernel selection) are not timed
    single = {key: seconds_per_call(call, 1, device) for key, call in calls.items()}
    per_sample = max(1, math.ceil(SAMPLE_SECONDS / max(max(single.values()), 1e-9)))
    samples: dict[str, list[float]] = {key: [] for key in calls}
    order = list(calls)
    for _ in range(repeats):
        for key in order:
            samples[key].append(seconds_per_call(calls[key], per_sample, device))
        order.reverse()  # neither path always runs first
    return {key: 1000 * statistics.median(times) for key, times in samples.items()}


def _walk(events: list) -> Iterator:
    stack = list(events)
    while stack:
        event = stack.pop()
        yield event
        stack.extend(event.children)


def cpu_peak_bytes(calls: dict[str, Callable[[], None]]) -> dict[str, int]:
    """Peak bytes the CPU allocator held during each call, above its level when the call began.

    All calls run in one profiler session (each session costs a start-up and prints two log
    lines), each inside a range named by its key. The profiler's allocation events carry the
    allocator's running total; the private event tree is the only place that exposes them per
    event.
    """
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for label, call in calls.items():
            with record_function(label):
                call()
    events = list(_walk(prof.profiler.kineto_results.experimental_event_tree()))
    # (time, bytes allocated (negative: freed), allocator total after the event)
    allocations = sorted(
        (e.start_time_ns, e.extra_fields.alloc_size, e.extra_fields.total_allocated)
        for e in events
        if e.tag == _EventType.Allocation
    )
    peaks = {}
    for event in events:
        if event.tag == _EventType.TorchOp and event.name in calls:
            inside = [a for a in allocations if event.start_time_ns <= a[0] <= event.end_time_ns]
            if not inside:
                peaks[event.name] = 0
                continue
            _, first_size, first_total = inside[0]
            peaks[event.name] = max(total for *_, total in inside) - (first_total - first_size)
    return peaks


def cuda_peak_bytes(call: Callable[[], None], device: torch.device) -> int:
    """Peak bytes allocated on ``device`` during ``call``, above the level before it."""
    synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    start = torch.cuda.memory_allocated(device)
    call()
    synchronize(device)
    return torch.cuda.max_memory_allocated(device) - start


def measure(
    lengths: list[int], args: argparse.Namespace, device: torch.device, dtype: torch.dtype
) -> list[dict[str, float]]:
    """Time and peak memory of both paths at every length: the rows of the table.

    All lengths are timed first; the memory passes come after, so that on the CPU one profiler
    session covers them all.
    """
    rows, calls = [], {}
    for n in lengths:
        q, k, v, grad_out = make_inputs(n, args, device, dtype)
        check_agreement(q, k, v)
        calls_n = {
            key: make_call(fn, q, k, v, grad_out, backward=not args.forward_only)
            for key, fn in PATHS.items()
        }
        ms = median_ms(calls_n, args.repeats, device)
        rows.append({"n": n, **{f"{key}_ms": ms[key] for key in PATHS}})
        calls.update({f"{key} n={n}": call for key, call in calls_n.items()})
    if device.type == "cuda":
        peaks = {label: cuda_peak_bytes(call, device) for label, call in calls.items()}
    else:
        peaks = cpu_peak_bytes(calls)
    for row in rows:
        for key in PATHS:
            row[f"{key}_mib"] = peaks[f"{key} n={row['n']}"] / MIB
    return rows


def plot_scaling(rows: list[dict], title: str, path: Path) -> Path:
    """Two log-log panels against ``n``: time per call and peak memory, one line per path.

    A dashed ``n^2`` guide runs through the math path's value at the largest ``n``.
    """
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), layout="constrained")
    lengths = [row["n"] for row in rows]
    panels = (("ms", "time per call (ms)", "Time"), ("mib", "peak memory (MiB)", "Peak memory"))
    for ax, (unit, ylabel, name) in zip(axes, panels, strict=True):
        for key in PATHS:
            ax.plot(lengths, [row[f"{key}_{unit}"] for row in rows], marker="o",
                    label=LEGEND[key])
        last = rows[-1][f"math_{unit}"]
        ax.plot(lengths, [last * (n / lengths[-1]) ** 2 for n in lengths], color="grey",
                linestyle="--", linewidth=1, label="∝ n²")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(lengths, [str(n) for n in lengths])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
        ax.grid(True, which="major", alpha=0.3)
        ax.set(xlabel="sequence length n", ylabel=ylabel, title=f"{name} against n")
        ax.legend(fontsize="small")
    fig.suptitle(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def parse_lengths(text: str) -> list[int]:
    """``"64,128,256"`` -> ``[64, 128, 256]``; ValueError unless increasing and positive."""
    message = f"--lengths must be increasing positive integers, e.g. 64,128,256; got {text!r}"
    try:
        lengths = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(message) from None
    if not lengths or any(n < 1 for n in lengths) or lengths != sorted(set(lengths)):
        raise ValueError(message)
    return lengths


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the table, write the plot (and JSON); return config and rows."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda")
    parser.add_argument("--dtype", default="auto", choices=["auto", *DTYPES],
                        help="input dtype; auto = bfloat16 on CUDA, float32 on the CPU")
    parser.add_argument("--lengths", default=DEFAULT_LENGTHS,
                        help=f"comma-separated sequence lengths (default {DEFAULT_LENGTHS})")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--d-k", type=int, default=64, help="width of one head")
    parser.add_argument("--repeats", type=int, default=5, help="timed samples per path and n")
    parser.add_argument("--forward-only", action="store_true",
                        help="time the forward pass alone (default: forward + backward)")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads for PyTorch (default: leave PyTorch's choice)")
    parser.add_argument("--plot", type=Path, default=DEFAULT_PLOT, help="PNG to write")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    args = parser.parse_args(argv)

    try:
        device = resolve_device(args.device)
        lengths = parse_lengths(args.lengths)
    except ValueError as error:
        parser.error(str(error))
    if min(args.batch, args.heads, args.d_k, args.repeats) < 1:
        parser.error("--batch, --heads, --d-k and --repeats must be at least 1")
    if args.threads is not None:
        if args.threads < 1:
            parser.error("--threads must be at least 1")
        torch.set_num_threads(args.threads)
    if args.dtype == "auto":
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    else:
        dtype = DTYPES[args.dtype]

    work = "forward" if args.forward_only else "forward+backward"
    dtype_name = str(dtype).removeprefix("torch.")
    config = {
        "device": device_name(device), "dtype": dtype_name, "threads": torch.get_num_threads(),
        "batch": args.batch, "heads": args.heads, "d_k": args.d_k, "pass": work,
        "repeats": args.repeats,
    }
    print(f"device: {config['device']} ({dtype_name}, {config['threads']} CPU threads), "
          f"batch {args.batch}, {args.heads} heads, d_k {args.d_k}, {work}, "
          f"median of {args.repeats}")
    print(f"{'n':>6} {'math ms':>10} {'fused ms':>10} {'math/fused':>11} "
          f"{'math MiB':>10} {'fused MiB':>10}")
    rows = measure(lengths, args, device, dtype)
    for row in rows:
        print(f"{row['n']:>6} {row['math_ms']:>10.3f} {row['fused_ms']:>10.3f} "
              f"{row['math_ms'] / row['fused_ms']:>11.2f} "
              f"{row['math_mib']:>10.2f} {row['fused_mib']:>10.2f}")

    where = f"CPU, {config['threads']} threads" if device.type == "cpu" else config["device"]
    title = (f"Attention {work}: batch {args.batch}, {args.heads} heads, d_k {args.d_k}, "
             f"{dtype_name}, {where}")
    print(f"plot: {plot_scaling(rows, title, args.plot)}")
    results = {"config": config, "rows": rows}
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
        print(f"json: {args.json}")
    return results


if __name__ == "__main__":
    main()
