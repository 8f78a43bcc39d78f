"""Time to grade one PyTorch notebook (chapters 7-10), today's grader against an older one.

Each chapter's honest submission (the release with the course's solutions pasted in, as the
sample class writes them), copied for ``--learners`` learners, is collected into a fresh course
folder and graded with ``python -m autograder autograde CHAPTER --jobs 1``, ``--repeats`` times
after one unmeasured run (which records the chapter in the gradebook and warms the file
cache). Two figures, medians:

* grading: the seconds the grader reports for a learner in its summary table (whole seconds):
  restoring, executing and verifying the notebook and storing the result. The median over the
  learners of a run is what grading a class costs per notebook: the first learner a grader
  process meets also pays its one-time imports, the others do not;
* command: the wall time of the whole command divided by the number of learners, which adds
  Python start-up, imports and, for today's grader, starting and stopping its one-worker
  cluster (a cost per run, not per notebook).

With ``--baseline-rev REV`` a temporary checkout of REV grades the same notebooks with
its own grader and its own solutions and release, alternating with this checkout chapter by
chapter, and the ratios today / REV are printed (goal for grading: at most 1.5). Both sides
run with this checkout's Python and packages, each from its own folder (:mod:`baseline`).
Notebooks run in fast mode
(``TRANSFORMER_COURSE_FAST=1``, as in CI) unless ``--full`` is given.

    python benchmarks/torch_grading_time.py                          # this checkout only
    python benchmarks/torch_grading_time.py --baseline-rev f909db6   # and an older revision
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import nbformat
from baseline import Side, autograder, grading_env, sides_in

# The sample class is a test fixture, imported from the repository's root.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.fixtures.sample_class import SOLUTION, load_chapter, work  # noqa: E402

CHAPTERS = ("ch07_pytorch_modules", "ch08_decoder_and_model", "ch09_training",
            "ch10_translation")
LEARNER = "honest"


def write_submissions(inbox: Path, chapters: list[str], learners: int) -> None:
    """``inbox/honestN/<chapter>/<chapter>.ipynb``: every exercise answered with the solution."""
    for name in chapters:
        chapter = load_chapter(name)
        answered = work(chapter, dict.fromkeys(chapter.exercises, SOLUTION))
        for n in range(1, learners + 1):
            path = inbox / f"{LEARNER}{n}" / name / f"{name}.ipynb"
            path.parent.mkdir(parents=True)
            nbformat.write(answered, path)


@dataclass(frozen=True)
class Run:
    """One ``autograde CHAPTER --jobs 1`` of the learners."""

    grading: float  # median seconds the grader reports per learner
    command: float  # wall seconds of the command per learner
    score: str  # "points/max" (the lowest of the learners')


def time_grading(side: Side, course_dir: Path, chapter: str, env: dict[str, str],
                 learners: int) -> Run:
    start = time.perf_counter()
    done = autograder(side, "autograde", chapter, "--jobs", "1", "--course-dir",
                      str(course_dir), env=env)
    seconds = time.perf_counter() - start
    # Today's table has auto, by-hand and total columns; f909db6's had one score. The first
    # is the automatic score either way, which an honest notebook gets in full.
    rows = re.findall(rf"^{LEARNER}\d+\s+{chapter}\s+(\S+)\s+(?:\S+\s+\S+\s+)?(\d+)s\s",
                      done.stdout, re.M)
    if done.returncode != 0 or len(rows) != learners:
        raise RuntimeError(f"autograde {chapter} with {side.label} failed:\n"
                           f"{done.stdout[-1000:]}\n{done.stderr[-2000:]}")
    scores = sorted((row[0] for row in rows), key=lambda score: fraction(score))
    return Run(statistics.median(float(row[1]) for row in rows), seconds / learners, scores[0])


def fraction(score: str) -> float:
    """``"7/10"`` -> 0.7."""
    points, total = score.split("/")
    return float(points) / float(total)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chapters", nargs="+", default=list(CHAPTERS), choices=CHAPTERS,
                        metavar="CHAPTER", help="chapters to grade (default: ch07 to ch10)")
    parser.add_argument("--baseline-rev", metavar="REV",
                        help="also grade with the grader of this git revision, e.g. f909db6")
    parser.add_argument("--repeats", type=int, default=1,
                        help="measured runs per chapter and side (default 1)")
    parser.add_argument("--learners", type=int, default=3,
                        help="honest learners graded in each run (default 3)")
    parser.add_argument("--full", action="store_true",
                        help="run the notebooks in full mode, as learners do (slower)")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.learners < 1:
        parser.error("--repeats and --learners must be 1 or more")

    env = grading_env()
    env.pop("TRANSFORMER_COURSE_FAST", None)
    if not args.full:
        env["TRANSFORMER_COURSE_FAST"] = "1"
    with ExitStack() as stack:
        workspace = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="torch-grade-")))
        sides = sides_in(workspace, args.baseline_rev)
        inbox = workspace / "inbox"
        write_submissions(inbox, args.chapters, args.learners)
        runs: dict[tuple[str, str], list[Run]] = {}
        for chapter in args.chapters:
            for side in sides:
                course_dir = workspace / f"course-{len(runs)}"
                collected = autograder(side, "collect", str(inbox), "--chapter", chapter,
                                       "--course-dir", str(course_dir), env=env)
                if collected.returncode != 0:
                    raise RuntimeError(f"collect with {side.label} failed:\n{collected.stderr}")
                time_grading(side, course_dir, chapter, env, args.learners)  # unmeasured
                runs[side.label, chapter] = [
                    time_grading(side, course_dir, chapter, env, args.learners)
                    for _ in range(args.repeats)
                ]

    labels = [side.label for side in sides]
    mode = "full" if args.full else "fast"
    print(f"seconds to grade one honest notebook with autograde --jobs 1 ({mode} mode, "
          f"{args.learners} learners a run, median of {args.repeats} runs): the grader's own "
          f"time per learner (median), then the whole command per learner")
    print("chapter".ljust(24) + "".join(f"{label + ' grading':>18}{label + ' command':>18}"
                                        for label in labels) + "  score")
    medians = {key: (statistics.median(r.grading for r in value),
                     statistics.median(r.command for r in value)) for key, value in runs.items()}
    for chapter in args.chapters:
        cells = "".join(f"{medians[label, chapter][0]:18.0f}{medians[label, chapter][1]:18.1f}"
                        for label in labels)
        scores = ", ".join(dict.fromkeys(runs[label, chapter][-1].score for label in labels))
        print(chapter.ljust(24) + cells + "  " + scores)
    partial = sorted(key for key, value in runs.items() if fraction(value[-1].score) < 1)
    # A grader that stops early is fast for nothing: compare chapters both graded in full.
    compared = [c for c in args.chapters if all((label, c) not in partial for label in labels)]
    if len(labels) == 2 and compared:
        grading, command = ([sum(medians[label, c][i] for c in compared) for label in labels]
                            for i in (0, 1))
        which = ("all chapters" if compared == list(args.chapters)
                 else "chapters both graded in full (" + ", ".join(compared) + ")")
        print(f"{which}, grading: {grading[0]:.0f} s with {labels[0]}, {grading[1]:.0f} s "
              f"today; ratio {grading[1] / grading[0]:.2f} (goal <= 1.5)")
        print(f"{which}, command: {command[0]:.1f} s with {labels[0]}, {command[1]:.1f} s "
              f"today; ratio {command[1] / command[0]:.2f}")
    for label, chapter in partial:
        print(f"NOTE: {label} did not give {chapter} full marks ({runs[label, chapter][-1].score});"
              " its time is not that of a complete grading")
    return 1 if partial else 0


if __name__ == "__main__":
    raise SystemExit(main())
