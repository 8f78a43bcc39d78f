"""Every known bug fails the checks and every valid alternative passes, in both modes."""

from __future__ import annotations

from collections import Counter

import pytest

from autograder import exercises, grade_function
from autograder.demo.mutants import Mutant, all_mutants

MUTANTS = all_mutants()


@pytest.mark.parametrize("hidden", [False, True], ids=["visible", "hidden"])
@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.id for m in MUTANTS])
def test_mutant_is_judged_correctly(mutant: Mutant, hidden: bool):
    result = grade_function(mutant.exercise, mutant.fn, hidden=hidden)
    if mutant.valid:
        assert result.passed, f"a valid alternative was rejected: {result.message}"
    else:
        assert not result.passed, "a buggy implementation passed"
        if mutant.hint is not None:
            assert mutant.hint in result.message


def test_mutants_belong_to_registered_exercises():
    registered = set(exercises())
    assert {m.exercise for m in MUTANTS} <= registered
    duplicates = [key for key, n in Counter((m.exercise, m.name) for m in MUTANTS).items()
                  if n > 1]
    assert not duplicates


@pytest.mark.parametrize("exercise_id", exercises())
def test_every_exercise_has_bugs_and_alternatives(exercise_id: str):
    mine = [m for m in MUTANTS if m.exercise == exercise_id]
    bugs = [m for m in mine if not m.valid]
    assert len(bugs) >= 3, "at least three realistic bugs per exercise"
    assert any(m.hint for m in bugs), "at least one bug with a targeted hint"
    assert sum(m.valid for m in mine) >= 2, "at least two valid alternatives per exercise"
