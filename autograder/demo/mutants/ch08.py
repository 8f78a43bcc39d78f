"""Buggy and valid implementations of the chapter 8 exercises (decoder side and full model).

The exercises follow :mod:`transformer_ref.masks` and :mod:`transformer_ref.modules`:
``shift_right`` prepends BOS and drops the last column; ``make_tgt_mask`` is causal AND
key-not-padding, ``(B, 1, T, T)``; ``Embeddings`` multiplies the looked-up rows by
``sqrt(d_model)``; ``DecoderLayer`` runs masked self-attention, cross-attention (queries from
the decoder, keys and values from the encoder memory) and the feed-forward network, each in a
residual connection (post-LN or pre-LN); ``make_model`` assembles the encoder-decoder with
Xavier-initialised weight matrices, optional shared embeddings and a tied generator.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from autograder.demo.mutants import Mutant
from transformer_ref.data.vocab import BOS_ID, PAD_ID
from transformer_ref.masks import subsequent_mask
from transformer_ref.modules import (
    Decoder,
    DecoderLayer,
    Embeddings,
    Encoder,
    EncoderDecoder,
    Generator,
    MultiHeadAttention,
    PositionalEncoding,
    PositionwiseFeedForward,
    residual,
)

SHIFT = "ch08.shift_right"
TGT_MASK = "ch08.make_tgt_mask"
EMBEDDINGS = "ch08.embeddings"
LAYER = "ch08.decoder_layer"
MODEL = "ch08.make_model"


# --- shift_right ----------------------------------------------------------------------------

def shift_left(tgt: Tensor, bos_id: int = BOS_ID) -> Tensor:
    """Drops the first column and pads at the end: the decoder would read the answer."""
    return torch.cat([tgt[:, 1:], torch.full_like(tgt[:, :1], bos_id)], dim=1)


def shift_keeps_last_column(tgt: Tensor, bos_id: int = BOS_ID) -> Tensor:
    """Prepends BOS but keeps every target token, so the result has T + 1 columns."""
    return torch.cat([torch.full_like(tgt[:, :1], bos_id), tgt], dim=1)


def shift_overwrites_first(tgt: Tensor, bos_id: int = BOS_ID) -> Tensor:
    """Replaces the first token by BOS instead of shifting."""
    out = tgt.clone()
    out[:, 0] = bos_id
    return out


def shift_ignores_bos_id(tgt: Tensor, bos_id: int = BOS_ID) -> Tensor:
    """Always writes the default BOS id."""
    return torch.cat([torch.full_like(tgt[:, :1], BOS_ID), tgt[:, :-1]], dim=1)


def shift_in_place(tgt: Tensor, bos_id: int = BOS_ID) -> Tensor:
    """Shifts the caller's tensor in place (the loss target is lost)."""
    tgt[:, 1:] = tgt[:, :-1].clone()
    tgt[:, 0] = bos_id
    return tgt


def shift_roll(tgt: Tensor, bos_id: int = BOS_ID) -> Tensor:
    """Rolls the columns by one and overwrites the wrapped-around column."""
    out = torch.roll(tgt, shifts=1, dims=1)
    out[:, 0] = bos_id
    return out


def shift_pad(tgt: Tensor, bos_id: int = BOS_ID) -> Tensor:
    """Pads one BOS column on the left, then cuts the last column."""
    return F.pad(tgt, (1, 0), value=bos_id)[:, :-1]


def shift_float_bos_column(tgt: Tensor, bos_id: int = BOS_ID) -> Tensor:
    """torch.full without a dtype makes a float BOS column, and torch.cat promotes the ids."""
    bos = torch.full((tgt.size(0), 1), bos_id)
    return torch.cat([bos.float(), tgt[:, :-1]], dim=1)


def shift_slice_assign(tgt: Tensor, bos_id: int = BOS_ID) -> Tensor:
    """Fills a new tensor with BOS and copies the target one column to the right."""
    out = torch.full_like(tgt, bos_id)
    out[:, 1:] = tgt[:, :-1]
    return out


# --- make_tgt_mask --------------------------------------------------------------------------

def _key_not_pad(tgt_in: Tensor, pad_id: int) -> Tensor:
    return (tgt_in != pad_id)[:, None, None, :]


def mask_causal_only(tgt_in: Tensor, pad_id: int = PAD_ID) -> Tensor:
    """Forgets the padding: queries may attend to padded keys."""
    return subsequent_mask(tgt_in.size(1))[:, None].expand(tgt_in.size(0), 1, -1, -1)


def mask_padding_only(tgt_in: Tensor, pad_id: int = PAD_ID) -> Tensor:
    """Forgets causality: every query sees the future."""
    t = tgt_in.size(1)
    return _key_not_pad(tgt_in, pad_id).expand(-1, 1, t, t)


def mask_strictly_lower(tgt_in: Tensor, pad_id: int = PAD_ID) -> Tensor:
    """Excludes the diagonal: a position may not attend to itself (row 0 sees nothing)."""
    t = tgt_in.size(1)
    causal = torch.ones(t, t, dtype=torch.bool).tril(-1)
    return _key_not_pad(tgt_in, pad_id) & causal


def mask_upper_triangle(tgt_in: Tensor, pad_id: int = PAD_ID) -> Tensor:
    """Uses triu: each query sees itself and the future instead of the past."""
    t = tgt_in.size(1)
    return _key_not_pad(tgt_in, pad_id) & torch.ones(t, t, dtype=torch.bool).triu()


def mask_pads_queries(tgt_in: Tensor, pad_id: int = PAD_ID) -> Tensor:
    """Masks the query rows of padding instead of the key columns."""
    t = tgt_in.size(1)
    return (tgt_in != pad_id)[:, None, :, None] & subsequent_mask(t)[:, None]


def mask_without_head_axis(tgt_in: Tensor, pad_id: int = PAD_ID) -> Tensor:
    """Returns ``(B, T, T)``: it no longer broadcasts against ``(B, h, T, T)`` scores."""
    return (tgt_in != pad_id)[:, None, :] & subsequent_mask(tgt_in.size(1))


def mask_ignores_pad_id(tgt_in: Tensor, pad_id: int = PAD_ID) -> Tensor:
    """Always compares with the default padding id 0."""
    return _key_not_pad(tgt_in, PAD_ID) & subsequent_mask(tgt_in.size(1))[:, None]


def mask_float_causal(tgt_in: Tensor, pad_id: int = PAD_ID) -> Tensor:
    """torch.tril of a float matrix of ones times the float padding mask: 0/1 floats."""
    causal = torch.ones(tgt_in.size(1), tgt_in.size(1)).tril()
    return (tgt_in != pad_id).float()[:, None, None, :] * causal


def mask_arange(tgt_in: Tensor, pad_id: int = PAD_ID) -> Tensor:
    """Causality from comparing key and query positions."""
    positions = torch.arange(tgt_in.size(1))
    causal = positions[None, :] <= positions[:, None]
    return (tgt_in != pad_id).unsqueeze(1).unsqueeze(2) & causal


def mask_loops(tgt_in: Tensor, pad_id: int = PAD_ID) -> Tensor:
    """Fills the mask entry by entry."""
    batch, t = tgt_in.shape
    mask = torch.zeros(batch, 1, t, t, dtype=torch.bool)
    for b in range(batch):
        for i in range(t):
            for j in range(i + 1):
                mask[b, 0, i, j] = bool(tgt_in[b, j] != pad_id)
    return mask


# --- Embeddings -----------------------------------------------------------------------------

class EmbeddingsUnscaled(nn.Module):
    """Returns the table rows without the sqrt(d_model) factor."""

    def __init__(self, vocab: int, d_model: int) -> None:
        super().__init__()
        self.lut = nn.Embedding(vocab, d_model)

    def forward(self, ids: Tensor) -> Tensor:
        return self.lut(ids)


class EmbeddingsScaledByDModel(EmbeddingsUnscaled):
    """Multiplies by d_model instead of its square root."""

    def forward(self, ids: Tensor) -> Tensor:
        return self.lut(ids) * self.lut.embedding_dim


class EmbeddingsDivided(EmbeddingsUnscaled):
    """Divides by sqrt(d_model), as attention does with its scores."""

    def forward(self, ids: Tensor) -> Tensor:
        return self.lut(ids) / math.sqrt(self.lut.embedding_dim)


class EmbeddingsScaledByVocab(EmbeddingsUnscaled):
    """Takes the square root of the vocabulary size."""

    def forward(self, ids: Tensor) -> Tensor:
        return self.lut(ids) * math.sqrt(self.lut.num_embeddings)


class EmbeddingsWithPositions(EmbeddingsUnscaled):
    """Adds the positional encoding too; the model adds it again in PositionalEncoding."""

    def forward(self, ids: Tensor) -> Tensor:
        d_model = self.lut.embedding_dim
        pe = PositionalEncoding(d_model, 0.0, max_len=ids.size(1)).pe
        return self.lut(ids) * math.sqrt(d_model) + pe.to(self.lut.weight.dtype)


class EmbeddingsFunctional(EmbeddingsUnscaled):
    """Looks the rows up with F.embedding and scales with a power."""

    def forward(self, ids: Tensor) -> Tensor:
        return F.embedding(ids, self.lut.weight) * self.lut.embedding_dim ** 0.5


class EmbeddingsIndexing(EmbeddingsUnscaled):
    """Indexes the weight matrix directly; the factor is stored as a buffer."""

    def __init__(self, vocab: int, d_model: int) -> None:
        super().__init__(vocab, d_model)
        self.register_buffer("factor", torch.tensor(float(d_model)).sqrt(), persistent=False)

    def forward(self, ids: Tensor) -> Tensor:
        return self.lut.weight[ids] * self.factor.to(self.lut.weight.dtype)


# --- DecoderLayer ---------------------------------------------------------------------------

class _Layer(DecoderLayer):
    """The reference layer's sub-modules; each mutant rewrites ``forward``."""

    def _res(self, x: Tensor, sublayer, norm: nn.LayerNorm) -> Tensor:
        return residual(x, sublayer, norm, self.dropout, self.norm_first)

    def _ffn(self, x: Tensor) -> Tensor:
        return self._res(x, self.feed_forward, self.norm3)


class LayerNoCausalMask(_Layer):
    """Self-attention without the target mask: every position sees the future."""

    def forward(self, x, memory, src_mask, tgt_mask):
        x = self._res(x, lambda y: self.self_attn(y, y, y), self.norm1)
        x = self._res(x, lambda y: self.cross_attn(y, memory, memory, src_mask), self.norm2)
        return self._ffn(x)


class LayerCrossFromDecoder(_Layer):
    """Cross-attention takes keys and values from the decoder states instead of the memory."""

    def forward(self, x, memory, src_mask, tgt_mask):
        x = self._res(x, lambda y: self.self_attn(y, y, y, tgt_mask), self.norm1)
        x = self._res(x, lambda y: self.cross_attn(y, y, y, tgt_mask), self.norm2)
        return self._ffn(x)


class LayerCrossFromDecoderSrcMask(_Layer):
    """Cross-attention over the decoder states with the source mask: the shapes clash."""

    def forward(self, x, memory, src_mask, tgt_mask):
        x = self._res(x, lambda y: self.self_attn(y, y, y, tgt_mask), self.norm1)
        x = self._res(x, lambda y: self.cross_attn(y, y, y, src_mask), self.norm2)
        return self._ffn(x)


class LayerNoSourceMask(_Layer):
    """Cross-attention ignores the source mask: queries attend to padded source tokens."""

    def forward(self, x, memory, src_mask, tgt_mask):
        x = self._res(x, lambda y: self.self_attn(y, y, y, tgt_mask), self.norm1)
        x = self._res(x, lambda y: self.cross_attn(y, memory, memory), self.norm2)
        return self._ffn(x)


class LayerAlwaysPostLN(_Layer):
    """Ignores ``norm_first``: post-LN even when pre-LN is asked for."""

    def forward(self, x, memory, src_mask, tgt_mask):
        steps = [
            (lambda y: self.self_attn(y, y, y, tgt_mask), self.norm1),
            (lambda y: self.cross_attn(y, memory, memory, src_mask), self.norm2),
            (self.feed_forward, self.norm3),
        ]
        for sublayer, norm in steps:
            x = norm(x + self.dropout(sublayer(x)))
        return x


class LayerNormOrderSwapped(_Layer):
    """Normalises before the sub-layer when asked for post-LN, and after it for pre-LN."""

    def forward(self, x, memory, src_mask, tgt_mask):
        steps = [
            (lambda y: self.self_attn(y, y, y, tgt_mask), self.norm1),
            (lambda y: self.cross_attn(y, memory, memory, src_mask), self.norm2),
            (self.feed_forward, self.norm3),
        ]
        for sublayer, norm in steps:
            x = residual(x, sublayer, norm, self.dropout, not self.norm_first)
        return x


class LayerCrossBeforeSelf(_Layer):
    """Runs cross-attention before masked self-attention."""

    def forward(self, x, memory, src_mask, tgt_mask):
        x = self._res(x, lambda y: self.cross_attn(y, memory, memory, src_mask), self.norm1)
        x = self._res(x, lambda y: self.self_attn(y, y, y, tgt_mask), self.norm2)
        return self._ffn(x)


class LayerNormsSwapped(_Layer):
    """Uses norm2 around self-attention and norm1 around cross-attention."""

    def forward(self, x, memory, src_mask, tgt_mask):
        x = self._res(x, lambda y: self.self_attn(y, y, y, tgt_mask), self.norm2)
        x = self._res(x, lambda y: self.cross_attn(y, memory, memory, src_mask), self.norm1)
        return self._ffn(x)


class LayerNoFeedForwardResidual(_Layer):
    """Forgets the residual path around the feed-forward network: norm3(dropout(ffn(x)))."""

    def forward(self, x, memory, src_mask, tgt_mask):
        x = self._res(x, lambda y: self.self_attn(y, y, y, tgt_mask), self.norm1)
        x = self._res(x, lambda y: self.cross_attn(y, memory, memory, src_mask), self.norm2)
        if self.norm_first:
            return self.dropout(self.feed_forward(self.norm3(x)))
        return self.norm3(self.dropout(self.feed_forward(x)))


def _steps(layer: _Layer, memory: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> list:
    return [(lambda y: layer.self_attn(y, y, y, tgt_mask), layer.norm1),
            (lambda y: layer.cross_attn(y, memory, memory, src_mask), layer.norm2),
            (layer.feed_forward, layer.norm3)]


class LayerNoResidualDropout(_Layer):
    """Never applies its own dropout: the sub-layer outputs are added as they are."""

    def forward(self, x, memory, src_mask, tgt_mask):
        for sublayer, norm in _steps(self, memory, src_mask, tgt_mask):
            x = x + sublayer(norm(x)) if self.norm_first else norm(x + sublayer(x))
        return x


class LayerDropoutAfterNorm(_Layer):
    """Post-LN with dropout after the norm instead of on the sub-layer's output."""

    def forward(self, x, memory, src_mask, tgt_mask):
        for sublayer, norm in _steps(self, memory, src_mask, tgt_mask):
            if self.norm_first:
                x = x + self.dropout(sublayer(norm(x)))
            else:
                x = self.dropout(norm(x + sublayer(x)))
        return x


class LayerAttentionsWithoutDropout(_Layer):
    """MultiHeadAttention(d_model, h): the attentions keep their default dropout of 0."""

    def __init__(self, d_model, h, d_ff, dropout=0.1, norm_first=False, fast_attention=True):
        super().__init__(d_model, h, d_ff, dropout, norm_first, fast_attention)
        self.self_attn = MultiHeadAttention(d_model, h, fast=fast_attention)
        self.cross_attn = MultiHeadAttention(d_model, h, fast=fast_attention)

    def forward(self, x, memory, src_mask, tgt_mask):
        for sublayer, norm in _steps(self, memory, src_mask, tgt_mask):
            x = self._res(x, sublayer, norm)
        return x


class LayerDropoutTwice(_Layer):
    """Each sub-layer's output goes through the layer's dropout twice."""

    def forward(self, x, memory, src_mask, tgt_mask):
        for sublayer, norm in _steps(self, memory, src_mask, tgt_mask):
            x = self._res(x, lambda y, f=sublayer: self.dropout(f(y)), norm)
        return x


class LayerFunctionalDropout(_Layer):
    """Valid: F.dropout on each sub-layer's output with the layer's training flag."""

    def forward(self, x, memory, src_mask, tgt_mask):
        def drop(y: Tensor) -> Tensor:
            return F.dropout(y, self.dropout.p, self.training)

        for sublayer, norm in _steps(self, memory, src_mask, tgt_mask):
            x = x + drop(sublayer(norm(x))) if self.norm_first else norm(x + drop(sublayer(x)))
        return x


class LayerExplicit(nn.Module):
    """Written out without the ``residual`` helper, with the math attention path only."""

    def __init__(self, d_model, h, d_ff, dropout=0.1, norm_first=False, fast_attention=True):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout, fast=False)
        self.cross_attn = MultiHeadAttention(d_model, h, dropout, fast=False)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x, memory, src_mask, tgt_mask):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout(self.self_attn(y, y, y, tgt_mask))
            x = x + self.dropout(self.cross_attn(self.norm2(x), memory, memory, src_mask))
            return x + self.dropout(self.feed_forward(self.norm3(x)))
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, tgt_mask)))
        x = self.norm2(x + self.dropout(self.cross_attn(x, memory, memory, src_mask)))
        return self.norm3(x + self.dropout(self.feed_forward(x)))


class LayerKeywordCalls(_Layer):
    """Passes keys and values by keyword and loops over the three residual steps."""

    def forward(self, x, memory, src_mask, tgt_mask):
        steps = (
            (lambda y: self.self_attn(query=y, key=y, value=y, mask=tgt_mask), self.norm1),
            (lambda y: self.cross_attn(query=y, key=memory, value=memory, mask=src_mask),
             self.norm2),
            (self.feed_forward, self.norm3),
        )
        for sublayer, norm in steps:
            x = self._res(x, sublayer, norm)
        return x


# --- make_model -----------------------------------------------------------------------------

def _require_one_vocabulary(share_embeddings: bool, src_vocab: int, tgt_vocab: int) -> None:
    if share_embeddings and src_vocab != tgt_vocab:
        raise ValueError(f"share_embeddings=True needs src_vocab == tgt_vocab, got {src_vocab} "
                         f"and {tgt_vocab}")


def _assemble(
    src_vocab, tgt_vocab, N, d_model, d_ff, h, dropout, norm_first, share_embeddings,
    max_len, fast_attention, embeddings=Embeddings, generator=Generator,
) -> EncoderDecoder:
    """An untied, Xavier-initialised model built from the given embedding/generator classes."""
    _require_one_vocabulary(share_embeddings, src_vocab, tgt_vocab)
    args = (d_model, h, d_ff, dropout, norm_first, fast_attention)
    tgt_embed = embeddings(tgt_vocab, d_model)
    model = EncoderDecoder(
        Encoder(N, *args), Decoder(N, *args),
        tgt_embed if share_embeddings else embeddings(src_vocab, d_model), tgt_embed,
        PositionalEncoding(d_model, dropout, max_len), generator(d_model, tgt_vocab),
    )
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    return model


class SoftmaxGenerator(Generator):
    """A generator that returns probabilities instead of logits."""

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(x).softmax(dim=-1)


class LogSoftmaxGenerator(Generator):
    """A generator that returns log-probabilities instead of logits."""

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(x).log_softmax(dim=-1)


def model_softmax_generator(src_vocab, tgt_vocab, N=6, d_model=512, d_ff=2048, h=8,
                            dropout=0.1, *, norm_first=False, share_embeddings=False,
                            tie_weights=False, max_len=5000, fast_attention=True):
    """The generator applies a softmax."""
    model = _assemble(src_vocab, tgt_vocab, N, d_model, d_ff, h, dropout, norm_first,
                      share_embeddings, max_len, fast_attention, generator=SoftmaxGenerator)
    if tie_weights:
        model.generator.proj.weight = model.tgt_embed.lut.weight
    return model


def model_log_softmax_generator(src_vocab, tgt_vocab, N=6, d_model=512, d_ff=2048, h=8,
                                dropout=0.1, *, norm_first=False, share_embeddings=False,
                                tie_weights=False, max_len=5000, fast_attention=True):
    """The generator applies a log-softmax."""
    model = _assemble(src_vocab, tgt_vocab, N, d_model, d_ff, h, dropout, norm_first,
                      share_embeddings, max_len, fast_attention, generator=LogSoftmaxGenerator)
    if tie_weights:
        model.generator.proj.weight = model.tgt_embed.lut.weight
    return model


def model_unscaled_embeddings(src_vocab, tgt_vocab, N=6, d_model=512, d_ff=2048, h=8,
                              dropout=0.1, *, norm_first=False, share_embeddings=False,
                              tie_weights=False, max_len=5000, fast_attention=True):
    """Embeddings without the sqrt(d_model) factor."""
    model = _assemble(src_vocab, tgt_vocab, N, d_model, d_ff, h, dropout, norm_first,
                      share_embeddings, max_len, fast_attention, embeddings=EmbeddingsUnscaled)
    if tie_weights:
        model.generator.proj.weight = model.tgt_embed.lut.weight
    return model


def model_never_tied(src_vocab, tgt_vocab, N=6, d_model=512, d_ff=2048, h=8, dropout=0.1, *,
                     norm_first=False, share_embeddings=False, tie_weights=False, max_len=5000,
                     fast_attention=True):
    """Ignores ``tie_weights``: the generator keeps its own matrix."""
    return _assemble(src_vocab, tgt_vocab, N, d_model, d_ff, h, dropout, norm_first,
                     share_embeddings, max_len, fast_attention)


def model_tied_to_source(src_vocab, tgt_vocab, N=6, d_model=512, d_ff=2048, h=8, dropout=0.1,
                         *, norm_first=False, share_embeddings=False, tie_weights=False,
                         max_len=5000, fast_attention=True):
    """Ties the generator to the source embedding table."""
    model = _assemble(src_vocab, tgt_vocab, N, d_model, d_ff, h, dropout, norm_first,
                      share_embeddings, max_len, fast_attention)
    if tie_weights:
        model.generator.proj.weight = model.src_embed.lut.weight
    return model


def model_never_shared(src_vocab, tgt_vocab, N=6, d_model=512, d_ff=2048, h=8, dropout=0.1,
                       *, norm_first=False, share_embeddings=False, tie_weights=False,
                       max_len=5000, fast_attention=True):
    """Ignores ``share_embeddings``: source and target keep separate tables."""
    model = _assemble(src_vocab, tgt_vocab, N, d_model, d_ff, h, dropout, norm_first,
                      False, max_len, fast_attention)
    if tie_weights:
        model.generator.proj.weight = model.tgt_embed.lut.weight
    return model


def _with_dropout(model: EncoderDecoder, keep: str) -> EncoderDecoder:
    """``model`` with every nn.Dropout whose path does not match the pattern ``keep`` set to
    p = 0 (the model is built with the dropout argument everywhere)."""
    import re

    for name, module in model.named_modules():
        if isinstance(module, nn.Dropout) and not re.search(keep, name):
            module.p = 0.0
    return model


def _model_keeping_dropout(keep: str):
    """A make_model whose dropout acts only where the module path matches ``keep``."""
    def make_model(src_vocab, tgt_vocab, N=6, d_model=512, d_ff=2048, h=8, dropout=0.1, *,
                   norm_first=False, share_embeddings=False, tie_weights=False, max_len=5000,
                   fast_attention=True):
        model = _assemble(src_vocab, tgt_vocab, N, d_model, d_ff, h, dropout, norm_first,
                          share_embeddings, max_len, fast_attention)
        if tie_weights:
            model.generator.proj.weight = model.tgt_embed.lut.weight
        return _with_dropout(model, keep)

    return make_model


# Valid: the paper's places only (embeddings plus positions, each layer's sub-layer outputs).
model_paper_dropout_only = _model_keeping_dropout(r"^pos_encoding|layers\.\d+\.dropout$")
# Bugs: no dropout on the embeddings plus positions; none on the sub-layer outputs.
model_no_positional_dropout = _model_keeping_dropout(r"layers\.")
model_no_residual_dropout = _model_keeping_dropout(r"^pos_encoding|attn|feed_forward")


class PositionsAlwaysDropped(PositionalEncoding):
    """F.dropout without the training flag: it drops in eval mode too."""

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x + self.pe[:, : x.size(1)].to(x.dtype), self.dropout.p)


def model_dropout_in_eval(src_vocab, tgt_vocab, N=6, d_model=512, d_ff=2048, h=8, dropout=0.1,
                          *, norm_first=False, share_embeddings=False, tie_weights=False,
                          max_len=5000, fast_attention=True):
    """Its positional encoding keeps dropping after model.eval()."""
    model = _assemble(src_vocab, tgt_vocab, N, d_model, d_ff, h, dropout, norm_first,
                      share_embeddings, max_len, fast_attention)
    model.pos_encoding = PositionsAlwaysDropped(d_model, dropout, max_len)
    if tie_weights:
        model.generator.proj.weight = model.tgt_embed.lut.weight
    return model


def model_default_init(src_vocab, tgt_vocab, N=6, d_model=512, d_ff=2048, h=8, dropout=0.1, *,
                       norm_first=False, share_embeddings=False, tie_weights=False,
                       max_len=5000, fast_attention=True):
    """Keeps PyTorch's default initialisation (N(0, 1) embeddings)."""
    _require_one_vocabulary(share_embeddings, src_vocab, tgt_vocab)
    args = (d_model, h, d_ff, dropout, norm_first, fast_attention)
    tgt_embed = Embeddings(tgt_vocab, d_model)
    model = EncoderDecoder(
        Encoder(N, *args), Decoder(N, *args),
        tgt_embed if share_embeddings else Embeddings(src_vocab, d_model), tgt_embed,
        PositionalEncoding(d_model, dropout, max_len), Generator(d_model, tgt_vocab),
    )
    if tie_weights:
        model.generator.proj.weight = model.tgt_embed.lut.weight
    return model


def model_fixed_dropout(src_vocab, tgt_vocab, N=6, d_model=512, d_ff=2048, h=8, dropout=0.1,
                        *, norm_first=False, share_embeddings=False, tie_weights=False,
                        max_len=5000, fast_attention=True):
    """Ignores the ``dropout`` argument and always uses 0.1."""
    model = _assemble(src_vocab, tgt_vocab, N, d_model, d_ff, h, 0.1, norm_first,
                      share_embeddings, max_len, fast_attention)
    if tie_weights:
        model.generator.proj.weight = model.tgt_embed.lut.weight
    return model


def model_post_ln_always(src_vocab, tgt_vocab, N=6, d_model=512, d_ff=2048, h=8, dropout=0.1,
                         *, norm_first=False, share_embeddings=False, tie_weights=False,
                         max_len=5000, fast_attention=True):
    """Forgets to pass ``norm_first`` on to the encoder and decoder."""
    model = _assemble(src_vocab, tgt_vocab, N, d_model, d_ff, h, dropout, False,
                      share_embeddings, max_len, fast_attention)
    if tie_weights:
        model.generator.proj.weight = model.tgt_embed.lut.weight
    return model


def model_keyword_assembly(src_vocab, tgt_vocab, N=6, d_model=512, d_ff=2048, h=8,
                           dropout=0.1, *, norm_first=False, share_embeddings=False,
                           tie_weights=False, max_len=5000, fast_attention=True):
    """Ties before initialising and names every constructor argument."""
    _require_one_vocabulary(share_embeddings, src_vocab, tgt_vocab)
    layer = dict(d_model=d_model, h=h, d_ff=d_ff, dropout=dropout, norm_first=norm_first,
                 fast_attention=fast_attention)
    src_embed = Embeddings(vocab=src_vocab, d_model=d_model)
    tgt_embed = src_embed if share_embeddings else Embeddings(vocab=tgt_vocab, d_model=d_model)
    generator = Generator(d_model=d_model, vocab=tgt_vocab)
    if tie_weights:
        generator.proj.weight = tgt_embed.lut.weight
    model = EncoderDecoder(
        generator=generator, tgt_embed=tgt_embed, src_embed=src_embed,
        decoder=Decoder(n_layers=N, **layer), encoder=Encoder(n_layers=N, **layer),
        pos_encoding=PositionalEncoding(d_model=d_model, dropout=dropout, max_len=max_len),
    )
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    return model


def model_named_init(src_vocab, tgt_vocab, N=6, d_model=512, d_ff=2048, h=8, dropout=0.1, *,
                     norm_first=False, share_embeddings=False, tie_weights=False, max_len=5000,
                     fast_attention=True):
    """Initialises with Xavier-normal weights, chosen by parameter name."""
    model = _assemble(src_vocab, tgt_vocab, N, d_model, d_ff, h, dropout, norm_first,
                      share_embeddings, max_len, fast_attention)
    for name, p in model.named_parameters():
        if name.endswith("weight") and "norm" not in name:
            nn.init.xavier_normal_(p)
    if tie_weights:
        model.generator.proj.weight = model.tgt_embed.lut.weight
    return model


def model_shares_any_vocabulary(src_vocab, tgt_vocab, N=6, d_model=512, d_ff=2048, h=8,
                                dropout=0.1, *, norm_first=False, share_embeddings=False,
                                tie_weights=False, max_len=5000, fast_attention=True):
    """Shares the target table even when the vocabularies differ, without a word."""
    if share_embeddings and src_vocab != tgt_vocab:
        src_vocab = tgt_vocab
    return model_keyword_assembly(src_vocab, tgt_vocab, N, d_model, d_ff, h, dropout,
                                  norm_first=norm_first, share_embeddings=share_embeddings,
                                  tie_weights=tie_weights, max_len=max_len,
                                  fast_attention=fast_attention)


def model_positional_signature(src_vocab, tgt_vocab, N=6, d_model=512, d_ff=2048, h=8,
                               dropout=0.1):
    """The paper's arguments only: no norm_first, sharing, tying or max_len."""
    return model_keyword_assembly(src_vocab, tgt_vocab, N, d_model, d_ff, h, dropout)


MUTANTS = [
    Mutant(SHIFT, "shift left", shift_left, False, "shifted left"),
    Mutant(SHIFT, "keeps the last column", shift_keeps_last_column, False, "drop the last"),
    Mutant(SHIFT, "overwrites the first token", shift_overwrites_first, False, "overwritten"),
    Mutant(SHIFT, "ignores bos_id", shift_ignores_bos_id, False, "bos_id"),
    Mutant(SHIFT, "shifts in place", shift_in_place, False, "in place"),
    Mutant(SHIFT, "float BOS column", shift_float_bos_column, False,
           "expected a int64 tensor of ids", every_secret=True),
    Mutant(SHIFT, "torch.roll", shift_roll, True),
    Mutant(SHIFT, "F.pad", shift_pad, True),
    Mutant(SHIFT, "slice assignment", shift_slice_assign, True),
    Mutant(TGT_MASK, "forgets padding", mask_causal_only, False, "padding"),
    Mutant(TGT_MASK, "forgets causality", mask_padding_only, False, "future"),
    Mutant(TGT_MASK, "excludes the diagonal", mask_strictly_lower, False, "diagonal"),
    Mutant(TGT_MASK, "upper triangle", mask_upper_triangle, False, "triu"),
    Mutant(TGT_MASK, "masks query rows", mask_pads_queries, False, "key"),
    Mutant(TGT_MASK, "no head axis", mask_without_head_axis, False, "(B, 1, T, T)"),
    Mutant(TGT_MASK, "ignores pad_id", mask_ignores_pad_id, False, "pad_id"),
    Mutant(TGT_MASK, "0/1 float mask", mask_float_causal, False,
           "the 0s and 1s are in the right places", every_secret=True),
    Mutant(TGT_MASK, "arange comparison", mask_arange, True),
    Mutant(TGT_MASK, "loops", mask_loops, True),
    Mutant(EMBEDDINGS, "no scaling", EmbeddingsUnscaled, False, "sqrt(d_model)"),
    Mutant(EMBEDDINGS, "scaled by d_model", EmbeddingsScaledByDModel, False, "square root"),
    Mutant(EMBEDDINGS, "divided by sqrt(d_model)", EmbeddingsDivided, False, "multiply"),
    Mutant(EMBEDDINGS, "scaled by sqrt(vocab)", EmbeddingsScaledByVocab, False, "vocab"),
    Mutant(EMBEDDINGS, "adds positions", EmbeddingsWithPositions, False, "positional"),
    Mutant(EMBEDDINGS, "F.embedding", EmbeddingsFunctional, True),
    Mutant(EMBEDDINGS, "indexing and a buffer", EmbeddingsIndexing, True),
    Mutant(LAYER, "no causal mask", LayerNoCausalMask, False, "future"),
    Mutant(LAYER, "cross-attention over the decoder", LayerCrossFromDecoder, False,
           "keys and values from the encoder output memory"),
    Mutant(LAYER, "cross-attention over the decoder, source mask", LayerCrossFromDecoderSrcMask,
           False, "one column per target position", every_secret=True),
    Mutant(LAYER, "no dropout on the sub-layer outputs", LayerNoResidualDropout, False,
           "the sub-layer outputs get no dropout", every_secret=True),
    Mutant(LAYER, "dropout after the norm", LayerDropoutAfterNorm, False,
           "dropout acts after the layer norm", every_secret=True),
    Mutant(LAYER, "attentions without dropout", LayerAttentionsWithoutDropout, True),
    Mutant(LAYER, "dropout twice on the sub-layer outputs", LayerDropoutTwice, False,
           "dropout acts twice on each sub-layer's output"),
    Mutant(LAYER, "F.dropout on the sub-layer outputs", LayerFunctionalDropout, True),
    Mutant(LAYER, "no source mask", LayerNoSourceMask, False, "src_mask"),
    Mutant(LAYER, "always post-LN", LayerAlwaysPostLN, False, "norm_first"),
    Mutant(LAYER, "norm order swapped", LayerNormOrderSwapped, False, "norm_first"),
    Mutant(LAYER, "cross-attention first", LayerCrossBeforeSelf, False, "order"),
    Mutant(LAYER, "norms swapped", LayerNormsSwapped, False, "norm1"),
    Mutant(LAYER, "no residual around the feed-forward network", LayerNoFeedForwardResidual,
           False, "the feed-forward step has no residual connection", every_secret=True),
    Mutant(LAYER, "written out, math attention", LayerExplicit, True),
    Mutant(LAYER, "keyword calls in a loop", LayerKeywordCalls, True),
    Mutant(MODEL, "softmax in the generator", model_softmax_generator, False, "logits"),
    Mutant(MODEL, "log-softmax in the generator", model_log_softmax_generator, False, "logits"),
    Mutant(MODEL, "unscaled embeddings", model_unscaled_embeddings, False, "sqrt(d_model)"),
    Mutant(MODEL, "never tied", model_never_tied, False, "tie_weights"),
    Mutant(MODEL, "tied to the source table", model_tied_to_source, False, "tgt_embed"),
    Mutant(MODEL, "never shared", model_never_shared, False, "share_embeddings"),
    Mutant(MODEL, "default initialisation", model_default_init, False, "Xavier"),
    Mutant(MODEL, "dropout ignored", model_fixed_dropout, False, "dropout"),
    Mutant(MODEL, "no dropout on the embeddings plus positions", model_no_positional_dropout,
           False, "the sums of the embeddings and the positional encodings get no dropout"),
    Mutant(MODEL, "no dropout on the sub-layer outputs", model_no_residual_dropout, False,
           "the sub-layer outputs get no dropout"),
    Mutant(MODEL, "the paper's dropout only", model_paper_dropout_only, True),
    Mutant(MODEL, "positional dropout in eval mode", model_dropout_in_eval, False,
           "still active after model.eval()"),
    Mutant(MODEL, "norm_first not passed on", model_post_ln_always, False, "norm_first"),
    Mutant(MODEL, "shared embeddings for two vocabularies", model_shares_any_vocabulary, False,
           "should raise ValueError (share_embeddings=True needs one vocabulary",
           every_secret=True),
    Mutant(MODEL, "signature without the keyword arguments", model_positional_signature, False,
           "make_model must accept the arguments of make_model(src_vocab", every_secret=True),
    Mutant(MODEL, "keyword assembly, tie before init", model_keyword_assembly, True),
    Mutant(MODEL, "Xavier-normal by name", model_named_init, True),
]
