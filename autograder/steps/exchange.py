"""The nbgrader exchange of a class: chapters out to learners, feedback back to them.

    python -m autograder release ch02 --exchange DIR     notebooks/ch02_attention/ -> outbound
    python -m autograder collect --exchange DIR          inbound -> submitted/ (pipeline.collect)
    python -m autograder feedback ch02 --exchange DIR    feedback/<student>/ch02_attention/ -> DIR

Learners fetch, submit and fetch their feedback in JupyterLab's Assignment List. nbgrader's own
exchange code does the copying, so the folders, names and permissions are the ones its
Assignment List expects: released chapters readable by all, submissions not listable by other
learners, each feedback page under a name only its learner's submission can derive.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from autograder.course import SECRET_FILE, Course, ready_alembic


def _run(app_class, what: str, chapter: str, exchange: str | os.PathLike, course: Course,
         student: str | None = None) -> None:
    """Run one of nbgrader's exchange applications (doing ``what``) for ``chapter``.

    Raises:
        RuntimeError: nbgrader failed (its log is in the message).
    """
    # nbgrader takes a second to import: loaded when this runs, not with the module.
    from nbgrader.apps.api import capture_log
    from nbgrader.coursedir import CourseDirectory

    ready_alembic()
    config = course.config()
    config.Exchange.root = str(Path(exchange).resolve())
    config.ExchangeReleaseAssignment.force = True  # a chapter released again replaces the old
    coursedir = CourseDirectory(config=config)
    coursedir.assignment_id = chapter
    if student is not None:
        coursedir.student_id = student
    app = app_class(coursedir=coursedir, config=config)
    result = capture_log(app)
    if not result["success"]:
        raise RuntimeError(f"nbgrader could not {what} {chapter} with the exchange {exchange}:"
                           f"\n{result.get('log', '')}{result.get('error', '')}")


def release_to_exchange(
    course: Course, chapters: Iterable[str], exchange: str | os.PathLike
) -> None:
    """Copy ``<root>/notebooks/<chapter>/`` of ``course`` into the exchange, for learners to fetch.

    A chapter released before is replaced (learners who fetched it keep their copy).

    Raises:
        RuntimeError: nbgrader failed, for example on an exchange folder it cannot write.
    """
    # nbgrader takes a second to import: loaded when this runs, not with the module.
    from nbgrader.exchange.default.release_assignment import ExchangeReleaseAssignment

    for chapter in chapters:
        _run(ExchangeReleaseAssignment, "release", chapter, exchange, course)


def release_feedback(
    course: Course,
    chapters: Iterable[str],
    exchange: str | os.PathLike,
    *,
    students: Iterable[str] | None = None,
) -> list[tuple[str, str]]:
    """Put the feedback pages of ``course``'s ``chapters`` into the exchange, where each learner's
    Assignment List finds their own.

    Only submissions that came through the exchange can be given feedback this way: nbgrader
    names each page after the secret that ``nbgrader submit`` left with the submission.

    Returns:
        The ``(student, chapter)`` pairs released, sorted.

    Raises:
        RuntimeError: nbgrader failed.
    """
    # nbgrader takes a second to import: loaded when this runs, not with the module.
    from nbgrader.exchange.default.release_feedback import ExchangeReleaseFeedback

    released = []
    for chapter in chapters:
        with_feedback = course.students("feedback", chapter)
        chosen = with_feedback if students is None else sorted(set(students) & set(with_feedback))
        for student in chosen:
            if not (course.step_dir("feedback", student, chapter) / SECRET_FILE).is_file():
                continue  # not submitted through the exchange: nothing names the page there
            _run(ExchangeReleaseFeedback, "release the feedback of", chapter, exchange, course,
                 student)
            released.append((student, chapter))
    return sorted(released)


def unreleasable(course: Course, chapter: str, students: Iterable[str] | None = None) -> str:
    """Why :func:`release_feedback` released nothing of ``chapter`` (for ``students``, default
    all): one sentence for the instructor, naming what to do."""
    with_pages = course.students("feedback", chapter)
    if students is not None:
        with_pages = sorted(set(students) & set(with_pages))
    who = "" if students is None else f" for {', '.join(sorted(students))}"
    if not with_pages:
        return (f"nothing to release: no feedback page of {chapter}{who} has been generated "
                "yet. Autograde the submissions, then generate the feedback, then release it")
    outside = [s for s in with_pages
               if not (course.step_dir("feedback", s, chapter) / SECRET_FILE).is_file()]
    return (f"nothing to release: the feedback of {chapter} of {', '.join(outside)} belongs to "
            "submissions that did not come through the exchange, so the exchange has no place "
            "for it; hand those pages over another way (they are in "
            f"{course.step_folder('feedback')})")
