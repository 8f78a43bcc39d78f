"""No rule that costs points is applied by the hidden checks alone.

Visible and hidden checks are one code: the check functions and the toolkits they use never
look at the mode, and the mode chooses only the seed of the random inputs. So every rule runs in
both modes; what could still differ is whether the visible inputs show a rule's failure. The
graded catalogues (``tests/demo/test_mutants.py`` for the mutants, under 20 secrets for the
bugs that need it, and ``tests/demo/test_tutorial_style.py``) therefore require, for every
implementation they hold, that what the hidden checks reject the visible checks reject too, by
the same check or with the same diagnosis (``tests/hidden_only.py``). This file proves the
first half for every exercise, and that the comparison of the second half can fail.
"""

from __future__ import annotations

import ast
import functools
import inspect
from pathlib import Path

import numpy as np
import pytest
from hidden_only import hidden_only_failure

from autograder import exercises, grade_function
from autograder.exercises.registry import CheckResult, get_exercise
from autograder.grade.verify import closure

EXERCISES_DIR = Path(get_exercise("ch02.softmax").check.__code__.co_filename).parents[1]
# Where a context is made and its mode turned into a seed: the only places that may read it.
MODE_READERS = {"registry.py", "checking.py"}


@functools.cache
def _modules_of(module: str) -> list[Path]:
    """The files of the check module ``module`` and of every course module it imports."""
    names = closure([module]) | {module}
    files = [Path(inspect.getfile(__import__(name, fromlist=["_"]))) for name in sorted(names)]
    return [f for f in files if f.is_relative_to(EXERCISES_DIR)]


@functools.cache
def _mode_reads(path: Path) -> list[str]:
    """Where ``path`` reads the mode: ``.hidden`` of anything, ``getattr(..., "hidden")``, or
    a seed of its own from ``seed_for``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr == "hidden":
            found.append(f"{path.name}:{node.lineno} .hidden")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
                node.func.id == "seed_for" or (node.func.id == "getattr" and any(
                    isinstance(a, ast.Constant) and a.value == "hidden" for a in node.args))):
            found.append(f"{path.name}:{node.lineno} {node.func.id}(...)")
    return found


@pytest.mark.parametrize("exercise_id", exercises())
def test_the_visible_and_hidden_checks_are_one_code(exercise_id: str):
    modules = _modules_of(get_exercise(exercise_id).check.__module__)
    assert any(m.parent.name == "checks" for m in modules)
    reads = [r for m in modules if m.name not in MODE_READERS for r in _mode_reads(m)]
    assert not reads, f"the checks of {exercise_id} depend on the mode: {reads}"


def test_the_mode_chooses_only_the_seed():
    seen = {}

    def spy(x, axis=-1):
        seen.setdefault(len(seen), x.shape)
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    grade_function("ch02.softmax", spy, hidden=False)
    visible, seen = dict(seen), {}
    grade_function("ch02.softmax", spy, hidden=True)
    assert len(seen) == len(visible) and seen != visible  # same calls, other inputs


def test_a_failure_only_the_hidden_checks_reach_is_reported():
    passed = CheckResult(True, "ch04.x (visible checks): all passed.")
    raised = CheckResult(False, "ch04.x (hidden checks) failed: ... should raise an error",
                         rule="ch04:273 expect_raises")
    assert "the visible ones do not" in hidden_only_failure(passed, raised)
    other = CheckResult(False, "ch04.x (visible checks) failed: values differ",
                        rule="ch04:250 compare")
    assert "by another rule" in hidden_only_failure(other, raised)
    assert hidden_only_failure(raised, raised) is None
    # One bug, two symptoms, one diagnosis: the same rule.
    hint = " Hint: the mask needs a head axis."
    values = CheckResult(False, "values differ." + hint, rule="ch02:236 compare")
    error = CheckResult(False, "raised ValueError." + hint, rule="ch02:251 error_hints")
    assert hidden_only_failure(values, error) is None
