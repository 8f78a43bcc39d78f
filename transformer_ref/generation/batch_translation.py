"""Decoding many sentences at once: pad, mask, sort by length, and give the order back.

Decoding one sentence at a time leaves most of the hardware idle: every decoder step is a
handful of tiny matrix products. :func:`translate_batched` stacks sentences of similar length into
one padded ``(B, S)`` tensor, masks the padding, decodes the whole batch with
:func:`~transformer_ref.generation.greedy.greedy_decode` (or another decoder, such as beam search)
and puts each output back in the position of its source. With a correct mask a sentence's output
does not depend on the other sentences of its batch, so the result is the same for every
``batch_size``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from transformer_ref.data.batching import pad_sequences
from transformer_ref.data.vocab import PAD_ID
from transformer_ref.generation.greedy import greedy_decode
from transformer_ref.model.basic_masks import make_src_mask
from transformer_ref.validation import require_int


def _require_id_lists(sources: Sequence[Sequence[int]], where: str) -> list[list[int]]:
    if isinstance(sources, (str, torch.Tensor)) or not isinstance(sources, Sequence):
        raise TypeError(
            f"{where}: sources must be a list of token-id lists (one per sentence), got "
            f"{type(sources).__name__}; encode sentences with transformer_ref.data.tokenizer."
            f"encode_batch first"
        )
    lists = []
    for i, ids in enumerate(sources):
        if isinstance(ids, str) or not all(isinstance(t, int) for t in ids) or not ids:
            raise TypeError(
                f"{where}: sources[{i}] must be a non-empty list of ints ending with EOS, got "
                f"{ids!r:.60}"
            )
        lists.append(list(ids))
    return lists


Decoder = Callable[[nn.Module, torch.Tensor, torch.Tensor, int], list[list[int]]]


@torch.no_grad()
def translate_batched(
    model: nn.Module,
    sources: Sequence[Sequence[int]],
    max_len: int,
    batch_size: int = 32,
    pad_id: int = PAD_ID,
    decoder: Decoder = greedy_decode,
) -> list[list[int]]:
    """Decode token-id sequences in length-sorted, padded batches; outputs in the input order.

    Args:
        model: an encoder-decoder in eval mode (``encode``, ``decode``, ``generator``).
        sources: one list of source ids per sentence, each ending with EOS (no padding).
        max_len: at most this many tokens are generated per sentence (EOS included).
        batch_size: sentences decoded together.
        pad_id: the id the padding positions get (and the source mask hides).
        decoder: ``decoder(model, src, src_mask, max_len)`` decodes one padded batch, e.g.
            ``greedy_decode`` (the default) or
            ``functools.partial(beam_search, beam_size=4, length_penalty=0.6)``.

    Returns:
        One list of ids per source, without BOS and cut before the first EOS.
    """
    where = "translate_batched"
    sources = _require_id_lists(sources, where)
    batch_size = require_int(batch_size, "batch_size", where, minimum=1)
    device = next(model.parameters()).device
    # Sentences of similar length together: little of each batch is padding.
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    outputs: list[list[int]] = [[] for _ in sources]
    for start in range(0, len(order), batch_size):
        chosen = order[start : start + batch_size]
        src = pad_sequences([sources[i] for i in chosen], pad_id).to(device)
        hyps = decoder(model, src, make_src_mask(src, pad_id), max_len)
        for i, hyp in zip(chosen, hyps, strict=True):
            outputs[i] = hyp
    return outputs
