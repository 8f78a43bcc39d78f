"""Graded functions are verified outside the kernel: the learner's code runs in a sandboxed
process of its own, the checks run in the grader."""

from __future__ import annotations

import copy
import time

import nbformat
import pytest

from autograder.course import Course
from autograder.exercises.registry import all_exercises
from autograder.notebook import cell_index
from autograder.pipeline.verify import plan, verify_exercises
from autograder.sandbox.launcher import GRACE_S, Learner, Limits

CHAPTER = "ch02_attention"
LIMITS = Limits(cell_timeout_s=5, memory_mb=1024)
TORCH_LIMITS = Limits(cell_timeout_s=60, memory_mb=4096)


def verify(chapter: str, nb, limits: Limits = LIMITS):
    with Learner(limits) as learner:
        return verify_exercises(chapter, nb, learner)


def _replace_solution(nb, name: str, code: str, prefix: str = "ch02"):
    nb.cells[cell_index(nb, f"{prefix}_{name}_solution")].source = code


def _source(chapter: str):
    return nbformat.read(Course.of().source_notebook(chapter), as_version=4)


def test_reference_solutions_get_full_credit(source):
    results = verify(CHAPTER, source)
    ids = [e.id for e in all_exercises() if e.chapter == CHAPTER]
    assert list(results) == ids
    assert all(r.passed and r.verified and not r.flags for r in results.values()), results


@pytest.mark.parametrize("chapter", ["ch07_pytorch_modules", "ch08_decoder_and_model",
                                     "ch09_training", "ch10_translation"])
def test_pytorch_reference_solutions_are_verified_outside_the_kernel(chapter):
    results = verify(chapter, _source(chapter), TORCH_LIMITS)
    assert list(results) == [e.id for e in all_exercises() if e.chapter == chapter]
    assert all(r.passed and r.verified and not r.flags for r in results.values()), results


@pytest.mark.parametrize("chapter", ["ch04_multi_head_attention", "ch07_pytorch_modules",
                                     "ch08_decoder_and_model"])
def test_stubs_fail_verification(chapter):
    release = nbformat.read(Course.of().release_notebook(chapter), as_version=4)
    results = verify(chapter, release, TORCH_LIMITS)
    assert results and not any(r.passed for r in results.values())
    assert all("NotImplementedError" in r.message for r in results.values()), results


def test_exercises_that_may_use_each_others_answers_get_processes_of_their_own():
    ch07 = [e for e in all_exercises() if e.chapter == "ch07_pytorch_modules"]
    groups = [[e.name for e in group] for group in plan(ch07)]
    # The encoder layer may build on the course's attention and feed-forward modules: the
    # answers of 7.1 and 7.2, so it never shares their process.
    assert groups == [["multi_head_attention", "positionwise_feed_forward",
                       "positional_encoding"], ["encoder_layer"]]
    ch02 = [e for e in all_exercises() if e.chapter == CHAPTER]
    assert len(plan(ch02)) == 1


def test_a_process_that_dies_costs_only_its_exercise(source):
    nb = copy.deepcopy(source)
    _replace_solution(nb, "padding_mask", (
        "import os\n\ndef padding_mask(lengths, max_len):\n    os._exit(1)\n"))
    results = verify(CHAPTER, nb)
    result = results["ch02.padding_mask"]
    assert not result.passed and "exit status" in result.message
    assert [f.code for f in result.flags] == ["worker_died"]
    # A fresh process grades the next exercise.
    after = results["ch02.scaled_dot_product_attention"]
    assert after.passed and after.flags == ()


def test_an_endless_solution_cell_costs_only_that_cell(source):
    nb = copy.deepcopy(source)
    _replace_solution(nb, "softmax", "while True:\n    pass\n")
    started = time.monotonic()
    results = verify(CHAPTER, nb, Limits(cell_timeout_s=3, memory_mb=1024))
    assert time.monotonic() - started < 3 + GRACE_S
    assert not results["ch02.softmax"].passed
    assert "not define" in results["ch02.softmax"].message
    assert "TimeoutError" in results["ch02.softmax"].message
    assert results["ch02.causal_mask"].passed and not results["ch02.causal_mask"].flags


def test_solution_cells_that_never_start_are_run_once_not_once_per_exercise(source):
    nb = copy.deepcopy(source)
    # Catching the interruption keeps the cell running: the grader's own deadline stops it.
    _replace_solution(nb, "softmax", (
        "while True:\n    try:\n        while True:\n            pass\n"
        "    except BaseException:\n        pass\n"))
    limits = Limits(cell_timeout_s=2, memory_mb=1024)
    started = time.monotonic()
    results = verify(CHAPTER, nb, limits)
    elapsed = time.monotonic() - started
    assert all(not r.passed and not r.verified and [f.code for f in r.flags] == ["worker_died"]
               for r in results.values())
    n_cells = sum(1 for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    assert elapsed < 2 * (2 * n_cells + GRACE_S), "the endless cells ran more than once"


def test_a_slow_solution_is_stopped_by_the_learners_deadline(source):
    """Sleeping just under the call limit in every hidden call would hold the grader for
    minutes; the learner's deadline bounds it all."""
    nb = copy.deepcopy(source)
    _replace_solution(nb, "softmax", (
        "import time\nimport numpy as np\n\ndef softmax(x, axis=-1):\n    time.sleep(2.5)\n"
        "    e = np.exp(x - x.max(axis=axis, keepdims=True))\n"
        "    return e / e.sum(axis=axis, keepdims=True)\n"))
    limits = Limits(cell_timeout_s=3, learner_timeout_s=10, memory_mb=1024)
    started = time.monotonic()
    results = verify(CHAPTER, nb, limits)
    assert time.monotonic() - started < 10 + GRACE_S
    assert not results["ch02.softmax"].passed
    assert all(not r.passed for r in results.values())
