"""Every known bug fails the checks and every valid alternative passes, in both modes."""

from __future__ import annotations

from collections import Counter

import pytest

from autograder import exercises, grade_function
from autograder.demo.mutants import Mutant, all_mutants
from autograder.exercises.checking import SECRET_ENV

MUTANTS = all_mutants()
EVERY_SECRET = [m for m in MUTANTS if m.every_secret]
SECRETS = [f"secret number {i}" for i in range(20)]


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


@pytest.mark.parametrize("mutant", EVERY_SECRET, ids=[m.id for m in EVERY_SECRET])
def test_mutant_is_judged_correctly_under_every_secret(mutant: Mutant, monkeypatch):
    """Hidden inputs follow AUTOGRADER_SECRET; these bugs fail, with their hint, whatever
    it is (one test per mutant, so that the secrets of several run in parallel)."""
    for secret in SECRETS:
        monkeypatch.setenv(SECRET_ENV, secret)
        result = grade_function(mutant.exercise, mutant.fn, hidden=True)
        assert result.passed == mutant.valid, f"AUTOGRADER_SECRET={secret!r}: {result.message}"
        if not mutant.valid and mutant.hint is not None:
            assert mutant.hint in result.message, f"AUTOGRADER_SECRET={secret!r}"


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
