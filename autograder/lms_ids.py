"""Who each learner is in the learning platform (Canvas, Moodle): an email, an LMS id, or both.

The course knows learners by their user names (``alice``); a platform knows them by an email
or by the id the university gave them (Canvas's "SIS User ID", Moodle's "ID number"). The
grade exports (:mod:`autograder.steps.lms_export`) write those, so that the platform finds each
row's learner. They are kept in the course folder, one row per learner::

    <course>/lms_ids.csv      student,email,lms_id

``python -m autograder hub add alice=alice@uni.edu bob=s1234567 carol=carol@uni.edu,s7654321``
puts learners on the class's roster with their ids (:func:`split_name`); a course without the
class server writes the file itself, with that header.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from autograder.course import Course

COLUMNS = ("student", "email", "lms_id")
# An email or LMS id: letters, digits and . _ % + @ -, starting with a letter or digit.
ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._%+@-]*")


@dataclass(frozen=True)
class LmsId:
    """A learner's ids in the platform; ``""`` where unknown."""

    email: str = ""
    lms_id: str = ""

    def merged(self, other: LmsId) -> LmsId:
        """These ids, each replaced by ``other``'s where ``other`` has one."""
        return LmsId(other.email or self.email, other.lms_id or self.lms_id)


def parse_ids(text: str) -> LmsId:
    """``"alice@uni.edu"``, ``"s1234567"`` or both separated by a comma: an id with ``@`` is an
    email, any other an LMS id.

    Raises:
        ValueError: empty, two of one kind, or not :data:`ID` (a space, a quote, or a first
            character that a spreadsheet reads as a formula).
    """
    parts = [part.strip() for part in text.split(",")]
    if not all(ID.fullmatch(part) for part in parts):
        raise ValueError(f"{text!r} is not an email or LMS id (give one or both, separated "
                         "by a comma, without spaces)")
    emails = [p for p in parts if "@" in p]
    others = [p for p in parts if "@" not in p]
    if len(emails) > 1 or len(others) > 1:
        raise ValueError(f"{text!r}: give at most one email and one LMS id")
    return LmsId(email=emails[0] if emails else "", lms_id=others[0] if others else "")


def split_name(text: str) -> tuple[str, LmsId | None]:
    """``"alice=alice@uni.edu"`` -> ``("alice", LmsId(email="alice@uni.edu"))``; a bare name
    has no ids (``None``).

    Raises:
        ValueError: the ids after ``=`` cannot be read (:func:`parse_ids`).
    """
    name, equals, ids = text.partition("=")
    return name, (parse_ids(ids) if equals else None)


def read_lms_ids(course: Course) -> dict[str, LmsId]:
    """The learners' ids, by student name; empty when the course has none."""
    path = course.lms_ids_file
    if not path.is_file():
        return {}
    with path.open(encoding="utf-8", newline="") as handle:
        return {row["student"]: LmsId(row.get("email") or "", row.get("lms_id") or "")
                for row in csv.DictReader(handle) if row.get("student")}


def record_lms_ids(course: Course, ids: Mapping[str, LmsId]) -> None:
    """Add or update learners' ids (an id given replaces the one of its kind kept before)."""
    if not ids:
        return
    known = read_lms_ids(course)
    for student, given in ids.items():
        known[student] = known.get(student, LmsId()).merged(given)
    course.lms_ids_file.parent.mkdir(parents=True, exist_ok=True)
    course.lms_ids_file.write_text(_table(known), encoding="utf-8", newline="")


def _table(ids: Mapping[str, LmsId]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows((student, ids[student].email, ids[student].lms_id) for student in sorted(ids))
    return buffer.getvalue()


def without_ids(students: Iterable[str], ids: Mapping[str, LmsId], kind: str) -> list[str]:
    """The ``students`` that have no id of ``kind`` (``"email"``, ``"lms_id"`` or ``"any"``)."""
    def has(student: str) -> bool:
        known = ids.get(student, LmsId())
        return bool(known.email or known.lms_id) if kind == "any" else bool(getattr(known, kind))

    return [student for student in students if not has(student)]
