"""Time to 100% on the reverse task, and Multi30k BLEU against wall time, for both presets.

Runs ``python -m transformer_ref.train`` once per requested task and preset. For each run it
prints the quality-against-time curve recorded at every evaluation (training seconds so far,
step, and the task's metric: held-out exact match for the synthetic tasks, greedy BLEU on the
preset's first validation sentences for Multi30k), then the result:

* synthetic tasks: the training time at which held-out exact match first reached 100%, and
  the whole run's wall time including start-up (data, model, final evaluation);
* Multi30k: sacreBLEU on the validation set and test_2016_flickr (beam search) with its
  signature, and the wall time.

    python benchmarks/time_to_accuracy.py --tasks reverse --presets cpu
    MULTI30K_DIR=/data/multi30k python benchmarks/time_to_accuracy.py --tasks multi30k \\
        --presets cpu --eval-every 50 --json m30k-cpu.json
    python benchmarks/time_to_accuracy.py --tasks reverse multi30k --presets gpu --device cuda

The gpu presets are sized for a CUDA GPU: without one they are skipped, with a line that says
so, rather than trained for hours on the CPU. Multi30k is read from ``MULTI30K_DIR`` (see
:mod:`transformer_ref.data.datasets`). Extra arguments after ``--`` go to the training command
(e.g. ``-- --max-steps 50``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from transformer_ref.training.device import resolve_device
from transformer_ref.training.presets import PRESETS, TASKS, get_preset

ROOT = Path(__file__).resolve().parents[1]


def run_one(task: str, preset: str, device: str, out: Path, extra: list[str]) -> dict[str, Any]:
    """Train once; return the metrics.json contents plus the measured wall time.

    Raises:
        RuntimeError: the training command failed (the message holds its stderr).
    """
    command = [sys.executable, "-m", "transformer_ref.train", "--task", task, "--preset", preset,
               "--device", device, "--out", str(out), "--no-progress", *extra]
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited with {proc.returncode}:\n"
                           f"{proc.stderr.strip()}")
    report = json.loads((out / "metrics.json").read_text())
    report["process_seconds"] = wall
    return report


def curve(report: dict[str, Any]) -> list[dict[str, float]]:
    """One point per evaluation: ``train_seconds``, ``step`` and the task's quality metric.

    The metric is ``exact_match`` (a fraction) for synthetic tasks and ``val_bleu_greedy``
    for Multi30k, which also keeps ``val_loss``.
    """
    keys = ("exact_match",) if report["task"] != "multi30k" else ("val_bleu_greedy", "val_loss")
    return [{"train_seconds": entry["train_seconds"], "step": entry["step"],
             **{k: entry[k] for k in keys if k in entry}} for entry in report["history"]]


def format_curve(report: dict[str, Any], points: list[dict[str, float]]) -> list[str]:
    """The curve as an aligned table, one line per evaluation."""
    if report["task"] == "multi30k":
        sentences = get_preset("multi30k", report["preset"]).eval_sentences
        lines = [f"  {'train s':>8} {'step':>6}  val BLEU (greedy, {sentences} sentences)"
                 f"  val loss"]
        for p in points:
            bleu = f"{p['val_bleu_greedy']:.2f}" if "val_bleu_greedy" in p else "-"
            lines.append(f"  {p['train_seconds']:8.1f} {p['step']:6d}  {bleu:>34}"
                         f"  {p['val_loss']:8.3f}")
        return lines
    lines = [f"  {'train s':>8} {'step':>6}  held-out exact match"]
    lines += [f"  {p['train_seconds']:8.1f} {p['step']:6d}  {100 * p['exact_match']:19.1f}%"
              for p in points]
    return lines


def describe(report: dict[str, Any], points: list[dict[str, float]]) -> str:
    """The run's result in one line (see the module docstring)."""
    metrics = report["metrics"]
    head = f"{report['task']} {report['preset']} on {report['device']}:"
    wall = (f"{report['process_seconds']:.1f} s wall including start-up "
            f"({report['steps']} steps, {report['train_seconds']:.1f} s of training)")
    if report["task"] != "multi30k":
        reached = next((p for p in points if p["exact_match"] >= 1.0), None)
        if reached is None:
            return (f"{head} did NOT reach 100% held-out exact match (final "
                    f"{100 * metrics['exact_match']:.1f}% of {metrics['held_out_sequences']} "
                    f"sequences); {wall}")
        return (f"{head} 100% held-out exact match after {reached['train_seconds']:.1f} s of "
                f"training (step {reached['step']}, {metrics['held_out_sequences']} sequences); "
                f"{wall}")
    test = metrics.get("test_2016_flickr_bleu")
    scores = f"validation sacreBLEU {metrics['val_bleu']:.2f}, test_2016_flickr " + (
        f"sacreBLEU {test:.2f}" if test is not None else "not scored")
    return f"{head} {scores} (beam {metrics['beam_size']}); {wall}; {metrics['bleu_signature']}"


def gpu_skip_reason(preset: str, device: torch.device) -> str | None:
    """Why ``preset`` is not run on ``device``, or None when it is."""
    if preset == "gpu" and device.type != "cuda":
        cause = "none is visible" if not torch.cuda.is_available() else "--device is the CPU"
        return f"the gpu preset needs a CUDA GPU and {cause}; skipped"
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    ours = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["reverse"], choices=TASKS)
    parser.add_argument("--presets", nargs="+", default=["cpu"], choices=PRESETS)
    parser.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    parser.add_argument("--eval-every", type=int, default=None, metavar="N",
                        help="evaluate every N steps (default: the preset's interval)")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH",
                        help="also write every run's curve and result to PATH")
    args = parser.parse_args(ours)
    try:
        device = resolve_device(args.device)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.eval_every is not None:
        extra = ["--eval-every", str(args.eval_every), *extra]

    runs: list[dict[str, Any]] = []
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for task in args.tasks:
            for preset in args.presets:
                skip = gpu_skip_reason(preset, device)
                if skip is not None:
                    print(f"{task} {preset}: {skip}", flush=True)
                    runs.append({"task": task, "preset": preset, "skipped": skip})
                    continue
                try:
                    report = run_one(task, preset, args.device, Path(tmp) / f"{task}-{preset}",
                                     extra)
                except RuntimeError as err:
                    print(f"{task} {preset}: training failed: {err}", flush=True)
                    failed = True
                    continue
                points = curve(report)
                print(f"{task} {preset} on {report['device']}: quality against training time")
                print("\n".join(format_curve(report, points)))
                print(describe(report, points), flush=True)
                runs.append({key: report[key] for key in
                             ("task", "preset", "device", "steps", "train_seconds",
                              "wall_seconds", "process_seconds", "metrics")}
                            | {"curve": points})
    if args.json is not None:
        args.json.write_text(json.dumps(runs, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
