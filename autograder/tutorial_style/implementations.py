"""Implementations of the PyTorch exercises structured the way well-known tutorials structure
them, each with the thinnest adapter to the course's names and signatures.

The code is the course's own; only the structure follows the tutorial named in each entry: the
Annotated Transformer (Harvard NLP), pytorch-seq2seq (Ben Trevett), Dive into Deep Learning
(d2l.ai), the UvA deep-learning tutorials, minGPT, nanoGPT and llama2.c (Andrej Karpathy),
Hugging Face's GPT-2, and the NumPy attention of the explanations the course builds on (scores
divided by ``np.sqrt(d_k)``). Learners bring exactly such code, so the checks must judge it
right and, where it differs from the course's contract, say how in terms of the tutorial's own
choices. The tests grade each of them (the catalogue ``TUTORIAL_STYLE`` of
``tests/fixtures/tutorial_style.py``, at least one per PyTorch exercise) in visible and hidden
mode and check its verdict and message.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from autograder.tutorial_style.parts import LanguageModelParts, StdLayerNorm
from transformer_ref.data.vocab import BOS_ID, EOS_ID, PAD_ID
from transformer_ref.decoding import greedy_decode
from transformer_ref.masks import subsequent_mask
from transformer_ref.modules import (
    Decoder,
    Embeddings,
    Encoder,
    EncoderDecoder,
    Generator,
    MultiHeadAttention,
    PositionalEncoding,
    PositionwiseFeedForward,
)

# --- Annotated Transformer: attention() returns the weights too, clones of the layers -------


def annotated_attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None,
                        dropout: nn.Module | None = None) -> tuple[Tensor, Tensor]:
    """Scaled dot-product attention returning ``(output, weights)``; masked scores -1e9."""
    d_k = query.size(-1)
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return p_attn @ value, p_attn


class AnnotatedMultiHeadedAttention(nn.Module):
    """Four projections walked through in one loop; the adapter names them w_q ... w_o
    instead of ``clones(nn.Linear(d_model, d_model), 4)`` and drops the tutorial's
    ``mask.unsqueeze(1)`` (the course's masks carry their head axis already)."""

    def __init__(self, d_model: int, h: int, dropout: float = 0.1) -> None:
        super().__init__()
        assert d_model % h == 0
        self.d_k, self.h = d_model // h, h
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                mask: Tensor | None = None) -> Tensor:
        nbatches = query.size(0)
        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
            for lin, x in zip((self.w_q, self.w_k, self.w_v), (query, key, value), strict=True)
        ]
        x, _ = annotated_attention(query, key, value, mask=mask, dropout=self.dropout)
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        return self.w_o(x)


class AnnotatedPositionwiseFeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.w_1, self.w_2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(self.dropout(self.w_1(x).relu()))


class AnnotatedPositionalEncoding(nn.Module):
    """Frequencies through exp and log, the table a buffer of shape (1, max_len, d_model)."""

    def __init__(self, d_model: int, dropout: float, max_len: int = 5000) -> None:
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0))

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.pe[:, : x.size(1)].requires_grad_(False)
        return self.dropout(x)


class AnnotatedSublayerConnection(nn.Module):
    """``x + dropout(sublayer(norm(x)))``: the tutorial normalises first (pre-LN). The adapter
    passes the norm in, so that the layer can keep it under the course's name."""

    def __init__(self, dropout: float) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, sublayer, norm: nn.Module) -> Tensor:
        return x + self.dropout(sublayer(norm(x)))


class AnnotatedEncoderLayer(nn.Module):
    """Two sublayer connections around the course's attention and FFN; the adapter keeps their
    norms as norm1 and norm2 (the tutorial's LayerNorm: unbiased std, eps 1e-6 added to it)."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = StdLayerNorm(d_model), StdLayerNorm(d_model)
        self.sublayer = nn.ModuleList(AnnotatedSublayerConnection(dropout) for _ in range(2))

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        x = self.sublayer[0](x, lambda y: self.self_attn(y, y, y, mask), self.norm1)
        return self.sublayer[1](x, self.feed_forward, self.norm2)


class AnnotatedDecoderLayer(nn.Module):
    """Three pre-LN sublayer connections whatever norm_first says."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False, fast_attention: bool = True) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.cross_attn = MultiHeadAttention(d_model, h, dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = (StdLayerNorm(d_model) for _ in range(3))
        self.sublayer = nn.ModuleList(AnnotatedSublayerConnection(dropout) for _ in range(3))

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor | None,
                tgt_mask: Tensor | None) -> Tensor:
        m = memory
        x = self.sublayer[0](x, lambda y: self.self_attn(y, y, y, tgt_mask), self.norm1)
        x = self.sublayer[1](x, lambda y: self.cross_attn(y, m, m, src_mask), self.norm2)
        return self.sublayer[2](x, self.feed_forward, self.norm3)


class AnnotatedEmbeddings(nn.Module):
    def __init__(self, vocab: int, d_model: int) -> None:
        super().__init__()
        self.lut = nn.Embedding(vocab, d_model)
        self.d_model = d_model

    def forward(self, x: Tensor) -> Tensor:
        return self.lut(x) * math.sqrt(self.d_model)


def annotated_make_tgt_mask(tgt_in: Tensor, pad_id: int = PAD_ID) -> Tensor:
    """``(tgt != pad).unsqueeze(-2) & subsequent_mask``: (B, T, T), no head axis."""
    tgt_mask = (tgt_in != pad_id).unsqueeze(-2)
    return tgt_mask & subsequent_mask(tgt_in.size(-1)).type_as(tgt_mask.data)


def annotated_make_model(src_vocab, tgt_vocab, N=6, d_model=512, d_ff=2048, h=8, dropout=0.1):
    """The paper's arguments only, with deep copies of one layer of each kind; the adapter
    builds the course's stacks (which take their layers' arguments)."""
    c = copy.deepcopy
    position = PositionalEncoding(d_model, dropout)
    model = EncoderDecoder(
        Encoder(N, d_model, h, d_ff, dropout), Decoder(N, d_model, h, d_ff, dropout),
        Embeddings(src_vocab, d_model), Embeddings(tgt_vocab, d_model), c(position),
        Generator(d_model, tgt_vocab))
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    return model


class AnnotatedLabelSmoothing(nn.Module):
    """KL divergence to the smoothed target, summed (``nn.KLDivLoss(reduction="sum")``); the
    adapter feeds it log-probabilities and divides by the number of real tokens."""

    def __init__(self, vocab_size: int, pad_id: int = PAD_ID, smoothing: float = 0.1) -> None:
        super().__init__()
        self.criterion = nn.KLDivLoss(reduction="sum")
        self.padding_idx, self.confidence = pad_id, 1.0 - smoothing
        self.smoothing, self.size = smoothing, vocab_size

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        x = logits.reshape(-1, self.size).log_softmax(dim=-1)
        target = target.reshape(-1)
        true_dist = x.detach().clone()
        true_dist.fill_(self.smoothing / (self.size - 2))
        true_dist.scatter_(1, target.unsqueeze(1), self.confidence)
        true_dist[:, self.padding_idx] = 0
        true_dist[target == self.padding_idx] = 0
        return self.criterion(x, true_dist) / (target != self.padding_idx).sum()


def annotated_rate(step, d_model, warmup, factor=1.0):
    """The tutorial's ``rate(step, model_size, factor, warmup)``, arguments reordered."""
    if step == 0:
        step = 1
    return factor * (d_model ** (-0.5) * min(step ** (-0.5), step * warmup ** (-1.5)))


def annotated_greedy_decode(model, src, src_mask, max_len, bos_id=BOS_ID, eos_id=EOS_ID):
    """The tutorial decodes ``max_len - 1`` tokens for one sentence, without stopping at EOS;
    the adapter loops over the batch and cuts at EOS."""
    out = []
    for b in range(src.size(0)):
        memory = model.encode(src[b : b + 1], src_mask[b : b + 1])
        ys = torch.zeros(1, 1).fill_(bos_id).type_as(src.data)
        for _ in range(max_len - 1):
            hidden = model.decode(ys, memory, src_mask[b : b + 1], subsequent_mask(ys.size(1)))
            prob = model.generator(hidden[:, -1])
            _, next_word = torch.max(prob, dim=1)
            ys = torch.cat([ys, torch.zeros(1, 1).type_as(src.data).fill_(next_word.item())], 1)
        row = ys[0, 1:].tolist()
        out.append(row[: row.index(eos_id)] if eos_id in row else row)
    return out


# --- pytorch-seq2seq: post-LN layers with named layer norms, masks built by unsqueeze -------


class Seq2SeqEncoderLayer(nn.Module):
    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        _src = self.self_attn(src, src, src, src_mask)
        src = self.norm1(src + self.dropout(_src))
        _src = self.feed_forward(src)
        return self.norm2(src + self.dropout(_src))


class Seq2SeqDecoderLayer(nn.Module):
    """Post-LN as in the tutorial; the adapter adds the pre-LN order for norm_first=True."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False, fast_attention: bool = True) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout, fast=fast_attention)
        self.cross_attn = MultiHeadAttention(d_model, h, dropout, fast=fast_attention)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, trg: Tensor, enc_src: Tensor, src_mask: Tensor | None,
                trg_mask: Tensor | None) -> Tensor:
        steps = ((lambda y: self.self_attn(y, y, y, trg_mask), self.norm1),
                 (lambda y: self.cross_attn(y, enc_src, enc_src, src_mask), self.norm2),
                 (self.feed_forward, self.norm3))
        for sublayer, norm in steps:
            if self.norm_first:
                trg = trg + self.dropout(sublayer(norm(trg)))
            else:
                trg = norm(trg + self.dropout(sublayer(trg)))
        return trg


def seq2seq_make_trg_mask(trg: Tensor, pad_id: int = PAD_ID) -> Tensor:
    trg_pad_mask = (trg != pad_id).unsqueeze(1).unsqueeze(2)
    trg_len = trg.shape[1]
    trg_sub_mask = torch.tril(torch.ones((trg_len, trg_len), device=trg.device)).bool()
    return trg_pad_mask & trg_sub_mask


def seq2seq_greedy_decode(model, src, src_mask, max_len, bos_id=BOS_ID, eos_id=EOS_ID):
    """``translate_sentence``: one sentence at a time, stop at EOS; the adapter batches."""
    out = []
    with torch.no_grad():
        for b in range(src.size(0)):
            enc_src = model.encode(src[b : b + 1], src_mask[b : b + 1])
            trg_indexes = [bos_id]
            for _ in range(max_len):
                trg_tensor = torch.LongTensor(trg_indexes).unsqueeze(0)
                trg_mask = subsequent_mask(len(trg_indexes))
                output = model.generator(model.decode(trg_tensor, enc_src, src_mask[b : b + 1],
                                                      trg_mask))
                pred_token = output.argmax(2)[:, -1].item()
                if pred_token == eos_id:
                    break
                trg_indexes.append(pred_token)
            out.append(trg_indexes[1:])
    return out


# --- d2l: the table P computed with broadcasting, decoder input by concatenation -------------


class D2lPositionalEncoding(nn.Module):
    """The tutorial's ``P`` (1, max_len, num_hiddens); the adapter registers it as ``pe``."""

    def __init__(self, num_hiddens: int, dropout: float, max_len: int = 1000) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        P = torch.zeros((1, max_len, num_hiddens))
        X = torch.arange(max_len, dtype=torch.float32).reshape(-1, 1) / torch.pow(
            10000, torch.arange(0, num_hiddens, 2, dtype=torch.float32) / num_hiddens)
        P[:, :, 0::2] = torch.sin(X)
        P[:, :, 1::2] = torch.cos(X)
        self.register_buffer("pe", P)

    def forward(self, X: Tensor) -> Tensor:
        X = X + self.pe[:, : X.shape[1], :].to(X.device)
        return self.dropout(X)


def d2l_shift_right(tgt: Tensor, bos_id: int = BOS_ID) -> Tensor:
    bos = torch.tensor([bos_id] * tgt.shape[0], device=tgt.device).reshape(-1, 1)
    return torch.cat([bos, tgt[:, :-1]], 1)


class D2lMultiHeadAttention(nn.Module):
    """Heads folded into the batch axis (``transpose_qkv``: (B, n, d) -> (B * h, n, d / h)) and
    ``torch.bmm``, dropout on the attention weights; the adapter names the projections w_q ...
    w_o (with biases, as the course's) and takes a boolean mask instead of ``valid_lens``."""

    def __init__(self, num_hiddens: int, num_heads: int, dropout: float) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.dropout = nn.Dropout(dropout)
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(num_hiddens, num_hiddens)
                                                  for _ in range(4))

    def transpose_qkv(self, X: Tensor) -> Tensor:
        X = X.reshape(X.shape[0], X.shape[1], self.num_heads, -1).permute(0, 2, 1, 3)
        return X.reshape(-1, X.shape[2], X.shape[3])

    def transpose_output(self, X: Tensor) -> Tensor:
        X = X.reshape(-1, self.num_heads, X.shape[1], X.shape[2]).permute(0, 2, 1, 3)
        return X.reshape(X.shape[0], X.shape[1], -1)

    def forward(self, queries: Tensor, keys: Tensor, values: Tensor,
                mask: Tensor | None = None) -> Tensor:
        queries = self.transpose_qkv(self.w_q(queries))
        keys, values = self.transpose_qkv(self.w_k(keys)), self.transpose_qkv(self.w_v(values))
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
        if mask is not None:  # (B, 1, n_q or 1, n_k) -> one row of masks per (sequence, head)
            heads = mask.expand(-1, self.num_heads, scores.shape[1], -1)
            scores = scores.masked_fill(~heads.reshape(scores.shape), -1e6)
        self.attention_weights = F.softmax(scores, dim=-1)
        output = torch.bmm(self.dropout(self.attention_weights), values)
        return self.w_o(self.transpose_output(output))


class D2lPositionWiseFFN(nn.Module):
    """``dense2(relu(dense1(X)))``, no dropout (d2l drops in AddNorm); named w_1, w_2 here."""

    def __init__(self, num_hiddens: int, ffn_num_hiddens: int) -> None:
        super().__init__()
        self.w_1, self.w_2 = nn.Linear(num_hiddens, ffn_num_hiddens), nn.Linear(ffn_num_hiddens,
                                                                               num_hiddens)
        self.relu = nn.ReLU()

    def forward(self, X: Tensor) -> Tensor:
        return self.w_2(self.relu(self.w_1(X)))


class D2lAddNorm(nn.Module):
    """``ln(dropout(Y) + X)``: the residual connection holds the dropout. The adapter hands the
    layer norm in, so that the block keeps it under the course's name."""

    def __init__(self, dropout: float) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, X: Tensor, Y: Tensor, ln: nn.LayerNorm) -> Tensor:
        return ln(self.dropout(Y) + X)


class D2lEncoderBlock(nn.Module):
    """``addnorm1(X, attention(X, X, X))`` then ``addnorm2(Y, ffn(Y))``."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.self_attn = D2lMultiHeadAttention(d_model, h, dropout)
        self.feed_forward = D2lPositionWiseFFN(d_model, d_ff)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.addnorm1, self.addnorm2 = D2lAddNorm(dropout), D2lAddNorm(dropout)

    def forward(self, X: Tensor, mask: Tensor | None = None) -> Tensor:
        Y = self.addnorm1(X, self.self_attn(X, X, X, mask), self.norm1)
        return self.addnorm2(Y, self.feed_forward(Y), self.norm2)


# --- UvA tutorials: one stacked qkv projection of the input (self-attention only) -----------


class UvaMultiheadAttention(nn.Module):
    """The tutorial projects one input x to queries, keys and values at once; the adapter
    splits that projection into w_q, w_k, w_v but still feeds them the query input only."""

    def __init__(self, d_model: int, h: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.num_heads, self.head_dim = h, d_model // h
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))
        self.dropout = nn.Dropout(dropout)

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                mask: Tensor | None = None) -> Tensor:
        x = query
        batch_size, seq_length, _ = x.size()
        qkv = torch.stack([self.w_q(x), self.w_k(x), self.w_v(x)], dim=2)  # (B, L, 3, D)
        qkv = qkv.reshape(batch_size, seq_length, 3, self.num_heads, self.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        attn_logits = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            attn_logits = attn_logits.masked_fill(mask == 0, -9e15)
        attention = self.dropout(F.softmax(attn_logits, dim=-1))
        values = (attention @ v).permute(0, 2, 1, 3).reshape(batch_size, seq_length, -1)
        return self.w_o(values)


class UvaSelfAttention(nn.Module):
    """The tutorial's ``MultiheadAttention`` as its encoder block calls it, ``self_attn(x,
    mask)``: no dropout anywhere inside; the adapter names the projections w_q ... w_o."""

    def __init__(self, input_dim: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads, self.head_dim = num_heads, input_dim // num_heads
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(input_dim, input_dim)
                                                  for _ in range(4))

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        batch_size, seq_length, embed_dim = x.size()
        q, k, v = (w(x).reshape(batch_size, seq_length, self.num_heads, self.head_dim)
                   .permute(0, 2, 1, 3) for w in (self.w_q, self.w_k, self.w_v))
        attn_logits = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        if mask is not None:
            attn_logits = attn_logits.masked_fill(mask == 0, -9e15)
        values = torch.matmul(F.softmax(attn_logits, dim=-1), v)
        return self.w_o(values.permute(0, 2, 1, 3).reshape(batch_size, seq_length, embed_dim))


class UvaFeedForward(nn.Module):
    """The tutorial's ``linear_net``: Linear, Dropout, ReLU, Linear (dropout before the ReLU);
    the adapter names the layers w_1 and w_2 instead of indexing an nn.Sequential."""

    def __init__(self, input_dim: int, dim_feedforward: int, dropout: float) -> None:
        super().__init__()
        self.w_1, self.w_2 = nn.Linear(input_dim, dim_feedforward), nn.Linear(dim_feedforward,
                                                                              input_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(torch.relu(self.dropout(self.w_1(x))))


class UvaEncoderBlock(nn.Module):
    """``x = norm1(x + dropout(self_attn(x, mask)))``, then the same around ``linear_net``."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.self_attn = UvaSelfAttention(d_model, h)
        self.feed_forward = UvaFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        attn_out = self.self_attn(x, mask=mask)
        x = x + self.dropout(attn_out)
        x = self.norm1(x)
        linear_out = self.feed_forward(x)
        x = x + self.dropout(linear_out)
        return self.norm2(x)


class UvaSelfAttentionDroppingOutput(UvaSelfAttention):
    """The attention with a dropout after its output projection."""

    def __init__(self, input_dim: int, num_heads: int, dropout: float) -> None:
        super().__init__(input_dim, num_heads)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        return self.dropout(super().forward(x, mask))


class UvaEncoderBlockDroppingAttention(UvaEncoderBlock):
    """The block around that attention: it drops the attention's output again (twice on one
    tensor)."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__(d_model, h, d_ff, dropout)
        self.self_attn = UvaSelfAttentionDroppingOutput(d_model, h, dropout)


# --- minGPT: the MLP with GELU and dropout after the output projection ----------------------


class MinGptMlp(nn.Module):
    """``c_fc``, GELU (the tanh approximation), ``c_proj``, dropout; named w_1, w_2 here."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.w_1, self.w_2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.w_2(F.gelu(self.w_1(x), approximate="tanh")))


# --- a beam search that moves finished hypotheses to a list of their own --------------------


@torch.no_grad()
def finished_list_beam_search(model, src, src_mask, max_len, beam_size=4, length_penalty=0.6,
                              bos_id=BOS_ID, eos_id=EOS_ID):
    """As many blog posts and small libraries write it: a hypothesis that emits EOS leaves the
    beam for a list of finished ones, unfinished ones fill its place, and the search ends once
    ``beam_size`` hypotheses have finished; the best normalised finished one wins."""
    def normalised(item: tuple[float, list[int]]) -> float:
        return item[0] / ((5.0 + len(item[1])) / 6.0) ** length_penalty

    results = []
    for b in range(src.size(0)):
        memory = model.encode(src[b : b + 1], src_mask[b : b + 1])
        beams: list[tuple[float, list[int]]] = [(0.0, [])]
        finished: list[tuple[float, list[int]]] = []
        for _ in range(max_len):
            candidates = []
            for score, tokens in beams:
                ys = torch.tensor([[bos_id, *tokens]])
                hidden = model.decode(ys, memory, src_mask[b : b + 1], subsequent_mask(ys.size(1)))
                log_probs = F.log_softmax(model.generator(hidden[:, -1]), dim=-1)[0]
                candidates += [(score + float(lp), tokens + [v]) for v, lp in enumerate(log_probs)]
            candidates.sort(key=normalised, reverse=True)
            beams = []
            for score, tokens in candidates[: 2 * beam_size]:
                if tokens[-1] == eos_id:
                    finished.append((score, tokens))
                elif len(beams) < beam_size:
                    beams.append((score, tokens))
            if len(finished) >= beam_size or not beams:
                break
        best = max(finished or beams, key=normalised)[1]
        results.append(best[: best.index(eos_id)] if eos_id in best else best)
    return results


# --- RNN packing tutorials: longest first, pad_sequence, then the original order back ------


def packing_style_translate_batched(model, sources, max_len, batch_size=32, pad_id=PAD_ID,
                                    decoder=None):
    """Batches sorted longest first (as ``pack_padded_sequence`` wants them), padded with
    ``nn.utils.rnn.pad_sequence``, and put back into the input order by the sort's indices."""
    decoder = decoder or greedy_decode
    lengths = torch.tensor([len(s) for s in sources])
    sorted_idx = torch.argsort(lengths, descending=True, stable=True).tolist()
    device = next(model.parameters()).device
    decoded: list[list[int]] = []
    for start in range(0, len(sorted_idx), batch_size):
        batch = [torch.tensor(sources[i]) for i in sorted_idx[start:start + batch_size]]
        src = nn.utils.rnn.pad_sequence(batch, batch_first=True, padding_value=pad_id)
        src = src.to(device)
        src_mask = (src != pad_id).unsqueeze(1).unsqueeze(2)
        decoded += decoder(model, src, src_mask, max_len)
    restored: list[list[int]] = [[] for _ in sources]
    for position, index in enumerate(sorted_idx):
        restored[index] = decoded[position]
    return restored


# --- NumPy attention as the explanations write it: np.matmul and a division by np.sqrt(d_k) ---


def numpy_softmax(x: np.ndarray) -> np.ndarray:
    e_x = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e_x / np.sum(e_x, axis=-1, keepdims=True)


def sqrt_scaled_dot_product_attention(Q, K, V, mask=None):
    """``softmax(Q K^T / np.sqrt(d_k)) V``. np.sqrt of the integer d_k is a NumPy float64, so
    float32 inputs come back float64 (NumPy 2's promotion): right values, with a note."""
    d_k = Q.shape[-1]
    scores = np.matmul(Q, np.swapaxes(K, -2, -1)) / np.sqrt(d_k)
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    weights = numpy_softmax(scores)
    return np.matmul(weights, V), weights


def sqrt_multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, num_heads, mask=None):
    """Project, split into heads, attend with the function above, concatenate, project."""
    d_model = W_q.shape[0]
    depth = d_model // num_heads

    def split_heads(x):
        *batch, seq_len, _ = x.shape
        return np.swapaxes(x.reshape(*batch, seq_len, num_heads, depth), -3, -2)

    Q, K, V = split_heads(x_q @ W_q), split_heads(x_kv @ W_k), split_heads(x_kv @ W_v)
    if mask is not None:
        mask = np.expand_dims(mask, -3).astype(bool)
    heads, weights = sqrt_scaled_dot_product_attention(Q, K, V, mask)
    concat = np.swapaxes(heads, -3, -2)
    concat = concat.reshape(*concat.shape[:-2], d_model)
    return concat @ W_o, weights


# --- nanoGPT / minGPT: a fused qkv projection, causal attention built in --------------------


class NanoGptSelfAttention(nn.Module):
    """nanoGPT's CausalSelfAttention: one projection ``c_attn`` to queries, keys and values,
    split in three, heads by view and transpose, the fused kernel with ``is_causal`` and
    ``dropout_p`` (the attention weights), then ``c_proj`` and ``resid_dropout``: the attention
    drops its own output, the paper's residual dropout. The adapter names the output
    projection w_o (nanoGPT: c_proj) and takes the course's call ``(query, key, value, mask)``,
    of which it reads the query (a block's self-attention)."""

    def __init__(self, d_model: int, h: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.c_attn = nn.Linear(d_model, 3 * d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.n_head = h

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                mask: Tensor | None = None) -> Tensor:
        x = query
        B, T, C = x.size()
        q, k, v = self.heads(x)
        p = self.attn_dropout.p if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        return self.resid_dropout(self.w_o(y.transpose(1, 2).contiguous().view(B, T, C)))

    def heads(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values ``(B, n_head, T, C // n_head)`` from ``c_attn``."""
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        return tuple(z.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                     for z in (q, k, v))


class MinGptSelfAttention(NanoGptSelfAttention):
    """minGPT's CausalSelfAttention: nanoGPT's without the fused kernel, the weights written
    out (a causal mask buffer ``bias`` there, a tril here) and dropped by ``attn_dropout``."""

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                mask: Tensor | None = None) -> Tensor:
        B, T, C = query.size()
        q, k, v = self.heads(query)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        causal = torch.ones(T, T, dtype=torch.bool, device=query.device).tril()
        att = self.attn_dropout(F.softmax(att.masked_fill(~causal, float("-inf")), dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.w_o(y))


class NanoGptReluMlp(MinGptMlp):
    """nanoGPT's MLP, ``dropout(c_proj(act(c_fc(x))))``, with the course's ReLU for GELU: it
    drops its own output, the paper's residual dropout (named w_1, w_2 here)."""

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.w_2(F.relu(self.w_1(x))))


class NanoGptBlock(nn.Module):
    """nanoGPT's Block: ``x + attn(ln_1(x))``, then ``x + mlp(ln_2(x))``, no dropout of its
    own (the attention and the MLP drop their outputs); the adapter names the parts as the
    course (ln_1 -> norm1, attn -> self_attn, mlp -> feed_forward) and uses ReLU."""

    attention = NanoGptSelfAttention

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.self_attn = self.attention(d_model, h, dropout)
        self.norm2 = nn.LayerNorm(d_model)
        self.feed_forward = NanoGptReluMlp(d_model, d_ff, dropout)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.self_attn(self.norm1(x), None, None)
        return x + self.feed_forward(self.norm2(x))


class MinGptBlock(NanoGptBlock):
    """minGPT's Block: nanoGPT's with the attention written out."""

    attention = MinGptSelfAttention


class NanoGptNamedBlock(nn.Module):
    """nanoGPT's block under its own names: ln_1, attn (c_attn, c_proj), ln_2, mlp."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = NanoGptSelfAttention(d_model, h, dropout)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp = NanoGptReluMlp(d_model, d_ff, dropout)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x), None, None)
        return x + self.mlp(self.ln_2(x))


class NanoGptMlpBlock(NanoGptBlock):
    """nanoGPT's MLP as it is: c_fc, GELU, c_proj, dropout (named w_1, w_2 here)."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__(d_model, h, d_ff, dropout)
        self.feed_forward = MinGptMlp(d_model, d_ff, dropout)


class NanoGptModel(LanguageModelParts):
    """nanoGPT's GPT: ``wte(idx) + wpe(pos)``, dropout, the blocks, ``ln_f``, ``lm_head``
    tied to ``wte``; named as the course (wte -> embed.lut, wpe -> pos_encoding.pe, h ->
    layers, ln_f -> norm, lm_head -> generator.proj). GPT-2 does not scale the embeddings."""

    def forward(self, idx: Tensor) -> Tensor:
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        tok_emb = self.embed.lut(idx)
        pos_emb = self.pos_encoding.pe(pos)
        x = self.pos_encoding.dropout(tok_emb + pos_emb)
        for block in self.layers:
            x = block(x)
        return self.generator(self.norm(x))


class MinGptModel(NanoGptModel):
    """minGPT's GPT with the course's scaled token embeddings: ``drop(tok_emb + pos_emb)``,
    then minGPT's blocks, whose attention and MLP drop their own outputs."""

    def __init__(self, vocab: int, N: int = 6, d_model: int = 512, d_ff: int = 2048, h: int = 8,
                 dropout: float = 0.1, max_len: int = 256, tie_weights: bool = True) -> None:
        super().__init__(vocab, N, d_model, d_ff, h, dropout, max_len, tie_weights)
        self.layers = nn.ModuleList(MinGptBlock(d_model, h, d_ff, dropout) for _ in range(N))

    def forward(self, idx: Tensor) -> Tensor:
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device).unsqueeze(0)
        x = self.pos_encoding.dropout(self.embed(idx) + self.pos_encoding.pe(pos))
        for block in self.layers:
            x = block(x)
        return self.generator(self.norm(x))


@torch.no_grad()
def nanogpt_generate(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None,
                     top_p=None, generator=None):
    """nanoGPT's ``generate`` (crop to the block size, last logits / temperature, top-k by the
    k-th value), with top-p as Hugging Face's TopPLogitsWarper writes it (an ascending sort,
    tokens whose running sum stays within 1 - p removed)."""
    idx = prompt_ids
    for _ in range(max_new_tokens):
        idx_cond = idx if idx.size(1) <= model.max_len else idx[:, -model.max_len:]
        logits = model(idx_cond)[:, -1, :] / temperature
        if top_k is not None:
            v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
            logits[logits < v[:, [-1]]] = -float("Inf")
        if top_p is not None:
            sorted_logits, sorted_indices = torch.sort(logits, descending=False)
            cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
            sorted_indices_to_remove = cumulative_probs <= (1 - top_p)
            sorted_indices_to_remove[..., -1:] = 0
            indices_to_remove = sorted_indices_to_remove.scatter(1, sorted_indices,
                                                                 sorted_indices_to_remove)
            logits = logits.masked_fill(indices_to_remove, -float("Inf"))
        probs = F.softmax(logits, dim=-1)
        idx_next = torch.multinomial(probs, num_samples=1, generator=generator)
        idx = torch.cat((idx, idx_next), dim=1)
    return idx


def llama2c_sample(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None, top_p=None,
                   generator=None):
    """llama2.c's ``sample_topp``, one row at a time: candidates below (1 - p) / (n - 1) are
    dropped first, the rest sorted, the nucleus cut where the running sum passes p, and one
    coin (a uniform number from the generator) picks a token from it; top-k added in
    nanoGPT's way."""
    ids = prompt_ids
    for _ in range(max_new_tokens):
        logits = model(ids[:, -model.max_len:])[:, -1, :] / temperature
        if top_k is not None and top_k < logits.size(-1):
            v, _ = torch.topk(logits, top_k)
            logits = logits.masked_fill(logits < v[:, [-1]], -float("inf"))
        probs = torch.softmax(logits, dim=-1)
        coins = torch.rand(probs.size(0), generator=generator, dtype=torch.float64).tolist()
        picked = []
        for row, coin in zip(probs.tolist(), coins, strict=True):
            n = len(row)
            if top_p is None or top_p >= 1:
                candidates = sorted(((p, i) for i, p in enumerate(row) if p > 0), reverse=True)
                last, total = len(candidates) - 1, sum(p for p, _ in candidates)
            else:
                cutoff = (1.0 - top_p) / (n - 1)
                candidates = sorted(((p, i) for i, p in enumerate(row) if p >= cutoff),
                                    reverse=True)
                total, last = 0.0, len(candidates) - 1
                for j, (p, _) in enumerate(candidates):
                    total += p
                    if total >= top_p:
                        last = j
                        break
            r, cdf = coin * total, 0.0
            choice = candidates[last][1]
            for p, i in candidates[: last + 1]:
                cdf += p
                if r < cdf:
                    choice = i
                    break
            picked.append(choice)
        ids = torch.cat([ids, torch.tensor(picked, dtype=ids.dtype)[:, None]], dim=1)
    return ids


class HuggingFacePastKeyValues:
    """Hugging Face's GPT-2 cache: ``past_key_values``, one ``(key, value)`` tuple per block,
    the position ids continue from the past length, each block's attention concatenates its
    ``layer_past`` and returns ``present``, the causal mask is the slice of a lower triangle
    that the new queries need, and ``_reorder_cache`` is an ``index_select`` by beam."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.past_key_values: tuple | None = None

    def _attn(self, layer: nn.Module, hidden_states: Tensor, layer_past: tuple | None
              ) -> tuple[Tensor, tuple]:
        attn = layer.self_attn
        bsz, q_len, _ = hidden_states.shape

        def split_heads(tensor: Tensor) -> Tensor:
            return tensor.view(bsz, q_len, attn.h, attn.d_k).permute(0, 2, 1, 3)

        query = split_heads(attn.w_q(hidden_states))
        key, value = split_heads(attn.w_k(hidden_states)), split_heads(attn.w_v(hidden_states))
        if layer_past is not None:
            past_key, past_value = layer_past
            key, value = torch.cat((past_key, key), dim=-2), torch.cat((past_value, value), -2)
        present = (key, value)
        key_length = key.size(-2)
        bias = torch.tril(torch.ones(key_length, key_length, dtype=torch.bool))
        causal_mask = bias[key_length - q_len : key_length, :key_length]
        attn_weights = torch.matmul(query, key.transpose(-1, -2)) / math.sqrt(attn.d_k)
        attn_weights = torch.where(causal_mask, attn_weights,
                                   torch.finfo(attn_weights.dtype).min).softmax(dim=-1)
        attn_output = torch.matmul(attn_weights, value).permute(0, 2, 1, 3)
        attn_output = attn_output.reshape(bsz, q_len, attn.h * attn.d_k)
        return attn.w_o(attn_output), present

    def __call__(self, input_ids: Tensor) -> Tensor:
        model = self.model
        past_length = 0 if self.past_key_values is None else self.past_key_values[0][0].size(-2)
        if past_length + input_ids.size(1) > model.max_len:
            raise ValueError(f"{past_length + input_ids.size(1)} positions, more than "
                             f"n_positions={model.max_len}")
        hidden_states = model.pos_encoding(model.embed(input_ids), start=past_length)
        presents = []
        past = self.past_key_values or (None,) * len(model.layers)
        for block, layer_past in zip(model.layers, past, strict=True):
            attn_output, present = self._attn(block, block.norm1(hidden_states), layer_past)
            hidden_states = hidden_states + block.dropout(attn_output)
            hidden_states = hidden_states + block.dropout(block.feed_forward(
                block.norm2(hidden_states)))
            presents.append(present)
        self.past_key_values = tuple(presents)
        return model.generator(model.norm(hidden_states))

    def reorder(self, beam_idx: Tensor) -> None:
        self.past_key_values = tuple(
            tuple(past_state.index_select(0, beam_idx) for past_state in layer_past)
            for layer_past in self.past_key_values)


# --- byte-pair encoding: Sennrich et al.'s get_stats / merge_vocab, Karpathy's minbpe ---------


def sennrich_get_stats(vocab: dict[tuple[str, ...], int]) -> dict[tuple[str, str], int]:
    pairs: dict[tuple[str, str], int] = {}
    for word, freq in vocab.items():
        for i in range(len(word) - 1):
            pairs[word[i], word[i + 1]] = pairs.get((word[i], word[i + 1]), 0) + freq
    return pairs


def sennrich_merge_vocab(pair: tuple[str, str], v_in: dict[tuple[str, ...], int]
                         ) -> dict[tuple[str, ...], int]:
    v_out = {}
    for word, freq in v_in.items():
        out: list[str] = []
        i = 0
        while i < len(word):
            if word[i:i + 2] == pair:
                out.append(pair[0] + pair[1])
                i += 2
            else:
                out.append(word[i])
                i += 1
        v_out[tuple(out)] = v_out.get(tuple(out), 0) + freq
    return v_out


def sennrich_learn_bpe(texts, num_merges):
    """The paper's loop: ``best = max(pairs, key=pairs.get)``, so a tie goes to the pair
    counted first, where the course's rule takes the smallest. Symbols are tuples, since the
    course's words keep their spaces."""
    from transformer_ref.data.words import split_words

    vocab: dict[tuple[str, ...], int] = {}
    for text in texts:
        for word in split_words(text):
            vocab[tuple(word)] = vocab.get(tuple(word), 0) + 1
    merges = []
    for _ in range(num_merges):
        pairs = sennrich_get_stats(vocab)
        if not pairs:
            break
        best = max(pairs, key=pairs.get)
        vocab = sennrich_merge_vocab(best, vocab)
        merges.append(best)
    return merges


def minbpe_encode(text, merges):
    """minbpe's ``encode``: per chunk, the pair with the lowest merge index until none is left
    (``min(stats, key=lambda p: ranks.get(p, inf))``), on characters instead of bytes."""
    from transformer_ref.data.words import split_words

    ranks: dict[tuple[str, str], int] = {}
    for i, pair in enumerate(merges):
        ranks.setdefault(tuple(pair), i)
    tokens: list[str] = []
    for chunk in split_words(text):
        ids = list(chunk)
        while len(ids) >= 2:
            stats = sennrich_get_stats({tuple(ids): 1})
            pair = min(stats, key=lambda p: ranks.get(p, float("inf")))
            if pair not in ranks:
                break
            ids = list(sennrich_merge_vocab(pair, {tuple(ids): 1}))[0]
        tokens.extend(ids)
    return tokens
