"""``make demo``: release, grade a sample class end to end, print the grades.

    python -m autograder demo [--jobs 2 | --scheduler ADDRESS] [--out DIR]

Steps, all in a course of its own (a temporary folder, or ``--out``), so the repository's
notebooks and gradebook are never touched:

1. copy the source notebooks of the sample class's chapters (two NumPy chapters and the
   language model of chapter 11) and release them with nbgrader;
2. write the sample class (:mod:`autograder.demo.sample_class`): honest, partial, buggy and
   untouched work, cheaters and broken files, with the grades they should get;
3. collect it, autograde it with ``--jobs`` local workers or on the Dask cluster of
   ``--scheduler`` (grading audits every submission, see
   :mod:`autograder.grade.audit`), write feedback pages and the grades CSV. The learners'
   notebooks run in fast mode (``TRANSFORMER_COURSE_FAST=1``, the tiny settings of the tests;
   workers of a ``--scheduler`` cluster need it in their own environment): the demo shows the
   grading, not the chapters' experiments;
4. print a table (learner, chapter, score, expected score, flags) and whether every result
   is as expected. The exit status is 0 only then.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from autograder.course import ROOT, Course
from autograder.demo.sample_class import CHAPTERS, Comparison, Expected, build_class, compare

# The chapters' fast mode (tiny settings, the same code paths), which the sandbox passes on.
FAST_ENV = "TRANSFORMER_COURSE_FAST"


@dataclass(frozen=True)
class DemoRow:
    """One graded submission with what was expected of it."""

    learner: str
    chapter: str
    kind: str
    score: float  # the autograded points, as the gradebook holds them
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


def demo_course(course_root: Path) -> Course:
    """The demo's course: its course folder is ``<course_root>/course``."""
    return Course.of(course_root, course_root / "course")


def prepare_course(workspace: Path, chapters: Iterable[str], root: Path = ROOT) -> Path:
    """Copy the chapters' sources into ``workspace/course_root`` and release them there."""
    from autograder.steps.release import generate

    course = demo_course(workspace / "course_root")
    for chapter in chapters:
        target = course.source_dir(chapter)
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(Course.of(root).source_dir(chapter), target)
    generate(course, chapters)
    return course.root


def grade_class(
    class_dir: Path, course_root: Path, chapters: list[str], *, jobs: int,
    expected: list[Expected], limits=None, scheduler: str | None = None,
) -> DemoResult:
    """Collect, autograde (audit included), write feedback and the grades CSV; compare with
    ``expected``.

    ``limits`` are the sandbox limits (:class:`autograder.sandbox.launcher.Limits`; default:
    its own); ``jobs`` and ``scheduler`` say where learners are graded (see
    :func:`autograder.grade.run.autograde`).
    """
    from autograder.collect.sources import collect
    from autograder.grade.gradebook import quiet_gradebook, read_scores
    from autograder.grade.run import autograde
    from autograder.grade.secret import development_grading
    from autograder.steps.feedback import generate_feedback
    from autograder.steps.report import export_csv

    course = demo_course(course_root)
    collect(course, [class_dir], chapters=chapters)
    # The sample class is no class: the development secret may grade it.
    with quiet_gradebook(), development_grading():
        summaries = autograde(course, chapters, jobs=jobs, scheduler=scheduler,
                              limits=limits)
    scores = {(s.student, s.chapter): s for s in read_scores(course.config())}
    feedback = generate_feedback(course, chapters).written
    export_csv(course, course.grades_csv)

    by_key = {(e.learner, e.chapter): e for e in expected}
    rows = []
    for summary in summaries:
        key = (summary.student, summary.chapter)
        codes = [f.code for f in summary.flags]
        wanted = by_key.get(key)
        # The autograded part, as the gradebook, the summary table and the CSV hold it.
        score = scores.get(key)
        rows.append(DemoRow(summary.student, summary.chapter, wanted.kind if wanted else "?",
                            score.auto_score if score else 0.0,
                            score.auto_max_score if score else 0.0,
                            wanted.expected_score if wanted else float("nan"),
                            tuple(dict.fromkeys(codes))))
    graded = {(r.learner, r.chapter): (r.score, set(r.flags)) for r in rows}
    return DemoResult(rows, compare(expected, graded), course.folder, course.grades_csv,
                      feedback)


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
    scheduler: str | None = None,
) -> DemoResult:
    """Run the whole demo in ``out`` (a fresh temporary folder when None, removed afterwards).

    ``learners`` limits the sample class to some of its learners (default: all of them);
    ``scheduler`` grades on an existing Dask cluster instead of ``jobs`` local workers.

    Raises:
        ValueError: ``jobs`` is not positive, or a chapter the sample class does not cover.
        ConnectionError: the scheduler cannot be reached or has no workers.
        GraderFaultError: the sandbox cannot start or run the course's Python.
    """
    from autograder.sandbox.launcher import Limits, check_sandbox

    chapters = list(chapters)
    if scheduler is None:  # a machine that cannot grade stops the demo before it starts
        check_sandbox(limits or Limits())
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
        stack.enter_context(_fast_notebooks())
        return grade_class(class_dir, course_root, chapters, jobs=jobs, expected=expected,
                           limits=limits, scheduler=scheduler)


@contextlib.contextmanager
def _fast_notebooks() -> Iterator[None]:
    """Within the block, notebooks run in fast mode: the sandbox passes this variable on to
    the kernels, and the local grading workers inherit it when they start."""
    saved = os.environ.get(FAST_ENV)
    os.environ[FAST_ENV] = "1"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(FAST_ENV, None)
        else:
            os.environ[FAST_ENV] = saved
