"""Every known bug fails the checks and every valid alternative passes, in both modes, and no
bug is rejected by a rule that only the hidden checks apply."""

from __future__ import annotations

from collections import Counter

import pytest
from class_secrets import secrets_for
from hidden_only import hidden_only_failure

from autograder import exercises, grade_function
from autograder.exercises.checking import SECRET_ENV
from autograder.exercises.registry import CheckResult
from tests.fixtures.mutants import Mutant, all_mutants

MUTANTS = all_mutants()
EVERY_SECRET = [m for m in MUTANTS if m.every_secret]


def judged(mutant: Mutant, result: CheckResult, mode: str) -> None:
    """The verdict, the hint of a bug and the note of a valid alternative."""
    if mutant.valid:
        assert result.passed, f"{mode}: a valid alternative was rejected: {result.message}"
        if mutant.note is None:
            assert not result.notes, f"{mode}: an unexpected note: {result.message}"
        else:
            assert result.notes and mutant.note in result.message, f"{mode}: {result.message}"
    else:
        assert not result.passed, f"{mode}: a buggy implementation passed"
        if mutant.hint is not None:
            assert mutant.hint in result.message, f"{mode}: {result.message}"


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.id for m in MUTANTS])
def test_mutant_is_judged_correctly(mutant: Mutant):
    visible = grade_function(mutant.exercise, mutant.fn, hidden=False)
    hidden = grade_function(mutant.exercise, mutant.fn, hidden=True)
    judged(mutant, visible, "visible")
    judged(mutant, hidden, "hidden")
    assert hidden_only_failure(visible, hidden) is None, hidden_only_failure(visible, hidden)


@pytest.mark.parametrize("mutant", EVERY_SECRET, ids=[m.id for m in EVERY_SECRET])
def test_mutant_is_judged_correctly_under_every_secret(mutant: Mutant, monkeypatch):
    """Hidden inputs follow AUTOGRADER_SECRET; these mutants are judged right whatever it is:
    the bugs fail, with their hint and by a rule the visible checks apply too, the valid
    alternatives pass (secrets: tests/class_secrets.py; one test per mutant, so that the secrets
    of several run in parallel)."""
    visible = grade_function(mutant.exercise, mutant.fn, hidden=False)
    for secret in secrets_for(mutant, EVERY_SECRET):
        monkeypatch.setenv(SECRET_ENV, secret)
        result = grade_function(mutant.exercise, mutant.fn, hidden=True)
        judged(mutant, result, f"AUTOGRADER_SECRET={secret!r}")
        problem = hidden_only_failure(visible, result)
        assert problem is None, f"AUTOGRADER_SECRET={secret!r}: {problem}"


def test_mutants_belong_to_registered_exercises():
    registered = set(exercises())
    assert {m.exercise for m in MUTANTS} <= registered
    duplicates = [key for key, n in Counter((m.exercise, m.name) for m in MUTANTS).items()
                  if n > 1]
    assert not duplicates
    assert not [m.id for m in MUTANTS if (m.note and not m.valid) or (m.hint and m.valid)]


@pytest.mark.parametrize("exercise_id", exercises())
def test_every_exercise_has_bugs_and_alternatives(exercise_id: str):
    mine = [m for m in MUTANTS if m.exercise == exercise_id]
    bugs = [m for m in mine if not m.valid]
    assert len(bugs) >= 3, "at least three realistic bugs per exercise"
    assert any(m.hint for m in bugs), "at least one bug with a targeted hint"
    assert sum(m.valid for m in mine) >= 2, "at least two valid alternatives per exercise"
