"""Code structured the way well-known tutorials structure it gets the right verdict and a
message in its own terms (see autograder/demo/tutorial_style.py)."""

from __future__ import annotations

import pytest

from autograder import exercises, grade_function
from autograder.demo.mutants import Mutant
from autograder.demo.tutorial_style import TUTORIAL_STYLE
from autograder.exercises.checking import SECRET_ENV

PYTORCH_EXERCISES = [e for e in exercises() if e.split(".")[0] >= "ch07"]
EVERY_SECRET = [c for c in TUTORIAL_STYLE if c.every_secret]
SECRETS = [f"secret number {i}" for i in range(20)]


@pytest.mark.parametrize("hidden", [False, True], ids=["visible", "hidden"])
@pytest.mark.parametrize("code", TUTORIAL_STYLE, ids=[c.id for c in TUTORIAL_STYLE])
def test_tutorial_style_code_is_judged_in_its_own_terms(code: Mutant, hidden: bool):
    result = grade_function(code.exercise, code.fn, hidden=hidden)
    if code.valid:
        assert result.passed, result.message
    else:
        assert not result.passed
        assert code.hint in result.message, result.message


@pytest.mark.parametrize("code", EVERY_SECRET, ids=[c.id for c in EVERY_SECRET])
def test_tutorial_style_code_is_judged_alike_under_every_secret(code: Mutant, monkeypatch):
    for secret in SECRETS:
        monkeypatch.setenv(SECRET_ENV, secret)
        result = grade_function(code.exercise, code.fn, hidden=True)
        assert result.passed == code.valid, f"AUTOGRADER_SECRET={secret!r}: {result.message}"
        if not code.valid:
            assert code.hint in result.message, f"AUTOGRADER_SECRET={secret!r}"


def test_every_pytorch_exercise_is_tried_with_tutorial_style_code():
    assert {c.exercise for c in TUTORIAL_STYLE} == set(PYTORCH_EXERCISES)
