"""What a copy flag does to a score: one policy for every chapter of a course.

The instructor chooses it in the course's configuration, ``<course folder>/copies.json``
(``{"policy": "zero-verbatim"}``, written by ``python -m autograder similarity CHAPTER
--policy P``):

    flag           the default: a flag never changes a score
    zero-verbatim  an exercise whose answer is the course's code whole and nothing else (once
                   normalised: names, comments, layout and argument checks set aside) scores 0
    zero-copied    every exercise flagged ``copied_reference`` scores 0

The policy is applied after each check of a chapter's class
(:func:`autograder.copies.detect.check_chapter`), by the same rule in every chapter: the
exercise's graded test cell gets a manual score of 0 in the gradebook, which the Formgrader
shows and the instructor may change like any manual score. A cell the policy zeroed that no
longer qualifies (another policy, another answer) gets its automatic score back. Only copies of
the course's code are zeroed: which of two alike learners copied the other is for the
instructor to find out.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from autograder.copies.pairs import Pair
from autograder.course import Course

POLICIES = ("flag", "zero-verbatim", "zero-copied")
DEFAULT_POLICY = "flag"
# Both shares from which a copy is verbatim (rounding aside, the whole of each).
VERBATIM = 0.99


def _policy_file(course: Course) -> Path:
    return course.folder / "copies.json"


def copy_policy(course: Course) -> str:
    """The course's policy for copies (:data:`DEFAULT_POLICY` unless the instructor chose
    another).

    Raises:
        ValueError: the configuration names no policy of :data:`POLICIES`.
    """
    path = _policy_file(course)
    policy = (json.loads(path.read_text(encoding="utf-8")).get("policy", DEFAULT_POLICY)
              if path.is_file() else DEFAULT_POLICY)
    if policy not in POLICIES:
        raise ValueError(f"{path}: the policy for copies {policy!r} is none of {POLICIES}")
    return policy


def set_copy_policy(course: Course, policy: str) -> None:
    """Choose the course's policy for copies, for every chapter checked from now on.

    Raises:
        ValueError: not one of :data:`POLICIES`.
    """
    if policy not in POLICIES:
        raise ValueError(f"the policy for copies is one of {', '.join(POLICIES)}; got {policy!r}")
    course.folder.mkdir(parents=True, exist_ok=True)
    _policy_file(course).write_text(json.dumps({"policy": policy}) + "\n", encoding="utf-8")


def zeroes(pair: Pair, policy: str, threshold: float) -> bool:
    """Whether ``policy`` scores the exercise of a flagged ``pair`` 0."""
    if policy == "flag" or not (pair.other.course and pair.flagged(threshold)):
        return False
    return policy == "zero-copied" or min(pair.overlap.shares) >= VERBATIM


def zeroed_cells(pairs: Iterable[Pair], policy: str, threshold: float) -> dict[str, set[str]]:
    """student -> the grade ids of the solution cells whose exercise ``policy`` scores 0."""
    found: dict[str, set[str]] = defaultdict(set)
    for pair in pairs:
        if zeroes(pair, policy, threshold):
            found[pair.learner.owner].add(pair.cell)
    return dict(found)


def _record_file(course: Course) -> Path:
    return course.folder / "similarity" / "zeroed.json"


def apply_policy(course: Course, chapter: str, zeroed: dict[str, set[str]]) -> None:
    """Give the graded test cell of each exercise of ``zeroed`` (student -> solution grade
    ids) a manual score of 0, and its automatic score back to each cell zeroed before that is
    no longer in ``zeroed``; learners the gradebook does not hold are left out."""
    record_path = _record_file(course)
    record = json.loads(record_path.read_text(encoding="utf-8")) if record_path.is_file() else {}
    before = {(s, c) for s, cells in record.get(chapter, {}).items() for c in cells}
    now = {(s, c) for s, cells in zeroed.items() for c in cells}
    if not (before or now) or not course.gradebook.is_file():
        return
    from nbgrader.api import MissingEntry

    from autograder.grade.gradebook import open_gradebook, quiet_gradebook

    done: dict[str, list[str]] = defaultdict(list)
    with quiet_gradebook(), open_gradebook(course) as gradebook:
        for student, cell in sorted(before | now):
            test_cell = cell.removesuffix("_solution") + "_test"
            try:
                grade = gradebook.find_grade(test_cell, chapter, chapter, student)
            except MissingEntry:
                continue
            if (student, cell) in now:
                grade.manual_score = 0.0
                done[student].append(cell)
            elif grade.manual_score == 0.0:
                grade.manual_score = None
        gradebook.db.commit()
    record[chapter] = dict(sorted(done.items()))
    record_path.parent.mkdir(parents=True, exist_ok=True)
    record_path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n",
                           encoding="utf-8")


def policy_sentence(policy: str, zeroed: bool) -> str:
    """What the course's policy did with a flagged cell, for the flag's reason."""
    if policy == "flag":
        return "Flags of copy detection never change a score."
    if zeroed:
        return (f"The course's policy for copies ({policy}) scores this exercise 0 (a manual "
                "score the Formgrader shows, which you may change).")
    return f"The course's policy for copies ({policy}) leaves this score as it is."
