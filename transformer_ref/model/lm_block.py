"""The block of a decoder-only language model (GPT): masked self-attention, then the FFN.

A decoder layer of the encoder–decoder (:mod:`transformer_ref.model.decoder`) without its
cross-attention: a language model has no source sentence to attend to. Its residual
connections normalise first (pre-LN, as GPT-2 and most language models since): chapter 5
measured why, the residual path stays an identity and deep stacks train without a careful
warm-up. The causal mask is part of the block, since a language model never looks ahead.

Conventions (shapes, masks): see :mod:`transformer_ref.modules`.
"""

from __future__ import annotations

from torch import Tensor, nn

from transformer_ref.model.attention import MultiHeadAttention
from transformer_ref.model.basic_masks import subsequent_mask
from transformer_ref.model.sublayers import PositionwiseFeedForward, residual


class DecoderOnlyBlock(nn.Module):
    """Causal self-attention, then the feed-forward network; each in a pre-LN residual
    connection ``x + dropout(sublayer(norm(x)))``.

    Sub-modules (named as in :class:`transformer_ref.model.decoder.DecoderLayer`): ``self_attn``,
    ``feed_forward``, ``norm1`` (before the attention), ``norm2`` (before the FFN) and
    ``dropout``, the paper's dropout on each sub-layer's output before it is added to ``x``.
    """

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """``(B, T, d_model) -> (B, T, d_model)``; position ``i`` sees positions ``0 .. i``."""
        mask = subsequent_mask(x.size(1), device=x.device)[:, None]  # (1, 1, T, T)
        x = residual(x, lambda y: self.self_attn(y, y, y, mask), self.norm1, self.dropout, True)
        return residual(x, self.feed_forward, self.norm2, self.dropout, True)
