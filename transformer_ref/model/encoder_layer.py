"""The encoder layer: self-attention, then the feed-forward network, each in a residual
connection.

Conventions (shapes, masks): see :mod:`transformer_ref.modules`.
"""

from __future__ import annotations

from torch import Tensor, nn

from transformer_ref.model.attention import MultiHeadAttention
from transformer_ref.model.sublayers import PositionwiseFeedForward, residual


class EncoderLayer(nn.Module):
    """Self-attention, then the feed-forward network; each inside a residual connection."""

    def __init__(
        self,
        d_model: int,
        h: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        fast_attention: bool = True,
    ) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout, fast=fast_attention)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """``x`` ``(B, S, d_model)``, ``mask`` bool ``(B, 1, 1, S)`` -> ``(B, S, d_model)``."""
        x = residual(
            x, lambda y: self.self_attn(y, y, y, mask), self.norm1, self.dropout, self.norm_first
        )
        return residual(x, self.feed_forward, self.norm2, self.dropout, self.norm_first)
