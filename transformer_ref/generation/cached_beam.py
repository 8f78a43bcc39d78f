"""Beam search with a key/value cache: :func:`~transformer_ref.generation.beam.beam_search`'s
loop over a :class:`~transformer_ref.generation.kv_cache.DecoderCache`, whose rows move with the
beams.

Conventions (shapes, masks): see :mod:`transformer_ref.modules`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from transformer_ref.data.vocab import BOS_ID, EOS_ID
from transformer_ref.generation.beam import beam_loop, beam_search
from transformer_ref.generation.greedy import check_max_len, check_source
from transformer_ref.generation.kv_cache import DecoderCache, can_cache
from transformer_ref.validation import require_int


@torch.no_grad()
def cached_beam_search(
    model: nn.Module,
    src: Tensor,
    src_mask: Tensor,
    max_len: int,
    beam_size: int = 4,
    length_penalty: float = 0.6,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
) -> list[list[int]]:
    """:func:`~transformer_ref.generation.beam.beam_search` with a :class:`DecoderCache`."""
    if not can_cache(model):
        return beam_search(model, src, src_mask, max_len, beam_size, length_penalty, bos_id,
                           eos_id)
    where = "cached_beam_search"
    check_source(src, src_mask, where)
    max_len = check_max_len(model, max_len, where)
    k = require_int(beam_size, "beam_size", where, minimum=1)
    memory = model.encode(src, src_mask).repeat_interleave(k, dim=0)  # (B*k, S, d)
    cache = DecoderCache(model, memory, src_mask.repeat_interleave(k, dim=0))
    return beam_loop(cache.log_probs, cache.reorder, src.size(0), k, max_len, length_penalty,
                     bos_id, eos_id, src.device)
