"""The honest answers that calibrate copy detection are correct: they pass the visible and the
hidden checks (see tests/fixtures/honest_styles.py and literal_followers.py)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from autograder import grade_function
from autograder.copies.pairs import DICTATED
from autograder.exercises.registry import get_exercise
from tests.fixtures.honest_styles import HONEST, Honest, honest_source


def graded(entry: Honest) -> Any:
    """The answer as its cell defines it: with the helpers the cell holds before it (a
    sampler's own ``pick_next``), run in the namespace of the module that writes it."""
    if not entry.helpers:
        return entry.answer
    namespace = dict(vars(inspect.getmodule(entry.answer)))
    exec(honest_source(entry), namespace)
    return namespace[get_exercise(entry.exercise).defines]


@pytest.mark.parametrize("entry", HONEST, ids=[h.id for h in HONEST])
def test_honest_answers_pass_in_both_modes(entry):
    for hidden in (False, True):
        result = grade_function(entry.exercise, graded(entry), hidden=hidden)
        assert result.passed, (hidden, result.message)


def test_every_style_is_paired_and_named_as_the_exercise():
    by_exercise: dict[str, set[str]] = {}
    for entry in HONEST:
        by_exercise.setdefault(entry.exercise, set()).add(entry.learner)
        name = entry.exercise.split(".", 1)[1].replace("_", "")
        assert name.lower() in honest_source(entry).replace("_", "").lower()
    # Learners who follow the hints in their own way come in pairs, or with a tutorial's.
    assert all({"hint-a", "hint-b"} <= found or "annotated" in found
               for found in by_exercise.values() if found & {"hint-a", "hint-b"})
    # Where the text dictates the code, a learner follows it to the letter (two, where the text
    # leaves choices), so that copy detection compares them with the course and each other.
    assert all("literal-a" in by_exercise[exercise] for exercise in DICTATED)
