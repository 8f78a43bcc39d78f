"""Buggy and valid implementations of the chapter 7 exercises (the PyTorch modules).

Every class has the constructor signature and the parameter names of its reference in
:mod:`transformer_ref.modules`, so that the checks can load the reference weights into it:
``MultiHeadAttention(d_model, h, dropout)`` with ``w_q, w_k, w_v, w_o``;
``PositionwiseFeedForward(d_model, d_ff, dropout)`` with ``w_1, w_2``;
``PositionalEncoding(d_model, dropout, max_len)`` with the buffer ``pe``;
``EncoderLayer(d_model, h, d_ff, dropout)`` with ``self_attn, feed_forward, norm1, norm2``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from autograder.demo.mutants import Mutant
from transformer_ref.modules import MultiHeadAttention, PositionwiseFeedForward, residual
from transformer_ref.numpy.positional import positional_encoding

EXERCISE_MHA = "ch07.multi_head_attention"
EXERCISE_FFN = "ch07.positionwise_feed_forward"
EXERCISE_PE = "ch07.positional_encoding"
EXERCISE_LAYER = "ch07.encoder_layer"


# --- multi-head attention -------------------------------------------------------------------

class AttentionBase(nn.Module):
    """Valid: the step-by-step formulation; subclasses change one step."""

    def __init__(self, d_model: int, h: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.h, self.d_k = h, d_model // h
        self.w_q, self.w_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.w_v, self.w_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def split(self, x: Tensor) -> Tensor:
        return x.view(x.size(0), x.size(1), self.h, self.d_k).transpose(1, 2)

    def heads(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return self.split(self.w_q(query)), self.split(self.w_k(key)), self.split(self.w_v(value))

    def scores(self, q: Tensor, k: Tensor) -> Tensor:
        return q @ k.transpose(-2, -1) / math.sqrt(self.d_k)

    def weights(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return self.dropout(scores.softmax(dim=-1))

    def merge(self, x: Tensor) -> Tensor:
        return x.transpose(1, 2).reshape(x.size(0), x.size(2), self.h * self.d_k)

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                mask: Tensor | None = None) -> Tensor:
        q, k, v = self.heads(query, key, value)
        return self.w_o(self.merge(self.weights(self.scores(q, k), mask) @ v))


class AttentionNoScale(AttentionBase):
    def scores(self, q: Tensor, k: Tensor) -> Tensor:
        return q @ k.transpose(-2, -1)


class AttentionScaleByDModel(AttentionBase):
    def scores(self, q: Tensor, k: Tensor) -> Tensor:
        return q @ k.transpose(-2, -1) / math.sqrt(self.h * self.d_k)


class AttentionNoTranspose(AttentionBase):
    def split(self, x: Tensor) -> Tensor:
        return x.reshape(x.size(0), self.h, x.size(1), self.d_k)


class AttentionMaskIgnored(AttentionBase):
    def weights(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        return self.dropout(scores.softmax(dim=-1))


class AttentionMaskInverted(AttentionBase):
    def weights(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        return super().weights(scores, None if mask is None else ~mask)


class AttentionSoftmaxOverQueries(AttentionBase):
    def weights(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        if mask is not None:
            scores = scores.masked_fill(~mask, -1e9)
        return self.dropout(scores.softmax(dim=-2))


class AttentionMergeNoTranspose(AttentionBase):
    def merge(self, x: Tensor) -> Tensor:
        return x.reshape(x.size(0), x.size(2), self.h * self.d_k)


class AttentionKeysFromQuery(AttentionBase):
    """Self-attention only: keys and values are projected from the query input."""

    def heads(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return super().heads(query, query, query)


class AttentionNoOutputProjection(AttentionBase):
    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                mask: Tensor | None = None) -> Tensor:
        q, k, v = self.heads(query, key, value)
        return self.merge(self.weights(self.scores(q, k), mask) @ v)


class AttentionDropoutInEval(AttentionBase):
    def weights(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return F.dropout(scores.softmax(dim=-1), self.dropout.p)  # training=True by default


class AttentionNoDropout(AttentionBase):
    def weights(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return scores.softmax(dim=-1)


class AttentionDropoutOnOutput(AttentionNoDropout):
    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                mask: Tensor | None = None) -> Tensor:
        return self.dropout(super().forward(query, key, value, mask))


class AttentionDropoutOnMergedHeads(AttentionBase):
    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                mask: Tensor | None = None) -> Tensor:
        q, k, v = self.heads(query, key, value)
        scores = self.scores(q, k)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return self.w_o(self.dropout(self.merge(scores.softmax(dim=-1) @ v)))


class AttentionDropoutOnValues(AttentionBase):
    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                mask: Tensor | None = None) -> Tensor:
        q, k, v = self.heads(query, key, value)
        scores = self.scores(q, k)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return self.w_o(self.merge(scores.softmax(dim=-1) @ self.dropout(v)))


class AttentionDropoutOnScores(AttentionBase):
    def weights(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        scores = self.dropout(scores)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return scores.softmax(dim=-1)


class AttentionFixedDropout(AttentionBase):
    """nn.Dropout(0.1) typed in: the dropout argument is ignored."""

    def __init__(self, d_model: int, h: int, dropout: float = 0.0) -> None:
        super().__init__(d_model, h, dropout)
        self.dropout = nn.Dropout(0.1)


class AttentionDropoutTwice(AttentionBase):
    def weights(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        return self.dropout(super().weights(scores, mask))


class AttentionFunctionalFixedRate(AttentionBase):
    """F.dropout with p typed in as 0.1 instead of the module's dropout argument."""

    def weights(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return F.dropout(scores.softmax(dim=-1), 0.1, training=self.training)


class AttentionBernoulliMask(AttentionBase):
    """Valid: dropout written out, a Bernoulli keep-mask and the 1 / (1 - p) scaling."""

    def weights(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=-1)
        if not self.training or self.dropout.p == 0:
            return weights
        keep = torch.rand_like(weights) >= self.dropout.p
        return weights * keep / (1.0 - self.dropout.p)


class AttentionFunctionalDropout(AttentionBase):
    """Valid: F.dropout with the module's training flag instead of the nn.Dropout module."""

    def weights(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return F.dropout(scores.softmax(dim=-1), self.dropout.p, training=self.training)


class AttentionEinsum(AttentionBase):
    """Valid: projections and both products as einsums, heads never materialised by views."""

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                mask: Tensor | None = None) -> Tensor:
        def heads(x: Tensor, layer: nn.Linear) -> Tensor:
            return layer(x).unflatten(-1, (self.h, self.d_k))  # (B, n, h, d_k)

        q, k, v = heads(query, self.w_q), heads(key, self.w_k), heads(value, self.w_v)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(self.d_k)
        weights = self.weights(scores, mask)
        return self.w_o(torch.einsum("bhqk,bkhd->bqhd", weights, v).flatten(-2))


class AttentionFused(AttentionBase):
    """Valid: PyTorch's fused kernel."""

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                mask: Tensor | None = None) -> Tensor:
        q, k, v = self.heads(query, key, value)
        p = self.dropout.p if self.training else 0.0
        return self.w_o(self.merge(F.scaled_dot_product_attention(q, k, v, mask, p)))


class AttentionHeadLoop(AttentionBase):
    """Valid: one head at a time, with column blocks of the projection outputs."""

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                mask: Tensor | None = None) -> Tensor:
        q, k, v = self.w_q(query), self.w_k(key), self.w_v(value)
        heads = []
        for i in range(self.h):
            block = slice(i * self.d_k, (i + 1) * self.d_k)
            head_mask = None if mask is None else mask[:, min(i, mask.size(1) - 1)]
            scores = q[..., block] @ k[..., block].transpose(-2, -1) / math.sqrt(self.d_k)
            heads.append(self.weights(scores, head_mask) @ v[..., block])
        return self.w_o(torch.cat(heads, dim=-1))


# --- position-wise feed-forward ---------------------------------------------------------------

class FeedForwardBase(nn.Module):
    """Valid: w_2(dropout(relu(w_1(x)))); subclasses change the activation or dropout."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.w_1, self.w_2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(self.dropout(torch.relu(self.w_1(x))))


class FeedForwardNoReLU(FeedForwardBase):
    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(self.dropout(self.w_1(x)))


class FeedForwardReLUAfter(FeedForwardBase):
    def forward(self, x: Tensor) -> Tensor:
        return torch.relu(self.w_2(self.dropout(self.w_1(x))))


class FeedForwardGELU(FeedForwardBase):
    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(self.dropout(F.gelu(self.w_1(x))))


class FeedForwardGELUTanh(FeedForwardBase):
    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(self.dropout(F.gelu(self.w_1(x), approximate="tanh")))


class FeedForwardDropoutInEval(FeedForwardBase):
    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(F.dropout(torch.relu(self.w_1(x)), self.dropout.p))


class FeedForwardNoDropout(FeedForwardBase):
    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(torch.relu(self.w_1(x)))


class FeedForwardDropoutOnOutput(FeedForwardBase):
    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.w_2(torch.relu(self.w_1(x))))


class FeedForwardDropoutOnInput(FeedForwardBase):
    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(torch.relu(self.w_1(self.dropout(x))))


class FeedForwardDropoutTwice(FeedForwardBase):
    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(self.dropout(self.dropout(torch.relu(self.w_1(x)))))


class FeedForwardUnscaledMask(FeedForwardBase):
    """Drops hidden units with a mask of its own but never divides by 1 - p."""

    def forward(self, x: Tensor) -> Tensor:
        hidden = torch.relu(self.w_1(x))
        if self.training:
            hidden = hidden * (torch.rand_like(hidden) >= self.dropout.p)
        return self.w_2(hidden)


class FeedForwardDropoutBeforeReLU(FeedForwardBase):
    """Valid: dropout before the ReLU gives the same numbers (relu(m * h) = m * relu(h))."""

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(torch.relu(self.dropout(self.w_1(x))))


class FeedForwardSequential(nn.Module):
    """nn.Sequential: right computation, but the parameters are named net.0.weight, ..."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Dropout(dropout),
                                 nn.Linear(d_ff, d_model))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class FeedForwardFunctional(FeedForwardBase):
    """Valid: F.linear with the layers' tensors, clamp for the ReLU, functional dropout."""

    def forward(self, x: Tensor) -> Tensor:
        hidden = F.linear(x, self.w_1.weight, self.w_1.bias).clamp(min=0)
        hidden = F.dropout(hidden, self.dropout.p, training=self.training)
        return F.linear(hidden, self.w_2.weight, self.w_2.bias)


class FeedForwardMatmul(FeedForwardBase):
    """Valid: explicit matrix products (nn.Linear stores W as (out, in))."""

    def forward(self, x: Tensor) -> Tensor:
        hidden = torch.relu(x @ self.w_1.weight.T + self.w_1.bias)
        return self.dropout(hidden) @ self.w_2.weight.T + self.w_2.bias


# --- positional encoding ----------------------------------------------------------------------

def _sinusoids(max_len: int, d_model: int) -> Tensor:
    """The table in float64 with torch: sin at even features, cos at odd ones."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    frequency = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64)
                          * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    return table


class PositionsBase(nn.Module):
    """Valid: a persistent (max_len, d_model) buffer built in torch; subclasses change it."""

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000) -> None:
        super().__init__()
        self.register_buffer("pe", self.table(max_len, d_model))
        self.dropout = nn.Dropout(dropout)

    def table(self, max_len: int, d_model: int) -> Tensor:
        return _sinusoids(max_len, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(x + self.pe[: x.size(1)])


class PositionsParameter(PositionsBase):
    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000) -> None:
        nn.Module.__init__(self)
        self.pe = nn.Parameter(_sinusoids(max_len, d_model))
        self.dropout = nn.Dropout(dropout)


class PositionsSwapped(PositionsBase):
    def table(self, max_len: int, d_model: int) -> Tensor:
        table = _sinusoids(max_len, d_model)
        return torch.stack([table[:, 1::2], table[:, 0::2]], dim=-1).flatten(-2)


class PositionsHalves(PositionsBase):
    def table(self, max_len: int, d_model: int) -> Tensor:
        table = _sinusoids(max_len, d_model)
        return torch.cat([table[:, 0::2], table[:, 1::2]], dim=-1)


class PositionsWrongFrequency(PositionsBase):
    def table(self, max_len: int, d_model: int) -> Tensor:
        position = torch.arange(max_len, dtype=torch.float64)[:, None]
        i = torch.arange(d_model // 2, dtype=torch.float64)
        angle = position / 10000.0 ** (i / d_model)  # 2i / d_model intended
        return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(-2)


class PositionsScaled(PositionsBase):
    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(x * math.sqrt(x.size(-1)) + self.pe[: x.size(1)])


class PositionsNoDropout(PositionsBase):
    def forward(self, x: Tensor) -> Tensor:
        return x + self.pe[: x.size(1)]


class PositionsDropoutOnX(PositionsBase):
    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(x) + self.pe[: x.size(1)]


class PositionsDropoutTwice(PositionsBase):
    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.dropout(x + self.pe[: x.size(1)]))


class PositionsFunctionalDropout(PositionsBase):
    """Valid: F.dropout on the sum, with the module's training flag."""

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x + self.pe[: x.size(1)], self.dropout.p, self.training)


class PositionsFromNumPy(nn.Module):
    """Valid: the NumPy table of chapter 1, (1, max_len, d_model), not saved in state_dict."""

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000) -> None:
        super().__init__()
        table = torch.from_numpy(positional_encoding(max_len, d_model))[None]
        self.register_buffer("pe", table, persistent=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(x + self.pe[:, : x.size(1)])


class PositionsLoop(PositionsBase):
    """Valid: the formula entry by entry, as in the paper."""

    def table(self, max_len: int, d_model: int) -> Tensor:
        table = torch.zeros(max_len, d_model, dtype=torch.float64)
        for pos in range(max_len):
            for i in range(0, d_model, 2):
                angle = pos / 10000.0 ** (i / d_model)
                table[pos, i], table[pos, i + 1] = math.sin(angle), math.cos(angle)
        return table


# --- encoder layer ----------------------------------------------------------------------------

class LayerBase(nn.Module):
    """Valid: post-LN, written out sub-layer by sub-layer; subclasses change one step."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, mask)))
        return self.norm2(x + self.dropout(self.feed_forward(x)))


class LayerPreLN(LayerBase):
    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        y = self.norm1(x)
        x = x + self.dropout(self.self_attn(y, y, y, mask))
        return x + self.dropout(self.feed_forward(self.norm2(x)))


class LayerNoResidual(LayerBase):
    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        x = self.norm1(self.dropout(self.self_attn(x, x, x, mask)))
        return self.norm2(self.dropout(self.feed_forward(x)))


class LayerMaskIgnored(LayerBase):
    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        return super().forward(x, None)


class LayerNormsSwapped(LayerBase):
    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        x = self.norm2(x + self.dropout(self.self_attn(x, x, x, mask)))
        return self.norm1(x + self.dropout(self.feed_forward(x)))


class LayerDropoutInEval(LayerBase):
    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        p = self.dropout.p
        x = self.norm1(x + F.dropout(self.self_attn(x, x, x, mask), p))
        return self.norm2(x + F.dropout(self.feed_forward(x), p))


class LayerNoDropout(LayerBase):
    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__(d_model, h, d_ff, 0.0)  # the dropout argument is dropped


class StdLayerNorm(nn.Module):
    """Layer norm as (x - mean) / (std + eps), with nn.LayerNorm's parameter names."""

    def __init__(self, d_model: int, eps: float = 1e-6, unbiased: bool = True) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
        self.eps, self.unbiased = eps, unbiased

    def forward(self, x: Tensor) -> Tensor:
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True, unbiased=self.unbiased)
        return self.weight * (x - mean) / (std + self.eps) + self.bias


class LayerEpsOnStd(LayerBase):
    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__(d_model, h, d_ff, dropout)
        self.norm1 = StdLayerNorm(d_model, unbiased=False)
        self.norm2 = StdLayerNorm(d_model, unbiased=False)


class LayerNoResidualDropout(LayerBase):
    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        x = self.norm1(x + self.self_attn(x, x, x, mask))
        return self.norm2(x + self.feed_forward(x))


class LayerDropoutAfterNorm(LayerBase):
    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        x = self.dropout(self.norm1(x + self.self_attn(x, x, x, mask)))
        return self.dropout(self.norm2(x + self.feed_forward(x)))


class LayerDropoutOnSum(LayerBase):
    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        x = self.norm1(self.dropout(x + self.self_attn(x, x, x, mask)))
        return self.norm2(self.dropout(x + self.feed_forward(x)))


class LayerAttentionWithoutDropout(LayerBase):
    """Its own attention module keeps an nn.Dropout but never applies it."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__(d_model, h, d_ff, dropout)
        self.self_attn = AttentionNoDropout(d_model, h, dropout)


class LayerDefaultFeedForwardDropout(LayerBase):
    """PositionwiseFeedForward(d_model, d_ff): the FFN keeps its default dropout of 0.1."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__(d_model, h, d_ff, dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff)


class LayerDropoutTwice(LayerBase):
    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        x = self.norm1(x + self.dropout(self.dropout(self.self_attn(x, x, x, mask))))
        return self.norm2(x + self.dropout(self.dropout(self.feed_forward(x))))


class LayerFeedForwardDropsItsOutput(LayerBase):
    """A feed-forward network that drops its own output, in a layer that drops it again."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__(d_model, h, d_ff, dropout)
        self.feed_forward = FeedForwardDropoutOnOutput(d_model, d_ff, dropout)


class LayerFixedRateDropout(LayerBase):
    """F.dropout on the sub-layer outputs with p typed in as 0.1."""

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        x = self.norm1(x + F.dropout(self.self_attn(x, x, x, mask), 0.1, self.training))
        return self.norm2(x + F.dropout(self.feed_forward(x), 0.1, self.training))


class LayerPaperDropoutOnly(LayerBase):
    """Valid: the paper's dropout only, on each sub-layer's output; none inside the attention
    (MultiHeadAttention's default dropout is 0) nor inside the feed-forward network."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__(d_model, h, d_ff, dropout)
        self.self_attn = MultiHeadAttention(d_model, h)
        self.feed_forward = FeedForwardNoDropout(d_model, d_ff, dropout)


class LayerSublayersDropTheirOutputs(LayerBase):
    """Valid: each sub-layer module drops its own output (as minGPT's attention holds its
    resid_dropout) and the layer adds it to x without another dropout."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__(d_model, h, d_ff, dropout)
        self.self_attn = AttentionDropoutOnOutput(d_model, h, dropout)
        self.feed_forward = FeedForwardDropoutOnOutput(d_model, d_ff, dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        x = self.norm1(x + self.self_attn(x, x, x, mask))
        return self.norm2(x + self.feed_forward(x))


class LayerBernoulliAttention(LayerBase):
    """Valid: an attention that draws its own keep-mask with torch.rand (not the way
    nn.Dropout draws it), on the weights."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__(d_model, h, d_ff, dropout)
        self.self_attn = AttentionBernoulliMask(d_model, h, dropout)


class LayerFunctionalDropout(LayerBase):
    """Valid: F.dropout on each sub-layer's output, with the layer's training flag."""

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        p = self.dropout.p
        x = self.norm1(x + F.dropout(self.self_attn(x, x, x, mask), p, self.training))
        return self.norm2(x + F.dropout(self.feed_forward(x), p, self.training))


class LayerTwoDropoutModules(LayerBase):
    """Valid: one nn.Dropout per sub-layer instead of one shared module."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__(d_model, h, d_ff, dropout)
        self.dropout_attn, self.dropout_ffn = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        x = self.norm1(x + self.dropout_attn(self.self_attn(x, x, x, mask)))
        return self.norm2(x + self.dropout_ffn(self.feed_forward(x)))


class LayerResidualHelper(LayerBase):
    """Valid: the reference's residual() helper around each sub-layer."""

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        x = residual(x, lambda y: self.self_attn(y, y, y, mask), self.norm1, self.dropout, False)
        return residual(x, self.feed_forward, self.norm2, self.dropout, False)


class LayerFunctionalNorm(LayerBase):
    """Valid: F.layer_norm with the norms' own parameters, and its own einsum attention."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__(d_model, h, d_ff, dropout)
        self.self_attn = AttentionEinsum(d_model, h, dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        def norm(y: Tensor, layer: nn.LayerNorm) -> Tensor:
            return F.layer_norm(y, layer.normalized_shape, layer.weight, layer.bias, layer.eps)

        x = norm(x + self.dropout(self.self_attn(x, x, x, mask)), self.norm1)
        return norm(x + self.dropout(self.feed_forward(x)), self.norm2)


MUTANTS = [
    Mutant(EXERCISE_MHA, "no 1/sqrt(d_k) scaling", AttentionNoScale, False, "sqrt(d_k)"),
    Mutant(EXERCISE_MHA, "scaled by sqrt(d_model)", AttentionScaleByDModel, False),
    Mutant(EXERCISE_MHA, "heads split without transpose", AttentionNoTranspose, False,
           "transpose(1, 2)"),
    Mutant(EXERCISE_MHA, "mask ignored", AttentionMaskIgnored, False, "mask was ignored"),
    Mutant(EXERCISE_MHA, "mask inverted", AttentionMaskInverted, False, "inverted"),
    Mutant(EXERCISE_MHA, "softmax over the queries", AttentionSoftmaxOverQueries, False),
    Mutant(EXERCISE_MHA, "no output projection w_o", AttentionNoOutputProjection, False,
           "w_o is missing"),
    Mutant(EXERCISE_MHA, "attention dropout in eval mode", AttentionDropoutInEval, False,
           "still active after model.eval()"),
    Mutant(EXERCISE_MHA, "dropout on the output", AttentionDropoutOnOutput, False,
           "dropout acts after the weights meet the values", every_secret=True),
    Mutant(EXERCISE_MHA, "dropout on the merged heads", AttentionDropoutOnMergedHeads, False,
           "dropout acts after the weights meet the values", every_secret=True),
    Mutant(EXERCISE_MHA, "dropout on the values", AttentionDropoutOnValues, False,
           "dropout acts after the weights meet the values", every_secret=True),
    Mutant(EXERCISE_MHA, "dropout on the scores", AttentionDropoutOnScores, False,
           "after the softmax", every_secret=True),
    Mutant(EXERCISE_MHA, "no dropout on the weights (the paper's attention)", AttentionNoDropout,
           True),
    Mutant(EXERCISE_MHA, "dropout p typed in", AttentionFixedDropout, False,
           "the dropout layers use p", every_secret=True),
    Mutant(EXERCISE_MHA, "F.dropout with p typed in", AttentionFunctionalFixedRate, False,
           "use the dropout argument", every_secret=True),
    Mutant(EXERCISE_MHA, "dropout twice on the weights", AttentionDropoutTwice, False,
           "dropout acts twice", every_secret=True),
    Mutant(EXERCISE_MHA, "heads merged without transpose", AttentionMergeNoTranspose, False,
           "merged with a reshape alone", every_secret=True),
    Mutant(EXERCISE_MHA, "keys and values from the query", AttentionKeysFromQuery, False,
           "does not depend on key and value", every_secret=True),
    Mutant(EXERCISE_MHA, "dropout written out", AttentionBernoulliMask, True),
    Mutant(EXERCISE_MHA, "F.dropout on the weights", AttentionFunctionalDropout, True),
    Mutant(EXERCISE_MHA, "step by step with -inf masking", AttentionBase, True),
    Mutant(EXERCISE_MHA, "einsum", AttentionEinsum, True),
    Mutant(EXERCISE_MHA, "fused scaled_dot_product_attention", AttentionFused, True),
    Mutant(EXERCISE_MHA, "loop over heads", AttentionHeadLoop, True),
    Mutant(EXERCISE_FFN, "no ReLU", FeedForwardNoReLU, False, "ReLU between"),
    Mutant(EXERCISE_FFN, "ReLU after w_2", FeedForwardReLUAfter, False, "after w_2"),
    Mutant(EXERCISE_FFN, "GELU instead of ReLU", FeedForwardGELU, False, "GELU"),
    Mutant(EXERCISE_FFN, "dropout in eval mode", FeedForwardDropoutInEval, False,
           "still active after model.eval()"),
    Mutant(EXERCISE_FFN, "no dropout (the paper's network)", FeedForwardNoDropout, True),
    Mutant(EXERCISE_FFN, "dropout twice on the hidden layer", FeedForwardDropoutTwice, False,
           "dropout acts twice", every_secret=True),
    Mutant(EXERCISE_FFN, "dropout on the output", FeedForwardDropoutOnOutput, False,
           "acts on the output of w_2", every_secret=True),
    Mutant(EXERCISE_FFN, "dropout on the input", FeedForwardDropoutOnInput, False,
           "not the eval-mode values", every_secret=True),
    Mutant(EXERCISE_FFN, "dropped but not rescaled", FeedForwardUnscaledMask, False,
           "not divided by 1 - p", every_secret=True),
    Mutant(EXERCISE_FFN, "GELU, tanh approximation", FeedForwardGELUTanh, False,
           "tanh approximation", every_secret=True),
    Mutant(EXERCISE_FFN, "dropout before the ReLU", FeedForwardDropoutBeforeReLU, True),
    Mutant(EXERCISE_FFN, "nn.Sequential parameter names", FeedForwardSequential, False,
           "missing keys"),
    Mutant(EXERCISE_FFN, "w_2(dropout(relu(w_1(x))))", FeedForwardBase, True),
    Mutant(EXERCISE_FFN, "F.linear and clamp", FeedForwardFunctional, True),
    Mutant(EXERCISE_FFN, "explicit matrix products", FeedForwardMatmul, True),
    Mutant(EXERCISE_PE, "table as an nn.Parameter", PositionsParameter, False,
           "register_buffer"),
    Mutant(EXERCISE_PE, "sin and cos swapped", PositionsSwapped, False, "swapped"),
    Mutant(EXERCISE_PE, "sines and cosines in halves", PositionsHalves, False, "interleave"),
    Mutant(EXERCISE_PE, "frequency exponent i/d_model", PositionsWrongFrequency, False),
    Mutant(EXERCISE_PE, "x scaled by sqrt(d_model)", PositionsScaled, False, "embeddings"),
    Mutant(EXERCISE_PE, "no dropout", PositionsNoDropout, False, "no value was dropped"),
    Mutant(EXERCISE_PE, "dropout on x before adding the table", PositionsDropoutOnX, False,
           "applied to x before the positional encoding", every_secret=True),
    Mutant(EXERCISE_PE, "dropout twice on the sum", PositionsDropoutTwice, False,
           "dropout acts twice", every_secret=True),
    Mutant(EXERCISE_PE, "F.dropout on the sum", PositionsFunctionalDropout, True),
    Mutant(EXERCISE_PE, "persistent float64 buffer built in torch", PositionsBase, True),
    Mutant(EXERCISE_PE, "non-persistent buffer from the NumPy table", PositionsFromNumPy, True),
    Mutant(EXERCISE_PE, "table entry by entry", PositionsLoop, True),
    Mutant(EXERCISE_LAYER, "pre-LN", LayerPreLN, False, "pre-LN"),
    Mutant(EXERCISE_LAYER, "no residual connections", LayerNoResidual, False,
           "residual connections are missing"),
    Mutant(EXERCISE_LAYER, "mask not passed on", LayerMaskIgnored, False,
           "mask was not passed"),
    Mutant(EXERCISE_LAYER, "norm1 and norm2 swapped", LayerNormsSwapped, False, "swapped"),
    Mutant(EXERCISE_LAYER, "dropout in eval mode", LayerDropoutInEval, False,
           "still active after model.eval()"),
    Mutant(EXERCISE_LAYER, "dropout argument ignored", LayerNoDropout, False,
           "no dropout acts anywhere", every_secret=True),
    Mutant(EXERCISE_LAYER, "eps added to the standard deviation", LayerEpsOnStd, False,
           "eps is added to the standard deviation", every_secret=True),
    Mutant(EXERCISE_LAYER, "no dropout on the sub-layer outputs", LayerNoResidualDropout, False,
           "the sub-layer outputs get no dropout", every_secret=True),
    Mutant(EXERCISE_LAYER, "dropout after the norm", LayerDropoutAfterNorm, False,
           "dropout acts after the layer norm", every_secret=True),
    Mutant(EXERCISE_LAYER, "dropout on the residual sum", LayerDropoutOnSum, False,
           "x itself is dropped", every_secret=True),
    Mutant(EXERCISE_LAYER, "attention without dropout", LayerAttentionWithoutDropout, True),
    Mutant(EXERCISE_LAYER, "dropout twice on the sub-layer outputs", LayerDropoutTwice, False,
           "dropout acts twice on each sub-layer's output"),
    Mutant(EXERCISE_LAYER, "feed-forward output dropped by the network and the layer",
           LayerFeedForwardDropsItsOutput, False, "would drop it twice", every_secret=True),
    Mutant(EXERCISE_LAYER, "F.dropout with p typed in", LayerFixedRateDropout, False,
           "p=0.1 typed in"),
    Mutant(EXERCISE_LAYER, "the paper's dropout only", LayerPaperDropoutOnly, True),
    Mutant(EXERCISE_LAYER, "sub-layers drop their own outputs (minGPT)",
           LayerSublayersDropTheirOutputs, True),
    Mutant(EXERCISE_LAYER, "attention with a torch.rand keep-mask", LayerBernoulliAttention,
           True),
    Mutant(EXERCISE_LAYER, "feed-forward with its default dropout",
           LayerDefaultFeedForwardDropout, False, "the dropout layers use p", every_secret=True),
    Mutant(EXERCISE_LAYER, "F.dropout on the sub-layer outputs", LayerFunctionalDropout, True),
    Mutant(EXERCISE_LAYER, "one dropout module per sub-layer", LayerTwoDropoutModules, True),
    Mutant(EXERCISE_LAYER, "post-LN step by step", LayerBase, True),
    Mutant(EXERCISE_LAYER, "reference residual helper", LayerResidualHelper, True),
    Mutant(EXERCISE_LAYER, "F.layer_norm and einsum attention", LayerFunctionalNorm, True),
]
