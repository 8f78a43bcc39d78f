"""Attention in NumPy: softmax, masks, scaled dot-product attention, one head, many heads.

Conventions used throughout:

* batch first, with any number of leading batch dimensions ``...``;
* a query sequence of length ``n_q`` attends to a key/value sequence of length ``n_k``;
* masks are boolean (or 0/1) with **True = may attend**, broadcastable to ``(..., n_q, n_k)``;
* projections are right multiplications without bias, ``q = x @ W_q``;
* floating inputs keep their dtype (float32 in, float32 out); integers become float64.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from transformer_ref.validation import (
    require_array,
    require_broadcastable,
    require_divisible,
    require_int,
    require_mask,
    require_matmul,
    require_ndim,
    require_same_axis,
    require_same_last_dim,
)


def softmax(x: ArrayLike, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax along ``axis``: ``exp(x_i - max x) / sum_j exp(x_j - max x)``.

    Subtracting the maximum changes nothing mathematically but keeps ``exp`` from overflowing
    (logits of 1e4 work). Entries equal to ``-inf`` (masked logits) get a weight of exactly 0.
    A slice in which *every* entry is ``-inf`` has no valid distribution: its result is NaN.

    Args:
        x: array of any shape (float dtypes are kept; integers become float64).
        axis: the axis that sums to 1.

    Returns:
        Array with the shape and float dtype of ``x``; non-negative, summing to 1 along ``axis``.
    """
    x = require_array(x, "x", "softmax")
    shifted = x - np.max(x, axis=axis, keepdims=True)
    exp = np.exp(shifted)
    return exp / np.sum(exp, axis=axis, keepdims=True)


def causal_mask(n: int) -> np.ndarray:
    """Mask that lets position ``i`` attend to positions ``0 .. i`` only (no peeking ahead).

    Returns:
        bool array of shape ``(n, n)``, True on and below the diagonal.
    """
    n = require_int(n, "n", "causal_mask", minimum=0)
    return np.tril(np.ones((n, n), dtype=bool))


def padding_mask(lengths: ArrayLike, max_len: int) -> np.ndarray:
    """Mask that hides the padding at the end of shorter sequences in a batch.

    Args:
        lengths: integer array of shape ``(batch,)``, the true length of each sequence
            (``0 <= length <= max_len``).
        max_len: the padded length.

    Returns:
        bool array of shape ``(batch, 1, max_len)``, True for real tokens. The middle axis of
        size 1 broadcasts over the queries, so the mask fits scores of shape
        ``(batch, n_q, max_len)``.
    """
    where = "padding_mask"
    max_len = require_int(max_len, "max_len", where, minimum=0)
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or not np.issubdtype(lengths.dtype, np.integer):
        raise ValueError(
            f"{where}: lengths must be a 1-D integer array (batch,), got shape "
            f"{lengths.shape} with dtype {lengths.dtype}"
        )
    if lengths.size and (lengths.min() < 0 or lengths.max() > max_len):
        raise ValueError(
            f"{where}: every length must lie in [0, max_len={max_len}], got lengths "
            f"from {lengths.min()} to {lengths.max()}"
        )
    positions = np.arange(max_len)
    return (positions[None, :] < lengths[:, None])[:, None, :]


def scaled_dot_product_attention(
    q: ArrayLike, k: ArrayLike, v: ArrayLike, mask: ArrayLike | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V`` (Vaswani et al., 2017, eq. 1).

    Args:
        q: queries ``(..., n_q, d_k)``.
        k: keys ``(..., n_k, d_k)``.
        v: values ``(..., n_k, d_v)``.
        mask: optional, boolean or 0/1, broadcastable to ``(..., n_q, n_k)``; True = may
            attend. Masked scores are set to ``-inf`` so that their weights are exactly 0.
            A query row with no allowed key gets NaN weights (see :func:`softmax`).

    Returns:
        ``(out, weights)``: ``out`` of shape ``(..., n_q, d_v)`` and ``weights`` of shape
        ``(..., n_q, n_k)`` whose rows sum to 1; the float dtype of the inputs.

    Raises:
        ValueError: shapes that do not fit together, or a mask that cannot broadcast.
    """
    where = "scaled_dot_product_attention"
    q = require_array(q, "q", where)
    k = require_array(k, "k", where)
    v = require_array(v, "v", where)
    require_ndim(q, 2, "q", where, "(..., n_q, d_k)")
    require_ndim(k, 2, "k", where, "(..., n_k, d_k)")
    require_ndim(v, 2, "v", where, "(..., n_k, d_v)")
    require_same_last_dim(q, k, "q", "k", where, "q and k must share d_k")
    require_same_axis(k, v, -2, "k", "v", where, "every key needs one value (n_k)")
    batch = require_broadcastable({"q": q.shape[:-2], "k": k.shape[:-2], "v": v.shape[:-2]}, where)

    d_k = q.shape[-1]
    # math.sqrt gives a Python float, which keeps float32 inputs in float32.
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_k)
    if mask is not None:
        mask = require_mask(mask, batch + (q.shape[-2], k.shape[-2]), where)
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-1)
    return weights @ v, weights


def attention_head(
    x_q: ArrayLike,
    x_kv: ArrayLike,
    W_q: ArrayLike,
    W_k: ArrayLike,
    W_v: ArrayLike,
    mask: ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """One attention head: project, then attend.

    ``q = x_q @ W_q``, ``k = x_kv @ W_k``, ``v = x_kv @ W_v``, then
    :func:`scaled_dot_product_attention`. Self-attention passes the same array as ``x_q`` and
    ``x_kv``; encoder-decoder attention passes decoder states and encoder memory.

    Args:
        x_q: ``(..., n_q, d_model)``, the sequence that asks.
        x_kv: ``(..., n_k, d_model)``, the sequence that is looked at.
        W_q: ``(d_model, d_k)``; W_k: ``(d_model, d_k)``; W_v: ``(d_model, d_v)``.
        mask: optional, broadcastable to ``(..., n_q, n_k)``, True = may attend.

    Returns:
        ``(out, weights)`` of shapes ``(..., n_q, d_v)`` and ``(..., n_q, n_k)``.
    """
    where = "attention_head"
    x_q = require_array(x_q, "x_q", where)
    x_kv = require_array(x_kv, "x_kv", where)
    W_q = require_array(W_q, "W_q", where)
    W_k = require_array(W_k, "W_k", where)
    W_v = require_array(W_v, "W_v", where)
    require_ndim(x_q, 2, "x_q", where, "(..., n_q, d_model)")
    require_ndim(x_kv, 2, "x_kv", where, "(..., n_k, d_model)")
    require_matmul(x_q, W_q, "x_q", "W_q", where)
    require_matmul(x_kv, W_k, "x_kv", "W_k", where)
    require_matmul(x_kv, W_v, "x_kv", "W_v", where)
    require_same_last_dim(W_q, W_k, "W_q", "W_k", where, "queries and keys must share d_k")
    return scaled_dot_product_attention(x_q @ W_q, x_kv @ W_k, x_kv @ W_v, mask)


def split_heads(x: ArrayLike, num_heads: int) -> np.ndarray:
    """Split the feature axis into heads: ``(..., seq, d_model) -> (..., h, seq, d_model // h)``.

    Head ``i`` gets the features ``i * d_head .. (i + 1) * d_head - 1``. The head axis is moved
    in front of ``seq`` so that each head is an ordinary ``(seq, d_head)`` attention problem.

    Raises:
        ValueError: ``d_model`` not divisible by ``num_heads``, or ``x`` with fewer than 2 axes.
    """
    where = "split_heads"
    x = require_array(x, "x", where)
    num_heads = require_int(num_heads, "num_heads", where, minimum=1)
    require_ndim(x, 2, "x", where, "(..., seq, d_model)")
    *lead, seq, d_model = x.shape
    require_divisible(d_model, num_heads, "d_model", "num_heads", where)
    # The reshape alone would give (..., seq, h, d_head); the swap puts heads before positions.
    return np.swapaxes(x.reshape(*lead, seq, num_heads, d_model // num_heads), -2, -3)


def merge_heads(x: ArrayLike) -> np.ndarray:
    """Inverse of :func:`split_heads`: ``(..., h, seq, d_head) -> (..., seq, h * d_head)``."""
    where = "merge_heads"
    x = require_array(x, "x", where)
    require_ndim(x, 3, "x", where, "(..., num_heads, seq, d_head)")
    *lead, num_heads, seq, d_head = x.shape
    return np.swapaxes(x, -2, -3).reshape(*lead, seq, num_heads * d_head)


def multi_head_attention(
    x_q: ArrayLike,
    x_kv: ArrayLike,
    W_q: ArrayLike,
    W_k: ArrayLike,
    W_v: ArrayLike,
    W_o: ArrayLike,
    num_heads: int,
    mask: ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Multi-head attention (Vaswani et al., 2017, section 3.2.2).

    ``MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_o`` with
    ``head_i = Attention(x_q W_q^i, x_kv W_k^i, x_kv W_v^i)``, where ``W_q^i`` is the i-th block
    of ``d_model // h`` columns of ``W_q`` (likewise ``W_k``, ``W_v``). All heads are computed at
    once: project with the full matrices, :func:`split_heads`, attend, :func:`merge_heads`.

    Args:
        x_q: ``(..., n_q, d_model)``.
        x_kv: ``(..., n_k, d_model)``.
        W_q, W_k, W_v: ``(d_model, d_model)`` (more generally ``(d_model, h * d_head)``).
        W_o: ``(d_model, d_model)`` (more generally ``(h * d_v, d_out)``).
        num_heads: number of heads ``h``; must divide the projected width.
        mask: optional, broadcastable to ``(..., n_q, n_k)``, True = may attend; the same mask
            applies to every head.

    Returns:
        ``(out, weights)``: ``out`` ``(..., n_q, d_out)``, ``weights`` ``(..., h, n_q, n_k)``.
    """
    where = "multi_head_attention"
    x_q = require_array(x_q, "x_q", where)
    x_kv = require_array(x_kv, "x_kv", where)
    W_q, W_k, W_v, W_o = (
        require_array(w, name, where)
        for w, name in ((W_q, "W_q"), (W_k, "W_k"), (W_v, "W_v"), (W_o, "W_o"))
    )
    num_heads = require_int(num_heads, "num_heads", where, minimum=1)
    require_ndim(x_q, 2, "x_q", where, "(..., n_q, d_model)")
    require_ndim(x_kv, 2, "x_kv", where, "(..., n_k, d_model)")
    require_matmul(x_q, W_q, "x_q", "W_q", where)
    require_matmul(x_kv, W_k, "x_kv", "W_k", where)
    require_matmul(x_kv, W_v, "x_kv", "W_v", where)
    require_same_last_dim(W_q, W_k, "W_q", "W_k", where, "queries and keys must share d_k")
    require_divisible(W_q.shape[1], num_heads, "W_q.shape[1]", "num_heads", where)
    require_divisible(W_v.shape[1], num_heads, "W_v.shape[1]", "num_heads", where)
    require_matmul(W_v, W_o, "W_v", "W_o", where)

    if mask is not None:
        batch = require_broadcastable({"x_q": x_q.shape[:-2], "x_kv": x_kv.shape[:-2]}, where)
        mask = require_mask(mask, batch + (x_q.shape[-2], x_kv.shape[-2]), where)
        if mask.ndim >= 2:
            # (..., n_q, n_k) -> (..., 1, n_q, n_k): one mask, shared by all heads.
            mask = mask[..., None, :, :]

    q = split_heads(x_q @ W_q, num_heads)
    k = split_heads(x_kv @ W_k, num_heads)
    v = split_heads(x_kv @ W_v, num_heads)
    heads, weights = scaled_dot_product_attention(q, k, v, mask)
    return merge_heads(heads) @ W_o, weights
