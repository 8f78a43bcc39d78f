"""The release step: learner notebooks generated from the instructor's, with nbgrader.

``python -m autograder release [CHAPTER ...]`` (and ``make release``) runs :func:`release`:
``notebooks/<chapter>/`` is written from ``solutions/<chapter>/`` (solutions replaced by stubs,
hidden tests removed, outputs cleared) and every chapter is recorded in the gradebook.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from autograder.course import (
    CHAPTERS,
    COURSE_ID,
    ROOT,
    SOURCE_DIRECTORY,
    Course,
    course_config,
    ensure_alembic_on_path,
)


def chapters_in(root: str | os.PathLike = ROOT) -> list[str]:
    """Chapter ids with a source notebook ``<root>/solutions/<chapter>/<chapter>.ipynb``."""
    course = Course.of(root)
    return [ch for ch in CHAPTERS if course.source_notebook(ch).is_file()]


def _check_chapters(chapters: Iterable[str], available: list[str]) -> list[str]:
    chosen = list(chapters)
    unknown = [ch for ch in chosen if ch not in available]
    if unknown:
        raise ValueError(
            f"cannot release {unknown}: expected chapter ids with a notebook in "
            f"{SOURCE_DIRECTORY}/<chapter>/<chapter>.ipynb, available: {available}. "
            "Pass one of those ids, or no ids to release every chapter."
        )
    return chosen


def generate(
    chapters: Iterable[str],
    root: str | os.PathLike = ROOT,
    course_dir: str | os.PathLike | None = None,
) -> None:
    """Run ``nbgrader generate_assignment <chapter> --force`` for each chapter.

    Writes ``<root>/notebooks/<chapter>/`` from ``<root>/solutions/<chapter>/`` (solutions
    replaced by stubs, hidden tests removed, outputs cleared) and records the chapter in the
    gradebook under ``course_dir``. The result depends only on the source folder, so running
    it again gives byte-identical files.

    Raises:
        RuntimeError: nbgrader could not generate a chapter (its log is in the message).
    """
    # Imported here so that loading the configuration stays light.
    from nbgrader.apps.api import capture_log
    from nbgrader.converters import GenerateAssignment
    from nbgrader.coursedir import CourseDirectory

    ensure_alembic_on_path()
    config = course_config(root, course_dir)
    for chapter in chapters:
        coursedir = CourseDirectory(config=config)
        coursedir.assignment_id = chapter
        app = GenerateAssignment(coursedir=coursedir, config=config)
        app.force = True
        app.create_assignment = True
        result = capture_log(app)
        if not result["success"]:
            raise RuntimeError(
                f"nbgrader generate_assignment {chapter} failed:\n"
                f"{result.get('log', '')}\n{result.get('error', '')}"
            )


def release(chapters: list[str] | None = None) -> None:
    """Regenerate the learner notebooks in ``notebooks/`` from ``solutions/``.

    Args:
        chapters: chapter ids such as ``"ch02_attention"``; ``None`` releases every chapter
            that has a source notebook.

    Raises:
        ValueError: a chapter id has no source notebook.
        RuntimeError: nbgrader failed on a chapter.
    """
    root = Course.of().root
    available = chapters_in(root)
    chosen = available if chapters is None else _check_chapters(chapters, available)
    generate(chosen, root)
    register_assignments(root)


def register_assignments(
    root: str | os.PathLike = ROOT, course_dir: str | os.PathLike | None = None
) -> None:
    """Make sure the gradebook lists all ten chapters as assignments (idempotent)."""
    from nbgrader.api import Gradebook

    ensure_alembic_on_path()
    config = course_config(root, course_dir)
    with Gradebook(config.CourseDirectory.db_url, COURSE_ID) as gradebook:
        for chapter in CHAPTERS:
            gradebook.update_or_create_assignment(chapter)
