"""One mistake, one loss: a later exercise built on the learner's wrong earlier one is judged
given that earlier function (error carried forward) or with the course's in its place
(isolation), and a wrong later one still fails.

For every declared dependency, the course's solution of the later exercise runs on known bugs
of the earlier one: the reference's own code with the bug bound to the earlier name (carried
forward: every bug), or the solution cell run in a notebook's namespace where the earlier name
is the bug (isolation: the first bug, hidden under a share of the classes' secrets, and
visible for a later exercise's first dependency, since a module's checks take up to seconds).
"""

from __future__ import annotations

import ast
import functools
import math
from collections.abc import Callable
from typing import Any

import nbformat
import numpy as np
import pytest
from class_secrets import SECRETS

from autograder import check, grade_function
from autograder.course import ROOT, Course
from autograder.exercises.checking import SECRET_ENV, learner_namespace
from autograder.exercises.registry import (
    all_exercises,
    carried_reference,
    earlier_functions,
    get_exercise,
    register,
)
from autograder.grade.verify import SKIPPED_IMPORTS, setup_import_nodes
from tests.fixtures.mutants import Mutant, all_mutants
from tests.fixtures.sample_class import load_chapter, mutant_source

MUTANTS = all_mutants()
DEPENDENCIES = [(later.id, earlier) for later in all_exercises() for earlier in later.depends]
ISOLATED = [(later, earlier) for later, earlier in DEPENDENCIES if get_exercise(later).isolated]
CARRIED = [dependency for dependency in DEPENDENCIES if dependency not in ISOLATED]
# An earlier bug that makes the later function raise or return NaN leaves nothing to judge.
NOTHING_TO_JUDGE = ("raised", "NaN or infinite")
# A later bug that repeats the earlier one: right given that earlier function.
SAME_BUG = {
    ("ch04.multi_head_attention: heads merged without transpose", "merge_no_transpose"),
    ("ch04.multi_head_attention: heads concatenated in reverse", "merge_heads_reversed"),
    ("ch05.add_and_norm: gamma and beta swapped", "ln_gamma_beta_swapped"),
    ("ch05.add_and_norm: eps not passed on", "ln_eps_ignored"),
    ("ch12.cached_rope_attention: positions from 0 at every call", "rope_ignores_positions"),
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
    assert ("ch07.encoder_layer", "ch07.multi_head_attention") in ISOLATED
    for later, earlier in DEPENDENCIES:
        assert later.split(".")[0] >= earlier.split(".")[0]


def test_every_solution_that_calls_an_earlier_exercise_declares_it():
    """A solution cell that names another exercise's definition of its chapter (and so calls
    the learner's own) declares that exercise: no dependency goes unhandled."""
    for exercise in all_exercises():
        for other in all_exercises():
            if (other.chapter == exercise.chapter and other != exercise
                    and calls(solution(exercise.id), other.defines)):
                assert other.id in exercise.depends, f"{exercise.id} calls {other.defines}"


def test_an_isolated_exercise_is_given_the_course_s_earlier_pieces_when_graded():
    """The grader's process swaps the learner's earlier definitions for the course's: those
    must be on the later exercise's allow-list."""
    for later, earlier in ISOLATED:
        reference = get_exercise(earlier).reference
        assert reference in get_exercise(later).allowed, f"{later}: {reference}"


@pytest.mark.parametrize(("later", "earlier"), CARRIED)
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


@pytest.mark.parametrize(("later", "earlier"), CARRIED)
def test_under_every_secret(later, earlier, monkeypatch):
    bug = carried_bugs(later, earlier)[0]
    fn = built_on(later, earlier, bug.fn)
    for secret in SECRETS:
        monkeypatch.setenv(SECRET_ENV, secret)
        result = grade_function(later, fn, hidden=True, earlier=learners(later, earlier, bug.fn))
        assert result.passed, f"{SECRET_ENV}={secret!r}, {bug.id}: {result.message}"


@pytest.mark.parametrize(("later", "earlier"), CARRIED)
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


# ----------------------------------------------------------------------------- isolation


@functools.cache
def solution(exercise_id: str) -> str:
    """The source of the exercise's solution cell."""
    return load_chapter(get_exercise(exercise_id).chapter).solutions[exercise_id]


@functools.cache
def setup_namespace(chapter: str) -> dict[str, Any]:
    """What the imports of the chapter's setup cell bind, without the plotting libraries the
    answers never need (as the grader's process does)."""
    namespace: dict[str, Any] = {}
    source_nb = nbformat.read(str(Course.of(ROOT).source_notebook(chapter)), as_version=4)
    for statement in map(ast.unparse, setup_import_nodes(source_nb)):
        if not any(skipped in statement for skipped in (*SKIPPED_IMPORTS, ".figures")):
            exec(statement, namespace)  # noqa: S102 - the course's own setup
    return namespace


def answer_source(later_id: str, earlier_id: str) -> str:
    """The course's answer of ``later_id`` that calls the earlier exercise by its name: the
    solution cell, or else a valid mutant's (the language model's solution stacks the
    course's EncoderLayer; learners may stack their own DecoderOnlyBlock)."""
    name = get_exercise(earlier_id).defines
    if calls(solution(later_id), name):
        return solution(later_id)
    valid = (mutant_source(later_id, m.fn.__name__) for m in MUTANTS
             if m.exercise == later_id and m.valid)
    return next(source for source in valid if calls(source, name))


def calls(source: str, name: str) -> bool:
    """Whether the code ``source`` names ``name``."""
    return name in {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)}


def in_notebook(later_id: str, earlier_id: str, earlier_fn: Any) -> Any:
    """The course's answer of ``later_id`` as a learner's notebook defines it: beside the
    course's pieces of its other earlier exercises and ``earlier_fn`` under the earlier name."""
    later = get_exercise(later_id)
    namespace = dict(setup_namespace(later.chapter))
    namespace |= {get_exercise(d).defines: get_exercise(d).load_reference()
                  for d in later.depends}
    exec(answer_source(later_id, earlier_id), namespace)  # noqa: S102 - the course's answer
    namespace[get_exercise(earlier_id).defines] = earlier_fn
    return namespace[later.defines]


@pytest.mark.parametrize(("later", "earlier"), ISOLATED)
def test_a_right_later_module_keeps_its_points_beside_a_wrong_earlier_one(later, earlier,
                                                                         monkeypatch):
    """Hidden under this dependency's share of the 20 secrets (every secret judges some
    dependency): the earlier bug fails its own hidden checks under each, so grading isolates,
    and the later module passes with the note under the first; in visible mode too for the
    later exercise's first dependency (both modes run one code: a module's checks are slow)."""
    bug = bugs(earlier)[0]
    fn = in_notebook(later, earlier, bug.fn)
    mine = earlier_functions(get_exercise(later), fn)
    assert mine[earlier] is bug.fn
    name = get_exercise(earlier).defines
    note = f"in place of yours; your {name} is wrong (see its cell)"
    share = SECRETS[ISOLATED.index((later, earlier))::len(ISOLATED)]
    for secret in reversed(share):
        monkeypatch.setenv(SECRET_ENV, secret)
        assert not grade_function(earlier, bug.fn, hidden=True).passed, secret
    first = earlier == get_exercise(later).depends[0]
    for hidden in (True, False) if first else (True,):
        result = grade_function(later, fn, hidden, earlier=mine)
        assert result.passed, f"{SECRET_ENV}={share[0]!r}, {bug.id}: {result.message}"
        assert note in result.message, result.message
    assert learner_namespace(fn)[name] is bug.fn  # the notebook's own, given back


@pytest.mark.parametrize("later", sorted({later for later, _ in ISOLATED}))
def test_a_wrong_later_module_still_fails(later, monkeypatch):
    """A bug of the later module fails with the course's earlier pieces (the learner's earlier
    exercises right), and with a bug of every earlier one under its name (then checked again
    with the course's pieces)."""
    bug, exercise = bugs(later)[0], get_exercise(later)
    for wrong in (False, True):
        for earlier in exercise.depends:
            mine = bugs(earlier)[0].fn if wrong else get_exercise(earlier).load_reference()
            monkeypatch.setitem(learner_namespace(bug.fn), get_exercise(earlier).defines, mine)
        result = grade_function(later, bug.fn, hidden=True,
                                earlier=earlier_functions(exercise, bug.fn))
        assert not result.passed, f"{bug.id} passed (earlier exercises wrong: {wrong})"
        assert "is right" not in result.message
        assert ("fails with the course's" in result.message) == wrong, result.message
