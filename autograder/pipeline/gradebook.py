"""Scores in nbgrader's gradebook.

Scores live in nbgrader's sqlite gradebook (so ``nbgrader export``, formgrader and
``nbgrader generate_feedback`` see them). Only the main process writes it, one learner at a
time: workers return their notebooks and :func:`save_grades` stores them. The reasons that go
with the scores are flags (:mod:`autograder.flags`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from nbformat import NotebookNode
from traitlets.config import Config

from autograder.course import COURSE_ID, ensure_alembic_on_path


def ensure_chapter(config: Config, chapter: str) -> bool:
    """True when the gradebook knows the cells of ``chapter`` (recorded by its release)."""
    from nbgrader.api import Gradebook, MissingEntry

    ensure_alembic_on_path()
    with Gradebook(config.CourseDirectory.db_url, COURSE_ID) as gradebook:
        try:
            notebook = gradebook.find_notebook(chapter, chapter)
        except MissingEntry:
            return False
        return bool(notebook.grade_cells)


def save_grades(
    config: Config,
    student: str,
    chapter: str,
    notebook: NotebookNode,
    timestamp: datetime | None,
    flagged: bool,
) -> None:
    """Record the scores of an executed ``notebook`` in the gradebook (idempotent).

    The score of each graded cell follows nbgrader's own rule (an error output gives 0),
    through nbgrader's ``SaveAutoGrades``; manual scores already given are kept.
    """
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import SaveAutoGrades

    ensure_alembic_on_path()
    db_url = config.CourseDirectory.db_url
    with Gradebook(db_url, COURSE_ID) as gradebook:
        gradebook.update_or_create_student(student)
        gradebook.update_or_create_submission(chapter, student, timestamp=timestamp)
    resources = {"nbgrader": {"db_url": db_url, "assignment": chapter, "notebook": chapter,
                              "student": student}}
    SaveAutoGrades().preprocess(notebook, resources)
    with Gradebook(db_url, COURSE_ID) as gradebook:
        submitted = gradebook.find_submission_notebook(chapter, chapter, student)
        submitted.flagged = flagged
        gradebook.db.commit()


@dataclass(frozen=True)
class Score:
    """One learner's result on one chapter, as the gradebook holds it."""

    student: str
    chapter: str
    score: float
    max_score: float
    auto_score: float
    auto_max_score: float


def read_scores(config: Config) -> list[Score]:
    """Every submission in the gradebook, sorted by student and chapter."""
    from nbgrader.api import Gradebook

    ensure_alembic_on_path()
    rows = []
    with Gradebook(config.CourseDirectory.db_url, COURSE_ID) as gradebook:
        for assignment in gradebook.assignments:
            for submission in assignment.submissions:
                auto = [g for n in submission.notebooks for g in n.grades
                        if g.cell.cell_type == "code"]
                rows.append(Score(
                    student=submission.student.id, chapter=assignment.name,
                    score=float(submission.score), max_score=float(submission.max_score),
                    auto_score=float(sum(g.score for g in auto)),
                    auto_max_score=float(sum(g.max_score for g in auto)),
                ))
    return sorted(rows, key=lambda r: (r.student, r.chapter))
