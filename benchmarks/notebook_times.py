"""Execution time of every solution notebook, in fast mode and in full mode.

Each chapter's folder (``solutions/<chapter>/``, with the data files beside the notebook) is
copied to a temporary folder, so the repository is never written to, and its notebook is run
top to bottom in a fresh kernel the way ``python -m autograder selfcheck`` runs it: hidden
checks left out, as in the release a learner runs. The time is the wall time of that run,
kernel start included. Each run also names its slowest cell after the first code cell (the
imports, which load NumPy, matplotlib and for most chapters PyTorch): no cell of chapters 1-8
should keep a learner waiting more than 3 s. Cells are numbered from 1, as JupyterLab does.

* fast mode: ``TRANSFORMER_COURSE_FAST=1``, the tiny configurations the test suite uses;
* full mode: the variable unset, what a learner runs.

    python benchmarks/notebook_times.py                                  # every chapter
    python benchmarks/notebook_times.py --chapters ch09_training --modes full --json t.json
    python benchmarks/notebook_times.py --modes full --busy 2            # on a busy machine

``--busy N`` keeps N more processes spinning on the CPU while the notebooks run, as other
programs do on a shared machine: a learner's cells must stay quick there too. ``--root`` times
the notebooks of another checkout (an earlier version, say) with this script.

Chapters 10 and 11 read Multi30k from ``MULTI30K_DIR`` (see :mod:`transformer_ref.data.datasets`);
without the files their Multi30k sections are skipped and their times are not comparable. A
notebook that fails does not stop the run: its status names the first error
(``error: <exception>``, or ``failed: <exercise>`` for a check that did not pass). A cell
that runs longer than ``--timeout`` seconds is interrupted, which shows as
``error: KeyboardInterrupt``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from autograder.course import ROOT, Course
from autograder.learner.selfcheck import SelfCheckReport, run_selfcheck
from autograder.steps.release import chapters_in
from transformer_ref.data.datasets import MULTI30K_ENV, verify_multi30k

FAST_ENV = "TRANSFORMER_COURSE_FAST"
MODES = ("fast", "full")
MULTI30K_CHAPTERS = ("ch10_translation", "ch11_language_model")
# Full mode trains models for minutes in one cell; the limit only stops a hung kernel.
DEFAULT_CELL_TIMEOUT = 1800


def status_of(report: SelfCheckReport) -> str:
    """``ok``, or the first thing that went wrong in the executed notebook."""
    if report.cell_errors:
        return f"error: {report.cell_errors[0][1].split(':', 1)[0]}"
    failed = [o.exercise for o in report.outcomes if not o.passed]
    return f"failed: {failed[0]}" if failed else "ok"


def slowest_cell(report: SelfCheckReport) -> tuple[int, float] | None:
    """``(cell number, seconds)`` of the slowest code cell after the first one (the imports),
    or None when no such cell ran."""
    cells = sorted(report.cell_seconds.items())[1:]
    return max(cells, key=lambda item: item[1]) if cells else None


def time_notebook(chapter: str, mode: str, timeout: int, root: Path = ROOT) -> dict[str, Any]:
    """Run ``chapter``'s solution notebook of the checkout ``root`` once in ``mode``, in a
    temporary copy of its folder.

    Returns:
        ``{"seconds": wall time, "imports_seconds": the first code cell's time,
        "slowest_cell": [cell number, seconds] of the slowest other cell (or None),
        "status": see status_of, "details": the failure lines}``.
    """
    if mode == "fast":
        os.environ[FAST_ENV] = "1"
    else:
        os.environ.pop(FAST_ENV, None)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / chapter
        shutil.copytree(Course.of(root).source_dir(chapter), folder)
        started = time.perf_counter()
        report = run_selfcheck(folder / f"{chapter}.ipynb", timeout=timeout)
        seconds = time.perf_counter() - started
    status = status_of(report)
    details = [] if status == "ok" else report.lines()[1:]
    cells = sorted(report.cell_seconds.items())
    slowest = slowest_cell(report)
    return {"seconds": seconds, "imports_seconds": cells[0][1] if cells else None,
            "slowest_cell": list(slowest) if slowest else None, "status": status,
            "details": details}


def describe_slowest(run: dict[str, Any]) -> str:
    """``"cell 28: 0.41 s"`` for a run's slowest cell after the imports, ``-`` without one."""
    if run["slowest_cell"] is None:
        return "-"
    number, seconds = run["slowest_cell"]
    return f"cell {number}: {seconds:.2f} s"


def table(results: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """One row per chapter: seconds per mode (``-`` when not run), the slowest cell after the
    imports in each mode, and a combined status."""
    width = max(len("chapter"), *(len(chapter) for chapter in results))
    slow = 20
    lines = [f"{'chapter':<{width}}  {'fast s':>8}  {'full s':>8}  {'slowest cell, fast':<{slow}}"
             f"  {'slowest cell, full':<{slow}}  status"]
    for chapter, runs in results.items():
        seconds = [f"{runs[m]['seconds']:8.1f}" if m in runs else f"{'-':>8}" for m in MODES]
        slowest = [describe_slowest(runs[m]) if m in runs else "-" for m in MODES]
        problems = [f"{m}: {r['status']}" for m, r in runs.items() if r["status"] != "ok"]
        lines.append(f"{chapter:<{width}}  {seconds[0]}  {seconds[1]}  {slowest[0]:<{slow}}  "
                     f"{slowest[1]:<{slow}}  {'; '.join(problems) or 'ok'}")
    return lines


def _spin(stop: Any) -> None:
    while not stop.is_set():
        sum(range(10_000))


@contextlib.contextmanager
def busy_processes(count: int) -> Iterator[None]:
    """``count`` processes that keep a core busy each until the block ends."""
    stop = multiprocessing.Event()
    workers = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True)
               for _ in range(count)]
    for worker in workers:
        worker.start()
    try:
        yield
    finally:
        stop.set()
        for worker in workers:
            worker.join()


def available_cores() -> int:
    """CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def main(argv: list[str] | None = None) -> int:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--root", type=Path, default=ROOT,
                     help="the checkout whose solutions/ to time (default: this one)")
    root = pre.parse_known_args(argv)[0].root.resolve()
    chapters = chapters_in(Course.of(root))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], parents=[pre])
    parser.add_argument("--chapters", nargs="+", default=chapters, choices=chapters,
                        metavar="CHAPTER", help="chapter ids (default: every chapter)")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--timeout", type=int, default=DEFAULT_CELL_TIMEOUT,
                        help=f"seconds one cell may run (default {DEFAULT_CELL_TIMEOUT})")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH",
                        help="also write the times and statuses to PATH")
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="keep N more processes busy on the CPU meanwhile (default 0)")
    args = parser.parse_args(argv)

    readers = [chapter for chapter in args.chapters if chapter in MULTI30K_CHAPTERS]
    if readers:
        try:
            # Absolute, because the notebook runs in another folder.
            os.environ[MULTI30K_ENV] = str(verify_multi30k().resolve())
        except (FileNotFoundError, ValueError) as err:
            print(f"note: {', '.join(readers)} run without Multi30k ({err})", flush=True)
    print(f"notebooks of {root}; {available_cores()} CPU cores; {args.busy} busy processes "
          f"besides; cell timeout {args.timeout} s", flush=True)

    saved = os.environ.get(FAST_ENV)
    results: dict[str, dict[str, dict[str, Any]]] = {}
    try:
        with busy_processes(args.busy):
            for chapter in args.chapters:
                for mode in MODES:
                    if mode in args.modes:
                        run = time_notebook(chapter, mode, args.timeout, root)
                        results.setdefault(chapter, {})[mode] = run
                        imports = run["imports_seconds"]
                        print(f"{chapter} {mode}: {run['seconds']:.1f} s, {run['status']}; "
                              f"imports {'-' if imports is None else f'{imports:.2f} s'}, "
                              f"slowest other {describe_slowest(run)}",
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
