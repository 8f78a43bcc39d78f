"""Where grading results are kept: nbgrader's gradebook for scores, flag files for reasons.

Scores live in nbgrader's sqlite gradebook (so ``nbgrader export``, formgrader and
``nbgrader generate_feedback`` see them). Only the main process writes it, one learner at a
time: workers return their notebooks and :func:`save_grades` stores them.

Flags (why a submission needs a human) live in small JSON files,
``<course>/flags/<student>/<chapter>.json``, one list per stage (``collect``, ``grade``), so
that collecting again replaces the collect flags and grading again replaces the grade flags.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from nbformat import NotebookNode
from traitlets.config import Config

from autograder.course import COURSE_ID, ensure_alembic_on_path
from autograder.integrity import Flag

STAGES = ("collect", "grade")


def _flags_path(course_dir: Path, student: str, chapter: str) -> Path:
    return Path(course_dir) / "flags" / student / f"{chapter}.json"


def write_flags(
    course_dir: str | os.PathLike, student: str, chapter: str, stage: str, flags: list[Flag]
) -> None:
    """Replace the ``stage`` flags of one submission (the other stage's flags are kept)."""
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
    path = _flags_path(Path(course_dir), student, chapter)
    stored = _load(path)
    stored[stage] = [{"code": f.code, "cell": f.cell, "reason": f.reason} for f in flags]
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    temporary.replace(path)


def _load(path: Path) -> dict[str, list[dict[str, str]]]:
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def read_flags(course_dir: str | os.PathLike, student: str, chapter: str) -> list[Flag]:
    """The flags of one submission: collect flags first, then grade flags."""
    stored = _load(_flags_path(Path(course_dir), student, chapter))
    return [Flag(f["code"], f.get("cell"), f["reason"])
            for stage in STAGES for f in stored.get(stage, [])]


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
