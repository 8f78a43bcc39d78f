"""Graded functions are verified outside the kernel: the learner's code runs in a sandboxed
process of its own, the checks run in the grader."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import time

import nbformat
import pytest

from autograder.course import ROOT, Course
from autograder.exercises.registry import all_exercises, get_exercise
from autograder.grade import verify as verify_module
from autograder.grade.verify import (
    KERNEL_COURSE_PREFIX,
    Verification,
    chapter_id,
    kernel_course_folder,
    plan,
    verify_exercises,
)
from autograder.notebook import cell_index
from autograder.sandbox.launcher import GRACE_S, Learner, Limits

CHAPTER = "ch02_attention"
LIMITS = Limits(cell_timeout_s=5, memory_mb=1024)
TORCH_LIMITS = Limits(cell_timeout_s=60, memory_mb=4096)


# The repository's own course, whose chapters these tests grade.
COURSE = Course.of(ROOT)


def verify(chapter: str, nb, limits: Limits = LIMITS):
    with Learner(limits) as learner:
        return verify_exercises(chapter, nb, learner, source_nb=_source(chapter_id(chapter)))


def _replace_solution(nb, name: str, code: str, prefix: str = "ch02"):
    nb.cells[cell_index(nb, f"{prefix}_{name}_solution")].source = code


def _source(chapter: str):
    return nbformat.read(COURSE.source_notebook(chapter), as_version=4)


def test_reference_solutions_get_full_credit(source):
    results = verify(CHAPTER, source)
    ids = [e.id for e in all_exercises() if e.chapter == CHAPTER]
    assert list(results) == ids
    assert all(r.passed and r.verified and not r.flags for r in results.values()), results


@pytest.mark.parametrize("chapter", ["ch07_pytorch_modules", "ch08_decoder_and_model",
                                     "ch09_training", "ch10_translation",
                                     "ch11_language_model"])
def test_pytorch_reference_solutions_are_verified_outside_the_kernel(chapter):
    results = verify(chapter, _source(chapter), TORCH_LIMITS)
    assert list(results) == [e.id for e in all_exercises() if e.chapter == chapter]
    assert all(r.passed and r.verified and not r.flags for r in results.values()), results


@pytest.mark.parametrize("chapter", ["ch04_multi_head_attention", "ch07_pytorch_modules",
                                     "ch08_decoder_and_model", "ch11_language_model"])
def test_stubs_fail_verification(chapter):
    release = nbformat.read(COURSE.release_notebook(chapter), as_version=4)
    results = verify(chapter, release, TORCH_LIMITS)
    assert results and not any(r.passed for r in results.values())
    assert all("NotImplementedError" in r.message for r in results.values()), results


def test_a_later_exercise_is_graded_on_the_courses_versions_of_earlier_ones():
    """Chapter 7's encoder layer builds on the learner's own attention and feed-forward
    network; graded, it gets the course's in their place, so a broken attention (here the
    stub) costs its own points only. Chapter 8's make_model likewise gets the course's
    DecoderLayer and Embeddings."""
    nb = copy.deepcopy(_source("ch07_pytorch_modules"))
    release = nbformat.read(COURSE.release_notebook("ch07_pytorch_modules"), as_version=4)
    for name in ("multi_head_attention", "positionwise_feed_forward"):
        cell = f"ch07_{name}_solution"
        nb.cells[cell_index(nb, cell)].source = release.cells[cell_index(release, cell)].source
    results = verify("ch07_pytorch_modules", nb, TORCH_LIMITS)
    assert not results["ch07.multi_head_attention"].passed
    assert not results["ch07.positionwise_feed_forward"].passed
    assert results["ch07.encoder_layer"].passed, results["ch07.encoder_layer"].message
    nb = copy.deepcopy(_source("ch08_decoder_and_model"))
    release = nbformat.read(COURSE.release_notebook("ch08_decoder_and_model"), as_version=4)
    for name in ("decoder_layer", "embeddings"):
        cell = f"ch08_{name}_solution"
        nb.cells[cell_index(nb, cell)].source = release.cells[cell_index(release, cell)].source
    results = verify("ch08_decoder_and_model", nb, TORCH_LIMITS)
    assert not results["ch08.decoder_layer"].passed and not results["ch08.embeddings"].passed
    assert results["ch08.make_model"].passed, results["ch08.make_model"].message


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


def test_solution_cells_that_never_start_are_run_once_not_once_per_exercise(source,
                                                                            monkeypatch):
    nb = copy.deepcopy(source)
    # Catching the interruption keeps the cell running: the grader's own deadline stops it.
    _replace_solution(nb, "softmax", (
        "while True:\n    try:\n        while True:\n            pass\n"
        "    except BaseException:\n        pass\n"))
    started_processes = []
    spawn = verify_module.LearnerProcess

    def counted(*args, **kwargs):
        started_processes.append(args)
        return spawn(*args, **kwargs)

    monkeypatch.setattr(verify_module, "LearnerProcess", counted)
    limits = Limits(cell_timeout_s=2, learner_timeout_s=5, memory_mb=1024)
    started = time.monotonic()
    results = verify(CHAPTER, nb, limits)
    elapsed = time.monotonic() - started
    assert all(not r.passed and not r.verified and [f.code for f in r.flags] == ["worker_died"]
               for r in results.values())
    groups = plan([e for e in all_exercises() if e.chapter == CHAPTER])
    assert len(started_processes) == len(groups), "the endless cells ran more than once"
    assert elapsed < 5 + GRACE_S


def test_a_slow_solution_is_stopped_by_the_learners_deadline(source):
    """Sleeping just under the call limit in every hidden call would hold the grader for
    minutes; the learner's deadline bounds it all."""
    nb = copy.deepcopy(source)
    _replace_solution(nb, "softmax", (
        "import time\nimport numpy as np\n\ndef softmax(x, axis=-1):\n    time.sleep(1.5)\n"
        "    e = np.exp(x - x.max(axis=axis, keepdims=True))\n"
        "    return e / e.sum(axis=axis, keepdims=True)\n"))
    limits = Limits(cell_timeout_s=2, learner_timeout_s=5, memory_mb=1024)
    started = time.monotonic()
    results = verify(CHAPTER, nb, limits)
    assert time.monotonic() - started < 5 + GRACE_S
    assert not results["ch02.softmax"].passed
    assert all(not r.passed for r in results.values())


def test_processes_started_early_give_the_same_verdicts(source):
    """Grading starts the learner processes while the kernel runs the notebook."""
    nb = copy.deepcopy(source)
    _replace_solution(nb, "padding_mask", (
        "import os\n\ndef padding_mask(lengths, max_len):\n    os._exit(1)\n"))
    with (Learner(LIMITS) as learner,
          Verification(CHAPTER, nb, learner, source_nb=source) as verification):
        verification.start()
        time.sleep(1)  # the grader busy elsewhere; the processes run the solution cells
        early = verification.results()
    assert early == verify(CHAPTER, nb)
    assert [f.code for f in early["ch02.padding_mask"].flags] == ["worker_died"]
    assert early["ch02.softmax"].passed


def test_processes_started_early_and_never_asked_are_stopped(source):
    """A notebook whose kernel passes nothing is not verified: the early processes end."""
    with Learner(LIMITS) as learner:
        with Verification(CHAPTER, source, learner,
                          source_nb=source) as verification:
            verification.start()
            (group,) = verification.groups
            process, folder = group.early.process, group.folder
            assert process.poll() is None and folder.is_dir()
        assert process.poll() is not None
        assert not folder.exists()


def _edit_solution(nb, cell: str, old: str, new: str) -> None:
    index = cell_index(nb, cell)
    assert old in nb.cells[index].source
    nb.cells[index].source = nb.cells[index].source.replace(old, new)


def test_an_error_in_learner_code_names_the_learner_s_line_and_the_mistake(source):
    nb = copy.deepcopy(source)
    _edit_solution(nb, "ch02_scaled_dot_product_attention_solution", "np.swapaxes(k, -1, -2)",
                   "k.T")
    message = verify(CHAPTER, nb)["ch02.scaled_dot_product_attention"].message
    assert "raised ValueError" in message
    assert "(in `scaled_dot_product_attention`, line" in message and "k.T" in message
    assert "np.swapaxes(k, -1, -2)" in message.partition("Hint:")[2]


def test_training_mode_checks_locate_dropout_in_learner_processes():
    nb = _source("ch07_pytorch_modules")
    _edit_solution(nb, "ch07_multi_head_attention_solution",
                   "weights = self.dropout(scores.softmax(dim=-1))",
                   "weights = scores.softmax(dim=-1)")
    _edit_solution(nb, "ch07_multi_head_attention_solution", "return self.w_o(out)",
                   "return self.dropout(self.w_o(out))")
    _edit_solution(nb, "ch07_encoder_layer_solution",
                   "x = self.norm1(x + self.dropout(self.self_attn(x, x, x, mask)))\n"
                   "        return self.norm2(x + self.dropout(self.feed_forward(x)))",
                   "x = self.norm1(x + self.self_attn(x, x, x, mask))\n"
                   "        return self.norm2(x + self.feed_forward(x))")
    results = verify("ch07_pytorch_modules", nb, TORCH_LIMITS)
    assert "dropout acts after the weights meet the values" in \
        results["ch07.multi_head_attention"].message
    assert "the sub-layer outputs get no dropout" in results["ch07.encoder_layer"].message
    assert results["ch07.positionwise_feed_forward"].passed


# An encoder layer written as d2l.ai writes it (an AddNorm module holds the dropout, the
# feed-forward network has none), around an attention that draws its own keep-mask on the
# weights: right, though its masks are not nn.Dropout's (so the grader reads the weights back
# from the attention module, which it calls in the learner's process).
D2L_LAYER = """
class RandAttention(MultiHeadAttention):
    def __init__(self, d_model, h, dropout):
        super().__init__(d_model, h, dropout)

    def forward(self, query, key, value, mask=None):
        b, n_q, d = query.shape
        split = lambda t: t.view(b, t.size(1), self.h, self.d_k).transpose(1, 2)
        q, k, v = split(self.w_q(query)), split(self.w_k(key)), split(self.w_v(value))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=-1)
        if self.training:
            weights = weights * (torch.rand_like(weights) >= self.dropout.p) / (1 - self.dropout.p)
        return self.w_o((weights @ v).transpose(1, 2).reshape(b, n_q, d))


class AddNorm(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, y, norm):
        return norm(self.dropout(y) + x)


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = RandAttention(d_model, h, dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, 0.0)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.addnorm1, self.addnorm2 = AddNorm(dropout), AddNorm(dropout)

    def forward(self, x, mask=None):
        y = self.addnorm1(x, self.self_attn(x, x, x, mask), self.norm1)
        return self.addnorm2(y, self.feed_forward(y), self.norm2)
"""


def test_the_paper_s_dropout_rules_reach_learner_processes():
    nb = _source("ch07_pytorch_modules")
    nb.cells[cell_index(nb, "ch07_encoder_layer_solution")].source = D2L_LAYER
    result = verify("ch07_pytorch_modules", nb, TORCH_LIMITS)["ch07.encoder_layer"]
    assert result.passed and result.verified, result.message
    # The feed-forward network drops its own output, and the layer drops it again.
    nb.cells[cell_index(nb, "ch07_encoder_layer_solution")].source = D2L_LAYER.replace(
        "return self.w_o(", "return self.dropout(self.w_o(").replace(
        "reshape(b, n_q, d))", "reshape(b, n_q, d)))")
    result = verify("ch07_pytorch_modules", nb, TORCH_LIMITS)["ch07.encoder_layer"]
    assert not result.passed and result.verified
    assert "self_attn of EncoderLayer" in result.message
    assert "would drop it twice" in result.message


def test_designed_beam_search_cases_reach_learner_processes():
    nb = _source("ch10_translation")
    _edit_solution(nb, "ch10_beam_search_solution",
                   "winner = (log_p / penalty(length)).argmax(dim=-1)",
                   "winner = log_p.argmax(dim=-1)")
    result = verify("ch10_translation", nb, TORCH_LIMITS)["ch10.beam_search"]
    assert not result.passed and result.verified
    assert "the answer was picked by the raw log P" in result.message


# A block with the two layer norms' parameters swapped, from the chapter's own building blocks
# (the block mutants call layer_norm, which chapter 6's graded code does not get).
SWAPPED_NORMS_BLOCK = """
def encoder_block(x, params, num_heads, mask=None):
    p = params
    attended, _ = multi_head_attention(x, x, p["W_q"], p["W_k"], p["W_v"], p["W_o"], num_heads,
                                       mask)
    x = add_and_norm(x, attended, p["gamma2"], p["beta2"])
    hidden = feed_forward(x, p["W1"], p["b1"], p["W2"], p["b2"])
    return add_and_norm(x, hidden, p["gamma1"], p["beta1"])
"""


@pytest.mark.parametrize(("later", "earlier", "bug"), [
    ("ch02.scaled_dot_product_attention", "ch02.softmax", "softmax_whole_array"),
    ("ch04.multi_head_attention", "ch04.split_heads", "split_no_transpose"),
    ("ch04.multi_head_attention", "ch04.merge_heads", "merge_interleaved"),
    ("ch05.add_and_norm", "ch05.layer_norm", "ln_unbiased_variance"),
    ("ch06.encoder", "ch06.encoder_block", SWAPPED_NORMS_BLOCK),
])
def test_a_later_exercise_is_graded_given_the_learners_wrong_earlier_one(later, earlier, bug):
    """The course's later solution calls the learner's earlier function, which has a bug: the
    grader calls that function in the learner's process and judges the later one given it, so
    the mistake costs points once."""
    from tests.fixtures.sample_class import mutant_source

    chapter = get_exercise(later).chapter
    nb = copy.deepcopy(_source(chapter))
    source = bug if "\n" in bug else mutant_source(earlier, bug)
    _replace_solution(nb, get_exercise(earlier).name, source, prefix=earlier[:4])
    results = verify(chapter, nb)
    assert not results[earlier].passed, results[earlier].message
    assert results[later].passed, results[later].message
    assert "right given your" in results[later].message


def test_kernel_course_folders_of_ended_processes_are_removed(tmp_path, monkeypatch):
    """A grading process that was killed leaves its copy of the course behind; the next one
    removes it, and leaves those of running processes and of names it did not make alone."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    orphan = tmp_path / f"{KERNEL_COURSE_PREFIX}{ended.stdout.strip()}-abc"
    alive = tmp_path / f"{KERNEL_COURSE_PREFIX}{os.getppid()}-def"
    unnamed = tmp_path / f"{KERNEL_COURSE_PREFIX}xyz"
    for folder in (orphan, alive, unnamed):
        (folder / "transformer_ref").mkdir(parents=True)
    kernel_course_folder.cache_clear()
    try:
        made = kernel_course_folder()
        assert made.parent == tmp_path and (made / "transformer_ref").is_dir()
        assert made.name.startswith(f"{KERNEL_COURSE_PREFIX}{os.getpid()}-")
        assert not orphan.exists() and alive.is_dir() and unnamed.is_dir()
    finally:
        kernel_course_folder.cache_clear()
