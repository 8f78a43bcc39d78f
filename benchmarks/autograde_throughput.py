"""Autograding throughput: ``python -m autograder autograde --jobs N`` against plain nbgrader.

Both sides grade the same sample class (:mod:`autograder.demo.sample_class`, its two NumPy
chapters) in one run, each in a course of its own (fresh gradebook, same release):

* pipeline: :func:`autograder.pipeline.grade.autograde` with ``--jobs`` worker processes of a
  local Dask cluster (sandboxed execution plus verification outside the kernel; the cluster's
  start and stop are part of the time);
* serial: nbgrader's own ``nbgrader autograde <chapter> --student <id>`` (without the course's
  configuration that routes it through the course's grader), one process per learner, one
  after the other, as an instructor would loop in a shell.

It prints notebooks graded per minute for both and their ratio (goal: at least 3 with
``--jobs 2`` on 2 cores). Broken submissions are part of the class on both sides.

    python benchmarks/autograde_throughput.py                   # whole class, --jobs 2
    python benchmarks/autograde_throughput.py --learners 3      # a quick smoke run
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from autograder.course import ensure_alembic_on_path
from autograder.demo.demo import prepare_course
from autograder.demo.sample_class import NUMPY_CHAPTERS, build_class
from autograder.pipeline.collect import collect
from autograder.pipeline.grade import autograde
from autograder.pipeline.secret import DEVELOPMENT_ENV

NBGRADER_CONFIG = """\
from autograder.course import course_config

c = get_config()  # noqa: F821
c.merge(course_config({root!r}, {course_dir!r}))
# nbgrader's own autograding, as it comes: the course's configuration routes it through the
# course's grader, which is what this benchmark compares against.
del c.Autograde
"""


def _class_subset(class_dir: Path, learners: int | None) -> list[tuple[str, str]]:
    """``(learner, chapter)`` of the submissions to grade (the first ``learners`` learners)."""
    names = sorted(p.name for p in class_dir.iterdir() if p.is_dir())[:learners]
    return [(name, chapter.name) for name in names
            for chapter in sorted((class_dir / name).iterdir()) if chapter.is_dir()]


def time_pipeline(class_dir: Path, course_root: Path, chapters: list[str],
                  learners: list[str], jobs: int) -> float:
    """Seconds :func:`autograde` takes for the class with ``jobs`` workers."""
    course_dir = course_root / "course-pipeline"
    collect([class_dir], root=course_root, course_dir=course_dir, chapters=chapters)
    start = time.perf_counter()
    autograde(chapters, root=course_root, course_dir=course_dir, jobs=jobs, students=learners)
    return time.perf_counter() - start


def time_plain_nbgrader(class_dir: Path, course_root: Path, chapters: list[str],
                        submissions: list[tuple[str, str]]) -> float:
    """Seconds a shell loop of ``nbgrader autograde CHAPTER --student ID`` takes."""
    from autograder.pipeline.release import generate

    course_dir = course_root / "course-nbgrader"
    collect([class_dir], root=course_root, course_dir=course_dir, chapters=chapters)
    generate(chapters, root=course_root, course_dir=course_dir)  # records the cells to grade
    config_dir = course_root / "nbgrader-plain"
    config_dir.mkdir(exist_ok=True)
    (config_dir / "nbgrader_config.py").write_text(
        NBGRADER_CONFIG.format(root=str(course_root), course_dir=str(course_dir)))
    ensure_alembic_on_path()
    nbgrader = str(Path(sys.executable).with_name("nbgrader"))
    start = time.perf_counter()
    for learner, chapter in submissions:
        # A failing learner (a broken notebook) does not stop the loop, as in a shell loop.
        subprocess.run([nbgrader, "autograde", chapter, "--student", learner, "--force"],
                       cwd=config_dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    # nbgrader's gradebook code trips a harmless SQLAlchemy warning for every learner.
    warnings.filterwarnings("ignore", message=".*not in session.*")
    # The sample class is no class: it grades with the development secret.
    os.environ[DEVELOPMENT_ENV] = "1"
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="pipeline workers (default 2)")
    parser.add_argument("--learners", type=int, default=None,
                        help="grade only the first N learners (default: the whole class)")
    args = parser.parse_args(argv)
    if args.jobs < 1 or (args.learners is not None and args.learners < 1):
        parser.error("--jobs and --learners must be 1 or more")

    chapters = list(NUMPY_CHAPTERS)
    with tempfile.TemporaryDirectory(prefix="throughput-") as folder:
        workspace = Path(folder)
        course_root = prepare_course(workspace, chapters)
        class_dir = workspace / "class"
        build_class(class_dir, root=course_root, chapters=chapters)
        (class_dir / "expected.csv").unlink()
        submissions = _class_subset(class_dir, args.learners)
        learners = sorted({learner for learner, _ in submissions})
        n = len(submissions)
        print(f"{n} notebooks of {len(learners)} learners, chapters {', '.join(chapters)}")

        serial = time_plain_nbgrader(class_dir, course_root, chapters, submissions)
        pipeline = time_pipeline(class_dir, course_root, chapters, learners, args.jobs)

    serial_rate, pipeline_rate = 60 * n / serial, 60 * n / pipeline
    print(f"plain nbgrader autograde, one process per learner: {serial:7.1f} s  "
          f"{serial_rate:6.1f} notebooks/min")
    print(f"python -m autograder autograde --jobs {args.jobs}:            {pipeline:7.1f} s  "
          f"{pipeline_rate:6.1f} notebooks/min")
    print(f"ratio (pipeline / plain): {pipeline_rate / serial_rate:.2f}  (goal >= 3 with "
          "--jobs 2 on 2 cores)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
