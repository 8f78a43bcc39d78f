"""Honest answers that copy detection must leave alone, for its calibration and its tests.

Three kinds of learner write code that looks like the course's without copying it:

* learners who follow the notebook's hints step by step (``hint-a`` and ``hint-b``, written
  independently of each other): the hints name the functions, the attributes and the order of
  the steps, so their answers resemble each other and the course's solution;
* learners who know a well-known tutorial and write its structure with their own lines
  (``annotated``: the Annotated Transformer's ``clones``-free layers, its sublayer
  connection and its decoding loop), as ``autograder/demo/tutorial_style.py`` does with the
  course's lines;
* learners who do exactly what each exercise's text says, line by line (``literal-a`` and
  ``literal-b``, :mod:`autograder.demo.literal_followers`): where the text dictates the code
  they write the course's answer.

Each entry of :data:`HONEST` is correct (``tests/demo/test_honest_styles.py`` grades it) and
must not be flagged against the course's code or against the other entries
(``benchmarks/similarity_calibration.py`` measures how far below the threshold each stays).
:func:`honest_source` gives an entry's source as a learner's cell holds it: the definition
under the exercise's name, with its annotations and docstring.
"""

from __future__ import annotations

import ast
import inspect
import math
import textwrap
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from autograder.demo import literal_followers as literal
from transformer_ref.data.vocab import BOS_ID, EOS_ID
from transformer_ref.model.attention import MultiHeadAttention
from transformer_ref.model.basic_masks import subsequent_mask
from transformer_ref.model.sublayers import PositionwiseFeedForward, residual
from transformer_ref.numpy.heads import merge_heads, split_heads
from transformer_ref.numpy.scaled_attention import scaled_dot_product_attention, softmax


@dataclass(frozen=True)
class Honest:
    """One honest answer: the exercise, who wrote it, how, and the function or class (after
    ``helpers``, the definitions its cell holds before it: name and function)."""

    exercise: str
    learner: str
    style: str
    answer: Any
    helpers: tuple[tuple[str, Any], ...] = ()

    @property
    def id(self) -> str:
        return f"{self.exercise}: {self.learner}"


def honest_source(entry: Honest) -> str:
    """The answer's cell: its helpers, then its definition, each renamed (the answer to the
    exercise's name)."""
    from autograder.exercises.registry import get_exercise

    parts = []
    for name, definition in (*entry.helpers, (get_exercise(entry.exercise).defines,
                                              entry.answer)):
        tree = ast.parse(textwrap.dedent(inspect.getsource(definition)))
        tree.body[0].name = name
        parts.append(ast.unparse(tree) + "\n")
    return "\n\n".join(parts)


# --- chapter 2 and 4 (NumPy), following the hints -------------------------------------------


def sdpa_hint_a(q, k, v, mask=None):
    """Scores, mask, softmax, weighted sum: the four steps of the notebook."""
    d_k = q.shape[-1]
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(d_k)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-1)
    output = np.matmul(weights, v)
    return output, weights


def sdpa_hint_b(q, k, v, mask=None):
    keys_t = k.swapaxes(-2, -1)
    scaled = (q @ keys_t) * (1 / q.shape[-1] ** 0.5)
    if mask is not None:
        scaled = np.where(np.asarray(mask, dtype=bool), scaled, -np.inf)
    attention = softmax(scaled)
    return attention @ v, attention


def split_heads_hint_a(x, num_heads):
    *lead, seq, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_k = d_model // num_heads
    return np.swapaxes(x.reshape(*lead, seq, num_heads, d_k), -2, -3)


def split_heads_hint_b(x, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads != 0:
        raise ValueError(f"cannot split d_model {d_model} into {num_heads} heads")
    heads = x.reshape(x.shape[:-1] + (num_heads, d_model // num_heads))
    return heads.swapaxes(-3, -2)


def mha_hint_a(x_q, x_kv, W_q, W_k, W_v, W_o, num_heads, mask=None):
    Q = split_heads(x_q @ W_q, num_heads)
    K = split_heads(x_kv @ W_k, num_heads)
    V = split_heads(x_kv @ W_v, num_heads)
    if mask is not None:
        mask = np.asarray(mask)[..., None, :, :]
    heads, weights = scaled_dot_product_attention(Q, K, V, mask)
    return merge_heads(heads) @ W_o, weights


def mha_hint_b(x_q, x_kv, W_q, W_k, W_v, W_o, num_heads, mask=None):
    head_mask = None if mask is None else np.expand_dims(mask, axis=-3)
    out, attn = scaled_dot_product_attention(
        split_heads(np.matmul(x_q, W_q), num_heads),
        split_heads(np.matmul(x_kv, W_k), num_heads),
        split_heads(np.matmul(x_kv, W_v), num_heads),
        head_mask,
    )
    return np.matmul(merge_heads(out), W_o), attn


# --- chapter 7 (PyTorch) ----------------------------------------------------------------------


class MultiHeadAttentionHintA(nn.Module):
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
        att = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.d_k)
        if mask is not None:
            att = att.masked_fill(mask == 0, float("-inf"))
        att = self.dropout(F.softmax(att, dim=-1))
        y = torch.matmul(att, v).transpose(1, 2).contiguous().view(B, -1, self.h * self.d_k)
        return self.w_o(y)


class MultiHeadAttentionHintB(nn.Module):
    def __init__(self, d_model, h, dropout=0.0):
        super().__init__()
        self.w_q, self.w_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.w_v, self.w_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)
        self.h, self.d_k = h, d_model // h

    def _heads(self, t):
        b, n, _ = t.shape
        return t.reshape(b, n, self.h, self.d_k).permute(0, 2, 1, 3)

    def forward(self, query, key, value, mask=None):
        q, k, v = self._heads(self.w_q(query)), self._heads(self.w_k(key)), self._heads(
            self.w_v(value))
        logits = q @ k.transpose(-1, -2) * self.d_k**-0.5
        if mask is not None:
            logits = torch.where(mask, logits, torch.full_like(logits, float("-inf")))
        probs = self.dropout(logits.softmax(-1))
        merged = (probs @ v).permute(0, 2, 1, 3).reshape(query.shape)
        return self.w_o(merged)


class MultiHeadAttentionAnnotated(nn.Module):
    """The Annotated Transformer's layout: one attention function, a loop over the three
    input projections, heads merged with ``contiguous().view``; the learner's own lines."""

    def __init__(self, d_model, h, dropout=0.0):
        super().__init__()
        assert d_model % h == 0
        self.d_k = d_model // h
        self.h = h
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(p=dropout)

    @staticmethod
    def attend(q, k, v, mask, dropout):
        raw = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.size(-1))
        if mask is not None:
            raw = raw.masked_fill(mask.logical_not(), -math.inf)
        p = dropout(raw.softmax(dim=-1))
        return torch.einsum("bhqk,bhkd->bhqd", p, v)

    def forward(self, query, key, value, mask=None):
        n_batch = query.size(0)
        projected = []
        for layer, inputs in ((self.w_q, query), (self.w_k, key), (self.w_v, value)):
            projected.append(layer(inputs).view(n_batch, -1, self.h, self.d_k).transpose(1, 2))
        context = self.attend(*projected, mask, self.dropout)
        context = context.transpose(1, 2).contiguous().view(n_batch, -1, self.h * self.d_k)
        return self.w_o(context)


class PositionwiseFeedForwardAnnotated(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        hidden = self.w_1(x).relu()
        return self.w_2(self.dropout(hidden))


# --- chapter 8 --------------------------------------------------------------------------------


class DecoderLayerHintA(nn.Module):
    """The hints' three residual steps with the notebook's ``residual`` helper, each sub-layer a
    small function of its own."""

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
        def masked_self_attention(t):
            return self.self_attn(t, t, t, tgt_mask)

        def encoder_attention(t):
            return self.cross_attn(t, memory, memory, src_mask)

        steps = [(masked_self_attention, self.norm1), (encoder_attention, self.norm2),
                 (self.feed_forward, self.norm3)]
        for sublayer, norm in steps:
            x = residual(x, sublayer, norm, self.dropout, self.norm_first)
        return x


class DecoderLayerHintB(nn.Module):
    """The residual steps written out, post-LN and pre-LN."""

    def __init__(self, d_model, h, d_ff, dropout=0.1, norm_first=False, fast_attention=True):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout, fast=fast_attention)
        self.cross_attn = MultiHeadAttention(d_model, h, dropout, fast=fast_attention)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model), nn.LayerNorm(d_model),
                                              nn.LayerNorm(d_model))
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x, memory, src_mask, tgt_mask):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout(self.self_attn(y, y, y, tgt_mask))
            y = self.norm2(x)
            x = x + self.dropout(self.cross_attn(y, memory, memory, src_mask))
            return x + self.dropout(self.feed_forward(self.norm3(x)))
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, tgt_mask)))
        x = self.norm2(x + self.dropout(self.cross_attn(x, memory, memory, src_mask)))
        return self.norm3(x + self.dropout(self.feed_forward(x)))


class DecoderLayerAnnotated(nn.Module):
    """The Annotated Transformer's sublayer connection, as a method, with the course's
    post-LN default and names."""

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

    def sublayer(self, x, norm, fn):
        if self.norm_first:
            return x + self.dropout(fn(norm(x)))
        return norm(x + self.dropout(fn(x)))

    def forward(self, x, memory, src_mask, tgt_mask):
        m = memory
        x = self.sublayer(x, self.norm1, lambda x: self.self_attn(x, x, x, tgt_mask))
        x = self.sublayer(x, self.norm2, lambda x: self.cross_attn(x, m, m, src_mask))
        return self.sublayer(x, self.norm3, self.feed_forward)


# --- chapter 9 --------------------------------------------------------------------------------


def greedy_decode_hint_a(model, src, src_mask, max_len, bos_id=BOS_ID, eos_id=EOS_ID):
    """One batch, a flag per sentence that has produced EOS."""
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        batch = src.size(0)
        ys = torch.full((batch, 1), bos_id, dtype=torch.long, device=src.device)
        finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
        for _ in range(max_len):
            out = model.decode(ys, memory, src_mask, subsequent_mask(ys.size(1)).to(src.device))
            best = model.generator(out[:, -1, :]).argmax(-1)
            ys = torch.cat([ys, best.unsqueeze(1)], dim=1)
            finished |= best == eos_id
            if finished.all():
                break
    results = []
    for sentence in ys[:, 1:].tolist():
        if eos_id in sentence:
            sentence = sentence[: sentence.index(eos_id)]
        results.append(sentence)
    return results


def greedy_decode_hint_b(model, src, src_mask, max_len, bos_id=BOS_ID, eos_id=EOS_ID):
    """Python lists per sentence, the model run on the whole batch at every step."""
    outputs = [[] for _ in range(src.size(0))]
    with torch.no_grad():
        enc = model.encode(src, src_mask)
        tokens = torch.tensor([[bos_id]] * src.size(0), device=src.device)
        for step in range(1, max_len + 1):
            causal = subsequent_mask(step, device=src.device)
            logits = model.generator(model.decode(tokens, enc, src_mask, causal)[:, -1])
            chosen = logits.max(dim=-1).indices
            tokens = torch.cat((tokens, chosen[:, None]), dim=-1)
            for row, token in enumerate(chosen.tolist()):
                if eos_id not in outputs[row]:
                    outputs[row].append(token)
            if all(eos_id in out for out in outputs):
                break
    return [out[: out.index(eos_id)] if eos_id in out else out for out in outputs]


def greedy_decode_annotated(model, src, src_mask, max_len, bos_id=BOS_ID, eos_id=EOS_ID):
    """The Annotated Transformer's loop (encode, then decode the growing ``ys`` with the
    subsequent mask and take the most probable word), run for the whole batch."""
    memory = model.encode(src, src_mask)
    ys = torch.zeros(src.size(0), 1).fill_(bos_id).type_as(src.data)
    with torch.no_grad():
        for _ in range(max_len):
            out = model.decode(ys, memory, src_mask, subsequent_mask(ys.size(1)).type_as(
                src_mask.data))
            prob = model.generator(out[:, -1])
            _, next_word = torch.max(prob, dim=1)
            ys = torch.cat([ys, next_word.unsqueeze(1).type_as(src.data)], dim=1)
            if (ys == eos_id).any(dim=1).all():
                break
    decoded = []
    for row in ys[:, 1:].tolist():
        decoded.append(row[: row.index(eos_id)] if eos_id in row else row)
    return decoded


# The literal hint-followers of :mod:`autograder.demo.literal_followers`: exercise, learner and
# answer (one entry per learner and exercise).
_LITERAL = [
    ("ch01.positional_encoding", "literal-a", literal.positional_encoding_literal_a),
    ("ch02.softmax", "literal-a", literal.softmax_literal_a),
    ("ch02.scaled_dot_product_attention", "literal-a", literal.sdpa_literal_a),
    ("ch02.scaled_dot_product_attention", "literal-b", literal.sdpa_literal_b),
    ("ch03.attention_head", "literal-a", literal.attention_head_literal_a),
    ("ch04.merge_heads", "literal-a", literal.merge_heads_literal_a),
    ("ch04.multi_head_attention", "literal-a", literal.mha_literal_a),
    ("ch05.layer_norm", "literal-a", literal.layer_norm_literal_a),
    ("ch05.feed_forward", "literal-a", literal.feed_forward_literal_a),
    ("ch05.add_and_norm", "literal-a", literal.add_and_norm_literal_a),
    ("ch06.encoder_block", "literal-a", literal.encoder_block_literal_a),
    ("ch06.encoder", "literal-a", literal.encoder_literal_a),
    ("ch07.multi_head_attention", "literal-a", literal.MultiHeadAttentionLiteralA),
    ("ch07.positionwise_feed_forward", "literal-a", literal.PositionwiseFeedForwardLiteralA),
    ("ch07.positionwise_feed_forward", "literal-b", literal.PositionwiseFeedForwardLiteralB),
    ("ch07.positional_encoding", "literal-a", literal.PositionalEncodingLiteralA),
    ("ch07.encoder_layer", "literal-a", literal.EncoderLayerLiteralA),
    ("ch07.encoder_layer", "literal-b", literal.EncoderLayerLiteralB),
    ("ch08.shift_right", "literal-a", literal.shift_right_literal_a),
    ("ch08.make_tgt_mask", "literal-a", literal.make_tgt_mask_literal_a),
    ("ch08.embeddings", "literal-a", literal.EmbeddingsLiteralA),
    ("ch08.decoder_layer", "literal-a", literal.DecoderLayerLiteralA),
    ("ch08.decoder_layer", "literal-b", literal.DecoderLayerLiteralB),
    ("ch08.make_model", "literal-a", literal.make_model_literal_a),
    ("ch08.make_model", "literal-b", literal.make_model_literal_b),
    ("ch09.label_smoothing_loss", "literal-a", literal.LabelSmoothingLossLiteralA),
    ("ch09.noam_rate", "literal-a", literal.noam_rate_literal_a),
    ("ch10.translate_batched", "literal-a", literal.translate_batched_literal_a),
    ("ch11.decoder_only_block", "literal-a", literal.DecoderOnlyBlockLiteralA),
    ("ch11.decoder_only_block", "literal-b", literal.DecoderOnlyBlockLiteralB),
    ("ch11.language_model", "literal-a", literal.LanguageModelLiteralA),
    ("ch11.sample", "literal-a", literal.sample_literal_a),
    ("ch11.sample", "literal-b", literal.sample_literal_b),
    ("ch11.key_value_cache", "literal-a", literal.KeyValueCacheLiteralA),
]
# Definitions a literal answer's cell holds before it (the sampler's cell: pick_next, then
# sample).
_HELPERS = {literal.sample_literal_a: (("pick_next", literal.pick_next_literal_a),),
            literal.sample_literal_b: (("pick_next", literal.pick_next_literal_b),)}

HONEST = [
    Honest("ch02.scaled_dot_product_attention", "hint-a", "the notebook's four steps",
           sdpa_hint_a),
    Honest("ch02.scaled_dot_product_attention", "hint-b", "the notebook's four steps",
           sdpa_hint_b),
    Honest("ch04.split_heads", "hint-a", "reshape, then swap axes", split_heads_hint_a),
    Honest("ch04.split_heads", "hint-b", "reshape, then swap axes", split_heads_hint_b),
    Honest("ch04.multi_head_attention", "hint-a", "split, attend, merge, project", mha_hint_a),
    Honest("ch04.multi_head_attention", "hint-b", "split, attend, merge, project", mha_hint_b),
    Honest("ch07.multi_head_attention", "hint-a", "the hints' steps", MultiHeadAttentionHintA),
    Honest("ch07.multi_head_attention", "hint-b", "the hints' steps", MultiHeadAttentionHintB),
    Honest("ch07.multi_head_attention", "annotated", "the Annotated Transformer's structure",
           MultiHeadAttentionAnnotated),
    Honest("ch07.positionwise_feed_forward", "annotated",
           "the Annotated Transformer's structure", PositionwiseFeedForwardAnnotated),
    Honest("ch08.decoder_layer", "hint-a", "the residual helper, one function per sub-layer",
           DecoderLayerHintA),
    Honest("ch08.decoder_layer", "hint-b", "the residual steps written out",
           DecoderLayerHintB),
    Honest("ch08.decoder_layer", "annotated", "the Annotated Transformer's sublayer connection",
           DecoderLayerAnnotated),
    Honest("ch09.greedy_decode", "hint-a", "a flag per finished sentence",
           greedy_decode_hint_a),
    Honest("ch09.greedy_decode", "hint-b", "a list per sentence", greedy_decode_hint_b),
    Honest("ch09.greedy_decode", "annotated", "the Annotated Transformer's loop, batched",
           greedy_decode_annotated),
] + [Honest(exercise, learner, "the exercise's text, line by line", answer,
            _HELPERS.get(answer, ()))
     for exercise, learner, answer in _LITERAL]
