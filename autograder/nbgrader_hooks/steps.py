"""What nbgrader's release, collect, autograde and release-feedback commands do, one function each.

nbgrader's commands and the Formgrader's buttons (:mod:`autograder.nbgrader_hooks.commands`)
run them in the grader's own process when it is root; on the class server, whose instructors
and teaching assistants are not root, they ask the class's grading service
(:mod:`autograder.hub.grading`), which runs the same functions as root. Either way one
function does each step, so that the two never grade differently.

Each step reports to ``log`` (a :class:`logging.Logger`) and raises :class:`StepError` with
one sentence for the instructor when it cannot be done.
"""

from __future__ import annotations

import logging
import os

from autograder.collect.sources import collect
from autograder.copies.detect import after_grading
from autograder.course import Course
from autograder.grade.gradebook import forget_ungraded, register_students
from autograder.grade.learner import grade_learner
from autograder.grade.secret import require_grading_secret
from autograder.grade.store import store_outcome
from autograder.sandbox.launcher import Limits, check_sandbox
from autograder.steps.exchange import release_feedback, unreleasable
from autograder.steps.release import ensure_recorded, release

# The first words of each line that says how a step ended: the Formgrader's dialogs show these
# lines before the step's others (autograder.nbgrader_hooks.formgrader.readable).
OUTCOME = "Outcome: "


def log_outcome(log: logging.Logger, message: str, *args: object, warning: bool = False) -> None:
    """Log how a step ended (``message % args``), marked with :data:`OUTCOME`."""
    (log.warning if warning else log.info)(OUTCOME + message, *args)


class StepError(RuntimeError):
    """A step could not be done (or was refused); the message says why, for the instructor."""


def release_chapter(course: Course, chapter: str, exchange: str | os.PathLike,
                    log: logging.Logger) -> None:
    """``python -m autograder release CHAPTER --exchange DIR``: generated, recorded, released."""
    try:
        release(course, [chapter], exchange=exchange, progress=log.info)
    except (ValueError, RuntimeError) as exc:
        raise StepError(f"release failed: {exc}") from exc
    log_outcome(log, "released %s to the exchange %s; the gradebook holds its points",
                chapter, exchange)


def collect_chapter(course: Course, chapter: str, exchange: str | os.PathLike,
                    log: logging.Logger) -> None:
    """The course's collect of ``chapter`` from the exchange; the learners collected enter the
    gradebook under their names."""
    report = collect(course, exchange=exchange, chapters=[chapter])
    summary, *lines = report.lines()
    log_outcome(log, "%s", summary, warning=bool(report.refused))
    for line in lines:
        (log.warning if line.startswith(("REFUSED", "FLAG")) else log.info)("%s", line)
    register_students(course, sorted({taken.student for taken in report.taken}))


def release_chapter_feedback(course: Course, chapter: str, exchange: str | os.PathLike,
                             students: list[str] | None, log: logging.Logger) -> None:
    """The feedback pages of ``chapter`` (of ``students``, default all) into the exchange; a
    release of nothing is an error that says why."""
    try:
        released = release_feedback(course, [chapter], exchange, students=students)
    except RuntimeError as exc:
        raise StepError(str(exc)) from exc
    if not released:
        raise StepError(unreleasable(course, chapter, students))
    log_outcome(log, "released the feedback of %d submission(s) of %s: %s", len(released),
                chapter, ", ".join(name for name, _ in released))


def prepare_grading(course: Course, chapter: str, log: logging.Logger) -> None:
    """Before any learner: the class's secret (which learners cannot read) and a sandbox that
    starts, else nothing is graded; the chapter is recorded in the gradebook if no release did.

    Raises:
        SecretError: no secret, or one that learners could read.
        GraderFaultError: the sandbox cannot start.
    """
    secret = require_grading_secret()
    (log.warning if secret.development else log.info)("%s", secret.notice())
    check_sandbox(Limits())
    ensure_recorded(course, chapter)


def grade_one(course: Course, student: str, chapter: str, log: logging.Logger) -> None:
    """Grade ``student``'s ``chapter`` in the sandbox and store it (the autograded notebook, the
    gradebook's scores, the flags), then run the chapter's copy detection again.

    Raises:
        StepError: the grader could not grade; nothing was recorded for this learner.
    """
    log.info("Grading %s of %s in the sandbox", chapter, student)
    outcome = grade_learner(course, student, chapter)
    if outcome.fault is not None:
        # nbgrader entered the submission before converting it: a row without a grade
        # must not read as a score of 0.
        forget_ungraded(course, student, chapter)
        raise StepError(f"grading stopped at {student}/{chapter}: {outcome.fault}. Nothing was "
                        "recorded for this learner, nor for those after it")
    summary = store_outcome(course, outcome)
    log_outcome(log, "%s scored %g of %g autograded point(s)", student, summary.score,
                summary.max_score)
    if summary.flags:
        log_outcome(log, "%s is flagged %s (the reasons are in %s)", student,
                    ", ".join(dict.fromkeys(f.code for f in summary.flags)),
                    course.flags_file(student, chapter), warning=True)
    # nbgrader grades one learner at a time (the Formgrader's button, one learner per click),
    # so the class is checked again after each; the course's sources are read once per process.
    after_grading(course, [chapter], [])
    log.info("Copy detection of %s: %s", chapter,
             course.folder / "similarity" / f"{chapter}.html")
