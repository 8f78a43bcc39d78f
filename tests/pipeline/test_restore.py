"""Locked cells come back from the source, and every change is named."""

from __future__ import annotations

import copy

import nbformat

from autograder.grade.restore import restore_test_cells
from autograder.notebook import cell_index


def _locked_sources(nb) -> list[str]:
    return [c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("locked")]


def test_untouched_submission_has_no_flags(source):
    restored, flags = restore_test_cells(copy.deepcopy(source), source)
    assert flags == []
    assert [c.source for c in restored.cells] == [c.source for c in source.cells]


def test_deleted_edited_repointed_and_moved_cells_are_restored(source):
    submitted = copy.deepcopy(source)
    before = copy.deepcopy(submitted)
    del submitted.cells[cell_index(submitted, "ch02_softmax_test")]
    submitted.cells[cell_index(submitted, "ch02_causal_mask_test")].source = "print('trust me')"
    padding = submitted.cells[cell_index(submitted, "ch02_padding_mask_test")]
    padding.metadata.nbgrader["points"] = 100
    padding.metadata.nbgrader["grade_id"] = "ch02_padding_mask_test_mine"
    attention = cell_index(submitted, "ch02_scaled_dot_product_attention_test")
    submitted.cells.insert(0, submitted.cells.pop(attention))
    submitted.cells.append(nbformat.v4.new_code_cell("x = 1"))
    restored, flags = restore_test_cells(submitted, source)

    assert submitted == nbformat.from_dict(submitted) and before != submitted
    codes = {(f.code, f.cell) for f in flags}
    assert ("test_cell_deleted", "ch02_softmax_test") in codes
    assert ("test_cell_edited", "ch02_causal_mask_test") in codes
    assert ("test_cell_repointed", "ch02_padding_mask_test") in codes
    assert ("test_cell_moved", "ch02_scaled_dot_product_attention_test") in codes
    assert any(f.code == "cell_added" for f in flags)
    assert all(f.reason for f in flags)
    assert _locked_sources(restored) == _locked_sources(source)
    assert restored.cells[cell_index(restored, "ch02_padding_mask_test")].metadata.nbgrader == \
        source.cells[cell_index(source, "ch02_padding_mask_test")].metadata.nbgrader
    assert restored.cells[-1].source == "x = 1"


def test_removed_metadata_is_restored(source):
    submitted = copy.deepcopy(source)
    del submitted.cells[cell_index(submitted, "ch02_softmax_test")].metadata["nbgrader"]
    restored, flags = restore_test_cells(submitted, source)
    assert ("metadata_removed", "ch02_softmax_test") in {(f.code, f.cell) for f in flags}
    assert restored.cells[cell_index(restored, "ch02_softmax_test")].source == \
        source.cells[cell_index(source, "ch02_softmax_test")].source


def test_points_come_from_the_release_only(source):
    submitted = copy.deepcopy(source)
    claim = submitted.cells[cell_index(submitted, "ch02_softmax_solution")]
    claim.metadata.nbgrader.update(grade=True, points=50)
    question = submitted.cells[cell_index(submitted, "ch02_question_scaling")]
    question.cell_type, question.source = "code", "print('free points')"
    question.outputs, question.execution_count = [], None
    question.metadata.nbgrader.update(grade=True, solution=False, points=50)
    plain = next(c for c in submitted.cells if c.cell_type == "code" and
                 "nbgrader" not in c.metadata)
    plain.metadata["nbgrader"] = {"grade": True, "grade_id": "bonus", "points": 9,
                                  "locked": False, "solution": False, "schema_version": 3}
    restored, flags = restore_test_cells(submitted, source)

    assert {(f.code, f.cell) for f in flags} == {
        ("cell_repointed", "ch02_softmax_solution"), ("cell_repointed", "ch02_question_scaling"),
        ("cell_repointed", plain.id)}, flags
    reasons = {f.cell: f.reason for f in flags}
    assert "markdown" in reasons["ch02_question_scaling"]
    assert "50 point(s)" in reasons["ch02_question_scaling"]
    for name in ("ch02_softmax_solution", "ch02_question_scaling"):
        ours, theirs = (nb.cells[cell_index(nb, name)] for nb in (restored, source))
        assert ours.metadata.nbgrader == theirs.metadata.nbgrader
        assert ours.cell_type == theirs.cell_type
    answer = restored.cells[cell_index(restored, "ch02_question_scaling")]
    assert answer.source == "print('free points')" and "outputs" not in answer
    assert sum(1 for c in restored.cells if "nbgrader" in c.metadata) == \
        sum(1 for c in source.cells if "nbgrader" in c.metadata)
    nbformat.validate(restored)


def test_cells_without_the_release_ids_are_matched_by_content(source):
    submitted = copy.deepcopy(source)
    for cell in submitted.cells:
        cell.id = f"other-{cell.id}"
    restored, flags = restore_test_cells(submitted, source)
    assert flags == []
    assert [c.source for c in restored.cells] == [c.source for c in source.cells]
