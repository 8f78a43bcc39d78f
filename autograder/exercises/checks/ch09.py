"""Checks of chapter 9: the loss, the learning-rate schedule and greedy decoding.

* ``LabelSmoothingLoss(vocab_size, pad_id, smoothing)`` is compared with
  :class:`transformer_ref.training.losses.LabelSmoothingLoss` in float64 (the value and its gradient
  with respect to the logits) on batches with padded targets, with padding ids other than 0,
  without smoothing, and with logits of ``-inf`` (a model that forbids the padding class).
* ``noam_rate(step, d_model, warmup, factor)`` is compared with
  :func:`transformer_ref.training.schedule.noam_rate` at step 0, around the end of the warm-up
  and far after it.
* ``greedy_decode(model, src, src_mask, max_len, bos_id, eos_id)`` decodes a padded batch
  with a *scripted* model (:class:`autograder.exercises.models.ScriptedModel`): a random
  Transformer whose end-of-sequence decisions follow a secret table, so that every sentence
  ends at a known step, one never ends, and a wrong source mask, a missing BOS or a missing
  stop shows in the output.

torch is imported inside the functions, so importing this module stays torch-free.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from autograder.exercises.checking import (
    CheckContext,
    ErrorHint,
    Hint,
    call,
    compare,
    describe,
    error_hints,
    fail,
    note,
)
from autograder.exercises.registry import register
from autograder.exercises.torch_checking import (
    ModulePair,
    build_modules,
    call_torch,
    compare_forward,
    describe_tensor,
    expect_tensor,
    one_thread,
    randomize_parameters,
    to_numpy,
)

if TYPE_CHECKING:
    from torch import Tensor, nn

# The floor of the log-probabilities (transformer_ref.training.losses.LOG_PROB_FLOOR, restated
# here so that importing this module does not import torch).
LOG_PROB_FLOOR = -100.0
# Relative tolerance for learning rates, whose values are too small for an absolute one.
NOAM_RTOL = 1e-6


# The course's building blocks the chapter's setup cell gives the learner's code; while an
# exercise of this chapter is graded, its process holds these and nothing else of the course.
BUILDING_BLOCKS = (
    "transformer_ref.model.basic_masks:subsequent_mask",
    "transformer_ref.model.make_model:make_model",
    "transformer_ref.model.attention:store_attention",
    "transformer_ref.data.vocab",
)


# ----------------------------------------------------------------------------- the loss


def _loss_variant(
    logits: Tensor,
    target: Tensor,
    pad_id: int,
    eps: float,
    *,
    off_share: str = "v-2",
    pad_mass: bool = False,
    ignore_pad: bool = True,
    divide_by: str = "tokens",
    kl: bool = False,
) -> Tensor:
    """Label-smoothed cross-entropy written out with one known bug switched on.

    ``off_share`` is how the smoothing mass is shared: ``"v-2"`` (correct), ``"v"`` or
    ``"v-1"``; ``pad_mass`` gives padding its share too; ``ignore_pad=False`` scores padded
    positions; ``divide_by`` is ``"tokens"`` (non-pad tokens), ``"all"`` (every position) or
    ``"none"`` (a sum); ``kl`` subtracts the entropy of the target (KL divergence).
    """
    import torch

    vocab = logits.size(-1)
    logits, target = logits.detach().reshape(-1, vocab), target.reshape(-1)
    keep = target != pad_id
    rows = torch.ones_like(keep) if not ignore_pad else keep
    log_probs = torch.nan_to_num(logits[rows], nan=0.0).log_softmax(-1).clamp(min=LOG_PROB_FLOOR)
    denominator = {"v-2": vocab - 2, "v-1": vocab - 1, "v": vocab}[off_share]
    dist = torch.full_like(log_probs, eps / denominator)
    dist.scatter_(-1, target[rows].unsqueeze(-1), 1.0 - eps)
    if not pad_mass:
        dist[:, pad_id] = 0.0
    per_token = -(dist * log_probs).sum(-1)
    if kl:
        per_token = per_token + torch.xlogy(dist, dist).sum(-1)
    total = per_token.sum()
    if divide_by == "all":
        return total / target.numel()
    if divide_by == "none":
        return total
    return total / keep.sum().clamp(min=1)


def _loss_hints(logits: Tensor, target: Tensor, pad_id: int, eps: float) -> list[Hint]:
    def variant(**bug: Any) -> Tensor:
        return _loss_variant(logits, target, pad_id, eps, **bug)

    not_finite = Hint(
        "the loss is NaN or infinite although only classes that get no target probability "
        "have a -inf logit: 0 * log(0) = 0 * (-inf) gives NaN. Clamp the log-probabilities "
        f"at {LOG_PROB_FLOOR:g} (log_probs.clamp(min={LOG_PROB_FLOOR:g})) before multiplying "
        "by the target distribution, and select the non-pad positions before the softmax.",
        predicate=lambda got: not np.isfinite(got).all(),
    )
    hints = [not_finite]
    if eps > 0:
        hints += [
            Hint("this is the KL divergence (nn.KLDivLoss), which differs from the "
                 "cross-entropy by the entropy of the target distribution: return "
                 "-sum(q * log p) itself.", buggy=variant(kl=True)),
            Hint("the padding class received some of the smoothing mass: it must get "
                 "probability 0, and the other V - 2 classes eps / (V - 2) each.",
                 buggy=variant(off_share="v-1", pad_mass=True)),
            Hint("the smoothing mass was divided by V: the V - 2 classes that are neither "
                 "the gold class nor padding get eps / (V - 2) each, so that each target "
                 "row sums to 1.", buggy=variant(off_share="v")),
            Hint("the smoothing mass was divided by V - 1: padding gets nothing, so the "
                 "remaining V - 2 classes get eps / (V - 2) each.",
                 buggy=variant(off_share="v-1")),
        ]
    hints += [
        Hint("the loss is a sum over the tokens: divide it by the number of non-pad target "
             "tokens (a mean).", buggy=variant(divide_by="none")),
        Hint("the sum was divided by every position, padding included: divide by the "
             "number of target tokens that are not padding.", buggy=variant(divide_by="all")),
        Hint("positions whose target is padding were scored: leave them out entirely "
             "(they add nothing and are not counted in the mean).",
             buggy=variant(ignore_pad=False, divide_by="all")),
        Hint("positions whose target is padding were scored: leave them out entirely "
             "(they add nothing and are not counted in the mean).",
             buggy=variant(ignore_pad=False, divide_by="tokens")),
    ]
    return hints


def _loss_inputs(
    rng: np.random.Generator, shape: tuple[int, ...], vocab: int, pad_id: int
) -> tuple[Tensor, Tensor]:
    """Float64 logits ``(*shape, vocab)`` and Long targets ``shape`` with padded positions.

    The padding class has low logits. Targets avoid ``pad_id`` except in the padding: every
    row of a 2-D target ends with padding of its own length (one row has none), a 1-D target
    has pad ids scattered in it.
    """
    import torch

    logits = torch.from_numpy(2.0 * rng.standard_normal((*shape, vocab)))
    # Like a model that has learnt to avoid padding: any mass given to it then shows.
    logits[..., pad_id] -= 4.0
    choices = np.array([c for c in range(vocab) if c != pad_id])
    target = rng.choice(choices, size=shape)
    if len(shape) == 2:
        lengths = [shape[1]] + [int(n) for n in rng.integers(1, shape[1], size=shape[0] - 1)]
        for row, length in enumerate(lengths):
            target[row, length:] = pad_id
    else:
        target[rng.random(shape) < 0.3] = pad_id
        target[0] = choices[0]
    return logits, torch.from_numpy(target).long()


def _as_vectors(pair: ModulePair) -> ModulePair:
    """The same losses returning float64 of shape ``(1,)`` instead of a scalar.

    compare_forward draws its random cotangent with the output's shape, which must not be
    ``()`` (NumPy returns a plain float for that shape); float64 compares with the float64
    tolerance even though the reference computes in float32.
    """
    import torch

    class AsVector(torch.nn.Module):
        def __init__(self, loss: nn.Module) -> None:
            super().__init__()
            self.loss = loss

        def forward(self, logits: Tensor, target: Tensor) -> Tensor:
            return self.loss(logits, target).to(torch.float64).reshape(1)

    return ModulePair(AsVector(pair.reference), AsVector(pair.learner), pair.what)


def _float64_hint(hint: Hint) -> Hint:
    """``hint`` for a loss of shape ``(1,)``, firing on a float64 match only: several bugs
    give values within the float32 tolerance of one another by chance."""
    if hint.buggy is None:
        return hint
    buggy = to_numpy(hint.buggy).reshape(1)
    return Hint(hint.message,
                predicate=lambda got: bool(np.allclose(got, buggy, rtol=1e-7, atol=0.0)))


def _loss_case(ctx: CheckContext, fn: Callable[..., Any], vocab: int, pad_id: int, eps: float,
               logits: Tensor, target: Tensor, words: str) -> None:
    pair = build_modules(ctx, fn, vocab, pad_id, eps)
    what = f"{pair.what} on logits {tuple(logits.shape)} and target {tuple(target.shape)} ({words})"
    got = call_torch(pair.learner, logits.detach(), target)
    expect_tensor(got, f"output of {what} (the mean loss, a tensor of shape ())", shape=())
    hints = [_float64_hint(h) for h in _loss_hints(logits, target, pad_id, eps)]
    compare_forward(ctx, _as_vectors(pair), (logits, target), call_description=what,
                    hints=hints)


@register(
    "ch09.label_smoothing_loss",
    title="Label-smoothed cross-entropy that ignores padding",
    points=3,
    difficulty="medium",
    minutes=25,
    reference="transformer_ref.training.losses:LabelSmoothingLoss",
    allowed=BUILDING_BLOCKS,
)
def check_label_smoothing_loss(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """``LabelSmoothingLoss(vocab_size, pad_id, smoothing)``, an ``nn.Module`` whose
    ``forward(logits, target)`` returns the mean smoothed cross-entropy over the non-pad
    targets: a padded batch ``(B, T, V)`` with ``pad_id = 0``; flat ``(N, V)`` logits with
    another padding id; no smoothing (plain cross-entropy); and logits that are ``-inf`` for
    the padding class everywhere and for one more class at some positions. Values and
    gradients with respect to the logits."""

    rng = ctx.rng
    eps = round(float(rng.uniform(0.05, 0.3)), 3)

    vocab = int(rng.integers(6, 13))
    batch, length = int(rng.integers(2, 5)), int(rng.integers(3, 7))
    logits, target = _loss_inputs(rng, (batch, length), vocab, 0)
    _loss_case(ctx, fn, vocab, 0, eps, logits, target, "padding id 0")

    vocab = int(rng.integers(6, 13))
    pad_id = int(rng.integers(1, vocab))
    logits, target = _loss_inputs(rng, (int(rng.integers(6, 12)),), vocab, pad_id)
    _loss_case(ctx, fn, vocab, pad_id, eps, logits, target, f"padding id {pad_id}")

    logits, target = _loss_inputs(rng, (batch, length), vocab, pad_id)
    _loss_case(ctx, fn, vocab, pad_id, 0.0, logits, target, "smoothing 0: plain cross-entropy")

    logits, target = _loss_inputs(rng, (batch, length), vocab, 0)
    logits[..., 0] = -math.inf
    # One more forbidden class at some positions, never the gold one: its share of the
    # smoothing mass meets the floor of the log-probabilities.
    for b, t in zip(*np.nonzero(rng.random((batch, length)) < 0.5), strict=True):
        gold = int(target[b, t])
        logits[b, t, 1 + (gold % (vocab - 1))] = -math.inf
    _loss_case(ctx, fn, vocab, 0, eps, logits, target,
               "logits -inf for the padding class everywhere and for one other class at "
               "some positions")


# ----------------------------------------------------------------------------- the schedule


def _noam_variant(step: int, d_model: int, warmup: int, factor: float, bug: str = "") -> float:
    """The Noam rate with one known bug (``bug`` names it; ``""`` is the correct rate)."""
    step = max(step, 1)
    warm = step * (step if bug == "step_exponent" else warmup) ** -1.5
    if bug == "warmup_sqrt":
        warm = step * warmup**-0.5
    pick = max if bug == "max" else min
    scale = 1.0 if bug == "no_d_model" else d_model**-0.5
    return (1.0 if bug == "no_factor" else factor) * scale * pick(step**-0.5, warm)


def _as_float(value: Any, what: str) -> float:
    """The learner's learning rate, which must be a Python float (NumPy's float64 is one;
    another NumPy float passes with a note: only its float dtype differs)."""
    if isinstance(value, float):
        return float(value)
    if isinstance(value, np.floating):
        note(("noam_rate dtype", str(value.dtype)),
             f"{what} returned a NumPy {value.dtype} scalar where a Python float is asked for; "
             f"the value is right, so this costs no points. Return float(rate) (NumPy float64 "
             f"scalars are Python floats already).")
        return float(value)
    if hasattr(value, "numel") and hasattr(value, "item"):
        fail(f"{what}: expected a Python float, got a tensor ({describe_tensor(value)}). The "
             f"schedule is arithmetic on plain numbers: compute it with ** and min (not "
             f"torch), or return float(rate).")
    fail(f"{what}: expected a Python float, got {describe(value)}. Return float(rate).")


@register(
    "ch09.noam_rate",
    title="The warm-up learning-rate schedule of the paper",
    points=2,
    difficulty="easy",
    minutes=10,
    reference="transformer_ref.training.schedule:noam_rate",
    allowed=BUILDING_BLOCKS,
)
def check_noam_rate(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """``noam_rate(step, d_model, warmup, factor=1.0)`` returns a float: steps 0 (treated
    as step 1), 1, 2, around ``warmup`` and up to twenty times ``warmup``, with a random
    ``d_model``, ``warmup`` and ``factor``, and with the default ``factor``."""
    rng = ctx.rng
    d_model = 8 * int(rng.integers(2, 129))
    warmup = int(rng.integers(20, 400))
    factor = round(float(rng.uniform(0.3, 3.0)), 3)
    step_zero = ErrorHint("LambdaLR evaluates the schedule at step 0 before the first update, "
                          "and 0 ** -0.5 is undefined: treat step 0 as step 1 "
                          "(step = max(step, 1)).", ("ZeroDivisionError", "ValueError"))
    with error_hints([step_zero]):
        at_zero = _as_float(call(fn, 0, d_model, warmup, factor),
                            f"noam_rate(0, {d_model}, {warmup}, {factor})")

    steps = sorted({1, 2, warmup // 2, warmup - 1, warmup, warmup + 1, 2 * warmup,
                    *(int(s) for s in rng.integers(1, 20 * warmup, size=4))})
    got = np.array([at_zero] + [_as_float(call(fn, s, d_model, warmup, factor),
                                          f"noam_rate({s}, {d_model}, {warmup}, {factor})")
                                for s in steps])
    steps = [0, *steps]
    expected = np.array([ctx.reference(s, d_model, warmup, factor) for s in steps])
    hint_texts = {
        "step_exponent": "the warm-up branch is step * warmup ** -1.5 (the warm-up length "
                         "to the power -1.5, not the step).",
        "warmup_sqrt": "the warm-up branch is step * warmup ** -1.5: with that exponent both "
                       "branches meet at step = warmup.",
        "max": "min and max are swapped: the rate is the smaller of the two branches, so it "
               "rises during the warm-up and decays afterwards.",
        "no_d_model": "the factor d_model ** -0.5 is missing.",
        "no_factor": "the factor argument is ignored: multiply the rate by it.",
    }
    buggy = {bug: np.array([_noam_variant(s, d_model, warmup, factor, bug) for s in steps])
             for bug in hint_texts}
    for shift in (1, -1):
        buggy[f"shift{shift}"] = np.array([_noam_variant(s + shift, d_model, warmup, factor)
                                           for s in steps])
        hint_texts[f"shift{shift}"] = ("the rate is off by one step: use the step itself (the "
                                       "first update is step 1), not step + 1 or step - 1.")
    # Rates are small numbers (1e-6 .. 1e-2): compare them relative to their size only.
    hints = [Hint(hint_texts[bug], predicate=lambda g, b=values: bool(
        np.allclose(g, b, rtol=NOAM_RTOL, atol=0.0))) for bug, values in buggy.items()]
    compare(got, expected, f"noam_rate(step, {d_model}, {warmup}, {factor}) at steps {steps} "
            "(step 0 counts as step 1)", hints=hints, rtol=NOAM_RTOL, atol=0.0)

    steps = [1, warmup, 3 * warmup]
    got = np.array([_as_float(call(fn, s, d_model, warmup), f"noam_rate({s}, {d_model}, "
                                                            f"{warmup})") for s in steps])
    compare(got, np.array([ctx.reference(s, d_model, warmup) for s in steps]),
            f"noam_rate(step, {d_model}, {warmup}) with the default factor at steps {steps}",
            hints=[Hint("the default factor must be 1.0.", predicate=lambda g: True)],
            rtol=NOAM_RTOL, atol=0.0)


# ----------------------------------------------------------------------------- decoding


def _scripted_model(rng: np.random.Generator, vocab: int, max_source: int,
                    ends: dict[int, int], bos_id: int, eos_id: int) -> Any:
    """A :class:`~autograder.exercises.models.ScriptedModel` with random weights: distinct ends
    (1 .. max_source + 1 tokens before EOS) for the source lengths 0 .. max_source, except
    that a source of length ``n`` in ``ends`` ends after ``ends[n]`` tokens."""
    from autograder.exercises.models import ScriptedModel

    h = int(rng.integers(2, 4))
    stops = [int(s) for s in rng.permutation(np.arange(1, max_source + 2))]
    for n, stop in ends.items():
        stops[n] = stop
    model = ScriptedModel(vocab, h, stops, bos_id, eos_id)
    randomize_parameters(model.inner, rng)
    return model


def _source_batch(rng: np.random.Generator, lengths: Sequence[int], symbols: range,
                  eos_id: int) -> tuple[Tensor, Tensor]:
    """Long ``(B, S)`` sources (symbols, then ``eos_id``, then padding 0) and their mask."""
    import torch

    from transformer_ref.masks import make_src_mask

    width = max(lengths)
    ids = np.zeros((len(lengths), width), dtype=np.int64)
    for row, n in enumerate(lengths):
        ids[row, : n - 1] = rng.integers(symbols.start, symbols.stop, size=n - 1)
        ids[row, n - 1] = eos_id
    src = torch.from_numpy(ids)
    return src, make_src_mask(src)


def _expect_id_lists(got: Any, batch: int, what: str) -> list[list[int]]:
    """Check that ``got`` is ``batch`` lists of ints (tensors and tuples are accepted)."""
    if hasattr(got, "tolist") and not isinstance(got, list):
        fail(f"{what}: expected a list of {batch} lists of token ids, got {describe(got)}. "
             "Return plain lists (row.tolist()), each cut before its first EOS, since the "
             "sentences have different lengths.")
    if not isinstance(got, (list, tuple)) or len(got) != batch:
        fail(f"{what}: expected a list of {batch} lists of token ids (one per sentence), "
             f"got {describe(got)}.")
    rows = []
    for b, row in enumerate(got):
        row = row.tolist() if hasattr(row, "tolist") else row
        if not isinstance(row, (list, tuple)) or not all(
                isinstance(t, (numbers.Integral, np.integer)) and not isinstance(t, bool)
                for t in row):
            fail(f"{what}: sentence {b} should be a list of int token ids, got "
                 f"{describe(row)}.")
        rows.append([int(t) for t in row])
    return rows


def _decode_hint(got: list[int], expected: list[int], bos_id: int, eos_id: int,
                 max_len: int) -> str:
    """A sentence naming the likely bug behind one wrong output row."""
    if got == expected + [eos_id]:
        return "the output keeps the EOS token: cut each sentence before its first EOS."
    if got[:1] == [bos_id] and got[1:] == expected:
        return "the output starts with BOS: return only the generated tokens."
    if len(got) > len(expected) and got[: len(expected) + 1] == expected + [eos_id]:
        return ("the sentence goes on after its EOS: cut each sentence before its first EOS. "
                "What a sentence produces after its EOS does not matter, as long as it is cut "
                "off.")
    if len(expected) == max_len and got == expected[:-1]:
        return (f"this sentence has no EOS among its first max_len = {max_len} tokens, so it "
                f"keeps all {max_len}: generate up to max_len tokens, EOS included.")
    if len(expected) == max_len and len(got) > max_len:
        return f"the output is longer than max_len = {max_len}: stop after max_len tokens."
    if got == [] and expected:
        return ("the model ended the sentence at once. The check's model only answers a "
                "decoder input that starts with bos_id, and the same src_mask in "
                "model.encode and model.decode (pass it to both, unchanged).")
    if len(got) < len(expected) and expected[: len(got)] == got:
        return ("the sentence stopped too early: decode every sentence until its own EOS "
                "or max_len, not until the first sentence of the batch ends.")
    return ("pick argmax of model.generator(hidden[:, -1]) at each step, where hidden = "
            "model.decode(ys, memory, src_mask, causal mask) and ys starts with bos_id.")


def _compare_decoding(got: Any, expected: list[list[int]], what: str, bos_id: int,
                      eos_id: int, max_len: int) -> None:
    rows = _expect_id_lists(got, len(expected), what)
    wrong = [b for b, (row, want) in enumerate(zip(rows, expected, strict=True)) if row != want]
    if wrong:
        # The output that shows the most of what happened chooses the hint: one that goes
        # on after an EOS, else the one that overshoots the most.
        def shows(b: int) -> tuple[bool, int]:
            row = rows[b]
            return eos_id in row[:-1], len(row) - len(expected[b])

        telling = max(wrong, key=shows)
        b = wrong[0]
        fail(f"{what}: {len(wrong)} of {len(rows)} sentences are wrong; sentence {b}: "
             f"expected {expected[b]}, got {rows[b]}. Hint: "
             f"{_decode_hint(rows[telling], expected[telling], bos_id, eos_id, max_len)}")


@register(
    "ch09.greedy_decode",
    title="Greedy decoding, one token at a time",
    points=3,
    difficulty="medium",
    minutes=25,
    reference="transformer_ref.generation.greedy:greedy_decode",
    allowed=BUILDING_BLOCKS,
    builders=("autograder.exercises.models:ScriptedModel",),
)
def check_greedy_decode(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """``greedy_decode(model, src, src_mask, max_len, bos_id, eos_id)`` returns one list of
    ids per sentence, without BOS, cut before the first EOS: a padded batch whose sentences
    end at different steps, one early, one with its EOS as the max_len-th token, one whose
    EOS would come one token after max_len and one that never ends; with the default special
    ids and
    with other ones; then ``max_len=1`` with a sentence that ends at once. The model is a
    scripted one (:func:`_scripted_model`)."""
    rng = ctx.rng
    vocab = int(rng.integers(10, 15))
    max_source = int(rng.integers(5, 8))
    max_len = max_source + int(rng.integers(1, 3))
    lengths = [int(n) for n in rng.permutation(np.arange(2, max_source + 1))]
    for bos_id, eos_id in ((1, 2), (vocab - 1, vocab - 2)):
        # The edges of max_len: EOS as the max_len-th token (max_len - 1 tokens are kept),
        # EOS one token too late (all max_len kept), a sentence that never ends, and one
        # that ends early (what follows its EOS must be cut).
        exact, late, never, early = (int(n) for n in rng.choice(lengths, size=4, replace=False))
        ends = {exact: max_len - 1, late: max_len, never: 3 * max_len,
                early: int(rng.integers(1, max_len - 2))}
        model = _scripted_model(rng, vocab, max_source, ends, bos_id, eos_id)
        _run_greedy(ctx, fn, rng, model, lengths, max_len, bos_id, eos_id)
    # max_len=1: one token each, or none for a sentence whose first token is EOS.
    model = _scripted_model(rng, vocab, max_source, {int(rng.choice(lengths)): 0}, 1, 2)
    _run_greedy(ctx, fn, rng, model, lengths, 1, 1, 2)


def _run_greedy(ctx: CheckContext, fn: Callable[..., Any], rng: np.random.Generator,
                model: Any, lengths: list[int], max_len: int, bos_id: int, eos_id: int) -> None:
    """Decode sources of ``lengths`` with ``model`` and compare with the reference."""
    src, src_mask = _source_batch(rng, lengths, range(4, model.vocab - 2), eos_id)
    if (bos_id, eos_id) == (1, 2):
        args: tuple = (model, src, src_mask, max_len)
        words = f"greedy_decode(model, src {tuple(src.shape)}, src_mask, max_len={max_len})"
    else:
        args = (model, src, src_mask, max_len, bos_id, eos_id)
        words = (f"greedy_decode(model, src {tuple(src.shape)}, src_mask, "
                 f"max_len={max_len}, bos_id={bos_id}, eos_id={eos_id})")
    with one_thread():
        expected = ctx.reference(*args)
        got = call_torch(fn, *args, name="greedy_decode")
    _compare_decoding(got, expected, f"{words}, source lengths {lengths}", bos_id, eos_id,
                      max_len)

