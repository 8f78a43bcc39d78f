"""The decoder layer: masked self-attention, cross-attention over the encoder output, then the
feed-forward network, each in a residual connection.

Conventions (shapes, masks): see :mod:`transformer_ref.modules`.
"""

from __future__ import annotations

from torch import Tensor, nn

from transformer_ref.model.attention import MultiHeadAttention
from transformer_ref.model.sublayers import PositionwiseFeedForward, residual


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder output, then the FFN."""

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
        self.cross_attn = MultiHeadAttention(d_model, h, dropout, fast=fast_attention)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(
        self, x: Tensor, memory: Tensor, src_mask: Tensor | None, tgt_mask: Tensor | None
    ) -> Tensor:
        """Run one decoder layer.

        Args:
            x: decoder states ``(B, T, d_model)``.
            memory: encoder output ``(B, S, d_model)``; queries come from ``x``, keys and
                values from ``memory``.
            src_mask: bool ``(B, 1, 1, S)``.
            tgt_mask: bool ``(B, 1, T, T)`` (causal and padding).

        Returns:
            ``(B, T, d_model)``.
        """
        x = residual(
            x, lambda y: self.self_attn(y, y, y, tgt_mask), self.norm1, self.dropout,
            self.norm_first,
        )
        x = residual(
            x, lambda y: self.cross_attn(y, memory, memory, src_mask), self.norm2, self.dropout,
            self.norm_first,
        )
        return residual(x, self.feed_forward, self.norm3, self.dropout, self.norm_first)
