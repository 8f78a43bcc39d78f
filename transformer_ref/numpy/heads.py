"""Chapter 4 in NumPy: splitting and merging heads, multi-head attention.

Conventions: see :mod:`transformer_ref.np_attention`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from transformer_ref.numpy.scaled_attention import scaled_dot_product_attention
from transformer_ref.validation import (
    require_array,
    require_broadcastable,
    require_divisible,
    require_int,
    require_mask,
    require_matmul,
    require_ndim,
    require_same_last_dim,
)


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
