"""Submitting from the Assignment List of a class: refused once the chapter's answers are in
the learner's view of the course.

In a class, a chapter's answers join a learner's view once that learner's deadline has
passed and the chapter is closed (:mod:`autograder.steps.view`, which lists those chapters
in :data:`~autograder.course.VISIBLE_ANSWERS_FILE`). Work handed in after that could copy
them, so the learner's own Assignment List (and ``nbgrader submit``) refuses it and says
why. A checkout of the course has no such listing, and submits as nbgrader does.

The learner's server is the learner's own process, so this refusal is a courtesy, not a
guard: a copy that reaches the exchange anyway is graded, marked ``late`` and flagged
``submitted_after_answers`` for a human (:mod:`autograder.deadlines`).
"""

from __future__ import annotations

import json
from pathlib import Path

from nbgrader.exchange.default.submit import ExchangeSubmit

from autograder.course import ROOT, VISIBLE_ANSWERS_FILE


def visible_chapters(listing: Path = ROOT / VISIBLE_ANSWERS_FILE) -> frozenset[str]:
    """The chapters whose answers the view holding ``listing`` shows (none without one)."""
    if not listing.is_file():
        return frozenset()
    return frozenset(json.loads(listing.read_text(encoding="utf-8"))["chapters"])


def refusal(chapter: str) -> str:
    """Why ``chapter`` is not submitted, and what the learner can do."""
    return (f"{chapter} is closed for you: your deadline for it has passed and its answers "
            f"are in your view of the course now, so it can no longer be submitted. If you "
            f"need more time, ask your instructor for an extension.")


class CourseSubmit(ExchangeSubmit):
    """``ExchangeFactory.submit`` of a class (the exchange layer's ``nbgrader_config.py``):
    nbgrader's submit, which refuses a chapter whose answers the learner can read."""

    listing = ROOT / VISIBLE_ANSWERS_FILE

    def init_release(self) -> None:
        """nbgrader's checks of the released chapter, then the refusal (an ``ExchangeError``,
        which the Assignment List shows in its "Invalid Submission" dialog)."""
        super().init_release()
        chapter = self.coursedir.assignment_id
        if chapter in visible_chapters(self.listing):
            self.fail(refusal(chapter))
