"""Decoding with a key/value cache: each step runs the decoder on the newest token only.

:func:`~transformer_ref.generation.greedy.greedy_decode` and
:func:`~transformer_ref.generation.beam.beam_search` re-run the decoder over the whole prefix at
every step, ``O(T^2)`` work that keeps them short and easy to check. A decoder layer's keys and
values at a position never change once that position is decoded (the causal mask hides everything
after it), so they can be kept and reused: :class:`DecoderCache` stores, per layer, the
self-attention keys and values of the positions decoded so far and the cross-attention keys and
values of the encoder output, and each step projects and attends for the newest position alone.

:func:`cached_greedy_decode` (and :func:`transformer_ref.generation.cached_beam.cached_beam_search`,
in a module of its own because it holds the answer of chapter 10's beam search) take the same
arguments as the plain decoders and give the same outputs (up to floating-point rounding)
several times faster on long batches; the translate command and the training script decode
with them. They
need a model built by :func:`~transformer_ref.modules.make_model` from this package's layers
(eval mode); any other model is decoded by the plain decoders.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_ref.data.vocab import BOS_ID, EOS_ID
from transformer_ref.generation.greedy import (
    check_max_len,
    check_source,
    greedy_decode,
    greedy_loop,
)
from transformer_ref.model.attention import MultiHeadAttention
from transformer_ref.model.decoder import Decoder
from transformer_ref.model.decoder_layer import DecoderLayer
from transformer_ref.model.encoder_decoder import EncoderDecoder
from transformer_ref.model.learned_positional import LearnedPositionalEncoding
from transformer_ref.model.positional import PositionalEncoding
from transformer_ref.model.sublayers import residual


def can_cache(model: nn.Module) -> bool:
    """True when ``model`` is this package's encoder–decoder with its layers, all in eval mode.

    The cache re-implements a decoder layer's forward pass step by step, so it is only
    exact for the classes it was written for; a subclass or a learner's own layer may
    compute something else.
    """
    if type(model) is not EncoderDecoder or any(part.training for part in model.modules()):
        return False
    decoder = model.decoder
    return (
        type(decoder) is Decoder
        and type(model.pos_encoding) in (PositionalEncoding, LearnedPositionalEncoding)
        and all(
            type(layer) is DecoderLayer
            and type(layer.self_attn) is MultiHeadAttention
            and type(layer.cross_attn) is MultiHeadAttention
            for layer in decoder.layers
        )
    )


def _split_heads(attn: MultiHeadAttention, x: Tensor) -> Tensor:
    """``(N, n, d_model) -> (N, h, n, d_k)``."""
    return x.view(x.size(0), x.size(1), attn.h, attn.d_k).transpose(1, 2)


def _attend(attn: MultiHeadAttention, query: Tensor, keys: Tensor, values: Tensor,
            mask: Tensor | None) -> Tensor:
    """``attn``'s output for ``query`` ``(N, 1, d_model)`` over projected ``keys``/``values``
    ``(N, h, n, d_k)``; returns ``(N, 1, d_model)``."""
    q = _split_heads(attn, attn.w_q(query))
    out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)  # (N, h, 1, d_k)
    return attn.w_o(out.transpose(1, 2).reshape(query.size(0), 1, attn.h * attn.d_k))


class DecoderCache:
    """The keys and values a decoder has computed so far, for ``N`` hypotheses.

    Args:
        model: an encoder–decoder for which :func:`can_cache` holds.
        memory: encoder output ``(N, S, d_model)``, one row per hypothesis.
        src_mask: Bool ``(N, 1, 1, S)``.
    """

    def __init__(self, model: EncoderDecoder, memory: Tensor, src_mask: Tensor) -> None:
        self.model = model
        self.src_mask = src_mask
        self.layers = list(model.decoder.layers)
        self.cross = [
            (_split_heads(layer.cross_attn, layer.cross_attn.w_k(memory)),
             _split_heads(layer.cross_attn, layer.cross_attn.w_v(memory)))
            for layer in self.layers
        ]
        self.keys: list[Tensor | None] = [None] * len(self.layers)
        self.values: list[Tensor | None] = [None] * len(self.layers)
        self.length = 0

    def _self_attend(self, i: int, y: Tensor) -> Tensor:
        attn = self.layers[i].self_attn
        keys = _split_heads(attn, attn.w_k(y))
        values = _split_heads(attn, attn.w_v(y))
        if self.keys[i] is not None:
            keys = torch.cat([self.keys[i], keys], dim=2)
            values = torch.cat([self.values[i], values], dim=2)
        self.keys[i], self.values[i] = keys, values
        # Only earlier positions are cached, so the causal mask has nothing left to hide.
        return _attend(attn, y, keys, values, None)

    def _cross_attend(self, i: int, y: Tensor) -> Tensor:
        keys, values = self.cross[i]
        return _attend(self.layers[i].cross_attn, y, keys, values, self.src_mask)

    def log_probs(self, ys: Tensor) -> Tensor:
        """Log-probabilities ``(N, V)`` (float32) of the token after each prefix ``ys``.

        ``ys`` ``(N, t)`` must extend the prefixes of the previous call by exactly one token
        (after :meth:`reorder`); only its last column is read.
        """
        t = ys.size(1)
        if t != self.length + 1:
            raise ValueError(
                f"DecoderCache.log_probs: the cache holds {self.length} positions, so it "
                f"needs prefixes of {self.length + 1} tokens, got {t}"
            )
        model = self.model
        x = model.tgt_embed(ys[:, -1:])
        if type(model.pos_encoding) is LearnedPositionalEncoding:
            x = model.pos_encoding(x, start=t - 1)  # eval mode: no dropout
        else:
            x = x + model.pos_encoding.pe[:, t - 1 : t].to(x.dtype)
        for i, layer in enumerate(self.layers):
            x = residual(x, functools.partial(self._self_attend, i), layer.norm1, layer.dropout,
                         layer.norm_first)
            x = residual(x, functools.partial(self._cross_attend, i), layer.norm2,
                         layer.dropout, layer.norm_first)
            x = residual(x, layer.feed_forward, layer.norm3, layer.dropout, layer.norm_first)
        self.length = t
        hidden = model.decoder.norm(x)
        return F.log_softmax(model.generator(hidden[:, -1]).float(), dim=-1)

    def reorder(self, rows: Tensor) -> None:
        """Row ``r`` of the cache becomes old row ``rows[r]`` (Long ``(N,)``), as beams move."""
        self.keys = [keys.index_select(0, rows) for keys in self.keys]
        self.values = [values.index_select(0, rows) for values in self.values]


@torch.no_grad()
def cached_greedy_decode(
    model: nn.Module,
    src: Tensor,
    src_mask: Tensor,
    max_len: int,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
) -> list[list[int]]:
    """:func:`~transformer_ref.generation.greedy.greedy_decode` with a :class:`DecoderCache`."""
    if not can_cache(model):
        return greedy_decode(model, src, src_mask, max_len, bos_id, eos_id)
    check_source(src, src_mask, "cached_greedy_decode")
    max_len = check_max_len(model, max_len, "cached_greedy_decode")
    cache = DecoderCache(model, model.encode(src, src_mask), src_mask)
    return greedy_loop(cache.log_probs, src.size(0), max_len, bos_id, eos_id, src.device)
