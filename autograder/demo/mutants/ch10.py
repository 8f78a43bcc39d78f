"""Buggy and valid implementations of the chapter 10 exercises: beam search with a length
penalty, and translating in padded batches.

The reference (:func:`transformer_ref.decoding.beam_search`) ranks every candidate by
``log P / ((5 + length) / 6) ** alpha`` over all ``beam_size * vocab`` continuations of a
sentence, keeps finished hypotheses in the beam with a frozen score and length, and stops when
every hypothesis has ended or ``max_len`` tokens were generated. The bugs below each break one
of these rules; the valid alternatives reach the same hypotheses another way.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from autograder.demo.mutants import Mutant
from autograder.exercises.beam_variants import Switches, beam_variant
from transformer_ref.data.batching import pad_sequences
from transformer_ref.data.vocab import BOS_ID, EOS_ID, PAD_ID
from transformer_ref.decoding import greedy_decode
from transformer_ref.masks import make_src_mask, subsequent_mask

BEAM = "ch10.beam_search"
BATCHED = "ch10.translate_batched"


def _variant(**switches):
    """A beam search with the bugs ``switches`` names (see :func:`beam_variant`)."""
    def search(model, src, src_mask, max_len, beam_size=4, length_penalty=0.6, bos_id=BOS_ID,
               eos_id=EOS_ID):
        return beam_variant(model, src, src_mask, max_len, beam_size, length_penalty, bos_id,
                            eos_id, Switches(**switches))
    search.__name__ = "beam_search"
    return search


def _log_probs(model: nn.Module, ys: Tensor, memory: Tensor, src_mask: Tensor) -> Tensor:
    """``(n, V)`` log-probabilities of the next token after each prefix in ``ys`` ``(n, t)``."""
    t = ys.size(1)
    tgt_mask = subsequent_mask(t, device=ys.device)[:, None].expand(ys.size(0), 1, t, t)
    hidden = model.decode(ys, memory, src_mask, tgt_mask)
    return F.log_softmax(model.generator(hidden[:, -1]), dim=-1)


# --- bugs -----------------------------------------------------------------------------------

beam_without_length_penalty = _variant(penalty="none")
beam_power_penalty = _variant(penalty="power")
beam_extends_finished = _variant(freeze=False)
beam_top_k_per_beam = _variant(global_top_k=False)
beam_stops_when_best_ended = _variant(stop="best")
beam_prunes_by_raw_score = _variant(prune="raw")
beam_picks_by_raw_score = _variant(pick="raw")
beam_picks_unfinished = _variant(pick="unfinished")


def beam_one_step_short(model, src, src_mask, max_len, beam_size=4, length_penalty=0.6,
                        bos_id=BOS_ID, eos_id=EOS_ID):
    """Runs ``max_len - 1`` decoding steps (an off-by-one in the loop bound)."""
    return beam_variant(model, src, src_mask, max_len, beam_size, length_penalty, bos_id,
                        eos_id, Switches(steps=max_len - 1))


def beam_one_step_long(model, src, src_mask, max_len, beam_size=4, length_penalty=0.6,
                       bos_id=BOS_ID, eos_id=EOS_ID):
    """Runs ``max_len + 1`` decoding steps."""
    return beam_variant(model, src, src_mask, max_len, beam_size, length_penalty, bos_id,
                        eos_id, Switches(steps=max_len + 1))


def beam_default_special_ids(model, src, src_mask, max_len, beam_size=4, length_penalty=0.6,
                             bos_id=BOS_ID, eos_id=EOS_ID):
    """Ignores the ``bos_id`` and ``eos_id`` arguments and uses the vocabulary's defaults."""
    return beam_variant(model, src, src_mask, max_len, beam_size, length_penalty)


# --- valid alternatives -----------------------------------------------------------------------

def beam_per_sentence(model, src, src_mask, max_len, beam_size=4, length_penalty=0.6,
                      bos_id=BOS_ID, eos_id=EOS_ID):
    """One sentence at a time, hypotheses as Python lists, sorted by normalised score."""
    return beam_variant(model, src, src_mask, max_len, beam_size, length_penalty, bos_id,
                        eos_id)


@torch.no_grad()
def beam_batched_growing(model, src, src_mask, max_len, beam_size=4, length_penalty=0.6,
                         bos_id=BOS_ID, eos_id=EOS_ID):
    """Batched over sentences, in float64, starting from one hypothesis per sentence and
    growing to ``beam_size``; finished hypotheses get a single free EOS continuation."""
    batch, device = src.size(0), src.device
    memory_1 = model.encode(src, src_mask)
    ys = torch.full((batch, 1, 1), bos_id, dtype=torch.long, device=device)  # (B, n, t)
    log_p = torch.zeros(batch, 1, dtype=torch.float64, device=device)
    length = torch.zeros(batch, 1, dtype=torch.float64, device=device)
    done = torch.zeros(batch, 1, dtype=torch.bool, device=device)
    for step in range(1, max_len + 1):
        n = ys.size(1)
        memory = memory_1.repeat_interleave(n, dim=0)
        mask = src_mask.repeat_interleave(n, dim=0)
        lp = _log_probs(model, ys.view(batch * n, -1), memory, mask).double()
        lp = lp.view(batch, n, -1)
        free_eos = torch.full_like(lp, float("-inf"))
        free_eos[..., eos_id] = 0.0
        lp = torch.where(done[..., None], free_eos, lp)
        total = log_p[..., None] + lp
        new_len = torch.where(done, length, torch.full_like(length, step))
        score = total / (((5.0 + new_len) / 6.0) ** length_penalty)[..., None]
        k = min(beam_size, score[0].numel())
        best = score.flatten(1).topk(k, dim=-1).indices
        origin, token = best // lp.size(-1), best % lp.size(-1)
        log_p = total.flatten(1).gather(1, best)
        length = new_len.gather(1, origin)
        done = done.gather(1, origin) | (token == eos_id)
        prefix = ys.gather(1, origin[..., None].expand(-1, -1, ys.size(2)))
        ys = torch.cat([prefix, token[..., None]], dim=-1)
        if bool(done.all()):
            break
    final = log_p / ((5.0 + length) / 6.0) ** length_penalty
    rows = ys[torch.arange(batch, device=device), final.argmax(dim=-1), 1:].tolist()
    return [row[: row.index(eos_id)] if eos_id in row else row for row in rows]


# translate_batched ---------------------------------------------------------------------------
# The reference sorts the sources by length, pads each batch on the right with pad_id, masks
# the padding, decodes, and puts every output back at its source's position. The bugs below
# each break one of these steps; the valid alternatives batch differently but translate the
# same.


def _batched(model, sources, max_len, batch_size, pad_id, decoder, *, order=None,
             make_mask=make_src_mask, restore=True, left=False, every_batch=True):
    """Readable batched translation; the keywords switch bugs (and harmless variants) on."""
    device = next(model.parameters()).device
    if order is None:
        order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    stop = len(order) if every_batch else len(order) - batch_size + 1
    outputs = [None] * len(sources)
    in_order = []
    for start in range(0, stop, batch_size):
        chosen = order[start : start + batch_size]
        rows = [list(sources[i]) for i in chosen]
        if left:
            width = max(map(len, rows))
            src = torch.tensor([[pad_id] * (width - len(r)) + r for r in rows])
        else:
            src = pad_sequences(rows, pad_id)
        src = src.to(device)
        hyps = decoder(model, src, make_mask(src, pad_id), max_len)
        in_order += hyps
        for i, hyp in zip(chosen, hyps, strict=True):
            outputs[i] = hyp
    if not every_batch:
        return [out for out in outputs if out is not None]
    return outputs if restore else in_order


def batched_no_mask(model, sources, max_len, batch_size=32, pad_id=PAD_ID,
                    decoder=greedy_decode):
    """Everything right but the mask: the padding takes part in attention."""
    def no_mask(src, pad):
        return torch.ones(src.size(0), 1, 1, src.size(1), dtype=torch.bool, device=src.device)

    return _batched(model, sources, max_len, batch_size, pad_id, decoder, make_mask=no_mask)


def batched_mask_for_zero(model, sources, max_len, batch_size=32, pad_id=PAD_ID,
                          decoder=greedy_decode):
    """Pads with pad_id but masks id 0, the default padding, whatever pad_id is."""
    return _batched(model, sources, max_len, batch_size, pad_id, decoder,
                    make_mask=lambda src, pad: make_src_mask(src))


def batched_sorted_outputs(model, sources, max_len, batch_size=32, pad_id=PAD_ID,
                           decoder=greedy_decode):
    """Returns the outputs in the order of the source lengths."""
    return _batched(model, sources, max_len, batch_size, pad_id, decoder, restore=False)


def batched_left_padding(model, sources, max_len, batch_size=32, pad_id=PAD_ID,
                         decoder=greedy_decode):
    """Pads on the left (and masks it): the real tokens move to later positions."""
    return _batched(model, sources, max_len, batch_size, pad_id, decoder, left=True)


def batched_drops_last_batch(model, sources, max_len, batch_size=32, pad_id=PAD_ID,
                             decoder=greedy_decode):
    """Only full batches: the last, smaller one is lost."""
    return _batched(model, sources, max_len, batch_size, pad_id, decoder, every_batch=False)


def batched_unsorted(model, sources, max_len, batch_size=32, pad_id=PAD_ID,
                     decoder=greedy_decode):
    """Batches in the order of the sources: more padding, the same translations."""
    return _batched(model, sources, max_len, batch_size, pad_id, decoder,
                    order=list(range(len(sources))))


def batched_longest_first(model, sources, max_len, batch_size=32, pad_id=PAD_ID,
                          decoder=greedy_decode):
    """Longest sentences first, the mask written out by hand."""
    order = sorted(range(len(sources)), key=lambda i: -len(sources[i]))

    def by_hand(src, pad):
        return (src != pad)[:, None, None, :]

    return _batched(model, sources, max_len, batch_size, pad_id, decoder, order=order,
                    make_mask=by_hand)


def batched_one_by_one(model, sources, max_len, batch_size=32, pad_id=PAD_ID,
                       decoder=greedy_decode):
    """Ignores batch_size and decodes every sentence alone: slow, but right."""
    device = next(model.parameters()).device
    outputs = []
    for ids in sources:
        src = torch.tensor([list(ids)], device=device)
        outputs.append(decoder(model, src, make_src_mask(src, pad_id), max_len)[0])
    return outputs


MUTANTS = [
    Mutant(BEAM, "no length normalisation", beam_without_length_penalty, False,
           "without length normalisation"),
    Mutant(BEAM, "length ** alpha penalty", beam_power_penalty, False, "length ** alpha",
           every_secret=True),
    Mutant(BEAM, "keeps extending finished hypotheses", beam_extends_finished, False,
           "hypotheses went on after their EOS", every_secret=True),
    Mutant(BEAM, "top-1 per beam, no ranking across the beam", beam_top_k_per_beam, False,
           "kept only its own best continuation", every_secret=True),
    Mutant(BEAM, "stops when the best hypothesis has ended", beam_stops_when_best_ended, False,
           "stopped as soon as the best hypothesis", every_secret=True),
    Mutant(BEAM, "survivors by raw log P", beam_prunes_by_raw_score, False,
           "survivors of each step were chosen by the raw log P", every_secret=True),
    Mutant(BEAM, "final pick by raw log P", beam_picks_by_raw_score, False,
           "the answer was picked by the raw log P", every_secret=True),
    Mutant(BEAM, "final pick among unfinished hypotheses", beam_picks_unfinished, False,
           "the best hypothesis that had not ended", every_secret=True),
    Mutant(BEAM, "max_len - 1 steps", beam_one_step_short, False, "one step early"),
    Mutant(BEAM, "max_len + 1 steps", beam_one_step_long, False, "more than max_len"),
    Mutant(BEAM, "ignores bos_id and eos_id", beam_default_special_ids, False,
           "the default start and end ids", every_secret=True),
    Mutant(BEAM, "per-sentence loop over Python lists", beam_per_sentence, True),
    Mutant(BEAM, "batched, float64, growing beam", beam_batched_growing, True),
    Mutant(BATCHED, "no source mask", batched_no_mask, False, "without a source mask"),
    Mutant(BATCHED, "mask for id 0 whatever pad_id", batched_mask_for_zero, False,
           "the mask hides id 0"),
    Mutant(BATCHED, "outputs in the order of the lengths", batched_sorted_outputs, False,
           "order of the source lengths"),
    Mutant(BATCHED, "padding on the left", batched_left_padding, False, "pad each batch"),
    Mutant(BATCHED, "last batch lost", batched_drops_last_batch, False,
           "last, smaller batch"),
    Mutant(BATCHED, "batches in source order", batched_unsorted, True),
    Mutant(BATCHED, "longest first, mask by hand", batched_longest_first, True),
    Mutant(BATCHED, "one sentence at a time", batched_one_by_one, True),
]
