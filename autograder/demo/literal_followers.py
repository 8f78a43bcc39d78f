"""Honest answers of learners who do exactly what an exercise's text says, line by line.

Where a notebook's exercise text names every attribute, every call and the order of the steps
(chapter 7's module constructors and residual steps, chapter 8's ``DecoderLayer`` with the
``residual`` helper, chapter 2's four steps of attention, chapter 11's block, model, sampler and
cache), a learner who follows it to the
letter writes the course's own answer, often token for token once names are set aside. These
learners (``literal-a``, and ``literal-b`` for a second reading of the same text) write each
exercise from its text: they use the names and calls the text gives and differ only where it
leaves a choice (``@`` or ``np.matmul``, an intermediate variable, ``torch.relu`` or
``F.relu``). Copy detection must not flag them, against the course's code or each other;
the exercises where they reach its threshold in normalised form are
:data:`autograder.copies.detect.DICTATED`, compared as written instead.

Each function or class stands in a learner's cell under the exercise's name
(:func:`autograder.demo.honest_styles.honest_source`); it calls what the chapter's notebook
imports or defines in earlier cells.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import transformer_ref.modules as ref
from transformer_ref.data.batching import pad_sequences
from transformer_ref.data.vocab import BOS_ID, PAD_ID
from transformer_ref.decoding import greedy_decode
from transformer_ref.masks import make_src_mask
from transformer_ref.model.basic_masks import subsequent_mask
from transformer_ref.model.decoder_layer import DecoderLayer
from transformer_ref.model.encoder_layer import EncoderLayer
from transformer_ref.model.learned_positional import LearnedPositionalEncoding
from transformer_ref.modules import (
    Decoder,
    Embeddings,
    Encoder,
    EncoderDecoder,
    Generator,
    MultiHeadAttention,
    PositionalEncoding,
    PositionwiseFeedForward,
    residual,
)
from transformer_ref.np_attention import multi_head_attention
from transformer_ref.np_layers import add_and_norm, encoder_block, feed_forward
from transformer_ref.numpy.heads import merge_heads, split_heads
from transformer_ref.numpy.positional import positional_encoding
from transformer_ref.numpy.scaled_attention import scaled_dot_product_attention, softmax
from transformer_ref.numpy.sublayers import layer_norm

# --- chapters 1 to 6 (NumPy) ------------------------------------------------------------------


def positional_encoding_literal_a(seq_len, d_model):
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even, got {d_model}")
    positions = np.arange(seq_len)
    omega = 1.0 / 10000 ** (2 * np.arange(d_model // 2) / d_model)
    angles = positions[:, None] * omega[None, :]
    pe = np.zeros((seq_len, d_model))
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)
    return pe.astype(np.float32)


def softmax_literal_a(x, axis=-1):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    exps = np.exp(shifted)
    return exps / np.sum(exps, axis=axis, keepdims=True)


def sdpa_literal_a(q, k, v, mask=None):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / d_k**0.5
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-1)
    return weights @ v, weights


def sdpa_literal_b(q, k, v, mask=None):
    d_k = q.shape[-1]
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / d_k**0.5
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores)
    output = np.matmul(weights, v)
    return output, weights


def attention_head_literal_a(x_q, x_kv, W_q, W_k, W_v, mask=None):
    q = x_q @ W_q
    k = x_kv @ W_k
    v = x_kv @ W_v
    return scaled_dot_product_attention(q, k, v, mask)


def merge_heads_literal_a(x):
    *lead, num_heads, seq, d_k = x.shape
    swapped = np.swapaxes(x, -3, -2)
    return swapped.reshape(*lead, seq, num_heads * d_k)


def mha_literal_a(x_q, x_kv, W_q, W_k, W_v, W_o, num_heads, mask=None):
    q = split_heads(x_q @ W_q, num_heads)
    k = split_heads(x_kv @ W_k, num_heads)
    v = split_heads(x_kv @ W_v, num_heads)
    if mask is not None:
        mask = np.expand_dims(mask, -3)
    heads, weights = scaled_dot_product_attention(q, k, v, mask)
    return merge_heads(heads) @ W_o, weights


def layer_norm_literal_a(x, gamma=None, beta=None, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    out = (x - mean) / np.sqrt(var + eps)
    if gamma is not None:
        out = out * gamma
    if beta is not None:
        out = out + beta
    return out


def feed_forward_literal_a(x, W1, b1, W2, b2):
    return np.maximum(0, x @ W1 + b1) @ W2 + b2


def add_and_norm_literal_a(x, sublayer_out, gamma, beta, eps=1e-5):
    return layer_norm(x + sublayer_out, gamma, beta, eps)


def encoder_block_literal_a(x, params, num_heads, mask=None):
    attn_out, _ = multi_head_attention(x, x, params["W_q"], params["W_k"], params["W_v"],
                                       params["W_o"], num_heads, mask)
    x = add_and_norm(x, attn_out, params["gamma1"], params["beta1"])
    ffn_out = feed_forward(x, params["W1"], params["b1"], params["W2"], params["b2"])
    return add_and_norm(x, ffn_out, params["gamma2"], params["beta2"])


def encoder_literal_a(tokens, embedding, layers, num_heads, mask=None):
    d_model = embedding.shape[-1]
    x = embedding[tokens] * math.sqrt(d_model)
    x = x + positional_encoding(x.shape[-2], d_model).astype(embedding.dtype)
    for params in layers:
        x = encoder_block(x, params, num_heads, mask)
    return x


# --- chapter 7 --------------------------------------------------------------------------------


class MultiHeadAttentionLiteralA(nn.Module):
    def __init__(self, d_model, h, dropout=0.0):
        super().__init__()
        self.h = h
        self.d_k = d_model // h
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        B = query.size(0)
        q = self.w_q(query).view(B, -1, self.h, self.d_k).transpose(1, 2)
        k = self.w_k(key).view(B, -1, self.h, self.d_k).transpose(1, 2)
        v = self.w_v(value).view(B, -1, self.h, self.d_k).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = self.dropout(scores.softmax(dim=-1))
        out = (weights @ v).transpose(1, 2).reshape(B, -1, self.h * self.d_k)
        return self.w_o(out)


class PositionwiseFeedForwardLiteralA(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.w_2(self.dropout(torch.relu(self.w_1(x))))


class PositionwiseFeedForwardLiteralB(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.w_2(self.dropout(F.relu(self.w_1(x))))


class PositionalEncodingLiteralA(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        pe = torch.tensor(positional_encoding(max_len, d_model))
        self.register_buffer("pe", pe.unsqueeze(0))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        L = x.size(1)
        return self.dropout(x + self.pe[:, :L])


class EncoderLayerLiteralA(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = ref.MultiHeadAttention(d_model, h, dropout)
        self.feed_forward = ref.PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, mask)))
        x = self.norm2(x + self.dropout(self.feed_forward(x)))
        return x


class EncoderLayerLiteralB(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = ref.MultiHeadAttention(d_model, h, dropout)
        self.feed_forward = ref.PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        attn = self.self_attn(x, x, x, mask)
        x = self.norm1(x + self.dropout(attn))
        ffn = self.feed_forward(x)
        return self.norm2(x + self.dropout(ffn))


# --- chapter 8 --------------------------------------------------------------------------------


def shift_right_literal_a(tgt, bos_id=BOS_ID):
    bos = torch.full_like(tgt[:, :1], bos_id)
    return torch.cat([bos, tgt[:, :-1]], dim=1)


def make_tgt_mask_literal_a(tgt_in, pad_id=PAD_ID):
    not_pad = (tgt_in != pad_id).view(tgt_in.size(0), 1, 1, tgt_in.size(1))
    causal = subsequent_mask(tgt_in.size(1), device=tgt_in.device)
    return not_pad & causal


class EmbeddingsLiteralA(nn.Module):
    def __init__(self, vocab, d_model):
        super().__init__()
        self.lut = nn.Embedding(vocab, d_model)
        self.factor = math.sqrt(d_model)

    def forward(self, ids):
        return self.lut(ids) * self.factor


class DecoderLayerLiteralA(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1, norm_first=False, fast_attention=True):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout, fast=fast_attention)
        self.cross_attn = MultiHeadAttention(d_model, h, dropout, fast=fast_attention)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x, memory, src_mask, tgt_mask):
        x = residual(x, lambda y: self.self_attn(y, y, y, tgt_mask), self.norm1, self.dropout,
                     self.norm_first)
        x = residual(x, lambda y: self.cross_attn(y, memory, memory, src_mask), self.norm2,
                     self.dropout, self.norm_first)
        x = residual(x, self.feed_forward, self.norm3, self.dropout, self.norm_first)
        return x


class DecoderLayerLiteralB(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1, norm_first=False, fast_attention=True):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout, fast=fast_attention)
        self.cross_attn = MultiHeadAttention(d_model, h, dropout, fast=fast_attention)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x, memory, src_mask, tgt_mask):
        x = residual(x, lambda y: self.self_attn(y, y, y, tgt_mask), self.norm1,
                     self.dropout, self.norm_first)
        x = residual(x, lambda y: self.cross_attn(y, memory, memory, src_mask), self.norm2,
                     self.dropout, self.norm_first)
        return residual(x, lambda y: self.feed_forward(y), self.norm3, self.dropout,
                        self.norm_first)


def make_model_literal_a(src_vocab, tgt_vocab, N=6, d_model=512, d_ff=2048, h=8, dropout=0.1,
                         *, norm_first=False, share_embeddings=False, tie_weights=False,
                         max_len=5000, fast_attention=True):
    if share_embeddings and src_vocab != tgt_vocab:
        raise ValueError(f"cannot share embeddings: {src_vocab} != {tgt_vocab}")
    encoder = Encoder(N, d_model, h, d_ff, dropout, norm_first, fast_attention)
    decoder = Decoder(N, d_model, h, d_ff, dropout, norm_first, fast_attention)
    src_embed = Embeddings(src_vocab, d_model)
    if share_embeddings:  # noqa: SIM108 (as the learner wrote it)
        tgt_embed = src_embed
    else:
        tgt_embed = Embeddings(tgt_vocab, d_model)
    pos_encoding = PositionalEncoding(d_model, dropout, max_len)
    generator = Generator(d_model, tgt_vocab)
    model = EncoderDecoder(encoder, decoder, src_embed, tgt_embed, pos_encoding, generator)
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    if tie_weights:
        model.generator.proj.weight = model.tgt_embed.lut.weight
    return model


def make_model_literal_b(src_vocab, tgt_vocab, N=6, d_model=512, d_ff=2048, h=8, dropout=0.1,
                         *, norm_first=False, share_embeddings=False, tie_weights=False,
                         max_len=5000, fast_attention=True):
    if share_embeddings and src_vocab != tgt_vocab:
        raise ValueError(f"share_embeddings needs one vocabulary, got src_vocab={src_vocab} "
                         f"and tgt_vocab={tgt_vocab}")
    src_embed = Embeddings(src_vocab, d_model)
    tgt_embed = src_embed if share_embeddings else Embeddings(tgt_vocab, d_model)
    model = EncoderDecoder(
        Encoder(N, d_model, h, d_ff, dropout, norm_first, fast_attention),
        Decoder(N, d_model, h, d_ff, dropout, norm_first, fast_attention, layer=DecoderLayer),
        src_embed, tgt_embed, PositionalEncoding(d_model, dropout, max_len),
        Generator(d_model, tgt_vocab))
    for param in model.parameters():
        if param.dim() > 1:
            nn.init.xavier_uniform_(param)
    if tie_weights:
        model.generator.proj.weight = model.tgt_embed.lut.weight
    return model


# --- chapters 9 and 10 ------------------------------------------------------------------------


class LabelSmoothingLossLiteralA(nn.Module):
    def __init__(self, vocab_size, pad_id=PAD_ID, smoothing=0.1):
        super().__init__()
        self.vocab_size = vocab_size
        self.pad_id = pad_id
        self.smoothing = smoothing

    def forward(self, logits, target):
        logits = logits.reshape(-1, self.vocab_size)
        target = target.reshape(-1)
        keep = target != self.pad_id
        log_probs = F.log_softmax(logits[keep], dim=-1).clamp(min=-100)
        q = torch.full(log_probs.shape, self.smoothing / (self.vocab_size - 2),
                       dtype=log_probs.dtype, device=log_probs.device)
        q.scatter_(1, target[keep].unsqueeze(1), 1 - self.smoothing)
        q[:, self.pad_id] = 0
        return -(q * log_probs).sum(dim=-1).mean()


def noam_rate_literal_a(step, d_model, warmup, factor=1.0):
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def translate_batched_literal_a(model, sources, max_len, batch_size=32, pad_id=PAD_ID,
                                decoder=greedy_decode):
    device = next(model.parameters()).device
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    results = [None] * len(sources)
    for start in range(0, len(order), batch_size):
        batch = order[start:start + batch_size]
        src = pad_sequences([sources[i] for i in batch], pad_id).to(device)
        src_mask = make_src_mask(src, pad_id)
        outputs = decoder(model, src, src_mask, max_len)
        for i, out in zip(batch, outputs):  # noqa: B905 (as the learner wrote it)
            results[i] = out
    return results


# --- chapter 11 -------------------------------------------------------------------------------


class DecoderOnlyBlockLiteralA(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        T = x.size(1)
        mask = subsequent_mask(T, device=x.device)
        x = residual(x, lambda y: self.self_attn(y, y, y, mask), self.norm1, self.dropout,
                     norm_first=True)
        x = residual(x, self.feed_forward, self.norm2, self.dropout, norm_first=True)
        return x


class DecoderOnlyBlockLiteralB(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        mask = subsequent_mask(x.size(1), device=x.device)
        y = self.norm1(x)
        x = x + self.dropout(self.self_attn(y, y, y, mask))
        x = x + self.dropout(self.feed_forward(self.norm2(x)))
        return x


class LanguageModelLiteralA(nn.Module):
    def __init__(self, vocab, N=6, d_model=512, d_ff=2048, h=8, dropout=0.1, max_len=256,
                 tie_weights=True):
        super().__init__()
        self.embed = Embeddings(vocab, d_model)
        self.pos_encoding = LearnedPositionalEncoding(d_model, dropout, max_len)
        self.layers = nn.ModuleList(
            [EncoderLayer(d_model, h, d_ff, dropout, norm_first=True) for _ in range(N)])
        self.norm = nn.LayerNorm(d_model)
        self.generator = Generator(d_model, vocab)
        self.max_len = max_len
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        if tie_weights:
            self.generator.proj.weight = self.embed.lut.weight

    def forward(self, ids):
        T = ids.size(1)
        mask = subsequent_mask(T, device=ids.device)
        x = self.embed(ids)
        x = self.pos_encoding(x)
        for layer in self.layers:
            x = layer(x, mask)
        x = self.norm(x)
        return self.generator(x)


def pick_next_literal_a(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    logits = logits / temperature
    if top_k is not None:
        threshold = torch.topk(logits, min(top_k, logits.size(-1)), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < threshold, float("-inf"))
    if top_p is not None:
        probs = torch.softmax(logits, dim=-1)
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        before = sorted_probs.cumsum(dim=-1) - sorted_probs
        remove = torch.zeros_like(before, dtype=torch.bool)
        remove.scatter_(-1, order, before >= top_p)
        logits = logits.masked_fill(remove, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs, 1, generator=generator)


# The cell of the sampling exercise defines pick_next first, and sample calls it by that name.
pick_next = pick_next_literal_a


@torch.no_grad()
def sample_literal_a(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None,
                     top_p=None, generator=None):
    ids = prompt_ids
    for _ in range(max_new_tokens):
        context = ids[:, -model.max_len:]
        logits = model(context)[:, -1, :]
        next_id = pick_next(logits, temperature, top_k, top_p, generator)
        ids = torch.cat([ids, next_id], dim=1)
    return ids


def pick_next_literal_b(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    logits = logits / temperature
    if top_k is not None and top_k < logits.size(-1):
        kth = torch.topk(logits, top_k).values[:, -1:]
        logits[logits < kth] = float("-inf")
    if top_p is not None and top_p < 1:
        sorted_probs, order = torch.sort(logits.softmax(dim=-1), descending=True)
        higher = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
        drop = torch.gather(higher >= top_p, -1, order.argsort(dim=-1))
        logits[drop] = float("-inf")
    return torch.multinomial(logits.softmax(dim=-1), 1, generator=generator)


@torch.no_grad()
def sample_literal_b(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None,
                     top_p=None, generator=None):
    ids = prompt_ids
    for _ in range(max_new_tokens):
        logits = model(ids[:, -model.max_len:])[:, -1, :]
        ids = torch.cat([ids, pick_next(logits, temperature, top_k, top_p, generator)], dim=1)
    return ids


class KeyValueCacheLiteralA:
    def __init__(self, model):
        self.model = model
        self.keys = [None] * len(model.layers)
        self.values = [None] * len(model.layers)
        self.length = 0

    def __call__(self, ids):
        model = self.model
        B, t = ids.shape
        x = model.pos_encoding(model.embed(ids), start=self.length)
        mask = torch.ones(t, self.length + t, dtype=torch.bool, device=ids.device)
        mask = mask.tril(self.length)
        for i, layer in enumerate(model.layers):
            attn = layer.self_attn
            y = layer.norm1(x)
            q = attn.w_q(y).view(B, t, attn.h, attn.d_k).transpose(1, 2)
            k = attn.w_k(y).view(B, t, attn.h, attn.d_k).transpose(1, 2)
            v = attn.w_v(y).view(B, t, attn.h, attn.d_k).transpose(1, 2)
            if self.keys[i] is not None:
                k = torch.cat([self.keys[i], k], dim=2)
                v = torch.cat([self.values[i], v], dim=2)
            self.keys[i] = k
            self.values[i] = v
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            out = out.transpose(1, 2).reshape(B, t, attn.h * attn.d_k)
            x = x + layer.dropout(attn.w_o(out))
            x = x + layer.dropout(layer.feed_forward(layer.norm2(x)))
        self.length += t
        return model.generator(model.norm(x))

    def reorder(self, rows):
        for i in range(len(self.keys)):
            if self.keys[i] is not None:
                self.keys[i] = self.keys[i].index_select(0, rows)
                self.values[i] = self.values[i].index_select(0, rows)
