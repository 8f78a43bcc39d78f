"""Locked cells come back from the source; graded functions are verified outside the kernel."""

from __future__ import annotations

import copy

import nbformat
import pytest

from autograder.course import ROOT
from autograder.integrity import restore_test_cells, verify_exercises
from autograder.registry import all_exercises
from autograder.sandbox import Limits

CHAPTER = "ch02_attention"
LIMITS = Limits(cell_timeout_s=5, memory_mb=1024)


@pytest.fixture(scope="module")
def source():
    return nbformat.read(ROOT / "solutions" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)


def _index(nb, grade_id: str) -> int:
    return next(i for i, c in enumerate(nb.cells)
                if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _locked_sources(nb) -> list[str]:
    return [c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("locked")]


def test_untouched_submission_has_no_flags(source):
    restored, flags = restore_test_cells(copy.deepcopy(source), source)
    assert flags == []
    assert [c.source for c in restored.cells] == [c.source for c in source.cells]


def test_deleted_edited_repointed_and_moved_cells_are_restored(source):
    submitted = copy.deepcopy(source)
    before = copy.deepcopy(submitted)
    del submitted.cells[_index(submitted, "ch02_softmax_test")]
    submitted.cells[_index(submitted, "ch02_causal_mask_test")].source = "print('trust me')"
    padding = submitted.cells[_index(submitted, "ch02_padding_mask_test")]
    padding.metadata.nbgrader["points"] = 100
    padding.metadata.nbgrader["grade_id"] = "ch02_padding_mask_test_mine"
    attention = _index(submitted, "ch02_scaled_dot_product_attention_test")
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
    assert restored.cells[_index(restored, "ch02_padding_mask_test")].metadata.nbgrader == \
        source.cells[_index(source, "ch02_padding_mask_test")].metadata.nbgrader
    assert restored.cells[-1].source == "x = 1"


def test_removed_metadata_is_restored(source):
    submitted = copy.deepcopy(source)
    del submitted.cells[_index(submitted, "ch02_softmax_test")].metadata["nbgrader"]
    restored, flags = restore_test_cells(submitted, source)
    assert ("metadata_removed", "ch02_softmax_test") in {(f.code, f.cell) for f in flags}
    assert restored.cells[_index(restored, "ch02_softmax_test")].source == \
        source.cells[_index(source, "ch02_softmax_test")].source


def test_reference_solutions_get_full_credit(source):
    results = verify_exercises(CHAPTER, source, LIMITS)
    ids = [e.id for e in all_exercises() if e.chapter == CHAPTER]
    assert list(results) == ids
    assert all(r.passed and r.verified and not r.flags for r in results.values()), results


def _replace_solution(nb, name: str, code: str):
    nb.cells[_index(nb, f"ch02_{name}_solution")].source = code


@pytest.fixture(scope="module")
def cheated(source):
    nb = copy.deepcopy(source)
    _replace_solution(nb, "softmax", (
        "import numpy as np\n"
        "np.testing.assert_allclose = lambda *args, **kwargs: None\n"
        "np.allclose = lambda *args, **kwargs: True\n"
        "np.array_equal = lambda *args, **kwargs: True\n"
        "def softmax(x, axis=-1):\n    return np.zeros_like(x)\n"))
    _replace_solution(nb, "causal_mask", (
        "try:\n    from transformer_ref.np_attention import causal_mask\n"
        "except ImportError:\n    import numpy as np\n\n"
        "    def causal_mask(n):\n        return np.tril(np.ones((n, n), dtype=bool))\n"))
    _replace_solution(nb, "padding_mask", (
        "import os\n\ndef padding_mask(lengths, max_len):\n    os._exit(1)\n"))
    return verify_exercises(CHAPTER, nb, LIMITS)


def test_monkeypatching_numpy_fools_only_the_worker(cheated):
    result = cheated["ch02.softmax"]
    assert not result.passed and "differ from the expected result" in result.message


def test_importing_the_reference_gives_no_credit_and_a_flag(cheated):
    result = cheated["ch02.causal_mask"]
    assert not result.passed
    assert [f.code for f in result.flags] == ["imports_reference"]


def test_a_dying_worker_fails_only_its_exercise(cheated):
    result = cheated["ch02.padding_mask"]
    assert not result.passed and "exit status" in result.message
    assert [f.code for f in result.flags] == ["worker_died"]
    # A fresh worker grades the next exercise (it fails on its merits: it uses the bad softmax).
    after = cheated["ch02.scaled_dot_product_attention"]
    assert after.flags == () and "softmax over the wrong axis" in after.message


def test_pytorch_chapters_are_not_verified_yet(source):
    results = verify_exercises("ch07", source, LIMITS)
    for result in results.values():
        assert not result.passed and not result.verified and "not supported yet" in result.message


def test_unknown_chapter(source):
    with pytest.raises(ValueError, match="unknown chapter"):
        verify_exercises("ch99", source, LIMITS)
