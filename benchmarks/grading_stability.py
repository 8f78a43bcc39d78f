"""Grading the sample class again and again: never a ``grading_error``, the same grades each time.

The sample class (:mod:`tests.fixtures.sample_class`: 13 learners) in its two NumPy chapters
(ch02 and ch05) is released
once; each run collects it into a fresh course folder, grades it with ``--jobs`` local workers
(or on the Dask cluster of ``--scheduler``) and exports the grades CSV. One line per run: wall
time, ``grading_error`` flags, whether every score and flag is as ``expected.csv`` says, and
whether the CSV is byte-identical to the first run's. The exit status is 0 only when every run
is clean on all three.

    python benchmarks/grading_stability.py --runs 10 --jobs 2
    python benchmarks/grading_stability.py --runs 3 --scheduler tcp://127.0.0.1:8786
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

from autograder.collect.sources import collect
from autograder.course import Course
from autograder.grade.run import autograde
from autograder.grade.secret import DEVELOPMENT_ENV
from autograder.steps.report import export_csv

# The sample class is a test fixture, imported from the repository's root.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.fixtures.demo import prepare_course  # noqa: E402
from tests.fixtures.sample_class import (  # noqa: E402
    LEARNERS,
    NUMPY_CHAPTERS,
    build_class,
    compare,
)


def grade_once(class_dir: Path, course: Course, **where) -> tuple[float, list, str]:
    """Collect and grade the class into ``course``; seconds, summaries and the CSV text."""
    collect(course, [class_dir], chapters=list(NUMPY_CHAPTERS))
    start = time.perf_counter()
    summaries = autograde(course, list(NUMPY_CHAPTERS), **where)
    return time.perf_counter() - start, summaries, export_csv(course)


def main(argv: list[str] | None = None) -> int:
    # nbgrader's gradebook code trips a harmless SQLAlchemy warning for every learner.
    warnings.filterwarnings("ignore", message=".*not in session.*")
    # The sample class is no class: it grades with the development secret.
    os.environ[DEVELOPMENT_ENV] = "1"
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="gradings of the class (default 10)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--jobs", type=int, default=2, help="local workers (default 2)")
    where.add_argument("--scheduler", metavar="ADDRESS", help="grade on this Dask cluster")
    parser.add_argument("--learners", nargs="+", choices=LEARNERS, metavar="LEARNER",
                        help="only these learners of the class (default: all)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.jobs < 1:
        parser.error("--runs and --jobs must be 1 or more")

    placement = {"scheduler": args.scheduler} if args.scheduler else {"jobs": args.jobs}
    clean = True
    with tempfile.TemporaryDirectory(prefix="stability-") as folder:
        workspace = Path(folder)
        root = prepare_course(workspace, list(NUMPY_CHAPTERS))
        expected = build_class(workspace / "class", root=root, chapters=NUMPY_CHAPTERS,
                               learners=args.learners)
        print(f"{len(expected)} notebooks of {len({e.learner for e in expected})} learners, "
              f"{args.runs} runs, " + (f"scheduler {args.scheduler}" if args.scheduler
                                       else f"--jobs {args.jobs}"))
        first_csv = None
        for run in range(1, args.runs + 1):
            course = Course.of(root, workspace / f"course-{run}")
            seconds, summaries, csv = grade_once(workspace / "class", course, **placement)
            errors = [(s.student, s.chapter, f.reason) for s in summaries for f in s.flags
                      if f.code == "grading_error"]
            graded = {(s.student, s.chapter): (s.score, {f.code for f in s.flags})
                      for s in summaries}
            comparison = compare(expected, graded)
            first_csv = csv if first_csv is None else first_csv
            same = csv == first_csv
            clean = clean and not errors and comparison.ok and same
            print(f"run {run:2d}: {seconds:6.1f} s  grading_error: {len(errors)}  as expected: "
                  f"{'yes' if comparison.ok else 'NO'}  CSV identical to run 1: "
                  f"{'yes' if same else 'NO'}")
            for student, chapter, reason in errors:
                print(f"    grading_error {student}/{chapter}: {reason}")
            for problem in comparison.problems:
                print(f"    {problem}")
    print("every run clean" if clean else "NOT every run was clean")
    return 0 if clean else 1


if __name__ == "__main__":
    raise SystemExit(main())
