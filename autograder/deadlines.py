"""Deadlines: each chapter's due date, each learner's extension, and the late policy.

A chapter's due date is nbgrader's: the due date of its assignment in the gradebook, which
``python -m autograder close`` and the Formgrader's Manage Assignments set. Extensions and late
policies are kept beside the gradebook, in ``<course folder>/deadlines.json``::

    {"ch02_attention": {"late_policy": "10%/day",
                        "extensions": {"alice": "2026-12-03T18:00:00+00:00"}}}

A learner's *deadline* for a chapter is the later of its due date and their extension. The
chapter's answers join that learner's view of the course only once their own deadline has
passed (:mod:`autograder.steps.view`). Work handed in after it is marked late by how much
(a ``late`` flag) and, since that learner could read the answers by then, flagged
``submitted_after_answers`` for a human: it is never given full marks silently. (In a class,
the learner's Assignment List refuses such work first: :mod:`autograder.learner.submit`.)

Late policies (:func:`parse_policy`): ``none`` (marked, no penalty; the default), ``zero``
(no points), or ``P%/hour`` and ``P%/day``: P percent of the chapter's points for each hour or
day begun after the deadline, never more than the points scored.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from autograder.course import CHAPTERS, Course
from autograder.flags import Flag
from autograder.grade.gradebook import open_gradebook

POLICY_PATTERN = re.compile(r"^(none|zero|(\d+(?:\.\d+)?)%/(hour|day))$")
PERIODS = {"hour": 3600.0, "day": 86400.0}


@dataclass(frozen=True)
class Lateness:
    """How late one submission is, and what the policy takes for it.

    Attributes:
        seconds: after the learner's deadline (0 when on time or when the chapter has no due
            date).
        penalty: points taken by the late policy (at most the points scored).
        flags: ``late`` and ``submitted_after_answers`` with the times, or none.
    """

    seconds: float
    penalty: float
    flags: tuple[Flag, ...]


def parse_policy(text: str) -> tuple[str, float]:
    """``("none"|"zero", 0)`` or ``("hour"|"day", percent)`` for a late policy's text.

    Raises:
        ValueError: not a late policy; the message lists the forms.
    """
    match = POLICY_PATTERN.match(text.strip())
    if match is None:
        raise ValueError(f"late policy {text!r} is none of: none, zero, P%/hour, P%/day "
                         "(e.g. 10%/day)")
    if match.group(2) is None:
        return match.group(1), 0.0
    return match.group(3), float(match.group(2))


def _load(course: Course) -> dict[str, dict]:
    path = course.deadlines_file
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _save(course: Course, data: dict[str, dict]) -> None:
    path = course.deadlines_file
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    temporary.replace(path)


def _require_class(course: Course, chapter: str) -> None:
    if chapter not in CHAPTERS:
        raise ValueError(f"unknown chapter {chapter!r}; use one of {', '.join(CHAPTERS)}")
    if not course.gradebook.is_file():
        raise ValueError(
            f"{course.folder} holds no gradebook, so no chapter was released there: it is not "
            f"your class's course folder, and nothing was changed. Name yours with "
            f"--course-dir (the class server of `make hub` keeps it in build/hub/course).")


def close_chapter(course: Course, chapter: str, at: datetime | None = None) -> datetime:
    """Set ``chapter``'s due date in the gradebook to ``at`` (default: now); return it in UTC.

    Once the due date has passed, the chapter counts as closed: its references join the view
    of each learner whose own deadline has passed, at its next refresh
    (:func:`autograder.steps.view.refresh_view`).

    Raises:
        ValueError: the course folder has no gradebook, so no chapter was ever released there:
            it is not a class's (no gradebook is created).
    """
    _require_class(course, chapter)
    when = (at or datetime.now(UTC)).astimezone(UTC)
    with open_gradebook(course) as gradebook:
        gradebook.update_or_create_assignment(chapter, duedate=when.replace(tzinfo=None))
    return when


def extend(course: Course, chapter: str, learner: str, until: datetime | None) -> None:
    """Give ``learner`` until ``until`` for ``chapter`` (``None`` takes the extension back).

    Raises:
        ValueError: an unknown chapter, or a course folder that is no class's (no gradebook).
    """
    _require_class(course, chapter)
    data = _load(course)
    extensions = data.setdefault(chapter, {}).setdefault("extensions", {})
    if until is None:
        extensions.pop(learner, None)
    else:
        extensions[learner] = until.astimezone(UTC).isoformat()
    _save(course, data)


def set_late_policy(course: Course, chapter: str, policy: str) -> None:
    """Apply ``policy`` (see :func:`parse_policy`) to ``chapter``'s late work from its next
    grading on.

    Raises:
        ValueError: not a policy, an unknown chapter, or a folder that is no class's.
    """
    parse_policy(policy)
    _require_class(course, chapter)
    data = _load(course)
    data.setdefault(chapter, {})["late_policy"] = policy.strip()
    _save(course, data)


def late_policy(course: Course, chapter: str) -> str:
    return _load(course).get(chapter, {}).get("late_policy", "none")


def due_dates(course: Course) -> dict[str, datetime]:
    """Chapter -> its due date in the gradebook (UTC), for the chapters that have one."""
    if not course.gradebook.is_file():
        return {}
    with open_gradebook(course) as gradebook:
        return {a.name: a.duedate.replace(tzinfo=UTC) for a in gradebook.assignments
                if a.name in CHAPTERS and a.duedate is not None}


def extensions(course: Course) -> dict[tuple[str, str], datetime]:
    """``(chapter, learner)`` -> the end of the learner's extension (UTC)."""
    return {(chapter, learner): datetime.fromisoformat(until)
            for chapter, entry in _load(course).items()
            for learner, until in entry.get("extensions", {}).items()}


def deadline(course: Course, chapter: str, learner: str) -> datetime | None:
    """``learner``'s deadline for ``chapter``: the later of its due date and their extension;
    None while the chapter has no due date."""
    due = due_dates(course).get(chapter)
    extended = extensions(course).get((chapter, learner))
    if due is None:
        return None
    return max(due, extended) if extended is not None else due


def sealed_for(course: Course, now: datetime | None = None) -> dict[str, set[str]]:
    """Learner -> the chapters closed for the class whose answers stay sealed for that learner
    (an extension not yet over), at ``now`` (default: now)."""
    now = now or datetime.now(UTC)
    due = due_dates(course)
    found: dict[str, set[str]] = {}
    for (chapter, learner), until in extensions(course).items():
        if chapter in due and due[chapter] <= now < until:
            found.setdefault(learner, set()).add(chapter)
    return found


def lateness(course: Course, chapter: str, learner: str, submitted: datetime | None,
             score: float, max_score: float, shown: datetime | None = None) -> Lateness:
    """How late ``learner``'s submission of ``chapter`` handed in at ``submitted`` is, and the
    policy's penalty on its ``score``, ``max_score`` being all the chapter's points.

    ``shown``: when the learner's view on the class server first showed the chapter's answers
    (a due date set in the past shows them only from then); without it, from the deadline."""
    limit = deadline(course, chapter, learner)
    if submitted is None or limit is None or submitted <= limit:
        return Lateness(0.0, 0.0, ())
    seconds = (submitted - limit).total_seconds()
    policy = late_policy(course, chapter)
    kind, percent = parse_policy(policy)
    if kind == "zero":
        penalty = score
    elif kind in PERIODS:
        penalty = min(score, math.ceil(seconds / PERIODS[kind]) * percent / 100 * max_score)
    else:
        penalty = 0.0
    when = f"{limit:%Y-%m-%d %H:%M} UTC"
    effect = (f"the late policy ({policy}) takes {penalty:g} of {score:g} points"
              if kind != "none" else "no penalty (late policy: none)")
    late = Flag("late", None, f"handed in {_duration(seconds)} after the deadline ({when}); "
                              f"{effect}")
    visible = max(limit, shown) if shown is not None else limit
    if submitted <= visible:
        return Lateness(seconds, penalty, (late,))
    return Lateness(seconds, penalty, (late, Flag(
        "submitted_after_answers", None,
        f"handed in at {submitted:%Y-%m-%d %H:%M:%S} UTC, after {chapter}'s answers became "
        f"visible to this learner ({visible:%Y-%m-%d %H:%M:%S} UTC): check it is the "
        "learner's own work")))


def _duration(seconds: float) -> str:
    """``"2 d 3 h 5 min"``, ``"40 min"``, ``"12 s"``."""
    left = timedelta(seconds=round(seconds))
    days, rest = left.days, left.seconds
    hours, minutes = rest // 3600, rest % 3600 // 60
    parts = [f"{days} d"] * (days > 0) + [f"{hours} h"] * (hours > 0) + \
        [f"{minutes} min"] * (minutes > 0)
    return " ".join(parts) or f"{rest} s"
