"""Turning lists of (source, target) id sequences into padded tensors, batched by token count.

Sequences follow the project convention: source and target both end with ``EOS_ID`` and
have no ``BOS_ID``. The decoder reads ``shift_right(target)`` and learns to predict
``target`` itself.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, fields

import torch

from transformer_ref.data.vocab import BOS_ID, PAD_ID
from transformer_ref.masks import make_src_mask, make_tgt_mask, shift_right


@dataclass
class Batch:
    """One padded batch of ``B`` pairs.

    Attributes:
        src: Long ``(B, S)`` source ids, padded with ``PAD_ID``.
        tgt_in: Long ``(B, T)`` decoder input, ``BOS`` followed by the target minus its last id.
        tgt_out: Long ``(B, T)`` the target ids the decoder must predict (the loss target).
        src_mask: Bool ``(B, 1, 1, S)``, True for real source tokens.
        tgt_mask: Bool ``(B, 1, T, T)``, causal and True for real decoder-input tokens.
        n_tokens: number of non-pad ids in ``tgt_out`` (what the loss averages over).
    """

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    src_mask: torch.Tensor
    tgt_mask: torch.Tensor
    n_tokens: int

    def to(self, device: torch.device | str) -> Batch:
        """A copy with every tensor moved to ``device``."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return Batch(
            **{k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in values.items()}
        )


def pad_sequences(seqs: list[list[int]], pad_id: int = PAD_ID) -> torch.Tensor:
    """Stack id lists of different lengths into a Long ``(len(seqs), max_len)`` tensor."""
    width = max(len(s) for s in seqs)
    out = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    for row, seq in enumerate(seqs):
        out[row, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
    return out


def collate(pairs: list[tuple[list[int], list[int]]], pad_id: int = PAD_ID) -> Batch:
    """Pad a list of ``(src_ids, tgt_ids)`` pairs into a :class:`Batch` (on the CPU)."""
    if not pairs:
        raise ValueError("collate needs at least one (src_ids, tgt_ids) pair, got an empty list")
    for i, (src, tgt) in enumerate(pairs):
        if len(src) == 0 or len(tgt) == 0:
            raise ValueError(
                f"pair {i} has an empty sequence (src length {len(src)}, tgt length "
                f"{len(tgt)}); every sequence must at least hold EOS_ID"
            )
    src = pad_sequences([list(s) for s, _ in pairs], pad_id)
    tgt_out = pad_sequences([list(t) for _, t in pairs], pad_id)
    tgt_in = shift_right(tgt_out, BOS_ID)
    return Batch(
        src=src,
        tgt_in=tgt_in,
        tgt_out=tgt_out,
        src_mask=make_src_mask(src, pad_id),
        tgt_mask=make_tgt_mask(tgt_in, pad_id),
        n_tokens=int((tgt_out != pad_id).sum()),
    )


def bucket_by_tokens(
    lengths: list[int],
    max_tokens: int,
    *,
    shuffle: bool,
    seed: int = 0,
    sort_by_length: bool = True,
) -> list[list[int]]:
    """Group example indices into batches of similar length.

    A batch of ``n`` examples whose longest has length ``L`` costs ``n * L`` padded tokens;
    every batch keeps that at most ``max_tokens``. An example longer than ``max_tokens``
    on its own still gets a batch of its own (so no data is dropped). Every index appears
    in exactly one batch.

    Args:
        lengths: per-example length (typically ``max(len(src), len(tgt))``).
        max_tokens: padded-token budget per batch.
        shuffle: randomise which equal-length examples go together and the batch order
            (use a new ``seed`` per epoch); without it batches come sorted by length.
        seed: seed for the shuffling.
        sort_by_length: group similar lengths (least padding). ``False`` keeps the (shuffled)
            order, so every batch mixes lengths: more padding, but gradients that are less
            tied to one length, which helps small synthetic tasks converge steadily.

    Returns:
        A list of batches, each a list of indices into ``lengths``.
    """
    if max_tokens <= 0:
        raise ValueError(f"max_tokens must be a positive number of tokens, got {max_tokens}")
    if any(n < 0 for n in lengths):
        raise ValueError("lengths must be non-negative")
    rng = random.Random(seed)
    order = list(range(len(lengths)))
    if shuffle:
        rng.shuffle(order)
    if sort_by_length:
        order.sort(key=lambda i: lengths[i])  # stable: ties keep their shuffled order

    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        grown = max(longest, lengths[i])
        if current and grown * (len(current) + 1) > max_tokens:
            batches.append(current)
            current, grown = [], lengths[i]
        current.append(i)
        longest = grown
    if current:
        batches.append(current)
    if shuffle:
        rng.shuffle(batches)
    return batches
