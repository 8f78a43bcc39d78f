"""Buggy and valid implementations of the chapter 9 exercises (loss, schedule, decoding).

``LabelSmoothingLoss(vocab_size, pad_id, smoothing)`` is an ``nn.Module`` whose forward
returns the mean smoothed cross-entropy over non-pad targets; ``noam_rate(step, d_model,
warmup, factor)`` a float; ``greedy_decode(model, src, src_mask, max_len, bos_id, eos_id)``
one list of ids per sentence, without BOS, cut before the first EOS.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from autograder.demo.mutants import Mutant
from transformer_ref.data.vocab import BOS_ID, EOS_ID, PAD_ID
from transformer_ref.masks import make_tgt_mask, subsequent_mask

EXERCISE_LOSS = "ch09.label_smoothing_loss"
EXERCISE_NOAM = "ch09.noam_rate"
EXERCISE_GREEDY = "ch09.greedy_decode"


# --- label smoothing ---------------------------------------------------------------------------

class SmoothingFullDistribution(nn.Module):
    """Valid: build the whole target distribution, then -sum(q * log p) per token."""

    def __init__(self, vocab_size: int, pad_id: int = PAD_ID, smoothing: float = 0.1) -> None:
        super().__init__()
        self.vocab_size, self.pad_id, self.smoothing = vocab_size, pad_id, smoothing

    def distribution(self, gold: Tensor) -> Tensor:
        dist = torch.full((gold.numel(), self.vocab_size), self.smoothing / (self.vocab_size - 2),
                          dtype=torch.float64)
        dist.scatter_(1, gold[:, None], 1.0 - self.smoothing)
        dist[:, self.pad_id] = 0.0
        return dist

    def log_probs(self, logits: Tensor) -> Tensor:
        return F.log_softmax(logits, dim=-1).clamp(min=-100.0)

    def rows(self, target: Tensor) -> Tensor:
        return target != self.pad_id

    def reduce(self, per_token: Tensor, target: Tensor) -> Tensor:
        return per_token.sum() / (target != self.pad_id).sum()

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        logits, target = logits.reshape(-1, self.vocab_size), target.reshape(-1)
        rows = self.rows(target)
        per_token = -(self.distribution(target[rows]) * self.log_probs(logits[rows])).sum(-1)
        return self.reduce(per_token, target)


class SmoothingPadMass(SmoothingFullDistribution):
    def distribution(self, gold: Tensor) -> Tensor:
        dist = torch.full((gold.numel(), self.vocab_size), self.smoothing / (self.vocab_size - 1),
                          dtype=torch.float64)
        return dist.scatter_(1, gold[:, None], 1.0 - self.smoothing)


class SmoothingOverV(SmoothingFullDistribution):
    def distribution(self, gold: Tensor) -> Tensor:
        dist = torch.full((gold.numel(), self.vocab_size), self.smoothing / self.vocab_size,
                          dtype=torch.float64)
        dist.scatter_(1, gold[:, None], 1.0 - self.smoothing)
        dist[:, self.pad_id] = 0.0
        return dist


class SmoothingSum(SmoothingFullDistribution):
    def reduce(self, per_token: Tensor, target: Tensor) -> Tensor:
        return per_token.sum()


class SmoothingMeanOverAll(SmoothingFullDistribution):
    def reduce(self, per_token: Tensor, target: Tensor) -> Tensor:
        return per_token.sum() / target.numel()


class SmoothingPadNotIgnored(SmoothingFullDistribution):
    def rows(self, target: Tensor) -> Tensor:
        return torch.ones_like(target, dtype=torch.bool)

    def reduce(self, per_token: Tensor, target: Tensor) -> Tensor:
        return per_token.mean()


class SmoothingNoFloor(SmoothingFullDistribution):
    """Scores every position and zeroes the padded ones afterwards, without a floor."""

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        logits, target = logits.reshape(-1, self.vocab_size), target.reshape(-1)
        dist = self.distribution(target)
        per_token = -(dist * F.log_softmax(logits, dim=-1)).sum(-1)
        keep = (target != self.pad_id).to(per_token.dtype)
        return (per_token * keep).sum() / keep.sum()


class SmoothingKL(SmoothingFullDistribution):
    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        logits, target = logits.reshape(-1, self.vocab_size), target.reshape(-1)
        keep = target != self.pad_id
        kl = nn.KLDivLoss(reduction="sum")(self.log_probs(logits[keep]),
                                           self.distribution(target[keep]))
        return kl / keep.sum()


class SmoothingPadZeroHardCoded(SmoothingFullDistribution):
    def rows(self, target: Tensor) -> Tensor:
        return target != PAD_ID

    def reduce(self, per_token: Tensor, target: Tensor) -> Tensor:
        return per_token.sum() / (target != PAD_ID).sum()


class SmoothingGather(SmoothingFullDistribution):
    """Valid: gold and 'all other classes' terms from one log-softmax, no distribution."""

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        keep = target != self.pad_id
        log_probs = self.log_probs(logits[keep])
        gold = log_probs.gather(-1, target[keep][:, None]).squeeze(-1)
        others = log_probs.sum(-1) - gold - log_probs[:, self.pad_id]
        off = self.smoothing / (self.vocab_size - 2)
        return -((1.0 - self.smoothing) * gold + off * others).mean()


class SmoothingLoop(SmoothingFullDistribution):
    """Valid: one token at a time."""

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        logits, target = logits.reshape(-1, self.vocab_size), target.reshape(-1)
        losses = []
        for row, gold in zip(logits, target.tolist(), strict=True):
            if gold == self.pad_id:
                continue
            log_probs = self.log_probs(row)
            loss = -(1.0 - self.smoothing) * log_probs[gold]
            for c in range(self.vocab_size):
                if c not in (gold, self.pad_id):
                    loss = loss - self.smoothing / (self.vocab_size - 2) * log_probs[c]
            losses.append(loss)
        return torch.stack(losses).mean()


# --- Noam schedule -----------------------------------------------------------------------------

def noam_min(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """Valid: the formula of the paper."""
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def noam_piecewise(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """Valid: linear warm-up to the peak, then inverse square-root decay."""
    step = max(step, 1)
    peak = factor / math.sqrt(d_model * warmup)
    return peak * step / warmup if step < warmup else peak * math.sqrt(warmup / step)


def noam_numpy(step: int, d_model: int, warmup: int, factor: float = 1.0) -> np.float64:
    """Valid: NumPy, returning a NumPy scalar."""
    step = np.maximum(step, 1)
    return factor * np.minimum(step ** -0.5, step * warmup ** -1.5) / np.sqrt(d_model)


def noam_float32(step: int, d_model: int, warmup: int, factor: float = 1.0) -> np.float32:
    """Valid, with a note: the right rate as a NumPy float32 scalar."""
    return np.float32(noam_min(step, d_model, warmup, factor))


def noam_step_exponent(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * step**-1.5)


def noam_max(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    step = max(step, 1)
    return factor * d_model**-0.5 * max(step**-0.5, step * warmup**-1.5)


def noam_no_d_model(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    step = max(step, 1)
    return factor * min(step**-0.5, step * warmup**-1.5)


def noam_no_factor(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    step = max(step, 1)
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def noam_step_zero(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def noam_tensor(step: int, d_model: int, warmup: int, factor: float = 1.0) -> Tensor:
    """Computes the rate with torch and returns a 0-d tensor."""
    step_t = torch.tensor(float(max(step, 1)))
    return factor * d_model**-0.5 * torch.minimum(step_t**-0.5, step_t * warmup**-1.5)


def noam_off_by_one(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    return noam_min(step + 1, d_model, warmup, factor)


# --- greedy decoding ---------------------------------------------------------------------------

def _causal(ys: Tensor) -> Tensor:
    return subsequent_mask(ys.size(1), device=ys.device)[:, None].expand(ys.size(0), -1, -1, -1)


def _greedy(model, src, src_mask, max_len, bos_id=BOS_ID, eos_id=EOS_ID, *, start=None,
            steps=None, stop_any=False, fill_eos=True, cut=True, keep_eos=False,
            keep_bos=False, encode_mask="src", decode_mask="src", causal=True):
    """Batched greedy decoding with switches for the known bugs (defaults: correct)."""
    with torch.no_grad():
        memory = model.encode(src, src_mask if encode_mask == "src" else None)
        first = bos_id if start is None else start
        ys = torch.full((src.size(0), 1), first, dtype=torch.long)
        done = torch.zeros(src.size(0), dtype=torch.bool)
        for _ in range(max_len if steps is None else steps(src, max_len)):
            mask = _causal(ys) if causal else None
            hidden = model.decode(ys, memory, src_mask if decode_mask == "src" else None, mask)
            next_ids = model.generator(hidden[:, -1]).argmax(-1)
            if fill_eos:
                next_ids = next_ids.masked_fill(done, eos_id)
            ys = torch.cat([ys, next_ids[:, None]], dim=1)
            done |= next_ids == eos_id
            if bool(done.any() if stop_any else done.all()):
                break
    rows = ys.tolist() if keep_bos else ys[:, 1:].tolist()
    if not cut:
        return rows
    return [row[: row.index(eos_id) + keep_eos] if eos_id in row else row for row in rows]


def greedy_batched(model, src, src_mask, max_len, bos_id=BOS_ID, eos_id=EOS_ID):
    """Valid: the whole batch at once."""
    return _greedy(model, src, src_mask, max_len, bos_id, eos_id)


def greedy_per_sentence(model, src, src_mask, max_len, bos_id=BOS_ID, eos_id=EOS_ID):
    """Valid: one sentence at a time, its padding cut off, stopping at its own EOS."""
    model.eval()
    out = []
    for b in range(src.size(0)):
        n = int(src_mask[b].sum())
        one_src, one_mask = src[b:b + 1, :n], src_mask[b:b + 1, ..., :n]
        memory = model.encode(one_src, one_mask)
        tokens = [bos_id]
        for _ in range(max_len):
            ys = torch.tensor([tokens])
            hidden = model.decode(ys, memory, one_mask, subsequent_mask(len(tokens)))
            token = int(model.generator(hidden)[0, -1].argmax())
            if token == eos_id:
                break
            tokens.append(token)
        out.append(tokens[1:])
    return out


def greedy_full_forward(model, src, src_mask, max_len, bos_id=BOS_ID, eos_id=EOS_ID):
    """Valid: the whole model on the prefix each step, softmax argmax, make_tgt_mask."""
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long)
    with torch.no_grad():
        for _ in range(max_len):
            probs = model(src, ys, src_mask, make_tgt_mask(ys)).softmax(-1)
            ys = torch.cat([ys, probs[:, -1].argmax(-1, keepdim=True)], dim=1)
    out = []
    for row in ys[:, 1:].tolist():
        out.append(row[: row.index(eos_id)] if eos_id in row else row)
    return out


def greedy_no_cut(model, src, src_mask, max_len, bos_id=BOS_ID, eos_id=EOS_ID):
    return _greedy(model, src, src_mask, max_len, bos_id, eos_id, cut=False)


def greedy_keeps_eos(model, src, src_mask, max_len, bos_id=BOS_ID, eos_id=EOS_ID):
    return _greedy(model, src, src_mask, max_len, bos_id, eos_id, keep_eos=True)


def greedy_runs_on(model, src, src_mask, max_len, bos_id=BOS_ID, eos_id=EOS_ID):
    return _greedy(model, src, src_mask, max_len, bos_id, eos_id, fill_eos=False, cut=False)


def greedy_starts_with_pad(model, src, src_mask, max_len, bos_id=BOS_ID, eos_id=EOS_ID):
    return _greedy(model, src, src_mask, max_len, bos_id, eos_id, start=PAD_ID)


def greedy_returns_bos(model, src, src_mask, max_len, bos_id=BOS_ID, eos_id=EOS_ID):
    return _greedy(model, src, src_mask, max_len, bos_id, eos_id, keep_bos=True)


def greedy_ignores_max_len(model, src, src_mask, max_len, bos_id=BOS_ID, eos_id=EOS_ID):
    return _greedy(model, src, src_mask, max_len, bos_id, eos_id,
                   steps=lambda src, max_len: src.size(1) + 10)


def greedy_one_short(model, src, src_mask, max_len, bos_id=BOS_ID, eos_id=EOS_ID):
    return _greedy(model, src, src_mask, max_len, bos_id, eos_id,
                   steps=lambda src, max_len: max_len - 1)


def greedy_one_long(model, src, src_mask, max_len, bos_id=BOS_ID, eos_id=EOS_ID):
    return _greedy(model, src, src_mask, max_len, bos_id, eos_id,
                   steps=lambda src, max_len: max_len + 1)


def greedy_decode_without_mask(model, src, src_mask, max_len, bos_id=BOS_ID, eos_id=EOS_ID):
    return _greedy(model, src, src_mask, max_len, bos_id, eos_id, decode_mask=None)


def greedy_encode_without_mask(model, src, src_mask, max_len, bos_id=BOS_ID, eos_id=EOS_ID):
    return _greedy(model, src, src_mask, max_len, bos_id, eos_id, encode_mask=None)


def greedy_stops_at_first_end(model, src, src_mask, max_len, bos_id=BOS_ID, eos_id=EOS_ID):
    return _greedy(model, src, src_mask, max_len, bos_id, eos_id, stop_any=True)


def greedy_default_ids(model, src, src_mask, max_len, bos_id=BOS_ID, eos_id=EOS_ID):
    return _greedy(model, src, src_mask, max_len)


MUTANTS = [
    Mutant(EXERCISE_LOSS, "full target distribution", SmoothingFullDistribution, True),
    Mutant(EXERCISE_LOSS, "gold and other-class terms", SmoothingGather, True),
    Mutant(EXERCISE_LOSS, "token by token", SmoothingLoop, True),
    Mutant(EXERCISE_LOSS, "padding gets smoothing mass", SmoothingPadMass, False,
           "padding class received"),
    Mutant(EXERCISE_LOSS, "eps / V", SmoothingOverV, False, "divided by V"),
    Mutant(EXERCISE_LOSS, "sum instead of mean", SmoothingSum, False, "is a sum"),
    Mutant(EXERCISE_LOSS, "mean over all positions", SmoothingMeanOverAll, False,
           "every position"),
    Mutant(EXERCISE_LOSS, "pad targets scored", SmoothingPadNotIgnored, False, "were scored"),
    Mutant(EXERCISE_LOSS, "NaN with -inf logits", SmoothingNoFloor, False, "NaN or infinite"),
    Mutant(EXERCISE_LOSS, "KL divergence", SmoothingKL, False, "KL divergence"),
    Mutant(EXERCISE_LOSS, "padding id 0 hard-coded", SmoothingPadZeroHardCoded, False),

    Mutant(EXERCISE_NOAM, "min of the two branches", noam_min, True),
    Mutant(EXERCISE_NOAM, "piecewise warm-up and decay", noam_piecewise, True),
    Mutant(EXERCISE_NOAM, "NumPy scalar", noam_numpy, True),
    Mutant(EXERCISE_NOAM, "NumPy float32 scalar", noam_float32, True,
           note="costs no points"),
    Mutant(EXERCISE_NOAM, "step ** -1.5 in the warm-up", noam_step_exponent, False,
           "warm-up length to the power -1.5"),
    Mutant(EXERCISE_NOAM, "max instead of min", noam_max, False, "min and max are swapped"),
    Mutant(EXERCISE_NOAM, "no d_model ** -0.5", noam_no_d_model, False, "d_model ** -0.5"),
    Mutant(EXERCISE_NOAM, "factor ignored", noam_no_factor, False, "factor argument"),
    Mutant(EXERCISE_NOAM, "step 0 not handled", noam_step_zero, False, "treat step 0"),
    Mutant(EXERCISE_NOAM, "off by one step", noam_off_by_one, False, "off by one"),
    Mutant(EXERCISE_NOAM, "returns a tensor", noam_tensor, False,
           "expected a Python float, got a tensor", every_secret=True),

    Mutant(EXERCISE_GREEDY, "whole batch at once", greedy_batched, True),
    Mutant(EXERCISE_GREEDY, "one sentence at a time", greedy_per_sentence, True),
    Mutant(EXERCISE_GREEDY, "full forward pass per step", greedy_full_forward, True),
    Mutant(EXERCISE_GREEDY, "not cut at EOS", greedy_no_cut, False, "EOS"),
    Mutant(EXERCISE_GREEDY, "EOS kept", greedy_keeps_eos, False, "keeps the EOS token"),
    Mutant(EXERCISE_GREEDY, "does not stop at EOS", greedy_runs_on, False, "after its EOS"),
    Mutant(EXERCISE_GREEDY, "starts from PAD instead of BOS", greedy_starts_with_pad, False,
           "bos_id"),
    Mutant(EXERCISE_GREEDY, "returns BOS", greedy_returns_bos, False, "starts with BOS"),
    Mutant(EXERCISE_GREEDY, "ignores max_len", greedy_ignores_max_len, False,
           "longer than max_len"),
    Mutant(EXERCISE_GREEDY, "one token short of max_len", greedy_one_short, False,
           "max_len tokens, EOS included", every_secret=True),
    Mutant(EXERCISE_GREEDY, "one token beyond max_len", greedy_one_long, False,
           "longer than max_len", every_secret=True),
    Mutant(EXERCISE_GREEDY, "decode without the source mask", greedy_decode_without_mask,
           False, "src_mask"),
    Mutant(EXERCISE_GREEDY, "encode without the source mask", greedy_encode_without_mask,
           False, "src_mask"),
    Mutant(EXERCISE_GREEDY, "stops when the first sentence ends", greedy_stops_at_first_end,
           False, "stopped too early"),
    Mutant(EXERCISE_GREEDY, "default special ids hard-coded", greedy_default_ids, False),
]
