"""Execution time of every solution notebook, in fast mode and in full mode.

Each chapter's folder (``solutions/<chapter>/``, with the data files beside the notebook) is
copied to a temporary folder, so the repository is never written to, and its notebook is run
top to bottom in a fresh kernel the way ``python -m autograder selfcheck`` runs it: hidden
checks left out, as in the release a learner runs. The time is the wall time of that run,
kernel start included.

* fast mode: ``TRANSFORMER_COURSE_FAST=1``, the tiny configurations the test suite uses;
* full mode: the variable unset, what a learner runs.

    python benchmarks/notebook_times.py                                  # every chapter
    python benchmarks/notebook_times.py --chapters ch09_training --modes full --json t.json

Chapter 10 reads Multi30k from ``MULTI30K_DIR`` (see :mod:`transformer_ref.data`); without
the files its Multi30k sections are skipped and its times are not comparable. A notebook that
fails does not stop the run: its status names the first error (``error: <exception>``, or
``failed: <exercise>`` for a check that did not pass). A cell that runs longer than
``--timeout`` seconds is interrupted, which shows as ``error: KeyboardInterrupt``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from autograder.course import ROOT, Course
from autograder.learner.selfcheck import SelfCheckReport, run_selfcheck
from autograder.pipeline.release import chapters_in
from transformer_ref.data import MULTI30K_ENV, verify_multi30k

FAST_ENV = "TRANSFORMER_COURSE_FAST"
MODES = ("fast", "full")
MULTI30K_CHAPTER = "ch10_translation"
# Full mode trains models for minutes in one cell; the limit only stops a hung kernel.
DEFAULT_CELL_TIMEOUT = 1800


def status_of(report: SelfCheckReport) -> str:
    """``ok``, or the first thing that went wrong in the executed notebook."""
    if report.cell_errors:
        return f"error: {report.cell_errors[0][1].split(':', 1)[0]}"
    failed = [o.exercise for o in report.outcomes if not o.passed]
    return f"failed: {failed[0]}" if failed else "ok"


def time_notebook(chapter: str, mode: str, timeout: int) -> dict[str, Any]:
    """Run ``chapter``'s solution notebook once in ``mode`` in a temporary copy of its folder.

    Returns:
        ``{"seconds": wall time, "status": see status_of, "details": the failure lines}``.
    """
    if mode == "fast":
        os.environ[FAST_ENV] = "1"
    else:
        os.environ.pop(FAST_ENV, None)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / chapter
        shutil.copytree(Course.of().source_dir(chapter), folder)
        started = time.perf_counter()
        report = run_selfcheck(folder / f"{chapter}.ipynb", timeout=timeout)
        seconds = time.perf_counter() - started
    status = status_of(report)
    details = [] if status == "ok" else report.lines()[1:]
    return {"seconds": seconds, "status": status, "details": details}


def table(results: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """One row per chapter: seconds per mode (``-`` when not run) and a combined status."""
    width = max(len("chapter"), *(len(chapter) for chapter in results))
    lines = [f"{'chapter':<{width}}  {'fast s':>8}  {'full s':>8}  status"]
    for chapter, runs in results.items():
        seconds = [f"{runs[m]['seconds']:8.1f}" if m in runs else f"{'-':>8}" for m in MODES]
        problems = [f"{m}: {r['status']}" for m, r in runs.items() if r["status"] != "ok"]
        lines.append(f"{chapter:<{width}}  {seconds[0]}  {seconds[1]}  "
                     f"{'; '.join(problems) or 'ok'}")
    return lines


def available_cores() -> int:
    """CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def main(argv: list[str] | None = None) -> int:
    chapters = chapters_in(ROOT)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chapters", nargs="+", default=chapters, choices=chapters,
                        metavar="CHAPTER", help="chapter ids (default: every chapter)")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--timeout", type=int, default=DEFAULT_CELL_TIMEOUT,
                        help=f"seconds one cell may run (default {DEFAULT_CELL_TIMEOUT})")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH",
                        help="also write the times and statuses to PATH")
    args = parser.parse_args(argv)

    if MULTI30K_CHAPTER in args.chapters:
        try:
            # Absolute, because the notebook runs in another folder.
            os.environ[MULTI30K_ENV] = str(verify_multi30k().resolve())
        except (FileNotFoundError, ValueError) as err:
            print(f"note: {MULTI30K_CHAPTER} runs without Multi30k ({err})", flush=True)
    print(f"{available_cores()} CPU cores; cell timeout {args.timeout} s", flush=True)

    saved = os.environ.get(FAST_ENV)
    results: dict[str, dict[str, dict[str, Any]]] = {}
    try:
        for chapter in args.chapters:
            for mode in MODES:
                if mode in args.modes:
                    run = time_notebook(chapter, mode, args.timeout)
                    results.setdefault(chapter, {})[mode] = run
                    print(f"{chapter} {mode}: {run['seconds']:.1f} s, {run['status']}",
                          *run["details"], sep="\n    ", flush=True)
    finally:
        if saved is None:
            os.environ.pop(FAST_ENV, None)
        else:
            os.environ[FAST_ENV] = saved
    print("\n".join(table(results)))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0 if all(r["status"] == "ok" for runs in results.values() for r in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
