"""The release step: learner notebooks generated from the instructor's, with nbgrader.

``python -m autograder release [CHAPTER ...] [--exchange DIR]`` (and ``make release``) runs
:func:`release`: ``notebooks/<chapter>/`` is written from ``solutions/<chapter>/`` (solutions
replaced by stubs, hidden tests removed, outputs cleared), every chapter is recorded in the
gradebook with its graded cells and points, and, given an exchange, the chapters are released
into it for learners to fetch. ``nbgrader release_assignment`` and the formgrader's Release
button run the same function (:class:`autograder.nbgrader_hooks.commands.CourseRelease`).

A chapter's trained models (:data:`LINKED_FILES`, such as chapter 10's translator) are kept
once, in its source folder: the release holds a relative link to each, which everything that
reads the release follows, and which the exchange turns into a copy for learners. So the
repository holds each model once, and replacing one adds one file to its history.
"""

from __future__ import annotations

import fnmatch
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from autograder.course import CHAPTERS, SOURCE_DIRECTORY, Course, ready_alembic
from autograder.grade.gradebook import ensure_chapter, open_gradebook
from autograder.steps.exchange import release_to_exchange
from autograder.steps.view import check_class_release, refresh_view

# The files of a chapter's source folder that its release links to instead of copying.
LINKED_FILES = ("*.pt",)


def chapters_in(course: Course) -> list[str]:
    """Chapter ids with a source notebook ``<root>/solutions/<chapter>/<chapter>.ipynb``."""
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
    course: Course,
    chapters: Iterable[str],
    progress: Callable[[str], object] | None = None,
) -> None:
    """Run ``nbgrader generate_assignment <chapter> --force`` for each chapter.

    Writes ``<root>/notebooks/<chapter>/`` from ``<root>/solutions/<chapter>/`` (solutions
    replaced by stubs, hidden tests removed, outputs cleared) and records the chapter in the
    gradebook under ``course_dir``. The result depends only on the source folder, so running
    it again gives byte-identical files. ``progress``, when given, is called with a line
    before and after each chapter (each takes seconds).

    Raises:
        RuntimeError: nbgrader could not generate a chapter (its log is in the message).
    """
    # Imported here so that loading the configuration stays light.
    from nbgrader.apps.api import capture_log
    from nbgrader.converters import GenerateAssignment
    from nbgrader.coursedir import CourseDirectory

    ready_alembic()
    config = course.config()
    chapters = list(chapters)
    for number, chapter in enumerate(chapters, 1):
        started = time.monotonic()
        if progress is not None:
            progress(f"[{number}/{len(chapters)}] releasing {chapter} ...")
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
        link_to_source(course, chapter)
        if progress is not None:
            progress(f"[{number}/{len(chapters)}] {chapter}: notebooks/{chapter}/ written "
                     f"({time.monotonic() - started:.1f} s)")


def link_to_source(course: Course, chapter: str) -> list[Path]:
    """Replace each file of ``chapter``'s release that :data:`LINKED_FILES` names by a relative
    link to the source's file of that name; the links made."""
    linked = []
    for source in sorted(course.source_dir(chapter).iterdir()):
        if not (source.is_file() and any(fnmatch.fnmatch(source.name, pattern)
                                         for pattern in LINKED_FILES)):
            continue
        target = course.release_dir(chapter) / source.name
        target.unlink(missing_ok=True)
        target.symlink_to(os.path.relpath(source, target.parent))
        linked.append(target)
    return linked


def release(
    course: Course,
    chapters: list[str] | None = None,
    progress: Callable[[str], object] | None = None,
    exchange: str | os.PathLike | None = None,
) -> list[str]:
    """Regenerate the learner notebooks in ``notebooks/`` from ``solutions/``, record the
    chapters in the gradebook and, given an ``exchange``, release them into it and bring the
    class's view of the course up to date (:mod:`autograder.steps.view`).

    Args:
        chapters: chapter ids such as ``"ch02_attention"``; ``None`` releases every chapter
            that has a source notebook.
        course: the course.
        progress: called with a line of progress per chapter (``print`` on the command line).
        exchange: an nbgrader exchange root, where learners fetch the chapters
            (:func:`~autograder.steps.exchange.release_to_exchange`).

    Returns:
        The chapters released.

    Raises:
        ValueError: a chapter id has no source notebook, or (with an exchange) a chapter needs
            the answer of a chapter that is still open (see
            :func:`autograder.steps.view.check_class_release`).
        RuntimeError: nbgrader failed on a chapter, or could not write the exchange.
    """
    available = chapters_in(course)
    chosen = available if chapters is None else _check_chapters(chapters, available)
    if exchange is not None:
        check_class_release(course, exchange, chosen)
    generate(course, chosen, progress=progress)
    register_assignments(course)
    if exchange is not None:
        release_to_exchange(course, chosen, exchange)
        refresh_view(course, exchange)
    return chosen


def ensure_recorded(course: Course, chapter: str) -> None:
    """Record ``chapter``'s graded cells in the gradebook unless a release did (grading needs
    them): the chapter is generated as :func:`release` does, without an exchange."""
    if not ensure_chapter(course, chapter):
        generate(course, [chapter])


def register_assignments(course: Course) -> None:
    """Make sure the gradebook lists all ten chapters as assignments (idempotent)."""
    with open_gradebook(course) as gradebook:
        for chapter in CHAPTERS:
            gradebook.update_or_create_assignment(chapter)
