"""Induction heads (Olsson et al., 2022): how strongly a head attends to the token after the
previous occurrence of the current token.

On a sequence of ``half`` random tokens repeated once, the token at position ``i`` of the second
half (``half <= i < 2 * half``) occurred before at ``i - half``; an induction head attends from
``i`` to ``i - half + 1``, the token that followed it, and so predicts the next token by copying
it. The *prefix-matching score* of a head is its mean attention weight on that position over
the second half: near 1 for an induction head, near ``1 / (i + 1)`` for a head that spreads
its attention evenly.
"""

from __future__ import annotations

import torch
from torch import Tensor


def prefix_matching_score(pattern: Tensor, half: int) -> Tensor:
    """The prefix-matching score of every head.

    Args:
        pattern: float ``(..., n_heads, 2 * half, 2 * half)``, the attention weights (rows:
            queries, columns: keys) on a sequence whose second half repeats its first.
        half: the length of the repeated block.

    Returns:
        Float ``(..., n_heads)``: ``mean over i in [half, 2 * half) of pattern[..., i,
        i - half + 1]``.

    Raises:
        ValueError: the pattern's last two axes are not ``(2 * half, 2 * half)``.
    """
    if tuple(pattern.shape[-2:]) != (2 * half, 2 * half):
        raise ValueError(f"prefix_matching_score: expected attention weights (..., {2 * half}, "
                         f"{2 * half}) for half={half}, got {tuple(pattern.shape)}")
    queries = torch.arange(half, 2 * half, device=pattern.device)
    return pattern[..., queries, queries - half + 1].mean(dim=-1)
