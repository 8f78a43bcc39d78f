"""Beam search with the GNMT length penalty (see :mod:`transformer_ref.decoding`)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_ref.data.vocab import BOS_ID, EOS_ID
from transformer_ref.generation.greedy import (
    check_max_len,
    check_source,
    cut_at_eos,
    next_log_probs,
)
from transformer_ref.model.basic_masks import subsequent_mask
from transformer_ref.model.targets import shift_right
from transformer_ref.validation import require_int


def length_penalty_factor(length: Tensor, alpha: float) -> Tensor:
    """GNMT length penalty ``lp = ((5 + length) / 6) ** alpha`` (Wu et al., 2016).

    A hypothesis is ranked by ``log P / lp``; ``alpha = 0`` ranks by ``log P`` alone, larger
    ``alpha`` favours longer outputs.
    """
    return ((5.0 + length.float()) / 6.0) ** alpha


@torch.no_grad()
def beam_search(
    model: nn.Module,
    src: Tensor,
    src_mask: Tensor,
    max_len: int,
    beam_size: int = 4,
    length_penalty: float = 0.6,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
) -> list[list[int]]:
    """Keep the ``beam_size`` best hypotheses per sentence, all sentences batched together.

    The ``B * beam_size`` hypotheses are decoded as one batch. A hypothesis is scored by its
    summed log-probability divided by :func:`length_penalty_factor` of its length (generated
    tokens, EOS included). At each step every hypothesis proposes every next token and the
    ``beam_size`` best-scoring candidates per sentence survive. A hypothesis that emitted EOS
    stays in the beam with a frozen score (it still competes for a place) until every
    hypothesis of its sentence has ended or ``max_len`` tokens were generated; then the best
    one is returned. With ``beam_size=1`` this is exactly :func:`greedy_decode`.

    Args:
        model, src, src_mask, max_len, bos_id, eos_id: as for :func:`greedy_decode`.
        beam_size: hypotheses kept per sentence (``>= 1``).
        length_penalty: the GNMT ``alpha`` (0 = no length normalisation).

    Returns:
        ``B`` lists of ids, without BOS and cut before the first EOS.
    """
    where = "beam_search"
    check_source(src, src_mask, where)
    max_len = check_max_len(model, max_len, where)
    k = require_int(beam_size, "beam_size", where, minimum=1)
    batch = src.size(0)

    memory = model.encode(src, src_mask).repeat_interleave(k, dim=0)  # (B*k, S, d)
    mask = src_mask.repeat_interleave(k, dim=0)  # (B*k, 1, 1, S)
    # The k rows of a sentence share one source, so reordering them needs nothing here.
    return beam_loop(lambda ys: next_log_probs(model, ys, memory, mask), lambda rows: None,
                     batch, k, max_len, length_penalty, bos_id, eos_id, src.device)


def beam_loop(
    step: Callable[[Tensor], Tensor], reorder: Callable[[Tensor], None], batch: int, k: int,
    max_len: int, length_penalty: float, bos_id: int, eos_id: int, device: torch.device,
) -> list[list[int]]:
    """The beam search loop of :func:`beam_search` over any next-token scorer.

    Args:
        step: Long prefixes ``(batch * k, t)`` -> log-probabilities ``(batch * k, V)`` of the
            next token; rows ``b * k .. b * k + k - 1`` are sentence ``b``'s hypotheses.
        reorder: told, before the next ``step``, which old row each new row continues (Long
            ``(batch * k,)``), so that a scorer with state can follow the hypotheses.
        batch, k, max_len, length_penalty, bos_id, eos_id, device: as for
            :func:`beam_search` (``k`` is ``beam_size``).

    Returns:
        ``batch`` lists of ids, without BOS and cut before the first EOS.
    """
    ys = torch.full((batch * k, 1), bos_id, dtype=torch.long, device=device)
    # Summed log-probabilities. Only the first hypothesis is live at the start, otherwise the
    # k identical copies would fill the beam with duplicates.
    raw = torch.full((batch, k), float("-inf"), device=device)
    raw[:, 0] = 0.0
    lengths = torch.zeros(batch, k, dtype=torch.long, device=device)
    finished = torch.zeros(batch, k, dtype=torch.bool, device=device)
    first_row = torch.arange(batch, device=device)[:, None] * k  # (B, 1)

    for step_number in range(1, max_len + 1):
        log_probs = step(ys)  # (B*k, V)
        vocab = log_probs.size(-1)
        log_probs = log_probs.view(batch, k, vocab)
        # A finished hypothesis has one continuation, EOS again, that costs nothing; dead
        # hypotheses (score -inf) are treated the same way so they never come back.
        frozen = torch.full_like(log_probs, float("-inf"))
        frozen[..., eos_id] = 0.0
        ended = finished | torch.isinf(raw)
        log_probs = torch.where(ended[..., None], frozen, log_probs)

        cand_raw = raw[..., None] + log_probs  # (B, k, V)
        cand_len = torch.where(ended, lengths, torch.full_like(lengths, step_number))
        cand_score = cand_raw / length_penalty_factor(cand_len, length_penalty)[..., None]
        _, index = cand_score.view(batch, k * vocab).topk(k, dim=-1)  # (B, k)
        origin, token = index // vocab, index % vocab

        raw = cand_raw.view(batch, k * vocab).gather(1, index)
        lengths = cand_len.gather(1, origin)
        finished = ended.gather(1, origin) | (token == eos_id)
        history = ys.view(batch, k, -1).gather(1, origin[..., None].expand(-1, -1, ys.size(1)))
        ys = torch.cat([history, token[..., None]], dim=-1).view(batch * k, -1)
        if bool((finished | torch.isinf(raw)).all()):
            break
        reorder((first_row + origin).view(-1))

    score = raw / length_penalty_factor(lengths, length_penalty)
    best = score.argmax(dim=-1)  # (B,)
    rows = ys.view(batch, k, -1)[torch.arange(batch, device=device), best]
    return cut_at_eos(rows[:, 1:], eos_id)


@torch.no_grad()
def sequence_log_probs(
    model: nn.Module,
    src: Tensor,
    src_mask: Tensor,
    tgt: Tensor,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
) -> Tensor:
    """Teacher-forced log-probability of whole target sequences.

    Each row counts up to and including its first ``eos_id``; whatever follows (padding) is
    ignored. A row without EOS counts in full. The positions are not masked by ``PAD_ID``, so a
    hypothesis that contains the padding token (as an untrained model may emit) is scored
    faithfully.

    Args:
        model, src, src_mask: as for :func:`greedy_decode`.
        tgt: Long ``(B, T)`` target ids, e.g. a decoded hypothesis followed by EOS.
        bos_id, eos_id: start and end tokens.

    Returns:
        Float ``(B,)``: ``sum_t log P(tgt[b, t] | tgt[b, :t], src[b])`` over the counted positions.
    """
    check_source(src, src_mask, "sequence_log_probs")
    tgt_in = shift_right(tgt, bos_id)
    t = tgt.size(1)
    tgt_mask = subsequent_mask(t, device=tgt.device)[:, None].expand(tgt.size(0), 1, t, t)
    memory = model.encode(src, src_mask)
    logits = model.generator(model.decode(tgt_in, memory, src_mask, tgt_mask)).float()
    picked = F.log_softmax(logits, dim=-1).gather(-1, tgt[..., None]).squeeze(-1)  # (B, T)
    # Positions strictly after the first EOS: at least one EOS earlier in the row.
    after_eos = (tgt == eos_id).long().cumsum(dim=-1) - (tgt == eos_id).long() > 0
    return picked.masked_fill(after_eos, 0.0).sum(dim=-1)
