"""Correct answers of the sample class's learners, each written in that learner's own way.

An honest learner does not hand in the course's solution: each writes the exercise in their
own words, so that copy detection (:mod:`autograder.copies.detect`) has nothing to find
between them or against the course's code. :data:`OWN_WORK` maps a learner and an exercise to
the function of this module that is their answer; :func:`autograder.demo.sample_class.work`
pastes its source into the learner's notebook under the exercise's name. The functions call
``softmax`` and ``layer_norm`` as a learner's notebook does: the learner's own, from an
earlier cell. Chapter 11's answers use what that chapter's setup cell imports
(``MultiHeadAttention``, ``EncoderLayer``, ``subsequent_mask``, ...) and, for a language model
of the learner's own blocks, the learner's ``DecoderOnlyBlock``; an answer whose cell holds a
helper of its own lists it in :data:`CELL_HELPERS`.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from transformer_ref.model.basic_masks import subsequent_mask
from transformer_ref.model.embeddings import Embeddings
from transformer_ref.model.encoder_layer import EncoderLayer
from transformer_ref.model.generator import Generator
from transformer_ref.model.learned_positional import LearnedPositionalEncoding
from transformer_ref.model.lm_block import (
    DecoderOnlyBlock,  # a learner's own block, in the notebook
)
from transformer_ref.modules import MultiHeadAttention, PositionwiseFeedForward, residual


def softmax(x, axis=-1):  # the notebook's own softmax, for the attention answers below
    x = np.asarray(x)
    shifted = np.exp(x - x.max(axis=axis, keepdims=True))
    return shifted / shifted.sum(axis=axis, keepdims=True)


def layer_norm(x, gamma=None, beta=None, eps=1e-5):  # the notebook's own, as above
    x = np.asarray(x)
    centred = x - x.mean(axis=-1, keepdims=True)
    out = centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + eps)
    return out * (1 if gamma is None else gamma) + (0 if beta is None else beta)


# --- ada: methods of the array, one step per line ---------------------------------------------


def softmax_ada(x, axis=-1):
    z = np.asarray(x)
    z = z - z.max(axis=axis, keepdims=True)
    numerators = np.exp(z)
    return numerators / numerators.sum(axis=axis, keepdims=True)


def causal_mask_ada(n):
    return np.tril(np.ones((n, n), dtype=bool))


def padding_mask_ada(lengths, max_len):
    lengths = np.asarray(lengths)
    return (np.arange(max_len) < lengths[:, None])[:, None, :]


def sdpa_ada(q, k, v, mask=None):
    d = q.shape[-1]
    logits = np.matmul(q, np.swapaxes(k, -2, -1)) / math.sqrt(d)
    if mask is not None:
        logits = np.where(np.asarray(mask).astype(bool), logits, -np.inf)
    attn = softmax(logits, axis=-1)
    return np.matmul(attn, v), attn


def layer_norm_ada(x, gamma=None, beta=None, eps=1e-5):
    x = np.asarray(x)
    mu = x.mean(axis=-1, keepdims=True)
    sq = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    y = (x - mu) / np.sqrt(sq + eps)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y


def feed_forward_ada(x, W1, b1, W2, b2):
    inner = np.maximum(0, x @ W1 + b1)
    return inner @ W2 + b2


def add_and_norm_ada(x, sublayer_out, gamma, beta, eps=1e-5):
    return layer_norm(x + sublayer_out, gamma, beta, eps)


# --- cleo: NumPy's named functions ----------------------------------------------------------


def softmax_cleo(x, axis=-1):
    peak = np.amax(x, axis=axis, keepdims=True)
    e = np.exp(np.subtract(x, peak))
    total = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, total)


def causal_mask_cleo(n):
    rows = np.arange(n)
    return rows[:, np.newaxis] >= rows[np.newaxis, :]


def layer_norm_cleo(x, gamma=None, beta=None, eps=1e-5):
    x = np.asarray(x)
    width = x.shape[-1]
    average = np.sum(x, axis=-1, keepdims=True) / width
    spread = np.sum(np.square(x - average), axis=-1, keepdims=True) / width
    result = np.subtract(x, average) / np.sqrt(np.add(spread, eps))
    scale = np.ones(width, dtype=x.dtype) if gamma is None else gamma
    shift = np.zeros(width, dtype=x.dtype) if beta is None else beta
    return result * scale + shift


# --- dev: everything in one expression where it fits ----------------------------------------


def softmax_dev(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def sdpa_dev(q, k, v, mask=None):
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = np.einsum("...qd,...kd->...qk", q, k) * scale
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores)
    return np.einsum("...qk,...kd->...qd", weights, v), weights


def layer_norm_dev(x, gamma=None, beta=None, eps=1e-5):
    x = np.asarray(x)
    out = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    return out if gamma is None and beta is None else out * (
        1 if gamma is None else gamma) + (0 if beta is None else beta)


# --- hana: the axis moved to the end first --------------------------------------------------


def softmax_hana(x, axis=-1):
    a = np.moveaxis(np.asarray(x), axis, -1)
    a = np.exp(a - a.max(-1)[..., None])
    return np.moveaxis(a / a.sum(-1)[..., None], -1, axis)


def causal_mask_hana(n):
    return ~np.triu(np.ones((n, n), dtype=bool), k=1)


def padding_mask_hana(lengths, max_len):
    index = np.arange(max_len).reshape(1, 1, -1)
    return index < np.asarray(lengths).reshape(-1, 1, 1)


def sdpa_hana(q, k, v, mask=None):
    scores = q @ k.swapaxes(-1, -2) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = np.where(np.asarray(mask) == 0, -np.inf, scores)
    w = softmax(scores, axis=-1)
    return w @ v, w


def layer_norm_hana(x, gamma=None, beta=None, eps=1e-5):
    x = np.asarray(x)
    m = x.mean(-1)[..., None]
    s = np.sqrt(np.square(x - m).sum(-1)[..., None] / x.shape[-1] + eps)
    z = (x - m) / s
    z = z if gamma is None else z * gamma
    return z if beta is None else z + beta


# --- kim: a learner who names every intermediate ----------------------------------------------


def layer_norm_kim(x, gamma=None, beta=None, eps=1e-5):
    values = np.asarray(x)
    feature_mean = np.mean(values, axis=-1, keepdims=True)
    deviations = values - feature_mean
    feature_variance = np.mean(deviations * deviations, axis=-1, keepdims=True)
    standardised = deviations / np.sqrt(feature_variance + eps)
    if gamma is not None:
        standardised = standardised * gamma
    return standardised if beta is None else standardised + beta


def feed_forward_kim(x, W1, b1, W2, b2):
    pre_activation = np.matmul(x, W1) + b1
    activation = np.where(pre_activation > 0, pre_activation, 0)
    return np.matmul(activation, W2) + b2


def add_and_norm_kim(x, sublayer_out, gamma, beta, eps=1e-5):
    residual_sum = x + sublayer_out
    return layer_norm(residual_sum, gamma=gamma, beta=beta, eps=eps)


# --- chapter 11 (PyTorch): ada writes every step out, cleo loops over the steps, dev keeps
# the chapter's helpers ---------------------------------------------------------------------


class DecoderOnlyBlock_ada(nn.Module):  # noqa: N801 (named after its learner, as above)
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.norm2 = nn.LayerNorm(d_model)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        n = x.shape[1]
        allowed = torch.tril(torch.ones(n, n, dtype=torch.bool, device=x.device))
        h = self.norm1(x)
        h = self.self_attn(h, h, h, allowed)
        x = x + self.dropout(h)
        h = self.feed_forward(self.norm2(x))
        return x + self.dropout(h)


class LanguageModel_ada(nn.Module):  # noqa: N801
    def __init__(self, vocab, N=6, d_model=512, d_ff=2048, h=8, dropout=0.1, max_len=256,
                 tie_weights=True):
        super().__init__()
        self.max_len = max_len
        self.embed = Embeddings(vocab, d_model)
        self.pos_encoding = LearnedPositionalEncoding(d_model, dropout, max_len)
        blocks = []
        for _ in range(N):
            blocks.append(EncoderLayer(d_model, h, d_ff, dropout, norm_first=True))
        self.layers = nn.ModuleList(blocks)
        self.norm = nn.LayerNorm(d_model)
        self.generator = Generator(d_model, vocab)
        for _, weight in self.named_parameters():
            if weight.ndim >= 2:
                nn.init.xavier_uniform_(weight)
        if tie_weights:
            self.generator.proj.weight = self.embed.lut.weight

    def forward(self, ids):
        n = ids.shape[1]
        causal = torch.tril(torch.ones(n, n, dtype=torch.bool, device=ids.device))
        h = self.pos_encoding(self.embed(ids))
        for block in self.layers:
            h = block(h, causal)
        return self.generator(self.norm(h))


def pick_next_ada(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    scores = logits / temperature
    if top_k is not None and top_k < scores.shape[-1]:
        kth_best = torch.topk(scores, top_k, dim=-1).values[..., -1, None]
        scores = torch.where(scores < kth_best, torch.full_like(scores, -math.inf), scores)
    if top_p is not None and top_p < 1.0:
        ranked, index = torch.sort(F.softmax(scores, dim=-1), dim=-1, descending=True)
        mass_before = torch.cumsum(ranked, dim=-1) - ranked
        cut = torch.zeros_like(scores, dtype=torch.bool).scatter(-1, index, mass_before >= top_p)
        scores = scores.masked_fill(cut, -math.inf)
    return torch.multinomial(F.softmax(scores, dim=-1), num_samples=1, generator=generator)


pick_next = pick_next_ada  # what sample_ada calls: the name its cell gives it


@torch.no_grad()
def sample_ada(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None, top_p=None,
               generator=None):
    out = prompt_ids
    for _ in range(max_new_tokens):
        window = out[:, -model.max_len:]
        last = model(window)[:, -1]
        out = torch.cat((out, pick_next(last, temperature, top_k, top_p, generator)), dim=1)
    return out


class KeyValueCache_ada:  # noqa: N801
    def __init__(self, model):
        self.model = model
        self.length = 0
        self.cached = [(None, None) for _ in model.layers]

    @staticmethod
    def heads(t, attention):
        return t.view(t.shape[0], t.shape[1], attention.h, attention.d_k).permute(0, 2, 1, 3)

    def __call__(self, ids):
        m, (batch, new) = self.model, ids.shape
        h = m.pos_encoding(m.embed(ids), start=self.length)
        total = self.length + new
        query_pos = torch.arange(self.length, total, device=ids.device)
        visible = torch.arange(total, device=ids.device)[None, :] <= query_pos[:, None]
        for index, block in enumerate(m.layers):
            att = block.self_attn
            y = block.norm1(h)
            keys, values = att.w_k(y), att.w_v(y)  # kept before the heads are split
            old_keys, old_values = self.cached[index]
            if old_keys is not None:
                keys = torch.cat((old_keys, keys), dim=1)
                values = torch.cat((old_values, values), dim=1)
            self.cached[index] = (keys, values)
            scores = self.heads(att.w_q(y), att) @ self.heads(keys, att).transpose(-1, -2)
            weights = (scores / math.sqrt(att.d_k)).masked_fill(~visible, -math.inf)
            mixed = weights.softmax(dim=-1) @ self.heads(values, att)
            h = h + block.dropout(att.w_o(mixed.permute(0, 2, 1, 3).reshape(batch, new, -1)))
            h = h + block.dropout(block.feed_forward(block.norm2(h)))
        self.length = total
        return m.generator(m.norm(h))

    def reorder(self, rows):
        self.cached = [(None, None) if k is None else (k[rows], v[rows]) for k, v in self.cached]


class DecoderOnlyBlock_cleo(nn.Module):  # noqa: N801
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(p=dropout)

    def attend(self, y):
        size = y.size(1)
        future = torch.triu(torch.ones(size, size, device=y.device), diagonal=1).bool()
        return self.self_attn(y, y, y, ~future)

    def forward(self, x):
        for sublayer, norm in ((self.attend, self.norm1), (self.feed_forward, self.norm2)):
            x = residual(x, sublayer, norm, self.dropout, norm_first=True)
        return x


class LanguageModel_cleo(nn.Module):  # noqa: N801 (her own blocks)
    def __init__(self, vocab, N=6, d_model=512, d_ff=2048, h=8, dropout=0.1, max_len=256,
                 tie_weights=True):
        super().__init__()
        self.embed = Embeddings(vocab, d_model)
        self.pos_encoding = LearnedPositionalEncoding(d_model, dropout, max_len)
        self.layers = nn.ModuleList([DecoderOnlyBlock(d_model, h, d_ff, dropout)
                                     for i in range(N)])
        self.norm = nn.LayerNorm(d_model)
        self.generator = Generator(d_model, vocab)
        self.max_len = max_len
        self.apply(self.xavier)
        if tie_weights:
            self.generator.proj.weight = self.embed.lut.weight

    @staticmethod
    def xavier(module):
        for p in module.parameters(recurse=False):
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def forward(self, ids):
        x = self.pos_encoding(self.embed(ids))
        for block in self.layers:
            x = block(x)
        return self.generator(self.norm(x))


class LanguageModel_dev(nn.Module):  # noqa: N801
    def __init__(self, vocab, N=6, d_model=512, d_ff=2048, h=8, dropout=0.1, max_len=256,
                 tie_weights=True):
        super().__init__()
        self.embed = Embeddings(vocab, d_model)
        self.pos_encoding = LearnedPositionalEncoding(d_model, dropout, max_len)
        self.layers = nn.ModuleList()
        for _ in range(N):
            self.layers.append(EncoderLayer(d_model, h, d_ff, dropout, True))
        self.norm = nn.LayerNorm(d_model)
        self.generator = Generator(d_model, vocab)
        self.max_len = max_len
        matrices = [p for p in self.parameters() if p.dim() > 1]
        for p in matrices:
            nn.init.xavier_uniform_(p)
        if tie_weights:
            self.generator.proj.weight = self.embed.lut.weight

    def forward(self, ids):
        mask = subsequent_mask(ids.size(-1), device=ids.device)
        out = self.embed(ids)
        out = self.pos_encoding(out)
        for layer in self.layers:
            out = layer(out, mask)
        return self.generator(self.norm(out))


class KeyValueCache_dev:  # noqa: N801
    def __init__(self, model):
        self.model = model
        self.store = {}
        self.length = 0

    @staticmethod
    def split(t, attn):
        b, n, _ = t.shape
        return t.reshape(b, n, attn.h, attn.d_k).transpose(1, 2)

    def __call__(self, ids):
        model, start, count = self.model, self.length, ids.size(1)
        x = model.pos_encoding(model.embed(ids), start=start)
        mask = torch.ones(count, start + count, dtype=torch.bool, device=ids.device).tril(start)
        for i, layer in enumerate(model.layers):
            attn = layer.self_attn
            y = layer.norm1(x)
            q, k, v = (self.split(w(y), attn) for w in (attn.w_q, attn.w_k, attn.w_v))
            if i in self.store:
                k = torch.cat([self.store[i][0], k], dim=2)
                v = torch.cat([self.store[i][1], v], dim=2)
            self.store[i] = (k, v)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            x = x + layer.dropout(attn.w_o(out.transpose(1, 2).flatten(2)))
            x = x + layer.dropout(layer.feed_forward(layer.norm2(x)))
        self.length = start + count
        return model.generator(model.norm(x))

    def reorder(self, rows):
        self.store = {i: (k[rows], v[rows]) for i, (k, v) in self.store.items()}


# The definitions a learner's cell holds before the answer: answer -> (name in the cell, the
# function of this module).
CELL_HELPERS = {"sample_ada": (("pick_next", "pick_next_ada"),)}

# learner -> exercise -> the name of their answer in this module.
OWN_WORK: dict[str, dict[str, str]] = {
    learner: {exercise: f"{name}_{learner}" for exercise, name in names.items()
              if f"{name}_{learner}" in globals()}
    for learner, names in {
        person: {"ch02.softmax": "softmax", "ch02.causal_mask": "causal_mask",
                 "ch02.padding_mask": "padding_mask",
                 "ch02.scaled_dot_product_attention": "sdpa", "ch05.layer_norm": "layer_norm",
                 "ch05.feed_forward": "feed_forward", "ch05.add_and_norm": "add_and_norm",
                 "ch11.decoder_only_block": "DecoderOnlyBlock",
                 "ch11.language_model": "LanguageModel", "ch11.sample": "sample",
                 "ch11.key_value_cache": "KeyValueCache"}
        for person in ("ada", "cleo", "dev", "hana", "kim")}.items()
}
