"""Autograding throughput: ``python -m autograder autograde --jobs N`` against plain nbgrader,
and against another revision's grader, side by side in one run.

The sample class (:mod:`tests.fixtures.sample_class`: its two NumPy chapters, ch02 and ch05,
13 learners, 21 notebooks, broken submissions included) is released once into a temporary
course and graded:

* pipeline: ``python -m autograder autograde all --jobs N``, as a command (its start-up, the
  local Dask cluster's start and stop included), into a course folder of its own each time;
  with ``--baseline-rev REV`` also REV's grader (:mod:`baseline`), the two alternating
  ``--repeats`` times on the same submissions;
* serial: nbgrader's own ``nbgrader autograde <chapter> --student <id>`` (without the course's
  configuration that routes it through the course's grader), one process per learner, one
  after the other, as an instructor would loop in a shell.

``--class-size N`` grades a class of at least N notebooks: the sample class's learners again
and again under other ids (``ada_2``, ...). A class is where the cluster's start-up stops
mattering. Plain nbgrader starts afresh for every learner, so its rate does not depend on the
class: it is timed on the sample class's distinct notebooks only.

Per grader it prints the seconds, notebooks per minute, the peak memory (resident memory of the
command and every process it started, summed, sampled four times a second) and the ratio to
plain nbgrader (goal: at least 3 with ``--jobs 2`` on 2 cores for the sample class, at least 4
for a class of 200); with a baseline, today's rate over the baseline's.

    python benchmarks/autograde_throughput.py                          # sample class, --jobs 2
    python benchmarks/autograde_throughput.py --baseline-rev main      # and main's grader
    python benchmarks/autograde_throughput.py --class-size 200 --baseline-rev main
    python benchmarks/autograde_throughput.py --learners 3             # a quick smoke run
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
from baseline import Side, grading_env, sides_in

from autograder.collect.sources import collect
from autograder.course import Course, ensure_alembic_on_path
from autograder.grade.secret import DEVELOPMENT_ENV

# The sample class is a test fixture, imported from the repository's root.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.fixtures.demo import prepare_course  # noqa: E402
from tests.fixtures.sample_class import NUMPY_CHAPTERS, build_class  # noqa: E402

NBGRADER_CONFIG = """\
from autograder.course import course_config

c = get_config()  # noqa: F821
c.merge(course_config({root!r}, {course_dir!r}))
# nbgrader's own autograding, as it comes: the course's configuration routes it through the
# course's grader, which is what this benchmark compares against.
del c.Autograde
"""


@dataclass(frozen=True)
class Timing:
    """One grading of the class: wall seconds and peak memory (MiB)."""

    seconds: float
    peak_mib: float


def _class_subset(class_dir: Path, learners: int | None) -> list[tuple[str, str]]:
    """``(learner, chapter)`` of the submissions to grade (the first ``learners`` learners)."""
    names = sorted(p.name for p in class_dir.iterdir() if p.is_dir())[:learners]
    return [(name, chapter.name) for name in names
            for chapter in sorted((class_dir / name).iterdir()) if chapter.is_dir()]


def scale_class(class_dir: Path, submissions: list[tuple[str, str]], size: int,
                ) -> list[tuple[str, str]]:
    """Copy the learners of ``submissions`` under new ids (``ada_2``, ``ben_2``, ...,
    ``ada_3``, ...) until the class holds at least ``size`` notebooks; all its submissions."""
    learners = sorted({learner for learner, _ in submissions})
    scaled = list(submissions)
    copy = 2
    while len(scaled) < size:
        for learner in learners:
            if len(scaled) >= size:
                break
            shutil.copytree(class_dir / learner, class_dir / f"{learner}_{copy}")
            scaled += [(f"{learner}_{copy}", chapter) for name, chapter in submissions
                       if name == learner]
        copy += 1
    return sorted(scaled)


@contextlib.contextmanager
def peak_memory(process: subprocess.Popen, every_s: float = 0.25) -> Iterator[list[float]]:
    """Sample the resident memory of ``process`` and all its descendants, summed, while the
    block runs; the list yielded holds the peak in MiB once the block ends."""
    peak = [0.0]
    done = threading.Event()

    def sample() -> None:
        try:
            root = psutil.Process(process.pid)
        except psutil.NoSuchProcess:
            return
        while not done.wait(every_s):
            total = 0
            with contextlib.suppress(psutil.Error):
                for member in [root, *root.children(recursive=True)]:
                    with contextlib.suppress(psutil.Error):
                        total += member.memory_info().rss
            peak[0] = max(peak[0], total / 2**20)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peak
    finally:
        done.set()
        sampler.join()


def time_pipeline(side: Side, course_root: Path, course_dir: Path, jobs: int,
                  expected: int) -> Timing:
    """Grade the collected class in ``course_dir`` with ``side``'s ``autograde all``."""
    command = [side.python, "-m", "autograder", "autograde", "all", "--jobs", str(jobs),
               "--root", str(course_root), "--course-dir", str(course_dir)]
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=side.checkout, env=grading_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with peak_memory(process) as peak:
        out, err = process.communicate()
    seconds = time.perf_counter() - start
    graded = re.search(r"(\d+) submission\(s\) graded", out)
    if process.returncode != 0 or graded is None or int(graded[1]) != expected:
        raise RuntimeError(f"autograde with {side.label} did not grade the {expected} "
                           f"notebooks:\n{out[-2000:]}\n{err[-2000:]}")
    return Timing(seconds, peak[0])


def time_plain_nbgrader(class_dir: Path, course_root: Path, chapters: list[str],
                        submissions: list[tuple[str, str]]) -> Timing:
    """Seconds a shell loop of ``nbgrader autograde CHAPTER --student ID`` takes."""
    from autograder.steps.release import generate

    course_dir = course_root / "course-nbgrader"
    collect(Course.of(course_root, course_dir), [class_dir], chapters=chapters)
    generate(Course.of(course_root, course_dir), chapters)  # records the cells to grade
    config_dir = course_root / "nbgrader-plain"
    config_dir.mkdir(exist_ok=True)
    (config_dir / "nbgrader_config.py").write_text(
        NBGRADER_CONFIG.format(root=str(course_root), course_dir=str(course_dir)))
    ensure_alembic_on_path()
    nbgrader = str(Path(sys.executable).with_name("nbgrader"))
    peak, start = 0.0, time.perf_counter()
    for learner, chapter in submissions:
        # A failing learner (a broken notebook) does not stop the loop, as in a shell loop.
        process = subprocess.Popen([nbgrader, "autograde", chapter, "--student", learner,
                                    "--force"], cwd=config_dir, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        with peak_memory(process) as one:
            process.wait()
        peak = max(peak, one[0])
    return Timing(time.perf_counter() - start, peak)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="pipeline workers (default 2)")
    parser.add_argument("--learners", type=int, default=None,
                        help="only the first N learners of the sample class (default: all)")
    parser.add_argument("--class-size", type=int, default=None, metavar="N",
                        help="grade a class of at least N notebooks (copies of the learners)")
    parser.add_argument("--baseline-rev", metavar="REV",
                        help="also grade with the grader of this git revision, side by side")
    parser.add_argument("--repeats", type=int, default=1,
                        help="gradings per grader, alternating (default 1; medians are shown)")
    args = parser.parse_args(argv)
    if min(args.jobs, args.repeats, args.learners or 1, args.class_size or 1) < 1:
        parser.error("--jobs, --repeats, --learners and --class-size must be 1 or more")
    return args


def main(argv: list[str] | None = None) -> int:
    # nbgrader's gradebook code trips a harmless SQLAlchemy warning for every learner.
    warnings.filterwarnings("ignore", message=".*not in session.*")
    # The sample class is no class: it grades with the development secret.
    os.environ[DEVELOPMENT_ENV] = "1"
    args = parse_args(argv)
    chapters = list(NUMPY_CHAPTERS)
    with tempfile.TemporaryDirectory(prefix="throughput-") as folder:
        workspace = Path(folder)
        sides = sides_in(workspace, args.baseline_rev)
        course_root = prepare_course(workspace, chapters)
        class_dir = workspace / "class"
        build_class(class_dir, root=course_root, chapters=chapters)
        (class_dir / "expected.csv").unlink()
        distinct = _class_subset(class_dir, args.learners)
        plain = time_plain_nbgrader(class_dir, course_root, chapters, distinct)
        submissions = distinct
        if args.class_size:
            submissions = scale_class(class_dir, distinct, args.class_size)
        learners = {learner for learner, _ in submissions}
        for extra in sorted(p.name for p in class_dir.iterdir() if p.name not in learners):
            shutil.rmtree(class_dir / extra)  # the learners after the first --learners
        print(f"{len(submissions)} notebooks of {len(learners)} learners, chapters "
              f"{', '.join(chapters)}; plain nbgrader timed on {len(distinct)} of them")
        timings: dict[str, list[Timing]] = {side.label: [] for side in sides}
        for repeat in range(args.repeats):
            for side in sides:
                course_dir = workspace / f"course-{side.label}-{repeat}"
                collect(Course.of(course_root, course_dir), [class_dir], chapters=chapters)
                timings[side.label].append(time_pipeline(side, course_root, course_dir,
                                                         args.jobs, len(submissions)))
    report(plain, len(distinct), timings, len(submissions), args.jobs)
    return 0


def report(plain: Timing, plain_n: int, timings: dict[str, list[Timing]], n: int,
           jobs: int) -> None:
    """Print the rates, the peak memories and the ratios."""
    plain_rate = 60 * plain_n / plain.seconds
    print(f"plain nbgrader autograde, one process per learner: {plain.seconds:8.1f} s "
          f"({plain_n} notebooks)  {plain_rate:6.1f} notebooks/min  peak {plain.peak_mib:6.0f} "
          "MiB")
    rates = {}
    for label, runs in timings.items():
        seconds = statistics.median(t.seconds for t in runs)
        peak = max(t.peak_mib for t in runs)
        rates[label] = 60 * n / seconds
        each = ", ".join(f"{t.seconds:.1f}" for t in runs)
        print(f"autograde --jobs {jobs} ({label}): {seconds:8.1f} s (runs: {each})  "
              f"{rates[label]:6.1f} notebooks/min  peak {peak:6.0f} MiB  "
              f"ratio to plain {rates[label] / plain_rate:.2f}")
    if len(rates) == 2:
        (base, base_rate), (_, today_rate) = rates.items()
        print(f"today / {base}: {today_rate / base_rate:.3f} (goal >= 0.95)")


if __name__ == "__main__":
    raise SystemExit(main())
