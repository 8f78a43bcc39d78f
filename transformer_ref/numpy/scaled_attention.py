"""Chapter 2 in NumPy: a stable softmax, causal and padding masks, scaled dot-product attention.

Conventions: see :mod:`transformer_ref.np_attention`.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from transformer_ref.validation import (
    require_array,
    require_broadcastable,
    require_int,
    require_mask,
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
