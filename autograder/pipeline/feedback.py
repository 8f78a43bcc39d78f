"""Feedback for learners: one HTML page per graded notebook, through nbgrader.

The pages are rendered by nbgrader's ``GenerateFeedback`` from the autograded notebooks, which
:mod:`autograder.pipeline.grade` writes without hidden tests and without tracebacks in graded cells,
so learners see their scores, their outputs and each check's diagnosis, but no hidden test
code. ``nbgrader generate_feedback`` run from ``autograder/`` gives the same pages.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from autograder.course import ROOT, Course, ensure_alembic_on_path


def generate_feedback(
    chapters: Iterable[str],
    *,
    students: Iterable[str] | None = None,
    root: str | os.PathLike = ROOT,
    course_dir: str | os.PathLike | None = None,
) -> list[Path]:
    """Write ``<course>/feedback/<student>/<chapter>/<chapter>.html`` for graded submissions.

    Args:
        chapters: chapter ids.
        students: only these students (default: every autograded one).
        root, course_dir: the course (see :func:`autograder.course.course_config`).

    Returns:
        The HTML files written, sorted.

    Raises:
        RuntimeError: nbgrader failed (its log is in the message).
    """
    from nbgrader.apps.api import capture_log
    from nbgrader.converters import GenerateFeedback
    from nbgrader.coursedir import CourseDirectory

    ensure_alembic_on_path()
    course = Course.of(root, course_dir)
    config = course.config()
    written = []
    for chapter in chapters:
        graded = course.students("autograded", chapter)
        for student in graded if students is None else sorted(set(students) & set(graded)):
            coursedir = CourseDirectory(config=config)
            coursedir.assignment_id, coursedir.student_id = chapter, student
            converter = GenerateFeedback(coursedir=coursedir, config=config)
            converter.force = True
            result = capture_log(converter)
            if not result["success"]:
                raise RuntimeError(f"nbgrader generate_feedback {chapter} for {student} "
                                   f"failed:\n{result.get('log', '')}{result.get('error', '')}")
            written += sorted(course.step_dir("feedback", student, chapter).glob("*.html"))
    return written
