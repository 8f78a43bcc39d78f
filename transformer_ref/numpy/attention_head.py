"""Chapter 3 in NumPy: one attention head (projections, then scaled dot-product attention).

Conventions: see :mod:`transformer_ref.np_attention`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from transformer_ref.numpy.scaled_attention import scaled_dot_product_attention
from transformer_ref.validation import (
    require_array,
    require_matmul,
    require_ndim,
    require_same_last_dim,
)


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
