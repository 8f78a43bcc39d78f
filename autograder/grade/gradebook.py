"""Scores in nbgrader's gradebook.

Scores live in nbgrader's sqlite gradebook (so ``nbgrader export``, formgrader and
``nbgrader generate_feedback`` see them). Only the main process writes it, one learner at a
time: workers return their notebooks and :func:`save_grades` stores them. The reasons that go
with the scores are flags (:mod:`autograder.flags`).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from nbformat import NotebookNode

from autograder.course import COURSE_ID, Course, ready_alembic


@contextmanager
def quiet_gradebook() -> Iterator[None]:
    """Silence the SQLAlchemy warning that nbgrader's gradebook code trips for every learner
    ("Object of type <SubmittedNotebook> not in session"); it is harmless, and would otherwise
    be printed across the progress bar."""
    # nbgrader's database library: loaded with the gradebook, when this runs.
    from sqlalchemy.exc import SAWarning

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=SAWarning, message=".*not in session.*")
        yield


def open_gradebook(course: Course):
    """nbgrader's ``Gradebook`` of ``course``, to use as a context manager; its folder is made
    when missing (nbgrader creates the file, not the folder)."""
    # nbgrader takes a second to import: loaded when this runs, not with the module.
    from nbgrader.api import Gradebook

    ready_alembic()
    course.folder.mkdir(parents=True, exist_ok=True)
    return Gradebook(course.db_url, COURSE_ID)


def ensure_chapter(course: Course, chapter: str) -> bool:
    """True when the gradebook knows the cells of ``chapter`` (recorded by its release)."""
    # nbgrader takes a second to import: loaded when this runs, not with the module.
    from nbgrader.api import MissingEntry

    with open_gradebook(course) as gradebook:
        try:
            notebook = gradebook.find_notebook(chapter, chapter)
        except MissingEntry:
            return False
        return bool(notebook.grade_cells)


def _named(gradebook, student: str) -> None:
    """Put ``student`` in the gradebook; one without a name (none imported from a roster with
    ``nbgrader db student import``) is listed under the student id, so that the formgrader shows
    the name the class knows instead of "None, None"."""
    known = gradebook.update_or_create_student(student)
    if known.first_name is None and known.last_name is None:
        gradebook.update_or_create_student(student, last_name=student, first_name="")


def register_students(course: Course, students: list[str]) -> None:
    """Put ``students`` in the gradebook under their ids, unless it knows their names."""
    with quiet_gradebook(), open_gradebook(course) as gradebook:
        for student in students:
            _named(gradebook, student)


def forget_ungraded(course: Course, student: str, chapter: str) -> None:
    """Remove ``student``'s submission of ``chapter`` from the gradebook when it holds no
    score at all: nbgrader's own commands enter a submission before it is graded, and one the
    grader could not grade must not read as a score of 0. A submission graded before keeps
    its scores."""
    # nbgrader takes a second to import: loaded when this runs, not with the module.
    from nbgrader.api import MissingEntry

    with quiet_gradebook(), open_gradebook(course) as gradebook:
        try:
            submission = gradebook.find_submission(chapter, student)
        except MissingEntry:
            return
        if not any(grade.auto_score is not None or grade.manual_score is not None
                   for notebook in submission.notebooks for grade in notebook.grades):
            gradebook.remove_submission(chapter, student)


def save_grades(
    course: Course,
    student: str,
    chapter: str,
    notebook: NotebookNode,
    timestamp: datetime | None,
    flagged: bool,
    late_penalty: float = 0.0,
) -> None:
    """Record the scores of an executed ``notebook`` in the gradebook (idempotent).

    The score of each graded cell follows nbgrader's own rule (an error output gives 0),
    through nbgrader's ``SaveAutoGrades``; manual scores already given are kept. The learner
    is named as :func:`register_students` does. ``late_penalty`` goes where nbgrader keeps
    it (the notebook's ``late_submission_penalty``), which its feedback page shows.
    """
    # nbgrader takes a second to import: loaded when this runs, not with the module.
    from nbgrader.preprocessors import SaveAutoGrades

    with quiet_gradebook():
        with open_gradebook(course) as gradebook:
            _named(gradebook, student)
            gradebook.update_or_create_submission(chapter, student, timestamp=timestamp)
        resources = {"nbgrader": {"db_url": course.db_url, "assignment": chapter,
                                  "notebook": chapter, "student": student}}
        SaveAutoGrades().preprocess(notebook, resources)
        with open_gradebook(course) as gradebook:
            submitted = gradebook.find_submission_notebook(chapter, chapter, student)
            submitted.flagged = flagged
            submitted.late_submission_penalty = late_penalty or None
            gradebook.db.commit()


@dataclass(frozen=True)
class Score:
    """One learner's result on one chapter, as the gradebook holds it: the one definition of
    a score that the summary table, the CSV and the demo all print.

    The points of a chapter are its graded cells (from the release; a learner cannot add
    any). *Auto* cells are the test cells the grader scores; *manual* cells are the answers
    a human grades (nbgrader solution or task cells with points). Each cell counts its
    manual score when a human gave one, else its automatic score, plus any extra credit.

    Attributes:
        score, max_score: ``auto_score + manual_score - late_penalty`` and
            ``auto_max_score + manual_max_score``: the whole chapter.
        manual_pending: points of manual cells that no human has graded yet.
        late_penalty: points the late policy took (:mod:`autograder.deadlines`).
    """

    student: str
    chapter: str
    auto_score: float
    auto_max_score: float
    manual_score: float
    manual_max_score: float
    manual_pending: float
    late_penalty: float = 0.0

    @property
    def score(self) -> float:
        return self.auto_score + self.manual_score - self.late_penalty

    @property
    def max_score(self) -> float:
        return self.auto_max_score + self.manual_max_score


def read_scores(course: Course) -> list[Score]:
    """Every submission in the gradebook, sorted by student and chapter."""
    rows = []
    with quiet_gradebook(), open_gradebook(course) as gradebook:
        for assignment in gradebook.assignments:
            for submission in assignment.submissions:
                auto, manual, late = [], [], 0.0
                for notebook in submission.notebooks:
                    late += notebook.late_submission_penalty or 0.0
                    by_hand = ({c.name for c in notebook.notebook.solution_cells}
                               | {c.name for c in notebook.notebook.task_cells})
                    for grade in notebook.grades:
                        (manual if grade.cell.name in by_hand else auto).append(grade)
                rows.append(Score(
                    student=submission.student.id, chapter=assignment.name,
                    auto_score=float(sum(g.score for g in auto)),
                    auto_max_score=float(sum(g.max_score for g in auto)),
                    manual_score=float(sum(g.score for g in manual if not g.needs_manual_grade)),
                    manual_max_score=float(sum(g.max_score for g in manual)),
                    manual_pending=float(sum(g.max_score for g in manual
                                             if g.needs_manual_grade)),
                    late_penalty=float(late),
                ))
    return sorted(rows, key=lambda r: (r.student, r.chapter))


def read_cell_scores(course: Course, chapter: str) -> dict[str, dict[str, tuple[float, float]]]:
    """The points of each graded cell of ``chapter``: ``student -> grade id -> (score,
    max_score)``, a hand-given score where there is one (as nbgrader counts it)."""
    # nbgrader takes a second to import: loaded when this runs, not with the module.
    from nbgrader.api import MissingEntry

    cells: dict[str, dict[str, tuple[float, float]]] = {}
    with quiet_gradebook(), open_gradebook(course) as gradebook:
        try:
            assignment = gradebook.find_assignment(chapter)
        except MissingEntry:
            return {}
        for submission in assignment.submissions:
            mine = cells.setdefault(submission.student.id, {})
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    mine[grade.cell.name] = (float(grade.score), float(grade.max_score))
    return cells
