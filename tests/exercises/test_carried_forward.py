"""One mistake, one loss: a later exercise built on the learner's wrong earlier one is judged
given that earlier function (error carried forward), and a wrong later one still fails.

For every declared dependency, the course's solution of the later exercise runs on each known
bug of the earlier one (the reference's own code with the bug bound to the earlier name, as a
learner's notebook binds their own function).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from class_secrets import SECRETS

from autograder import check, grade_function
from autograder.exercises.checking import SECRET_ENV
from autograder.exercises.registry import (
    all_exercises,
    carried_reference,
    get_exercise,
    register,
)
from tests.fixtures.mutants import Mutant, all_mutants

MUTANTS = all_mutants()
DEPENDENCIES = [(later.id, earlier) for later in all_exercises() for earlier in later.depends]
# An earlier bug that makes the later function raise or return NaN leaves nothing to judge.
NOTHING_TO_JUDGE = ("raised", "NaN or infinite")
# A later bug that repeats the earlier one: right given that earlier function.
SAME_BUG = {
    ("ch04.multi_head_attention: heads merged without transpose", "merge_no_transpose"),
    ("ch04.multi_head_attention: heads concatenated in reverse", "merge_heads_reversed"),
    ("ch05.add_and_norm: gamma and beta swapped", "ln_gamma_beta_swapped"),
    ("ch05.add_and_norm: eps not passed on", "ln_eps_ignored"),
}
LEARNERS_ATTENTION = """
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-1)
    return weights @ v, weights
"""


def learners(later_id: str, earlier_id: str, earlier_fn: Callable[..., Any]) -> dict[str, Any]:
    """The learner's earlier functions: ``earlier_fn`` for ``earlier_id``, the course's for the
    other exercises the later one depends on."""
    later = get_exercise(later_id)
    mine = {d: get_exercise(d).load_reference() for d in later.depends}
    return mine | {earlier_id: earlier_fn}


def built_on(later_id: str, earlier_id: str, earlier_fn: Callable[..., Any]) -> Any:
    """The course's solution of ``later_id`` calling ``earlier_fn`` by the earlier name."""
    later = get_exercise(later_id)
    name = get_exercise(earlier_id).defines
    assert name in later.load_reference().__code__.co_names, f"{later_id} does not call {name}"
    return carried_reference(later, learners(later_id, earlier_id, earlier_fn))


def bugs(exercise_id: str) -> list[Mutant]:
    return [m for m in MUTANTS if m.exercise == exercise_id and not m.valid]


@functools.cache
def carried_bugs(later_id: str, earlier_id: str) -> tuple[Mutant, ...]:
    """The earlier exercise's bugs under which the course's later solution is judged: those
    that leave it something to judge in both modes."""
    found = []
    for bug in bugs(earlier_id):
        fn, mine = built_on(later_id, earlier_id, bug.fn), learners(later_id, earlier_id, bug.fn)
        results = [grade_function(later_id, fn, hidden, earlier=mine) for hidden in (False, True)]
        if not any(word in r.message for r in results for word in NOTHING_TO_JUDGE):
            found.append(bug)
    return tuple(found)


def test_dependencies_are_declared():
    assert ("ch02.scaled_dot_product_attention", "ch02.softmax") in DEPENDENCIES
    for later, earlier in DEPENDENCIES:
        assert later.split(".")[0] >= earlier.split(".")[0]


@pytest.mark.parametrize(("later", "earlier"), DEPENDENCIES)
def test_a_right_later_exercise_keeps_its_points_on_a_wrong_earlier_one(later, earlier):
    carried = carried_bugs(later, earlier)
    assert carried, f"no bug of {earlier} leaves {later} anything to judge"
    for bug in carried:
        fn = built_on(later, earlier, bug.fn)
        assert not grade_function(earlier, bug.fn).passed
        for hidden in (False, True):
            result = grade_function(later, fn, hidden, earlier=learners(later, earlier, bug.fn))
            assert result.passed, f"{bug.id}: {result.message}"
            if not grade_function(later, fn, hidden).passed:  # judged given the bug
                assert "is right given your" in result.message, result.message
                assert "wrong (see its cell)" in result.message, result.message


@pytest.mark.parametrize(("later", "earlier"), DEPENDENCIES)
def test_under_every_secret(later, earlier, monkeypatch):
    bug = carried_bugs(later, earlier)[0]
    fn = built_on(later, earlier, bug.fn)
    for secret in SECRETS:
        monkeypatch.setenv(SECRET_ENV, secret)
        result = grade_function(later, fn, hidden=True, earlier=learners(later, earlier, bug.fn))
        assert result.passed, f"{SECRET_ENV}={secret!r}, {bug.id}: {result.message}"


@pytest.mark.parametrize(("later", "earlier"), DEPENDENCIES)
def test_a_wrong_later_exercise_still_fails(later, earlier):
    """With the earlier exercise right (the course's), or wrong: a bug of the later one is
    not carried forward, unless it is the very bug of the learner's earlier function."""
    right = get_exercise(earlier).load_reference()
    for bug in bugs(later):
        for mine in (right, *(b.fn for b in carried_bugs(later, earlier))):
            if (bug.id, mine.__name__) in SAME_BUG:
                continue
            result = grade_function(later, bug.fn, hidden=True,
                                    earlier=learners(later, earlier, mine))
            assert not result.passed, f"{bug.id} with {earlier} {mine.__name__} passed"
            assert "is right given your" not in result.message


def test_the_notebook_check_finds_the_learners_earlier_function(capsys):
    """A test cell passes the later function only: its notebook's softmax is the learner's."""
    bug = next(m for m in bugs("ch02.softmax") if m.fn.__name__ == "softmax_whole_array")
    notebook = {"np": np, "math": math, "softmax": bug.fn}
    exec(LEARNERS_ATTENTION, notebook)  # noqa: S102 - a notebook cell of the test's own
    check("ch02.scaled_dot_product_attention", notebook["scaled_dot_product_attention"])
    printed = capsys.readouterr().out
    assert "all passed" in printed
    assert "your scaled_dot_product_attention is right given your softmax" in printed


def test_a_dependency_is_of_this_or_an_earlier_chapter():
    with pytest.raises(ValueError, match="depends"):
        register("ch02.later_thing", title="t", points=1, difficulty="easy", minutes=1,
                 reference="m:a", depends=("ch03.attention_head",))
