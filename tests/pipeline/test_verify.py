"""Graded functions are verified outside the kernel, in a sandboxed worker."""

from __future__ import annotations

import copy
import time

import nbformat
import pytest

from autograder.course import ROOT
from autograder.exercises.registry import all_exercises
from autograder.notebook import cell_index
from autograder.pipeline.verify import verify_exercises
from autograder.sandbox.launcher import GRACE_S, Limits

CHAPTER = "ch02_attention"
LIMITS = Limits(cell_timeout_s=5, memory_mb=1024)


def test_reference_solutions_get_full_credit(source):
    results = verify_exercises(CHAPTER, source, LIMITS)
    ids = [e.id for e in all_exercises() if e.chapter == CHAPTER]
    assert list(results) == ids
    assert all(r.passed and r.verified and not r.flags for r in results.values()), results


def _replace_solution(nb, name: str, code: str):
    nb.cells[cell_index(nb, f"ch02_{name}_solution")].source = code


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


TORCH_LIMITS = Limits(cell_timeout_s=60, memory_mb=4096)


def _source(chapter: str):
    folder = next((ROOT / "solutions").glob(f"{chapter}_*"))
    return nbformat.read(folder / f"{folder.name}.ipynb", as_version=4)


@pytest.mark.parametrize("chapter", ["ch07", "ch08", "ch09", "ch10"])
def test_pytorch_reference_solutions_are_verified_outside_the_kernel(chapter):
    results = verify_exercises(chapter, _source(chapter), TORCH_LIMITS)
    assert list(results) == [e.id for e in all_exercises() if e.id.startswith(chapter)]
    assert all(r.passed and r.verified and not r.flags for r in results.values()), results


def test_pytorch_stubs_fail_verification():
    release = nbformat.read(ROOT / "notebooks" / "ch07_pytorch_modules" /
                            "ch07_pytorch_modules.ipynb", as_version=4)
    results = verify_exercises("ch07", release, TORCH_LIMITS)
    assert results and not any(r.passed for r in results.values())
    assert all("NotImplementedError" in r.message for r in results.values())


@pytest.fixture(scope="module")
def torch_cheats():
    nb = _source("ch07")

    def replace(name: str, code: str) -> None:
        nb.cells[cell_index(nb, f"ch07_{name}_solution")].source = code

    # The notebook itself hands learners the reference module as `ref` (chapter 7 builds its
    # encoder layer on the reference attention), so none of these name the package.
    replace("multi_head_attention", "MultiHeadAttention = ref.MultiHeadAttention\n")
    replace("positionwise_feed_forward",
            "class PositionwiseFeedForward(ref.PositionwiseFeedForward):\n    pass\n")
    replace("positional_encoding", (
        "import torch\n"
        "torch.allclose = lambda *args, **kwargs: True\n"
        "np.testing.assert_allclose = lambda *args, **kwargs: None\n"
        "PositionalEncoding = nn.Dropout\n"))
    replace("encoder_layer", (
        "class EncoderLayer(nn.Module):\n"
        "    def __init__(self, d_model, h, d_ff, dropout=0.1):\n"
        "        super().__init__()\n"
        "        self.self_attn = ref.MultiHeadAttention(d_model, h, dropout)\n"
        "        self.feed_forward = ref.PositionwiseFeedForward(d_model, d_ff, dropout)\n"
        "        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)\n"
        "        self.dropout, self.norm_first = nn.Dropout(dropout), False\n\n"
        "    def forward(self, x, mask=None):\n"
        "        return ref.EncoderLayer.forward(self, x, mask)\n"))
    return verify_exercises("ch07", nb, TORCH_LIMITS)


@pytest.mark.parametrize("exercise, evidence", [
    ("ch07.multi_head_attention", "MultiHeadAttention is the course's own object"),
    ("ch07.positionwise_feed_forward", "PositionwiseFeedForward is the course's own object"),
    ("ch07.encoder_layer", "EncoderLayer.forward (encoder.py)"),
])
def test_reaching_the_pytorch_reference_gives_no_credit(torch_cheats, exercise, evidence):
    result = torch_cheats[exercise]
    assert not result.passed and "no credit" in result.message and evidence in result.message
    assert "imports_reference" in [f.code for f in result.flags]


def test_replacing_what_the_checks_rely_on_is_flagged_as_tampering(torch_cheats):
    result = torch_cheats["ch07.positional_encoding"]
    assert not result.passed
    assert [f.code for f in result.flags] == ["tampering"]
    assert "torch.allclose" in result.flags[0].reason
    assert "numpy.testing.assert_allclose" in result.flags[0].reason
    # The checks share the process with every solution cell: no exercise keeps its credit.
    assert all("tampering" in [f.code for f in r.flags] for r in torch_cheats.values())


def test_an_endless_solution_cell_costs_only_that_cell(source):
    nb = copy.deepcopy(source)
    _replace_solution(nb, "softmax", "while True:\n    pass\n")
    started = time.monotonic()
    results = verify_exercises(CHAPTER, nb, Limits(cell_timeout_s=3, memory_mb=1024))
    assert time.monotonic() - started < 3 + GRACE_S
    assert not results["ch02.softmax"].passed
    assert "not defined" in results["ch02.softmax"].message
    assert results["ch02.causal_mask"].passed and not results["ch02.causal_mask"].flags


def test_solution_cells_that_never_start_are_run_once_not_once_per_exercise(source):
    nb = copy.deepcopy(source)
    # Catching the interruption keeps the cell running: the grader's own deadline stops it.
    _replace_solution(nb, "softmax", (
        "while True:\n    try:\n        while True:\n            pass\n"
        "    except BaseException:\n        pass\n"))
    limits = Limits(cell_timeout_s=2, memory_mb=1024)
    started = time.monotonic()
    results = verify_exercises(CHAPTER, nb, limits)
    elapsed = time.monotonic() - started
    assert all(not r.passed and not r.verified and [f.code for f in r.flags] == ["worker_died"]
               for r in results.values())
    n_cells = sum(1 for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    assert elapsed < 2 * (2 * n_cells + GRACE_S), "the endless cells ran more than once"


def test_decorated_references_are_watched_and_their_decorator_is_not():
    """``beam_search`` is decorated with ``torch.no_grad``, as ``greedy_decode`` (allowed in
    chapter 10) is: reaching the reference beam search costs the credit, calling
    ``greedy_decode`` does not."""
    nb = _source("ch10")
    # show_attention is handed to learners by the notebook; its module holds the reference,
    # and a function of the learner's own wraps it, so only the call tracing can tell.
    nb.cells[cell_index(nb, "ch10_beam_search_solution")].source = (
        "_found = show_attention.__globals__['batch_decoder'](4).func\n\n"
        "def beam_search(*args, **kwargs):\n"
        "    return _found(*args, **kwargs)\n")
    results = verify_exercises("ch10", nb, TORCH_LIMITS)
    cheat = results["ch10.beam_search"]
    assert not cheat.passed and "no credit" in cheat.message
    assert "beam_search (beam.py)" in cheat.message
    assert results["ch10.translate_batched"].passed, results["ch10.translate_batched"].message
