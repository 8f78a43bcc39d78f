"""Time to accuracy of the reference training command.

Runs ``python -m transformer_ref.train`` for each requested task and preset and prints the
wall time it took to reach 100% held-out exact match (synthetic tasks) or the final
sacreBLEU on test_2016_flickr together with the wall time (Multi30k).

    python benchmarks/time_to_accuracy.py --tasks reverse --presets cpu
    python benchmarks/time_to_accuracy.py --tasks multi30k --presets gpu --device cuda

Extra arguments after ``--`` go to the training command (e.g. ``-- --max-steps 50``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_one(task: str, preset: str, device: str, out: Path, extra: list[str]) -> dict:
    """Train once; return the metrics.json contents plus the measured wall time."""
    command = [sys.executable, "-m", "transformer_ref.train", "--task", task, "--preset", preset,
               "--device", device, "--out", str(out), "--no-progress", *extra]
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{proc.stderr}")
    report = json.loads((out / "metrics.json").read_text())
    report["process_seconds"] = wall
    return report


def describe(report: dict) -> str:
    metrics = report["metrics"]
    head = (f"{report['task']:>8} {report['preset']:>4} on {report['device']}: "
            f"{report['steps']} steps, {report['wall_seconds']:.1f} s in the run, "
            f"{report['process_seconds']:.1f} s including start-up")
    if "exact_match" in metrics:
        reached = "reached" if metrics["exact_match"] >= 1.0 else "did NOT reach"
        return f"{head}; {reached} 100% exact match ({100 * metrics['exact_match']:.1f}%)"
    return (f"{head}; test_2016_flickr BLEU {metrics['test_2016_flickr_bleu']:.2f} "
            f"(beam {metrics['beam_size']}) {metrics['bleu_signature']}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    ours = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["reverse"],
                        choices=["copy", "reverse", "sort", "multi30k"])
    parser.add_argument("--presets", nargs="+", default=["cpu"], choices=["cpu", "gpu"])
    parser.add_argument("--device", default="auto")
    args = parser.parse_args(ours)
    with tempfile.TemporaryDirectory() as tmp:
        for task in args.tasks:
            for preset in args.presets:
                out = Path(tmp) / f"{task}-{preset}"
                print(describe(run_one(task, preset, args.device, out, extra)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
