"""A language model of attention layers only: the smallest model in which induction heads form.

Olsson et al. (2022) and Elhage et al. (2021) study transformers without feed-forward networks
and without norms: what such a model computes is the sum of the paths through its attention
heads, which makes its heads easy to read. Two layers are enough for an *induction head*: a
head of the first layer that attends to the previous token lets a head of the second layer
find "the token after the previous occurrence of the current token" and copy it.

Conventions (shapes, masks): see :mod:`transformer_ref.modules`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from transformer_ref.model.attention import MultiHeadAttention, store_attention
from transformer_ref.model.basic_masks import subsequent_mask
from transformer_ref.model.generator import Generator
from transformer_ref.model.learned_positional import LearnedPositionalEncoding


class AttentionOnlyModel(nn.Module):
    """``logits = generator(x_N)`` with ``x_0 = embed(ids) + pe`` and
    ``x_{l+1} = x_l + attention_l(x_l)`` (causal multi-head self-attention; no norm, no FFN,
    no dropout).

    Args:
        vocab: vocabulary size; N: attention layers; d_model: width; h: heads per layer;
        max_len: positions of the learned table.

    Attributes:
        embed (``nn.Embedding``, unscaled), pos_encoding, layers (``N``
        :class:`MultiHeadAttention`), generator (untied), config
        (``AttentionOnlyModel(**model.config)`` rebuilds it).
    """

    def __init__(self, vocab: int, N: int = 2, d_model: int = 64, h: int = 4,
                 max_len: int = 64) -> None:
        super().__init__()
        # Token and position tables on the same scale (GPT-2's N(0, 0.02^2)): the previous-token
        # head needs the positions, which chapter 11's scaled embeddings would drown.
        self.embed = nn.Embedding(vocab, d_model)
        nn.init.normal_(self.embed.weight, std=0.02)
        self.pos_encoding = LearnedPositionalEncoding(d_model, 0.0, max_len)
        self.layers = nn.ModuleList(MultiHeadAttention(d_model, h, 0.0) for _ in range(N))
        self.generator = Generator(d_model, vocab)
        self.config = dict(vocab=vocab, N=N, d_model=d_model, h=h, max_len=max_len)

    def forward(self, ids: Tensor) -> Tensor:
        """Long ``(B, T)`` -> logits ``(B, T, vocab)``; position ``i`` sees ``0 .. i``."""
        mask = subsequent_mask(ids.size(1), device=ids.device)[:, None]  # (1, 1, T, T)
        x = self.pos_encoding(self.embed(ids))
        for attention in self.layers:
            x = x + attention(x, x, x, mask)
        return self.generator(x)

    @torch.no_grad()
    def patterns(self, ids: Tensor) -> Tensor:
        """The attention weights of every layer on ``ids`` ``(B, T)``: float
        ``(N, B, h, T, T)`` (rows: queries, columns: keys)."""
        store_attention(self)
        try:
            self(ids)
            return torch.stack([layer.attn_weights for layer in self.layers])
        finally:
            store_attention(self, False)
