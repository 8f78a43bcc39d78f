"""Every GPU figure of the course in one run: the paths a learner with a GPU takes.

Run on a machine with one CUDA GPU (or on the CPU with ``--quick``, tiny sizes, to try the
script itself). Each step runs in a process of its own under a time limit, so one step that
fails or hangs leaves the others' figures; everything goes to ``--out``:

1. ``environment``: the GPU's name, memory, compute capability, and the versions in use.
2. ``amp``: the reverse task trained briefly under bf16 autocast and under float16 autocast
   with a gradient scaler (bf16 support masked, as on a GPU older than Ampere), with the
   held-out exact match each reaches.
3. ``throughput``: ``throughput_vs_torch.py`` at the tiny and base-like sizes.
4. ``attention``: ``attention_scaling.py`` up to n = 8192.
5. ``notebooks``: chapters 10 and 11's solution notebooks top to bottom in fast mode
   (``TRANSFORMER_COURSE_FAST=1``), training cells included, each in a fresh kernel.
6. ``multi30k``, last, so that ``--budget`` gives it the time the others leave:
   ``python -m transformer_ref.train --task multi30k --preset gpu`` with its optimisation
   fitted to the time (see ``fitted_recipe``), with the peak GPU memory, the target tokens
   per second, and the model FLOPs utilisation (bf16) of the training steps: model FLOPs per
   target token (the formula of ``throughput_vs_torch.py``, averaged over the training pairs,
   which every epoch visits once) times the target tokens per second, over the GPU's dense
   bf16 peak.

``OUT/summary.json`` gathers the figures; ``OUT/<step>.log`` holds each step's output.

    python benchmarks/gpu_figures.py --budget 540 --out /tmp/gpu          # on the GPU
    python benchmarks/gpu_figures.py --quick --device cpu --out /tmp/gpu  # try it on a CPU
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_CHAPTERS = ("ch10_translation", "ch11_language_model")
# Seconds the Multi30k step needs besides its training steps: the data and BPE, the step-time
# probe, an evaluation halfway, beam search over validation and test2016, and the FLOP count.
TRAINING_RESERVE = 110
# What the quick mode trains on the CPU: the gpu preset's code paths with a model and a
# decoding small enough for a minute.
QUICK_MULTI30K = ("--set", "N=1", "--set", "d_model=64", "--set",
                  "d_ff=128", "--set", "h=2", "--set", "max_tokens=1000", "--set",
                  "beam_size=1", "--set", "eval_sentences=20")


def run_step(name: str, command: list[str], out: Path, timeout: float) -> dict[str, Any]:
    """Run ``command`` with its output in ``OUT/name.log``; its status and wall time."""
    # Unbuffered, so that a step stopped at its time limit leaves every line it printed.
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    started = time.perf_counter()
    with open(out / f"{name}.log", "w") as log:
        try:
            code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                                  timeout=timeout, env=env, check=False).returncode
            status = "ok" if code == 0 else f"exit {code}"
        except subprocess.TimeoutExpired:
            status = f"timed out after {timeout:.0f} s"
    seconds = time.perf_counter() - started
    print(f"[{name}] {status} in {seconds:.1f} s", flush=True)
    return {"status": status, "seconds": round(seconds, 1)}


def self_step(step: str, args: argparse.Namespace) -> list[str]:
    """This script, asked to run one in-process step with the run's options."""
    return [sys.executable, __file__, "--step", step, "--device", args.device,
            "--out", str(args.out), "--train-minutes", str(args.train_minutes),
            *(["--quick"] if args.quick else [])]


# --------------------------------------------------------------------------- in-process steps
# Each step imports torch and the course when it runs, in its own process: the process that
# runs the steps holds no CUDA context of its own.


def environment(args: argparse.Namespace) -> dict[str, Any]:
    import numpy
    import torch

    info: dict[str, Any] = {"python": sys.version.split()[0], "torch": torch.__version__,
                            "numpy": numpy.__version__, "cuda": torch.version.cuda}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1),
                    capability=f"{props.major}.{props.minor}",
                    multiprocessors=props.multi_processor_count,
                    bf16=torch.cuda.is_bf16_supported())
        smi = shutil.which("nvidia-smi")
        if smi:
            query = "--query-gpu=name,driver_version,memory.total"
            info["nvidia_smi"] = subprocess.run([smi, query, "--format=csv,noheader"],
                                                capture_output=True, text=True).stdout.strip()
    return info


def amp(args: argparse.Namespace) -> dict[str, Any]:
    """The reverse task under bf16 autocast, then float16 autocast with a GradScaler."""
    import torch

    from transformer_ref.train import main as train_main

    results = {}
    steps = "10" if args.quick else "400"
    for dtype in ("bfloat16", "float16"):
        if dtype == "float16":
            # autocast_dtype() asks this at every call: masked, the GPU looks pre-Ampere.
            torch.cuda.is_bf16_supported = lambda *a, **k: False
        run_dir = Path(tempfile.mkdtemp()) / dtype
        started = time.perf_counter()
        code = train_main(["--task", "reverse", "--preset", "cpu", "--device", args.device,
                           "--max-steps", steps, "--out", str(run_dir), "--no-progress"])
        report = json.loads((run_dir / "metrics.json").read_text())
        results[dtype] = {"exit": code, "steps": report["steps"],
                          "exact_match": report["metrics"]["exact_match"],
                          "wall_seconds": round(time.perf_counter() - started, 1)}
    return results


def flops_per_target_token(run_dir: Path, model_config: dict[str, Any]) -> float:
    """Model FLOPs of training per target token, averaged over the training pairs."""
    import torch
    from tokenizers import Tokenizer

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from throughput_vs_torch import model_flops

    from transformer_ref.data.datasets import load_multi30k
    from transformer_ref.data.tokenizer import encode_batch
    from transformer_ref.data.vocab import PAD_ID
    from transformer_ref.model.build import build_model
    from transformer_ref.training.checkpoint import load_checkpoint
    from transformer_ref.training.loop import pair_length
    from transformer_ref.training.presets import get_preset

    checkpoint = load_checkpoint(run_dir / "checkpoint.pt")
    tok = Tokenizer.from_str(checkpoint["tokenizer"])
    model = build_model(**checkpoint["model_config"])
    raw = load_multi30k("train")
    pairs = list(zip(encode_batch(tok, [de for de, _ in raw]),
                     encode_batch(tok, [en for _, en in raw]), strict=True))
    limit = get_preset("multi30k", "gpu").max_train_len
    pairs = [p for p in pairs if pair_length(p) <= limit]
    params = {part: sum(p.numel() for p in getattr(model, part).parameters())
              for part in ("encoder", "decoder")}
    params["generator"] = model.generator.proj.weight.numel()
    # model_flops reads real lengths from padded tensors: one row per pair, target shifted.
    src = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s, _ in pairs],
                                          batch_first=True, padding_value=PAD_ID)
    tgt = torch.nn.utils.rnn.pad_sequence([torch.tensor(t) for _, t in pairs],
                                          batch_first=True, padding_value=PAD_ID)
    flops = model_flops(model_config["N"], model_config["d_model"], (src, None, tgt), params)
    return flops / float((tgt != PAD_ID).sum())


def fitted_recipe(args: argparse.Namespace, command: list[str]) -> dict[str, Any]:
    """The gpu preset's optimisation fitted to ``--train-minutes`` on this GPU.

    Times a short run of the preset's model and batches, then takes as many steps as the time
    allows (at most the preset's), with the learning rate falling linearly to zero at the last
    one and a warm-up of an eighth of them at the preset's peak rate: a schedule cut short by
    the time cap would stop at a high rate instead.
    """
    import math
    from dataclasses import replace

    from transformer_ref.model.build import build_model
    from transformer_ref.train import build_parser, multi30k_setup
    from transformer_ref.training.device import resolve_device
    from transformer_ref.training.loop import fit
    from transformer_ref.training.presets import get_preset, parse_setting, with_settings

    parsed = build_parser().parse_args(command)
    preset = with_settings(get_preset("multi30k", "gpu"),
                           dict(parse_setting(text) for text in parsed.settings))
    if parsed.max_steps is not None:
        return {"max_steps": parsed.max_steps}
    device = resolve_device(args.device)
    setup = multi30k_setup(preset, device, test=False)
    model = build_model(setup.vocab_size, setup.vocab_size, **preset.model).to(device)
    # The first steps pay for CUDA's start-up and the allocator's growth: time the ones after.
    for probe_steps in (5, 10) if args.quick else (30, 60):
        config = replace(preset.train, max_steps=probe_steps, eval_every=0, max_minutes=None)
        result = fit(model, setup.train_pairs, config, device=device, progress=False,
                     log=lambda _line: None)
    per_step = result.train_seconds / result.step
    steps = min(preset.train.max_steps, int(0.9 * args.train_minutes * 60 / per_step))
    warmup = max(steps // 8, 1)
    peak = preset.train.lr_factor * preset.train.warmup ** -0.5
    print(f"probe: {per_step * 1000:.1f} ms per step over {result.step} steps", flush=True)
    return {"max_steps": steps, "decay": "linear", "warmup": warmup,
            "lr_factor": round(peak * math.sqrt(warmup), 4)}


def multi30k(args: argparse.Namespace) -> dict[str, Any]:
    """The gpu preset under a time cap, with its peak memory and MFU."""
    import torch

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from throughput_vs_torch import peak_flops

    from transformer_ref.train import main as train_main
    from transformer_ref.training.device import resolve_device

    run_dir = Path(tempfile.mkdtemp()) / "multi30k-gpu"
    command = ["--task", "multi30k", "--preset", "gpu", "--device", args.device,
               "--out", str(run_dir), "--no-progress"]
    if args.quick:
        command += QUICK_MULTI30K
    recipe = fitted_recipe(args, command)
    print(f"recipe for {args.train_minutes:g} minutes: {recipe}", flush=True)
    for name, value in recipe.items():
        if name != "max_steps":
            command += ["--set", f"{name}={value!r}"]
        elif "--max-steps" not in command:  # --quick names its own
            command += ["--max-steps", str(value)]
    # The cap only guards the call's time limit: the steps were chosen to end before it.
    command += ["--max-minutes", str(args.train_minutes * 1.15),
                "--eval-every", str(max(recipe["max_steps"] // 2, 1))]
    code = train_main(command)
    report = json.loads((run_dir / "metrics.json").read_text())
    shutil.copy(run_dir / "metrics.json", args.out / "multi30k_metrics.json")
    device = resolve_device(args.device)
    per_token = flops_per_target_token(run_dir, report["model_config"])
    peak = peak_flops(device)
    rate = report["target_tokens_per_second"]
    result = {"exit": code, "steps": report["steps"], "train_seconds": report["train_seconds"],
              "wall_seconds": report["wall_seconds"], "target_tokens_per_second": rate,
              "parameters": report["parameters"], "model_flops_per_target_token": per_token,
              "mfu_bf16": None if peak is None else per_token * rate / peak,
              "stop_reason": report["stop_reason"], "recipe": recipe,
              "metrics": report["metrics"], "history": report["history"]}
    if device.type == "cuda":
        result["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
        result["peak_reserved_gib"] = torch.cuda.max_memory_reserved(device) / 2**30
    return result


def notebook(chapter: str, out: Path) -> dict[str, Any]:
    """One solution notebook top to bottom in fast mode, in a copy of its folder."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(shutil.copytree(ROOT / "solutions" / chapter, Path(tmp) / chapter))
        path = folder / f"{chapter}.ipynb"
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(nb, timeout=600, kernel_name="python3",
                                resources={"metadata": {"path": str(folder)}})
        started, error = time.perf_counter(), None
        try:
            client.execute()
        except CellExecutionError as failure:
            error = str(failure).strip().splitlines()[-1]
        seconds = time.perf_counter() - started
        nbformat.write(nb, out / f"{chapter}.executed.ipynb")
    devices = [line for cell in nb.cells if cell.cell_type == "code"
               for output in cell.get("outputs", []) if output.get("name") == "stdout"
               for line in output.get("text", "").splitlines() if line.startswith("device:")]
    return {"status": "ok" if error is None else f"error: {error}",
            "seconds": round(seconds, 1), "first_line": devices[0] if devices else None}


def notebooks(args: argparse.Namespace) -> dict[str, Any]:
    os.environ["TRANSFORMER_COURSE_FAST"] = "1"
    return {chapter: notebook(chapter, args.out) for chapter in NOTEBOOK_CHAPTERS}


IN_PROCESS = {"environment": environment, "amp": amp, "multi30k": multi30k,
              "notebooks": notebooks}


# --------------------------------------------------------------------------------- the run


def plan(args: argparse.Namespace) -> list[tuple[str, list[str], float]]:
    """(step, command, time limit in seconds) of the steps before the training, in order."""
    python = sys.executable
    sizes = ["--steps", "3", "--repeats", "1", "--warmup", "1"] if args.quick else \
        ["--steps", "20", "--repeats", "3", "--warmup", "5"]
    lengths = "64,256,1024" if args.quick else "256,512,1024,2048,4096,8192"
    return [
        ("environment", self_step("environment", args), 60),
        ("amp", self_step("amp", args), 120),
        ("throughput", [python, "benchmarks/throughput_vs_torch.py", "--device", args.device,
                        "--sizes", "tiny,base-like", *sizes], 90),
        ("attention", [python, "benchmarks/attention_scaling.py", "--device", args.device,
                       "--lengths", lengths, "--repeats", "3",
                       "--plot", str(args.out / "attention_scaling.png"),
                       "--json", str(args.out / "attention_scaling.json")], 90),
        ("notebooks", self_step("notebooks", args), 300),
    ]


def training_step(args: argparse.Namespace, elapsed: float) -> tuple[list[str], float]:
    """The Multi30k step, last: with ``--budget`` it trains for the time the others left."""
    if args.budget is not None:
        args.train_minutes = max(1.0, (args.budget - elapsed - TRAINING_RESERVE) / 60)
        return self_step("multi30k", args), args.budget - elapsed
    return self_step("multi30k", args), args.train_minutes * 60 + TRAINING_RESERVE


def record(summary: dict[str, Any], name: str, step: dict[str, Any], out: Path) -> None:
    """Add a step's status and figures to ``summary`` and write it to ``OUT/summary.json``."""
    figures = out / f"{name}.json"
    if figures.is_file():
        step["figures"] = json.loads(figures.read_text())
    summary[name] = step
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (default), or cpu with --quick")
    parser.add_argument("--out", type=Path, required=True, help="folder for logs and figures")
    parser.add_argument("--train-minutes", type=float, default=5.0,
                        help="time cap of the Multi30k training steps (default 5)")
    parser.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                        help="the whole run's time: the training, last, gets what the other "
                             "steps leave (instead of --train-minutes)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, to try the script")
    parser.add_argument("--only", default=None, help="comma-separated steps to run")
    parser.add_argument("--step", choices=sorted(IN_PROCESS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.step:
        result = IN_PROCESS[args.step](args)
        (args.out / f"{args.step}.json").write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
        # A step whose parts report a status (the notebooks) fails when any part failed.
        statuses = [part["status"] for part in result.values()
                    if isinstance(part, dict) and "status" in part]
        return 0 if all(status == "ok" for status in statuses) else 1

    wanted = set(args.only.split(",")) if args.only else None
    summary: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                               "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])}
    started = time.perf_counter()
    for name, command, limit in plan(args):
        if wanted is None or name in wanted:
            record(summary, name, run_step(name, command, args.out, limit), args.out)
    if wanted is None or "multi30k" in wanted:
        command, limit = training_step(args, time.perf_counter() - started)
        record(summary, "multi30k", run_step("multi30k", command, args.out, limit), args.out)
    failed = [name for name, step in summary.items()
              if isinstance(step, dict) and step["status"] != "ok"]
    print("failed steps: " + (", ".join(failed) if failed else "none"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
