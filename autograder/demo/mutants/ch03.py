"""Buggy and valid implementations of the chapter 3 exercise (one attention head).

``attention_head(x_q, x_kv, W_q, W_k, W_v, mask=None)`` computes ``q = x_q @ W_q``,
``k = x_kv @ W_k``, ``v = x_kv @ W_v`` (``W_q, W_k: (d_model, d_k)``, ``W_v: (d_model, d_v)``)
and returns ``softmax(q k^T / sqrt(d_k)) v`` with its weights; the mask (True = may attend)
broadcasts to ``(..., n_q, n_k)``.
"""

from __future__ import annotations

import math

import numpy as np

from autograder.demo.mutants import Mutant

HEAD = "ch03.attention_head"


def _attend(q, k, v, mask, scale):
    scores = q @ np.swapaxes(k, -1, -2) / scale
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def head_scale_d_model(x_q, x_kv, W_q, W_k, W_v, mask=None):
    """Divides the scores by sqrt(d_model) instead of sqrt(d_k)."""
    return _attend(x_q @ W_q, x_kv @ W_k, x_kv @ W_v, mask, math.sqrt(x_q.shape[-1]))


def head_no_scale(x_q, x_kv, W_q, W_k, W_v, mask=None):
    """Forgets the scale altogether."""
    return _attend(x_q @ W_q, x_kv @ W_k, x_kv @ W_v, mask, 1.0)


def head_keys_from_queries(x_q, x_kv, W_q, W_k, W_v, mask=None):
    """Projects x_q for the keys and values too: only right for self-attention."""
    return _attend(x_q @ W_q, x_q @ W_k, x_q @ W_v, mask, math.sqrt(W_k.shape[1]))


def head_keys_values_swapped(x_q, x_kv, W_q, W_k, W_v, mask=None):
    """Uses W_v for the keys and W_k for the values."""
    return _attend(x_q @ W_q, x_kv @ W_v, x_kv @ W_k, mask, math.sqrt(W_k.shape[1]))


def head_queries_keys_swapped(x_q, x_kv, W_q, W_k, W_v, mask=None):
    """Uses W_k for the queries and W_q for the keys."""
    return _attend(x_q @ W_k, x_kv @ W_q, x_kv @ W_v, mask, math.sqrt(W_k.shape[1]))


def head_mask_dropped(x_q, x_kv, W_q, W_k, W_v, mask=None):
    """Never passes the mask on."""
    return _attend(x_q @ W_q, x_kv @ W_k, x_kv @ W_v, None, math.sqrt(W_k.shape[1]))


def head_numpy_sqrt(x_q, x_kv, W_q, W_k, W_v, mask=None):
    """Scales by np.sqrt(d_k), a NumPy float64 scalar: float32 inputs give float64 results."""
    return _attend(x_q @ W_q, x_kv @ W_k, x_kv @ W_v, mask, np.sqrt(W_k.shape[1]))


def head_transposed_weights(x_q, x_kv, W_q, W_k, W_v, mask=None):
    """Projects with W.T @ x, the column-vector habit."""
    q = np.swapaxes(W_q.T @ np.swapaxes(x_q, -1, -2), -1, -2)
    k = np.swapaxes(W_k.T @ np.swapaxes(x_kv, -1, -2), -1, -2)
    v = np.swapaxes(W_v @ np.swapaxes(x_kv, -1, -2), -1, -2)
    return _attend(q, k, v, mask, math.sqrt(W_k.shape[1]))


def head_einsum(x_q, x_kv, W_q, W_k, W_v, mask=None):
    """Projections and attention with einsum."""
    q = np.einsum("...nd,dk->...nk", x_q, W_q)
    k = np.einsum("...nd,dk->...nk", x_kv, W_k)
    v = np.einsum("...nd,dv->...nv", x_kv, W_v)
    scores = np.einsum("...qk,...nk->...qn", q, k) / math.sqrt(k.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return np.einsum("...qn,...nv->...qv", weights, v), weights


def head_float64(x_q, x_kv, W_q, W_k, W_v, mask=None):
    """Works in float64 and casts the results back to the inputs' dtype."""
    dtype = np.result_type(x_q, x_kv, W_q, W_k, W_v)
    x_q, x_kv = x_q.astype(np.float64), x_kv.astype(np.float64)
    q, k, v = x_q @ W_q.astype(np.float64), x_kv @ W_k.astype(np.float64), x_kv @ W_v
    out, weights = _attend(q, k, v.astype(np.float64), mask, math.sqrt(k.shape[-1]))
    return out.astype(dtype), weights.astype(dtype)


def head_per_row(x_q, x_kv, W_q, W_k, W_v, mask=None):
    """Projects the whole batch, then attends one query at a time."""
    q, k, v = x_q @ W_q, x_kv @ W_k, x_kv @ W_v
    n_q, n_k = q.shape[-2], k.shape[-2]
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    allowed = np.ones(batch + (n_q, n_k), dtype=bool) if mask is None else mask
    allowed = np.broadcast_to(allowed, batch + (n_q, n_k))
    weights = np.zeros(batch + (n_q, n_k), dtype=q.dtype)
    for index in np.ndindex(*batch, n_q):
        row = k[index[:-1]] @ q[index] / math.sqrt(k.shape[-1])
        row = np.where(allowed[index], row, -np.inf)
        e = np.exp(row - row.max())
        weights[index] = e / e.sum()
    return weights @ v, weights


MUTANTS = [
    Mutant(HEAD, "scaled by sqrt(d_model)", head_scale_d_model, False, "sqrt(d_model)"),
    Mutant(HEAD, "no scale", head_no_scale, False, "without dividing the scores by sqrt(d_k)"),
    Mutant(HEAD, "keys and values from x_q", head_keys_from_queries, False, "x_kv"),
    Mutant(HEAD, "W_k and W_v swapped", head_keys_values_swapped, False, "W_k and W_v"),
    Mutant(HEAD, "W_q and W_k swapped", head_queries_keys_swapped, False, "W_q and W_k"),
    Mutant(HEAD, "mask not passed on", head_mask_dropped, False, "received weight"),
    Mutant(HEAD, "column-vector projections", head_transposed_weights, False, "raised"),
    Mutant(HEAD, "np.sqrt(d_k) makes float32 float64", head_numpy_sqrt, True,
           every_secret=True, note="np.sqrt(d_k)"),
    Mutant(HEAD, "einsum", head_einsum, True),
    Mutant(HEAD, "float64 inside", head_float64, True),
    Mutant(HEAD, "one query at a time", head_per_row, True),
]
