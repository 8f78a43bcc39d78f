"""Grades in the files that learning platforms import: Canvas's gradebook CSV and Moodle's
"CSV file" grade import.

Both take one row per learner and one column per chapter, with the chapter's points as the
gradebook holds them (:attr:`~autograder.grade.gradebook.Score.score`: autograded plus graded
by hand, less the late penalty). A cell stays empty where the learner handed nothing in: Canvas
leaves that grade unchanged, Moodle records "no grade". The platforms find each learner by an
id of theirs (:mod:`autograder.lms_ids`); a learner without one cannot be matched and is left
out, by name in :attr:`LmsExport.left_out`.

Canvas (Grades > Import): the columns of its own gradebook export, ``Student, ID, SIS User
ID, SIS Login ID, Section``, then one column per assignment, ``Name (assignment id)``; a column
without an id in parentheses becomes a new assignment. The second row, ``Points Possible``,
gives each assignment's points. Canvas matches a row by ``SIS User ID`` (the LMS id here) or
``SIS Login ID`` (the email here), so a learner needs one of them.

Moodle (Grades > Import > CSV file): a header row, then one row per learner. On import the
instructor maps the identifying column (``Email address`` to the user's email, or ``ID number``
to their ID number) and each chapter's column to a grade item (or a new one). Only one
identifying column is written (``id_field``), so that every row has the id the mapping reads:
Moodle aborts the whole import at a row whose user it cannot find.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from dataclasses import dataclass

from autograder.course import Course
from autograder.grade.gradebook import Score, read_scores
from autograder.lms_ids import read_lms_ids, without_ids
from autograder.steps.report import points_text

FORMATS = ("csv", "canvas", "moodle")
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_POINTS_ROW = "Points Possible"
# Moodle's own names for the user fields its grade import identifies learners by.
MOODLE_ID_COLUMNS = {"email": "Email address", "lms_id": "ID number"}


@dataclass(frozen=True)
class LmsExport:
    """A platform's grade file.

    Attributes:
        text: the CSV.
        learners: the learners it holds, in its row order.
        left_out: learners with grades but without the id the platform matches them by.
    """

    text: str
    learners: list[str]
    left_out: list[str]


def _grid(scores: list[Score]) -> tuple[list[str], dict[str, float], dict[tuple[str, str], float]]:
    """The chapters (course order: their ids sort so), each one's points, and each learner's
    score by ``(student, chapter)``."""
    chapters = sorted({s.chapter for s in scores})
    possible = {ch: max(s.max_score for s in scores if s.chapter == ch) for ch in chapters}
    return chapters, possible, {(s.student, s.chapter): s.score for s in scores}


def _write(rows: list[list[str]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def canvas_csv(course: Course, assignment_ids: Mapping[str, str] | None = None) -> LmsExport:
    """The grades as Canvas's gradebook import reads them.

    Args:
        course: the course.
        assignment_ids: Canvas's assignment id of some chapters (the number in the
            assignment's address); a chapter without one becomes a new assignment.
    """
    assignment_ids = assignment_ids or {}
    chapters, possible, score = _grid(read_scores(course))
    ids = read_lms_ids(course)
    students = sorted({student for student, _ in score})
    left_out = without_ids(students, ids, "any")
    header = [*CANVAS_COLUMNS, *(f"{ch} ({assignment_ids[ch]})" if ch in assignment_ids else ch
                                 for ch in chapters)]
    rows = [header,
            [CANVAS_POINTS_ROW, "", "", "", "", *(points_text(possible[ch]) for ch in chapters)]]
    kept = [student for student in students if student not in left_out]
    for student in kept:
        cells = [points_text(score[student, ch]) if (student, ch) in score else ""
                 for ch in chapters]
        rows.append([student, "", ids[student].lms_id, ids[student].email, "", *cells])
    return LmsExport(_write(rows), kept, left_out)


def moodle_csv(course: Course, id_field: str = "email") -> LmsExport:
    """The grades as Moodle's "CSV file" grade import reads them.

    Args:
        course: the course.
        id_field: ``"email"`` or ``"lms_id"``: the learners' id that identifies them (map it
            to the user's email, or to their ID number).

    Raises:
        ValueError: an unknown ``id_field``.
    """
    if id_field not in MOODLE_ID_COLUMNS:
        raise ValueError(f"id_field must be one of {', '.join(MOODLE_ID_COLUMNS)}, "
                         f"got {id_field!r}")
    chapters, _, score = _grid(read_scores(course))
    ids = read_lms_ids(course)
    students = sorted({student for student, _ in score})
    left_out = without_ids(students, ids, id_field)
    kept = [student for student in students if student not in left_out]
    rows = [[MOODLE_ID_COLUMNS[id_field], *chapters]]
    rows += [[getattr(ids[student], id_field),
              *(points_text(score[student, ch]) if (student, ch) in score else ""
                for ch in chapters)] for student in kept]
    return LmsExport(_write(rows), kept, left_out)


def left_out_message(export: LmsExport, platform: str, id_field: str = "any") -> str:
    """What to tell the instructor about the learners the file leaves out; ``""`` if none."""
    if not export.left_out:
        return ""
    wanted = {"email": "an email", "lms_id": "an LMS id"}.get(id_field, "an email or LMS id")
    example = export.left_out[0]
    return (f"left out of the {platform} file, without {wanted} on the roster: "
            f"{' '.join(export.left_out)}. Give them one with `python -m autograder hub add "
            f"{example}=EMAIL_OR_ID` (or a row in the course's lms_ids.csv) and export again.")
