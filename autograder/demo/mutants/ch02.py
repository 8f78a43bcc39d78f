"""Buggy and valid implementations of the chapter 2 exercises (softmax, masks, attention).

Masks are boolean with True = may attend. ``scaled_dot_product_attention(q, k, v, mask=None)``
takes ``q (..., n_q, d_k)``, ``k (..., n_k, d_k)``, ``v (..., n_k, d_v)`` and a mask
broadcastable to ``(..., n_q, n_k)``, and returns ``(out (..., n_q, d_v), weights)``.
"""

from __future__ import annotations

import math

import numpy as np

from autograder.demo.mutants import Mutant

SOFTMAX = "ch02.softmax"
CAUSAL = "ch02.causal_mask"
PADDING = "ch02.padding_mask"
SDPA = "ch02.scaled_dot_product_attention"


# --- softmax ----------------------------------------------------------------------------------

def softmax_naive(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """exp without subtracting the maximum: overflows for large logits."""
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_global_max(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Subtracts one maximum for the whole array: rows far below it underflow to 0 / 0."""
    e = np.exp(x - np.max(x))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_axis_ignored(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Always normalises the last axis."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_max_without_keepdims(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """np.max without keepdims: broadcasts along the wrong axis when the slices are square."""
    e = np.exp(x - np.max(x, axis=axis))
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_sum_without_keepdims(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """np.sum without keepdims: divides by the sums of other slices."""
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis)


def softmax_whole_array(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Normalises over every element instead of along the axis."""
    e = np.exp(x - x.max())
    return e / e.sum()


def softmax_in_place(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Right values, but it overwrites the caller's array."""
    x -= x.max(axis=axis, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=axis, keepdims=True)
    return x


def softmax_logsumexp(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """exp(x - logsumexp(x)), with the stable logsumexp."""
    m = x.max(axis=axis, keepdims=True)
    lse = m + np.log(np.exp(x - m).sum(axis=axis, keepdims=True))
    return np.exp(x - lse)


def softmax_loop(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Moves the axis last and normalises one slice at a time."""
    moved = np.moveaxis(x, axis, -1)
    out = np.empty_like(moved)
    for index in np.ndindex(moved.shape[:-1]):
        row = moved[index]
        e = np.exp(row - row.max())
        out[index] = e / e.sum()
    return np.moveaxis(out, -1, axis)


def softmax_float64(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Computes in float64 and returns the input's dtype."""
    x64 = np.asarray(x, dtype=np.float64)
    e = np.exp(x64 - x64.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)


# --- causal_mask ------------------------------------------------------------------------------

def softmax_float64_result(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Computes in float64 and forgets to convert back."""
    x64 = np.asarray(x, dtype=np.float64)
    e = np.exp(x64 - x64.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def causal_inverted(n: int) -> np.ndarray:
    """True above the diagonal: marks the forbidden positions."""
    return np.triu(np.ones((n, n), dtype=bool), k=1)


def causal_strict(n: int) -> np.ndarray:
    """Strictly below the diagonal: a position cannot attend to itself."""
    return np.tril(np.ones((n, n), dtype=bool), k=-1)


def causal_upper(n: int) -> np.ndarray:
    """On and above the diagonal: rows and columns mixed up."""
    return np.triu(np.ones((n, n), dtype=bool))


def causal_float(n: int) -> np.ndarray:
    """Right pattern, but float 0/1."""
    return np.tril(np.ones((n, n)))


def causal_from_tril_of_ones(n: int) -> np.ndarray:
    """np.tril of an integer matrix of ones: 0/1 integers in the right places."""
    return np.tril(np.ones((n, n), dtype=np.int64))


def causal_loop(n: int) -> np.ndarray:
    mask = np.zeros((n, n), dtype=bool)
    for i in range(n):
        for j in range(i + 1):
            mask[i, j] = True
    return mask


def causal_arange(n: int) -> np.ndarray:
    positions = np.arange(n)
    return positions[:, None] >= positions[None, :]


def causal_tri(n: int) -> np.ndarray:
    return np.tri(n, dtype=bool)


# --- padding_mask -----------------------------------------------------------------------------

def _real_tokens(lengths: np.ndarray, max_len: int) -> np.ndarray:
    return np.arange(max_len)[None, :] < np.asarray(lengths)[:, None]


def padding_inverted(lengths: np.ndarray, max_len: int) -> np.ndarray:
    """True on the padding."""
    return ~_real_tokens(lengths, max_len)[:, None, :]


def padding_off_by_one(lengths: np.ndarray, max_len: int) -> np.ndarray:
    """position <= length: one padding position too many counts as real."""
    return (np.arange(max_len)[None, :] <= np.asarray(lengths)[:, None])[:, None, :]


def padding_no_query_axis(lengths: np.ndarray, max_len: int) -> np.ndarray:
    """Shape (batch, max_len): the query axis is missing."""
    return _real_tokens(lengths, max_len)


def padding_axis_last(lengths: np.ndarray, max_len: int) -> np.ndarray:
    """Shape (batch, max_len, 1): the new axis on the wrong side."""
    return _real_tokens(lengths, max_len)[:, :, None]


def padding_int(lengths: np.ndarray, max_len: int) -> np.ndarray:
    """Right pattern, but integer 0/1."""
    return _real_tokens(lengths, max_len)[:, None, :].astype(np.int64)


def padding_loop(lengths: np.ndarray, max_len: int) -> np.ndarray:
    mask = np.zeros((len(lengths), 1, max_len), dtype=bool)
    for b, length in enumerate(lengths):
        mask[b, 0, :length] = True
    return mask


def padding_greater_outer(lengths: np.ndarray, max_len: int) -> np.ndarray:
    return np.expand_dims(np.greater.outer(lengths, np.arange(max_len)), 1)


# --- scaled_dot_product_attention -------------------------------------------------------------

def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _scores(q: np.ndarray, k: np.ndarray, scale: float) -> np.ndarray:
    return q @ np.swapaxes(k, -1, -2) / scale


def _masked(scores: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    return scores if mask is None else np.where(mask, scores, -np.inf)


def sdpa_no_scale(q, k, v, mask=None):
    """Forgets to divide by sqrt(d_k)."""
    w = _softmax(_masked(_scores(q, k, 1.0), mask))
    return w @ v, w


def sdpa_divide_by_d_k(q, k, v, mask=None):
    """Divides by d_k instead of sqrt(d_k)."""
    w = _softmax(_masked(_scores(q, k, q.shape[-1]), mask))
    return w @ v, w


def sdpa_scale_d_v(q, k, v, mask=None):
    """Uses the width of the values for the scale."""
    w = _softmax(_masked(_scores(q, k, math.sqrt(v.shape[-1])), mask))
    return w @ v, w


def sdpa_softmax_over_queries(q, k, v, mask=None):
    """Softmax over axis -2 (the queries)."""
    s = _masked(_scores(q, k, math.sqrt(q.shape[-1])), mask)
    e = np.exp(s - s.max(axis=-2, keepdims=True))
    w = e / e.sum(axis=-2, keepdims=True)
    return w @ v, w


def sdpa_mask_inverted(q, k, v, mask=None):
    """Hides the positions the mask allows."""
    s = _scores(q, k, math.sqrt(q.shape[-1]))
    w = _softmax(s if mask is None else np.where(mask, -np.inf, s))
    return w @ v, w


def sdpa_mask_ignored(q, k, v, mask=None):
    """Accepts a mask and never uses it."""
    w = _softmax(_scores(q, k, math.sqrt(q.shape[-1])))
    return w @ v, w


def sdpa_mask_after_softmax(q, k, v, mask=None):
    """Zeroes masked weights after the softmax, without renormalising."""
    w = _softmax(_scores(q, k, math.sqrt(q.shape[-1])))
    if mask is not None:
        w = w * mask
    return w @ v, w


def sdpa_mask_to_zero(q, k, v, mask=None):
    """Multiplies the scores by the mask: masked scores become 0, not -inf."""
    s = _scores(q, k, math.sqrt(q.shape[-1]))
    w = _softmax(s if mask is None else s * mask)
    return w @ v, w


def sdpa_naive_softmax(q, k, v, mask=None):
    """exp without subtracting the row maximum."""
    e = np.exp(_masked(_scores(q, k, math.sqrt(q.shape[-1])), mask))
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def sdpa_full_transpose(q, k, v, mask=None):
    """k.T reverses every axis, not just the last two."""
    w = _softmax(_masked(q @ k.T / math.sqrt(q.shape[-1]), mask))
    return w @ v, w


def sdpa_boolean_index(q, k, v, mask=None):
    """scores[~mask] = -inf: fails when the mask only broadcasts to the scores."""
    s = _scores(q, k, math.sqrt(q.shape[-1]))
    if mask is not None:
        s[~mask] = -np.inf
    w = _softmax(s)
    return w @ v, w


def sdpa_swapped_outputs(q, k, v, mask=None):
    """Returns (weights, out)."""
    w = _softmax(_masked(_scores(q, k, math.sqrt(q.shape[-1])), mask))
    return w, w @ v


def sdpa_out_only(q, k, v, mask=None):
    """Returns only the output."""
    w = _softmax(_masked(_scores(q, k, math.sqrt(q.shape[-1])), mask))
    return w @ v


def sdpa_keys_as_values(q, k, v, mask=None):
    """Averages the keys instead of the values."""
    w = _softmax(_masked(_scores(q, k, math.sqrt(q.shape[-1])), mask))
    return w @ k, w


def sdpa_einsum(q, k, v, mask=None):
    """einsum for both products."""
    s = np.einsum("...qd,...kd->...qk", q, k) / q.shape[-1] ** 0.5
    w = _softmax(_masked(s, mask))
    return np.einsum("...qk,...kd->...qd", w, v), w


def sdpa_numpy_sqrt(q, k, v, mask=None):
    """Divides by np.sqrt(d_k), a NumPy float64 scalar: float32 scores become float64."""
    s = _masked(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]), mask)
    w = _softmax(s)
    return w @ v, w


def sdpa_one_batch_axis(q, k, v, mask=None):
    """Unpacks q.shape into three names: only one batch axis works."""
    batch, n_q, d_k = q.shape
    w = _softmax(_masked(q @ np.swapaxes(k, -1, -2) / math.sqrt(d_k), mask))
    return w @ v, w


def sdpa_inverted_mask_where(q, k, v, mask=None):
    """np.where(~mask, -inf, scores): right for boolean masks, a TypeError for 0/1 floats."""
    s = _scores(q, k, math.sqrt(q.shape[-1]))
    if mask is not None:
        s = np.where(~mask, -np.inf, s)
    w = _softmax(s)
    return w @ v, w


def sdpa_bool_mask(q, k, v, mask=None):
    """Converts a 0/1 mask to booleans before inverting it."""
    s = _scores(q, k, math.sqrt(q.shape[-1]))
    if mask is not None:
        s = np.where(~np.asarray(mask, dtype=bool), -np.inf, s)
    w = _softmax(s)
    return w @ v, w


def sdpa_large_negative(q, k, v, mask=None):
    """Masked scores set to -1e9 instead of -inf."""
    s = _scores(q, k, math.sqrt(q.shape[-1]))
    if mask is not None:
        s = np.where(mask, s, -1e9)
    w = _softmax(s)
    return w @ v, w


def sdpa_float64_loop(q, k, v, mask=None):
    """float64, one query row at a time over a flattened batch, cast back at the end."""
    dtype = np.result_type(q, k, v)
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    n_q, n_k = q.shape[-2], k.shape[-2]
    full_mask = np.ones(batch + (n_q, n_k), dtype=bool) if mask is None else mask
    qs = np.broadcast_to(q, batch + q.shape[-2:]).reshape(-1, n_q, q.shape[-1])
    ks = np.broadcast_to(k, batch + k.shape[-2:]).reshape(-1, n_k, k.shape[-1])
    vs = np.broadcast_to(v, batch + v.shape[-2:]).reshape(-1, n_k, v.shape[-1])
    ms = np.broadcast_to(full_mask, batch + (n_q, n_k)).reshape(-1, n_q, n_k)
    out = np.zeros((len(qs), n_q, vs.shape[-1]))
    weights = np.zeros((len(qs), n_q, n_k))
    for b in range(len(qs)):
        for i in range(n_q):
            row = ks[b].astype(np.float64) @ qs[b, i].astype(np.float64) / math.sqrt(q.shape[-1])
            row = np.where(ms[b, i], row, -np.inf)
            e = np.exp(row - row.max())
            weights[b, i] = e / e.sum()
            out[b, i] = weights[b, i] @ vs[b]
    return (out.reshape(batch + (n_q, -1)).astype(dtype),
            weights.reshape(batch + (n_q, n_k)).astype(dtype))


MUTANTS = [
    Mutant(SOFTMAX, "no max subtraction", softmax_naive, False, "exp overflowed"),
    Mutant(SOFTMAX, "one global maximum", softmax_global_max, False, "maximum of each slice"),
    Mutant(SOFTMAX, "axis argument ignored", softmax_axis_ignored, False, "sum to 1"),
    Mutant(SOFTMAX, "max without keepdims", softmax_max_without_keepdims, False, "keepdims"),
    Mutant(SOFTMAX, "sum without keepdims", softmax_sum_without_keepdims, False, "keepdims"),
    Mutant(SOFTMAX, "normalised over the whole array", softmax_whole_array, False, "sum to 1"),
    Mutant(SOFTMAX, "modifies its input", softmax_in_place, False, "in place"),
    Mutant(SOFTMAX, "float32 input, float64 result", softmax_float64_result, True,
           every_secret=True, note="costs no points"),
    Mutant(SOFTMAX, "logsumexp", softmax_logsumexp, True),
    Mutant(SOFTMAX, "loop over slices", softmax_loop, True),
    Mutant(SOFTMAX, "float64 inside", softmax_float64, True),
    Mutant(CAUSAL, "inverted", causal_inverted, False, "inverted"),
    Mutant(CAUSAL, "diagonal missing", causal_strict, False, "diagonal must be True"),
    Mutant(CAUSAL, "upper triangle", causal_upper, False, "upper triangle"),
    Mutant(CAUSAL, "float 0/1", causal_float, False, "0s and 1s are in the right places"),
    Mutant(CAUSAL, "integer 0/1 from np.tril", causal_from_tril_of_ones, False,
           "the masks the course builds are boolean", every_secret=True),
    Mutant(CAUSAL, "loops", causal_loop, True),
    Mutant(CAUSAL, "arange comparison", causal_arange, True),
    Mutant(CAUSAL, "np.tri", causal_tri, True),
    Mutant(PADDING, "inverted", padding_inverted, False, "inverted"),
    Mutant(PADDING, "off by one", padding_off_by_one, False, "off by one"),
    Mutant(PADDING, "no query axis", padding_no_query_axis, False, "query axis"),
    Mutant(PADDING, "new axis last", padding_axis_last, False, "permuted"),
    Mutant(PADDING, "integer 0/1", padding_int, False, "boolean"),
    Mutant(PADDING, "loop", padding_loop, True),
    Mutant(PADDING, "np.greater.outer", padding_greater_outer, True),
    Mutant(SDPA, "no scaling", sdpa_no_scale, False, "without dividing the scores by sqrt(d_k)"),
    Mutant(SDPA, "divides by d_k", sdpa_divide_by_d_k, False, "divided by d_k"),
    Mutant(SDPA, "scales with d_v", sdpa_scale_d_v, False, "d_v"),
    Mutant(SDPA, "softmax over the queries", sdpa_softmax_over_queries, False, "sum to 1"),
    Mutant(SDPA, "mask inverted", sdpa_mask_inverted, False, "inverted"),
    Mutant(SDPA, "mask ignored", sdpa_mask_ignored, False, "received weight"),
    Mutant(SDPA, "mask after softmax", sdpa_mask_after_softmax, False, "after the softmax"),
    Mutant(SDPA, "masked scores set to 0", sdpa_mask_to_zero, False, "set to 0"),
    Mutant(SDPA, "softmax without max subtraction", sdpa_naive_softmax, False, "overflows"),
    Mutant(SDPA, "k.T with batch axes", sdpa_full_transpose, False, "np.swapaxes(k, -1, -2)",
           every_secret=True),
    Mutant(SDPA, "np.sqrt(d_k) makes float32 float64", sdpa_numpy_sqrt, True,
           every_secret=True, note="a Python float does not (math.sqrt(d_k), d_k ** 0.5)"),
    Mutant(SDPA, "one batch axis unpacked", sdpa_one_batch_axis, False, "*batch, n, d",
           every_secret=True),
    Mutant(SDPA, "~mask on a 0/1 mask", sdpa_inverted_mask_where, False,
           "np.asarray(mask, dtype=bool)", every_secret=True),
    Mutant(SDPA, "0/1 mask converted to bool", sdpa_bool_mask, True),
    Mutant(SDPA, "boolean indexing with the mask", sdpa_boolean_index, False, "np.where"),
    Mutant(SDPA, "returns (weights, out)", sdpa_swapped_outputs, False, "(out, weights)"),
    Mutant(SDPA, "returns out only", sdpa_out_only, False, "expected a tuple"),
    Mutant(SDPA, "weights @ k", sdpa_keys_as_values, False, "multiply the weights by the values"),
    Mutant(SDPA, "einsum", sdpa_einsum, True),
    Mutant(SDPA, "-1e9 for masked scores", sdpa_large_negative, True),
    Mutant(SDPA, "float64 loops", sdpa_float64_loop, True),
]
