"""Learned positional embeddings: the alternative to sinusoids that GPT-2 and BERT use.

The paper (section 3.5) tried learned positional embeddings and "found that the two versions
produced nearly identical results" (Table 3, row E); it kept the sinusoids because they may
extrapolate to sequences longer than those seen in training. A learned table cannot: it has
one row per position up to ``max_len`` and nothing beyond.

Conventions (shapes): see :mod:`transformer_ref.modules`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class LearnedPositionalEncoding(nn.Module):
    """Add a trained embedding of each position, then apply dropout.

    A drop-in replacement for :class:`transformer_ref.model.positional.PositionalEncoding`: the
    same constructor arguments and the same ``forward``. The table is a parameter
    ``pe.weight`` of shape ``(max_len, d_model)``, initialised from N(0, 0.02²) as in GPT-2,
    so it is trained and saved in the ``state_dict``.
    """

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000) -> None:
        super().__init__()
        self.pe = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.pe.weight, std=0.02)
        self.dropout = nn.Dropout(dropout)
        self.max_len = max_len

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        """``(B, L, d_model) -> (B, L, d_model)``: rows ``start .. start + L - 1`` of the table
        added to ``x`` (``start`` > 0 when a cached decoder feeds one new token at a time)."""
        length = x.size(1)
        if start + length > self.max_len:
            raise ValueError(
                f"LearnedPositionalEncoding: positions up to {start + length} are needed but "
                f"the table has max_len={self.max_len} rows; a learned table cannot go beyond "
                f"the positions it was built with, so build it with max_len >= {start + length}"
            )
        positions = torch.arange(start, start + length, device=x.device)
        return self.dropout(x + self.pe(positions).to(x.dtype))
