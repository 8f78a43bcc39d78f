"""Flags: why a submission needs a human, kept next to the gradebook.

Flags live in small JSON files, ``<course>/flags/<student>/<chapter>.json``, one list per stage
(``collect``, ``grade``, ``similarity``, ``feedback``), so that collecting again replaces the
collect flags, grading again replaces the grade flags and checking the class for copies again
(:mod:`autograder.copies.detect`) replaces the similarity flags::

    {"collect": [], "grade": [{"cell": "ch02_softmax_test", "code": "test_cell_edited",
                               "reason": "..."}]}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from autograder.course import Course

STAGES = ("collect", "grade", "similarity", "feedback")


@dataclass(frozen=True)
class Flag:
    """Something a human should look at.

    Attributes:
        code: a short machine-readable kind: ``"test_cell_edited"``, ``"test_cell_deleted"``,
            ``"test_cell_moved"``, ``"test_cell_repointed"``, ``"metadata_removed"``,
            ``"cell_added"``, ``"locked_cell_edited"``, ``"imports_reference"``,
            ``"learner_timeout"``, ``"worker_died"``, ``"audit:<category>"``,
            ``"duplicate_submission"``, ``"older_than_collected"``, ``"shared_file"``
            (collect), ``"copied_reference"``, ``"similar_submissions"`` (similarity; for the
            instructor only), ``"feedback_failed"`` (feedback), ...
        cell: the grade id (or cell id) concerned, or ``None`` for the whole notebook.
        reason: one or two sentences for a human.
    """

    code: str
    cell: str | None
    reason: str


def write_flags(
    course: Course, student: str, chapter: str, stage: str, flags: list[Flag]
) -> list[Flag]:
    """Replace the ``stage`` flags of one submission (the other stage's flags are kept).

    Returns:
        Every flag of the submission now, stage by stage, as :func:`read_flags` gives them.
    """
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
    path = course.flags_file(student, chapter)
    stored = _load(path)
    stored[stage] = [{"code": f.code, "cell": f.cell, "reason": f.reason} for f in flags]
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    temporary.replace(path)
    return _flags_of(stored)


def _load(path: Path) -> dict[str, list[dict[str, str]]]:
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def read_flags(course: Course, student: str, chapter: str) -> list[Flag]:
    """The flags of one submission, stage by stage: collect, grade, then feedback."""
    return _flags_of(_load(course.flags_file(student, chapter)))


def _flags_of(stored: dict[str, list[dict[str, str]]]) -> list[Flag]:
    return [Flag(f["code"], f.get("cell"), f["reason"])
            for stage in STAGES for f in stored.get(stage, [])]
