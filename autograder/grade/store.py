"""Storing one learner's outcome: the autograded notebook, the gradebook's scores, the flags.

Only the process that runs the class (or nbgrader's command) stores; a worker only grades
(:mod:`autograder.grade.learner`).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import UTC, datetime

import nbformat
from nbformat import NotebookNode
from nbgrader.utils import determine_grade, parse_utc

from autograder.course import SECRET_FILE, TIMESTAMP_FILE, Course
from autograder.deadlines import Lateness, lateness
from autograder.flags import Flag, write_flags
from autograder.grade.gradebook import save_grades
from autograder.grade.learner import Outcome, placeholder
from autograder.notebook import graded_test_cells, nbgrader_metadata
from autograder.steps.view import answers_shown_since


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
    reason of its first flag. Work handed in after the learner's deadline is flagged ``late``
    and ``submitted_after_answers``, and the chapter's late policy takes its penalty
    (:func:`autograder.deadlines.lateness`)."""
    student, chapter = outcome.student, outcome.chapter
    if outcome.notebook is None:
        release = nbformat.read(course.release_notebook(chapter), as_version=4)
        nb = placeholder(release, outcome.flags[0].reason)
    else:
        nb = nbformat.reads(outcome.notebook, as_version=4)
    submitted = course.step_dir("submitted", student, chapter)
    target = course.step_dir("autograded", student, chapter)
    target.mkdir(parents=True, exist_ok=True)
    stamp = submitted / TIMESTAMP_FILE
    timestamp = None
    if stamp.is_file():
        timestamp = parse_utc(stamp.read_text(encoding="utf-8").strip())
        shutil.copy2(stamp, target / TIMESTAMP_FILE)
    # Feedback pages are released to the exchange under a name derived from this secret.
    if (submitted / SECRET_FILE).is_file():
        shutil.copy2(submitted / SECRET_FILE, target / SECRET_FILE)
    scored = [determine_grade(c) for c in graded_test_cells(nb)]
    score, max_score = float(sum(s for s, _ in scored)), float(sum(m for _, m in scored))
    late = _late_work(course, student, chapter, nb, timestamp, score)
    graded = [*outcome.flags, *late.flags]
    nbformat.write(nb, target / f"{chapter}.ipynb")
    save_grades(course, student, chapter, nb, timestamp, flagged=bool(graded),
                late_penalty=late.penalty)
    flags = tuple(write_flags(course, student, chapter, "grade", graded))
    return Summary(student, chapter, score - late.penalty, max_score, flags, outcome.seconds)


def _late_work(course: Course, student: str, chapter: str, nb: NotebookNode,
               timestamp: datetime | None, score: float) -> Lateness:
    """How late the submission handed in at ``timestamp`` (naive UTC, as nbgrader reads it)
    is; when late, ``nb`` starts with a note that says so, which the learner's feedback page
    and the Formgrader show first."""
    # The late policy takes a share of the whole chapter's points, written answers included.
    points = sum(float(nbgrader_metadata(c).get("points") or 0) for c in nb.cells
                 if nbgrader_metadata(c).get("grade"))
    late = lateness(course, chapter, student,
                    None if timestamp is None else timestamp.replace(tzinfo=UTC), score, points,
                    shown=answers_shown_since(course, chapter, student))
    if late.flags:
        notice = nbformat.v4.new_markdown_cell(f"**Late:** {late.flags[0].reason}.")
        notice.id = "late-notice"
        nb.cells.insert(0, notice)
    return late


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
