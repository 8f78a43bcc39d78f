"""``make demo``: release, grade a sample class end to end, print the grades.

    python -m autograder demo [--jobs 2] [--out DIR]
    python -m autograder.demo                      # the same, without the main command line

Steps, all in a course of its own (a temporary folder, or ``--out``), so the repository's
notebooks and gradebook are never touched:

1. copy the source notebooks of the NumPy chapters and release them with nbgrader;
2. write the sample class (:mod:`autograder.sample_class`): honest, partial, buggy and
   untouched work, cheaters and broken files, with the grades they should get;
3. collect it, autograde it with ``--jobs`` workers (grading audits every submission, see
   :mod:`autograder.audit`), write feedback pages and the grades CSV;
4. print a table (learner, chapter, score, expected score, flags) and whether every result
   is as expected. The exit status is 0 only then.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from autograder.course import ROOT
from autograder.sample_class import CHAPTERS, Comparison, Expected, build_class, compare


@dataclass(frozen=True)
class DemoRow:
    """One graded submission with what was expected of it."""

    learner: str
    chapter: str
    kind: str
    score: float
    max_score: float
    expected_score: float
    flags: tuple[str, ...]  # flag codes, "audit:<category>" for the audit's findings


@dataclass
class DemoResult:
    """Everything the demo produced."""

    rows: list[DemoRow]
    comparison: Comparison
    course_dir: Path
    grades_csv: Path
    feedback: list[Path]


def prepare_course(workspace: Path, chapters: Iterable[str], root: Path = ROOT) -> Path:
    """Copy the chapters' sources into ``workspace/course_root`` and release them there."""
    from autograder.course import generate

    course_root = workspace / "course_root"
    for chapter in chapters:
        target = course_root / "solutions" / chapter
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(root / "solutions" / chapter, target)
    generate(chapters, root=course_root, course_dir=course_root / "course")
    return course_root


def grade_class(
    class_dir: Path, course_root: Path, chapters: list[str], *, jobs: int,
    expected: list[Expected], limits=None,
) -> DemoResult:
    """Collect, autograde (audit included), write feedback and the grades CSV; compare with
    ``expected``.

    ``limits`` are the sandbox limits (:class:`autograder.sandbox.Limits`; default: its own).
    """
    from autograder.collect import collect
    from autograder.feedback import generate_feedback
    from autograder.grading import autograde
    from autograder.report import export_csv

    course_dir = course_root / "course"
    collect([class_dir], root=course_root, course_dir=course_dir, chapters=chapters)
    summaries = autograde(chapters, root=course_root, course_dir=course_dir, jobs=jobs,
                          limits=limits)
    feedback = generate_feedback(chapters, root=course_root, course_dir=course_dir)
    grades_csv = course_dir / "grades.csv"
    export_csv(grades_csv, root=course_root, course_dir=course_dir)

    by_key = {(e.learner, e.chapter): e for e in expected}
    rows = []
    for summary in summaries:
        key = (summary.student, summary.chapter)
        codes = [f.code for f in summary.flags]
        wanted = by_key.get(key)
        rows.append(DemoRow(summary.student, summary.chapter, wanted.kind if wanted else "?",
                            summary.score, summary.max_score,
                            wanted.expected_score if wanted else float("nan"),
                            tuple(dict.fromkeys(codes))))
    graded = {(r.learner, r.chapter): (r.score, set(r.flags)) for r in rows}
    return DemoResult(rows, compare(expected, graded), course_dir, grades_csv, feedback)


def table(rows: list[DemoRow]) -> str:
    """Fixed-width lines: learner, chapter, kind, score, expected, flags."""
    header = ("learner", "chapter", "kind", "score", "expected", "flags")
    body = [(r.learner, r.chapter, r.kind, f"{r.score:g}/{r.max_score:g}",
             f"{r.expected_score:g}", ", ".join(r.flags) or "-") for r in rows]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in [header, *body])


def run_demo(
    out: str | os.PathLike | None = None, *, jobs: int = 2, chapters: Iterable[str] = CHAPTERS,
    learners: Iterable[str] | None = None, root: Path = ROOT, limits=None,
) -> DemoResult:
    """Run the whole demo in ``out`` (a fresh temporary folder when None, removed afterwards).

    ``learners`` limits the sample class to some of its learners (default: all of them).

    Raises:
        ValueError: ``jobs`` is not positive, or a chapter the sample class does not cover.
    """
    chapters = list(chapters)
    with contextlib.ExitStack() as stack:
        if out is None:
            workspace = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="demo-")))
        else:
            workspace = Path(out).resolve()
            if workspace.exists():
                shutil.rmtree(workspace)  # a re-run starts from a clean course
            workspace.mkdir(parents=True)
        course_root = prepare_course(workspace, chapters, root)
        class_dir = workspace / "class"
        expected = build_class(class_dir, root=course_root, chapters=chapters,
                               learners=learners)
        return grade_class(class_dir, course_root, chapters, jobs=jobs, expected=expected,
                           limits=limits)


def _run(args: argparse.Namespace) -> int:
    # nbgrader's gradebook code trips a harmless SQLAlchemy warning for every learner.
    warnings.filterwarnings("ignore", message=".*not in session.*")
    if args.jobs < 1:
        print(f"--jobs must be 1 or more, got {args.jobs}", file=sys.stderr)
        return 2
    result = run_demo(args.out, jobs=args.jobs)
    print(table(result.rows))
    if args.out:
        print(f"course, feedback pages and grades.csv are in {result.course_dir}")
    if result.comparison.ok:
        print(f"all {len(result.rows)} submissions graded as expected: honest work keeps its "
              "marks, cheats score 0 on what they cheated or are flagged")
        return 0
    print("results that differ from the expectation:", file=sys.stderr)
    for problem in result.comparison.problems:
        print(f"  {problem}", file=sys.stderr)
    return 1


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    """Add ``demo [--jobs N] [--out DIR]``."""
    parser = subparsers.add_parser(
        "demo", help="grade a sample class end to end and print the grades",
        description="Release ch02 and ch05 in a course of its own, write a sample class "
                    "(honest, partial, buggy, untouched, cheating and broken submissions), "
                    "collect, autograde, write feedback and grades.csv, audit, and print each "
                    "learner's score and flags next to the expected score.")
    parser.add_argument("--jobs", "-j", type=int, default=2, help="learners graded at once")
    parser.add_argument("--out", help="keep the course here (default: a temporary folder)")
    parser.set_defaults(handler=_run)

