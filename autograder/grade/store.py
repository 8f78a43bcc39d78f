"""Storing one learner's outcome: the autograded notebook, the gradebook's scores, the flags.

Only the process that runs the class (or nbgrader's command) stores; a worker only grades
(:mod:`autograder.grade.learner`).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

import nbformat
from nbgrader.utils import determine_grade, parse_utc

from autograder.course import SECRET_FILE, TIMESTAMP_FILE, Course
from autograder.flags import Flag, write_flags
from autograder.grade.gradebook import save_grades
from autograder.grade.learner import Outcome, placeholder
from autograder.notebook import graded_test_cells


@dataclass(frozen=True)
class Summary:
    """One graded submission, for the summary table."""

    student: str
    chapter: str
    score: float
    max_score: float
    flags: tuple[Flag, ...]
    seconds: float


def store_outcome(course: Course, outcome: Outcome) -> Summary:
    """Write one outcome: autograded notebook, gradebook scores, flags (this process only).

    An outcome without a notebook stores the release with every graded cell failed with the
    reason of its first flag."""
    student, chapter = outcome.student, outcome.chapter
    if outcome.notebook is None:
        release = nbformat.read(course.release_notebook(chapter), as_version=4)
        nb = placeholder(release, outcome.flags[0].reason)
    else:
        nb = nbformat.reads(outcome.notebook, as_version=4)
    submitted = course.step_dir("submitted", student, chapter)
    target = course.step_dir("autograded", student, chapter)
    target.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target / f"{chapter}.ipynb")
    stamp = submitted / TIMESTAMP_FILE
    timestamp = None
    if stamp.is_file():
        timestamp = parse_utc(stamp.read_text(encoding="utf-8").strip())
        shutil.copy2(stamp, target / TIMESTAMP_FILE)
    # Feedback pages are released to the exchange under a name derived from this secret.
    if (submitted / SECRET_FILE).is_file():
        shutil.copy2(submitted / SECRET_FILE, target / SECRET_FILE)
    save_grades(course, student, chapter, nb, timestamp, flagged=bool(outcome.flags))
    flags = tuple(write_flags(course, student, chapter, "grade", outcome.flags))
    scored = [determine_grade(c) for c in graded_test_cells(nb)]
    return Summary(student, chapter, float(sum(s for s, _ in scored)),
                   float(sum(m for _, m in scored)), flags, outcome.seconds)


def store_safely(course: Course, outcome: Outcome) -> Summary:
    """:func:`store_outcome`; a problem storing one learner's results costs only that learner (a
    ``grading_error`` flag)."""
    try:
        return store_outcome(course, outcome)
    except Exception as exc:  # one learner's storage problem must not stop the class
        flag = Flag("grading_error", None, f"storing the results failed: "
                                           f"{type(exc).__name__}: {exc}")
        write_flags(course, outcome.student, outcome.chapter, "grade", [flag])
        return Summary(outcome.student, outcome.chapter, 0.0, 0.0, (flag,), outcome.seconds)
