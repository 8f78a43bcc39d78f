"""The item analysis's reading of graded cells and handed-in notebooks, from the messages the
real checks produce (no kernel runs here). The whole command, on the graded sample class, is
tested in tests/demo/test_sample_class.py."""

from __future__ import annotations

import nbformat
import numpy as np

from autograder.exercises.registry import grade_function, render_pass
from autograder.steps.analysis import cell_findings, hint_id, hint_of, minutes_spent
from tests.fixtures.mutants.ch02 import softmax_loop, softmax_whole_array

SOFTMAX = "ch02.softmax"


def _test_cell(*results) -> nbformat.NotebookNode:
    """A graded test cell with the outputs the kernel gives for ``results`` (the visible
    checks' result, then the hidden checks' if the visible ones passed)."""
    cell = nbformat.v4.new_code_cell("check(...)")
    printed = [render_pass(r) + "\n" for r in results if r.passed]
    if printed:
        cell.outputs.append(nbformat.v4.new_output("stream", name="stdout",
                                                   text="".join(printed)))
    failed = [r for r in results if not r.passed]
    if failed:
        cell.outputs.append(nbformat.v4.new_output("error", ename="CheckFailed",
                                                   evalue=failed[0].message, traceback=[]))
    return cell


def test_one_hint_has_one_id_whatever_inputs_showed_it() -> None:
    visible = grade_function(SOFTMAX, softmax_whole_array)
    hidden = grade_function(SOFTMAX, softmax_whole_array, hidden=True)
    hints = [hint_of(r.message) for r in (visible, hidden)]
    assert all(hints) and len({hint_id(h) for h in hints}) == 1
    assert hint_id("the values do not sum to 1 along axis 0") == hint_id(
        "the values do not sum to 1 along axis -2.")
    assert hint_id("the diagonal must be True") != hint_id("the diagonal must be False")
    assert hint_of(grade_function(SOFTMAX, _stub).message) is None


def _stub(x: np.ndarray, axis: int = -1) -> np.ndarray:
    raise NotImplementedError


def test_hidden_only_failures_are_told_from_visible_ones() -> None:
    good = grade_function(SOFTMAX, softmax_loop)
    bad_hidden = grade_function(SOFTMAX, softmax_whole_array, hidden=True)
    bad_visible = grade_function(SOFTMAX, softmax_whole_array)
    hint, hidden_only = cell_findings(_test_cell(good, bad_hidden))
    assert hidden_only and hint == hint_of(bad_hidden.message)
    assert cell_findings(_test_cell(bad_visible)) == (hint_of(bad_visible.message), False)
    assert cell_findings(_test_cell(good, grade_function(SOFTMAX, softmax_loop,
                                                         hidden=True))) == (None, False)


def test_minutes_come_from_the_times_the_notebook_recorded() -> None:
    cells = {"ch02_softmax_test": SOFTMAX, "ch02_causal_mask_test": "ch02.causal_mask"}
    answer, test, mask = (nbformat.v4.new_code_cell("") for _ in range(3))
    answer.metadata = {"nbgrader": {"grade_id": "ch02_softmax_solution"},
                       "execution": {"iopub.execute_input": "2025-03-01T10:00:00.000Z",
                                     "shell.execute_reply": "2025-03-01T10:00:01.000Z"}}
    test.metadata = {"nbgrader": {"grade_id": "ch02_softmax_test"},
                     "ExecuteTime": {"start_time": "2025-03-01T10:24:00Z",
                                     "end_time": "2025-03-01T10:25:00Z"}}
    mask.metadata = {"nbgrader": {"grade_id": "ch02_causal_mask_test"}}  # never timed
    notebook = nbformat.v4.new_notebook(cells=[answer, test, mask])
    assert minutes_spent(notebook, cells) == {SOFTMAX: 25.0}
