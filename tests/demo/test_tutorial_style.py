"""Code structured the way well-known tutorials structure it gets the right verdict and a
message in its own terms (see autograder/tutorial_style/implementations.py and the catalogue
tests/fixtures/tutorial_style.py), in both modes, and is never rejected by a rule that only the
hidden checks apply."""

from __future__ import annotations

import pytest
from class_secrets import secrets_for
from hidden_only import hidden_only_failure

from autograder import exercises, grade_function
from autograder.exercises.checking import SECRET_ENV
from autograder.tutorial_style import implementations as tutorial_style
from tests.fixtures.mutants import Mutant
from tests.fixtures.tutorial_style import TUTORIAL_STYLE

PYTORCH_EXERCISES = [e for e in exercises() if e.split(".")[0] >= "ch07"]
# Judged under the classes' secrets (tests/class_secrets.py): the entries marked so, and the
# layouts and the NumPy code that the paper's rules and the dtype notes must accept whatever the
# secret.
ALWAYS_EVERY_SECRET = (
    tutorial_style.D2lEncoderBlock, tutorial_style.UvaEncoderBlock,
    tutorial_style.sqrt_scaled_dot_product_attention, tutorial_style.sqrt_multi_head_attention)
EVERY_SECRET = [c for c in TUTORIAL_STYLE if c.every_secret or c.fn in ALWAYS_EVERY_SECRET]


@pytest.mark.parametrize("code", TUTORIAL_STYLE, ids=[c.id for c in TUTORIAL_STYLE])
def test_tutorial_style_code_is_judged_in_its_own_terms(code: Mutant):
    results = {hidden: grade_function(code.exercise, code.fn, hidden=hidden)
               for hidden in (False, True)}
    for result in results.values():
        if code.valid:
            assert result.passed, result.message
            assert (code.note in result.message) if code.note else not result.notes, \
                result.message
        else:
            assert not result.passed
            assert code.hint in result.message, result.message
    problem = hidden_only_failure(results[False], results[True])
    assert problem is None, problem


@pytest.mark.parametrize("code", EVERY_SECRET, ids=[c.id for c in EVERY_SECRET])
def test_tutorial_style_code_is_judged_alike_under_every_secret(code: Mutant, monkeypatch):
    for secret in secrets_for(code, EVERY_SECRET):
        monkeypatch.setenv(SECRET_ENV, secret)
        result = grade_function(code.exercise, code.fn, hidden=True)
        assert result.passed == code.valid, f"AUTOGRADER_SECRET={secret!r}: {result.message}"
        if not code.valid:
            assert code.hint in result.message, f"AUTOGRADER_SECRET={secret!r}"


def test_every_pytorch_exercise_is_tried_with_tutorial_style_code():
    assert {c.exercise for c in TUTORIAL_STYLE} >= set(PYTORCH_EXERCISES)
    assert {c.fn for c in EVERY_SECRET} >= set(ALWAYS_EVERY_SECRET)
