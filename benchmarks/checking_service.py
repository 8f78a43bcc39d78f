"""How long a learner waits for a check cell in a class, where the class's checking service
runs the visible checks, against the same check run in the notebook's own process.

The script starts a checking service (``python -m autograder.hub.checking``, as the class server
does), waits for its warm-up, then checks every exercise's reference both ways, ``--repeat``
times each, in this process (the "kernel"), and prints per exercise the median time in the
notebook, the median and the worst time through the service, and their ratio. The goal: at
most 3 s per check through the service on 2 cores.

    python benchmarks/checking_service.py                  # every exercise
    python benchmarks/checking_service.py --chapters ch08 ch10 --repeat 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autograder.exercises.checking import CHECKS_ENV
from autograder.exercises.registry import all_exercises, grade_function
from autograder.learner.remote_check import remote_check

GOAL_S = 3.0


def _start_service(folder: Path) -> tuple[subprocess.Popen, Path, float]:
    """Start a service and wait for its first answer (which waits for its warm-up)."""
    path = folder / "socket"
    started = time.perf_counter()
    # This one process stands for every exercise's learner: no learner's rate limit.
    process = subprocess.Popen([sys.executable, "-m", "autograder.hub.checking",
                                "--listen", str(path), "--rate-limit", "1000000"],
                               stdout=subprocess.DEVNULL)
    while not path.exists():
        if process.poll() is not None:
            raise SystemExit("the checking service stopped before it was ready")
        time.sleep(0.2)
    os.environ[CHECKS_ENV] = str(path)
    remote_check("ch02.softmax", lambda x, axis=-1: x)
    return process, path, time.perf_counter() - started


def _time(fn, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chapters", nargs="*", default=None, help="chapter prefixes (ch08)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)  # as the chapters' notebooks do
    with tempfile.TemporaryDirectory() as folder:
        process, path, warm_up = _start_service(Path(folder))
        try:
            print(f"service ready after {warm_up:.1f} s (warm-up included)")
            print(f"{'exercise':32} {'notebook':>9} {'service':>9} {'worst':>7} {'ratio':>6}")
            worst_all = 0.0
            for exercise in all_exercises():
                if args.chapters and exercise.id[:4] not in args.chapters:
                    continue
                fn = exercise.load_reference()
                local = _time(lambda fn=fn, e=exercise: grade_function(e.id, fn), args.repeat)
                remote = _time(lambda fn=fn, e=exercise: remote_check(e.id, fn), args.repeat)
                worst_all = max(worst_all, max(remote))
                print(f"{exercise.id:32} {statistics.median(local):8.2f}s "
                      f"{statistics.median(remote):8.2f}s {max(remote):6.2f}s "
                      f"{statistics.median(remote) / statistics.median(local):6.1f}")
            verdict = "meets" if worst_all <= GOAL_S else "misses"
            print(f"slowest check through the service: {worst_all:.2f} s ({verdict} the "
                  f"{GOAL_S:g} s goal)")
        finally:
            process.terminate()
            process.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
