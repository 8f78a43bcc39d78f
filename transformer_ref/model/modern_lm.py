"""A language model with today's block: RMSNorm, grouped-query attention with RoPE, SwiGLU.

It keeps chapter 11's :class:`~transformer_ref.model.language_model.LanguageModel` around the
blocks (scaled token embeddings, a final norm, a tied generator) and its sub-module names, so
that the two train with the same code; what changes is inside the block, and the learned
position table is gone: RoPE puts the positions into attention.

Conventions (shapes): see :mod:`transformer_ref.modules`.
"""

from __future__ import annotations

from torch import Tensor, nn

from transformer_ref.model.embeddings import Embeddings
from transformer_ref.model.generator import Generator
from transformer_ref.model.grouped_attention import GroupedQueryAttention
from transformer_ref.model.language_model import init_language_model
from transformer_ref.model.modern_layers import RmsNorm, Swiglu


class ModernBlock(nn.Module):
    """``x + self_attn(norm1(x))``, then ``x + feed_forward(norm2(x))`` (pre-norm, no dropout).

    Sub-modules: ``self_attn`` (:class:`GroupedQueryAttention`), ``feed_forward``
    (:class:`Swiglu`), ``norm1``, ``norm2`` (:class:`RmsNorm`).
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int,
                 d_ff: int | None = None) -> None:
        super().__init__()
        self.self_attn = GroupedQueryAttention(d_model, n_heads, n_kv_heads)
        self.feed_forward = Swiglu(d_model, d_ff)
        self.norm1 = RmsNorm(d_model)
        self.norm2 = RmsNorm(d_model)

    def forward(self, x: Tensor) -> Tensor:
        """``(B, T, d_model) -> (B, T, d_model)``, causal."""
        x = x + self.self_attn(self.norm1(x))
        return x + self.feed_forward(self.norm2(x))


class ModernLanguageModel(nn.Module):
    """``logits = generator(norm(blocks(embed(ids))))`` with :class:`ModernBlock` blocks.

    Args:
        vocab: vocabulary size; N: blocks; d_model: width; h: query heads;
        n_kv_heads: key/value heads (``h``: MHA, 1: MQA); d_ff: SwiGLU's hidden width (None:
        :func:`~transformer_ref.model.modern_layers.swiglu_width`); max_len: the longest
        context generation keeps; tie_weights: the generator shares the embedding table.

    Attributes:
        embed, layers, norm (:class:`RmsNorm`), generator, max_len, config (the constructor's
        arguments: ``ModernLanguageModel(**model.config)`` rebuilds it).

    Initialised as chapter 11's model
    (:func:`~transformer_ref.model.language_model.init_language_model`).
    """

    def __init__(self, vocab: int, N: int = 2, d_model: int = 128, h: int = 4,
                 n_kv_heads: int = 2, d_ff: int | None = None, max_len: int = 64,
                 tie_weights: bool = True) -> None:
        super().__init__()
        self.embed = Embeddings(vocab, d_model)
        self.layers = nn.ModuleList(ModernBlock(d_model, h, n_kv_heads, d_ff) for _ in range(N))
        self.norm = RmsNorm(d_model)
        self.generator = Generator(d_model, vocab)
        self.max_len = max_len
        self.config = dict(vocab=vocab, N=N, d_model=d_model, h=h, n_kv_heads=n_kv_heads,
                           d_ff=d_ff, max_len=max_len, tie_weights=tie_weights)
        init_language_model(self, tie_weights)

    def forward(self, ids: Tensor) -> Tensor:
        """Long ``(B, T)`` -> logits ``(B, T, vocab)``."""
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return self.generator(self.norm(x))
