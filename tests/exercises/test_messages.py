"""How failures reach learners: the check's sentence first, the learner's own failing line,
hints for known mistakes in their terms, and where dropout acts in training mode."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from autograder import grade_function
from autograder.exercises.checking import (
    COMMON_ERROR_HINTS,
    ErrorHint,
    LearnerError,
    call,
    error_hints,
)
from autograder.exercises.registry import CheckFailed, check, render_failure
from autograder.exercises.torch_checking import dropout_problem


def test_a_failed_check_shows_its_sentence_first_without_a_traceback():
    def softmax(x, axis=-1):
        return np.exp(x) / np.exp(x).sum()

    with pytest.raises(CheckFailed) as info:
        check("ch02.softmax", softmax)
    assert isinstance(info.value, AssertionError)  # nbgrader and pytest still see a failure
    lines = info.value._render_traceback_()
    assert "ch02.softmax (visible checks) failed:" in lines[0]
    assert not any("Traceback" in line or "File " in line for line in lines)
    assert " ".join(lines[1:]).split() == str(info.value).partition(" failed: ")[2].split()


def test_rendering_puts_the_hint_on_its_own_lines():
    lines = render_failure("ex (visible checks) failed: the values differ. Hint: use keepdims.")
    assert lines[1:] == ["the values differ.", "Hint: use keepdims."]
    assert render_failure("plain text") == ["\x1b[1m\x1b[31mplain text\x1b[0m"]


def test_an_error_in_learner_code_names_the_learner_s_line_and_the_known_mistake():
    def scaled_dot_product_attention(q, k, v, mask=None):
        weights = q @ k.T
        return weights @ v, weights

    message = grade_function("ch02.scaled_dot_product_attention",
                             scaled_dot_product_attention).message
    assert "raised ValueError" in message
    assert re.search(r"\(in `scaled_dot_product_attention`, line \d+: `weights = q @ k\.T`\)",
                     message)
    assert "np.swapaxes(k, -1, -2)" in message.partition("Hint:")[2]


def test_error_hints_explain_only_their_own_mistake():
    def broadcast_of_two_unrelated_shapes():
        return np.zeros((2, 3)) + np.zeros((4, 5))

    with pytest.raises(LearnerError) as info:
        call(broadcast_of_two_unrelated_shapes)
    assert "keepdims" not in str(info.value) and info.value.hint is None

    def mean_without_keepdims(x):
        return x - x.mean(axis=-1)

    with pytest.raises(LearnerError, match="keepdims=True"):
        call(mean_without_keepdims, np.zeros((2, 3)))


def test_a_specific_error_hint_replaces_a_generic_one():
    def unpacks(x):
        a, b = x.shape
        return a + b

    specific = ErrorHint("the input has three axes here.", ("ValueError",), "unpack")
    with pytest.raises(LearnerError) as generic:
        call(unpacks, np.zeros((1, 2, 3)))
    assert generic.value.hint == next(h.message for h in COMMON_ERROR_HINTS
                                      if h.matches(generic.value.error))
    with pytest.raises(LearnerError, match="Hint: the input has three axes here.$"), \
            error_hints([specific]):
        call(unpacks, np.zeros((1, 2, 3)))


def test_a_dropout_pattern_is_recognised_and_its_faults_named():
    base = torch.linspace(0.5, 2.0, 40, dtype=torch.float64)
    keep = torch.arange(40) % 3 != 0
    p = 0.4
    assert dropout_problem(base * keep / (1 - p), base, p) is None
    assert dropout_problem(base, base, p) == "no value was dropped"
    assert "not divided by 1 - p" in dropout_problem(base * keep, base, p)
    assert "as for dropout p = 0.1" in dropout_problem(base * keep / 0.9, base, p)
    assert dropout_problem(base * 1.3, base, p) == "no value was dropped"
    assert "eval-mode values" in dropout_problem(base * keep * (1 + base), base, p)
    assert "dropout acts twice" in dropout_problem(base * keep / (1 - p) ** 2, base, p)
    # Where dropout is optional, no dropout at all is right too; a wrong one is not.
    assert dropout_problem(base, base, p, required=False) is None
    assert "not divided by 1 - p" in dropout_problem(base * keep, base, p, required=False)


@pytest.mark.slow
def test_an_executed_notebook_shows_the_sentence_first_and_nbgrader_scores_zero():
    import nbformat
    from nbclient import NotebookClient
    from nbgrader.utils import determine_grade

    from autograder.learner.selfcheck import _kernel_config

    nb = nbformat.v4.new_notebook()
    solution = ("import numpy as np\n\ndef softmax(x, axis=-1):\n"
                "    e = np.exp(x - np.max(x, axis=axis))\n"
                "    return e / e.sum(axis=axis, keepdims=True)\n")
    test = nbformat.v4.new_code_cell('from autograder import check\ncheck("ch02.softmax", softmax)')
    test.metadata["nbgrader"] = {"grade": True, "grade_id": "t", "locked": True, "points": 2,
                                 "solution": False, "schema_version": 3}
    nb.cells = [nbformat.v4.new_code_cell(solution), test]
    NotebookClient(nb, timeout=120, allow_errors=True, kernel_name="python3",
                   config=_kernel_config()).execute()
    (output,) = nb.cells[1].outputs
    assert output.output_type == "error"
    assert "ch02.softmax (visible checks) failed:" in output.traceback[0]
    shown = "\n".join(output.traceback)
    assert "Traceback" not in shown and "registry.py" not in shown
    assert "(in `softmax`, line 4: `e = np.exp(x - np.max(x, axis=axis))`)" in " ".join(
        output.traceback).replace("\n", " ")
    assert determine_grade(nb.cells[1]) == (0, 2)
