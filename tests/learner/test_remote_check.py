"""The class's checking service: the same verdicts and messages as the checks run in the
notebook, for every exercise's reference and a seeded choice of its mutants, with the learner's
function in the learner's own process and the checks in the service's."""

from __future__ import annotations

import inspect
import math
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from autograder import grade_function
from autograder.course import CHAPTERS, ROOT, Course
from autograder.exercises.checking import CHECKS_ENV
from autograder.exercises.registry import all_exercises
from autograder.learner.remote_check import CheckingServiceError, remote_check
from autograder.steps.view import ChapterStates, plan_view, write_view
from tests.fixtures.mutants import all_mutants

MUTANTS = all_mutants()
# tests/demo/test_mutants.py judges every mutant in process, and the wire between a kernel and
# the service is the grader's own (tests/sandbox/). What this test adds is that the service,
# calling the learner's function over it, gives the notebook's verdict, message and notes for
# each exercise: its reference, one of its bugs and one of its valid alternatives show that, a
# seeded choice (the same in every run) at a quarter of the time of every mutant.
SAMPLE_SEED = 31
BUGS_PER_EXERCISE = 1


def _cases(chapter: str) -> list[tuple[str, object]]:
    """(exercise id, function) for each exercise of ``chapter``: its reference, then sampled
    mutants."""
    choose = random.Random(f"{SAMPLE_SEED} {chapter}")
    cases = []
    for exercise in (e for e in all_exercises() if e.chapter == chapter):
        mine = [m for m in MUTANTS if m.exercise == exercise.id]
        bugs = choose.sample([m for m in mine if not m.valid], BUGS_PER_EXERCISE)
        alternative = choose.choice([m for m in mine if m.valid])
        cases += [(exercise.id, exercise.load_reference())]
        cases += [(m.exercise, m.fn) for m in [*bugs, alternative]]
    return cases


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_same_verdicts_and_messages_as_in_the_notebook(checking_service: Path, chapter: str,
                                                       monkeypatch):
    monkeypatch.setenv(CHECKS_ENV, str(checking_service))
    for exercise_id, fn in _cases(chapter):
        local = grade_function(exercise_id, fn)
        verdict = remote_check(exercise_id, fn)
        assert (verdict["passed"], verdict["message"], tuple(verdict["notes"])) == (
            local.passed, local.message, local.notes), (exercise_id, getattr(fn, "__name__", fn))


def test_unknown_ids_hidden_checks_and_values(checking_service: Path, monkeypatch):
    monkeypatch.setenv(CHECKS_ENV, str(checking_service))
    verdict = remote_check("ch02.sofmax", len)
    assert verdict["unknown"] and "ch02.softmax" in verdict["message"]
    verdict = remote_check("ch02.softmax", len, hidden=True)
    assert not verdict["passed"] and "only when your instructor grades" in verdict["message"]


def test_a_service_that_is_down_is_named_with_what_to_do(tmp_path: Path, monkeypatch):
    monkeypatch.setenv(CHECKS_ENV, str(tmp_path / "nobody"))
    with pytest.raises(CheckingServiceError, match="Your work is safe.*tell your instructor"):
        remote_check("ch02.softmax", len)


def test_a_notebook_in_the_learners_view_checks_through_the_service(checking_service: Path,
                                                                     tmp_path: Path):
    """In a view without the checks and chapter 2's answers, check() gives the notebook's
    verdicts: a pass printed, a failure raised with the check's message and hint."""
    states = ChapterStates(frozenset(CHAPTERS[:2]), frozenset(CHAPTERS[:1]))
    write_view(plan_view(Course.of(ROOT), states),
               tmp_path)
    code = f"""
import sys, sysconfig
sys.path[:0] = [{str(tmp_path)!r}, sysconfig.get_paths()["purelib"]]
import numpy as np
from autograder import check
from autograder.exercises.registry import exercises
assert exercises() == [], "no checks in the view"
def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)
check("ch02.softmax", softmax)
def wrong(x, axis=-1):
    return np.exp(x) / np.exp(x).sum(axis=0, keepdims=True)
try:
    check("ch02.softmax", wrong)
except AssertionError as exc:
    print("FAILED:", exc)
"""
    result = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                            timeout=300, cwd=tmp_path,
                            env={"PATH": "/usr/bin:/bin", CHECKS_ENV: str(checking_service)})
    assert result.returncode == 0, result.stderr
    assert "ch02.softmax (visible checks): all passed." in result.stdout
    assert "FAILED: ch02.softmax (visible checks) failed:" in result.stdout
    assert "softmax over the wrong axis" in result.stdout


def test_the_service_carries_the_kernels_earlier_error_forward(checking_service: Path,
                                                                monkeypatch):
    """The kernel's attention calls its own wrong softmax: the service calls that softmax back
    in the kernel and passes the attention, saying why."""
    from tests.exercises.test_carried_forward import LEARNERS_ATTENTION

    monkeypatch.setenv(CHECKS_ENV, str(checking_service))
    bug = next(m.fn for m in MUTANTS if m.fn.__name__ == "softmax_whole_array")
    notebook = {"__name__": "__main__", "np": np, "math": math}
    # Both cells are the notebook's own, as a learner's are.
    exec(inspect.getsource(bug).replace(bug.__name__, "softmax"), notebook)  # noqa: S102
    exec(LEARNERS_ATTENTION, notebook)  # noqa: S102
    verdict = remote_check("ch02.scaled_dot_product_attention",
                           notebook["scaled_dot_product_attention"])
    assert verdict["passed"], verdict["message"]
    assert "right given your softmax; your softmax is wrong" in verdict["message"]


def test_the_service_says_that_grading_isolates_a_module_built_on_a_wrong_one(
        checking_service: Path, monkeypatch):
    """The kernel's encoder layer builds on its own attention, which lacks the 1/sqrt(d_k)
    scaling. A class's view holds no course attention while chapter 7 is open, so the service
    cannot isolate the layer: it fails, saying that grading gives it the course's attention
    (which a notebook with the course installed does in its own checks)."""
    from autograder.exercises.registry import earlier_functions, get_exercise
    from tests.exercises.test_carried_forward import setup_namespace, solution
    from tests.fixtures.sample_class import mutant_source

    monkeypatch.setenv(CHECKS_ENV, str(checking_service))
    notebook = {**setup_namespace("ch07_pytorch_modules"), "__name__": "__main__"}
    for source in (mutant_source("ch07.multi_head_attention", "AttentionNoScale"),
                   solution("ch07.positionwise_feed_forward"), solution("ch07.encoder_layer")):
        exec(source, notebook)  # noqa: S102 - the notebook's own cells
    layer = notebook["EncoderLayer"]
    verdict = remote_check("ch07.encoder_layer", layer)
    assert not verdict["passed"]
    assert ("your MultiHeadAttention is wrong (see its cell) and your EncoderLayer uses "
            "MultiHeadAttention. When grading, your EncoderLayer runs with the course's "
            "MultiHeadAttention in place of yours") in verdict["message"], verdict["message"]
    monkeypatch.delenv(CHECKS_ENV)
    local = grade_function("ch07.encoder_layer", layer,
                           earlier=earlier_functions(get_exercise("ch07.encoder_layer"), layer))
    assert local.passed and "with the course's MultiHeadAttention in place of yours" in (
        local.message)
