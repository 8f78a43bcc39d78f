"""Buggy and valid implementations of the chapter 4 exercises (multi-head attention).

Shapes follow section 4 of the course design: ``split_heads`` maps ``(..., seq, d_model)`` to
``(..., num_heads, seq, d_k)`` with ``d_k = d_model // num_heads``, ``merge_heads`` inverts it,
and ``multi_head_attention`` projects with ``(d_model, d_model)`` matrices (``x @ W``), attends
per head and returns ``(out (..., n_q, d_model), weights (..., num_heads, n_q, n_k))``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from autograder.demo.mutants import Mutant
from transformer_ref.np_attention import merge_heads, softmax, split_heads
from transformer_ref.numpy.attention_head import attention_head

Array = np.ndarray

EXERCISE_SPLIT = "ch04.split_heads"
EXERCISE_MERGE = "ch04.merge_heads"
EXERCISE_MHA = "ch04.multi_head_attention"


def _head_size(d_model: int, num_heads: int) -> int:
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return d_model // num_heads


# --- split_heads ----------------------------------------------------------------------------

def split_no_transpose(x: np.ndarray, num_heads: int) -> np.ndarray:
    """Reshapes straight to (..., h, seq, d_k): mixes positions into heads."""
    *lead, seq, d_model = x.shape
    return x.reshape(*lead, num_heads, seq, _head_size(d_model, num_heads))


def split_interleaved(x: np.ndarray, num_heads: int) -> np.ndarray:
    """Takes every h-th feature for a head instead of a contiguous block."""
    *lead, seq, d_model = x.shape
    d_k = _head_size(d_model, num_heads)
    return np.moveaxis(x.reshape(*lead, seq, d_k, num_heads), -1, -3)


def split_no_divisibility_check(x: np.ndarray, num_heads: int) -> np.ndarray:
    """Silently drops the trailing features when d_model is not divisible by num_heads."""
    *lead, seq, d_model = x.shape
    d_k = d_model // num_heads
    parts = x[..., : num_heads * d_k].reshape(*lead, seq, num_heads, d_k)
    return np.swapaxes(parts, -2, -3)


def split_three_dims_only(x: np.ndarray, num_heads: int) -> np.ndarray:
    """Hard-codes one batch axis: (batch, seq, d_model) only."""
    batch, seq, d_model = x.shape[0], x.shape[-2], x.shape[-1]
    d_k = _head_size(d_model, num_heads)
    return x.reshape(batch, seq, num_heads, d_k).transpose(0, 2, 1, 3)


def split_message_without_numbers(x: np.ndarray, num_heads: int) -> np.ndarray:
    """Raises for a d_model not divisible by num_heads, but the message hides both numbers."""
    *lead, seq, d_model = x.shape
    if d_model % num_heads:
        raise ValueError("the model width must be divisible by the number of heads")
    return np.swapaxes(x.reshape(*lead, seq, num_heads, d_model // num_heads), -2, -3)


def split_loop(x: np.ndarray, num_heads: int) -> np.ndarray:
    """Valid: slices one contiguous block per head and stacks them."""
    d_k = _head_size(x.shape[-1], num_heads)
    return np.stack([x[..., i * d_k : (i + 1) * d_k] for i in range(num_heads)], axis=-3)


def split_moveaxis(x: np.ndarray, num_heads: int) -> np.ndarray:
    """Valid: reshape then moveaxis instead of swapaxes/transpose."""
    *lead, seq, d_model = x.shape
    d_k = _head_size(d_model, num_heads)
    return np.moveaxis(x.reshape(*lead, seq, num_heads, d_k), -2, -3)


# --- merge_heads ----------------------------------------------------------------------------

def merge_no_transpose(x: np.ndarray) -> np.ndarray:
    """Reshapes (..., h, seq, d_k) straight to (..., seq, h * d_k)."""
    *lead, h, seq, d_k = x.shape
    return x.reshape(*lead, seq, h * d_k)


def merge_interleaved(x: np.ndarray) -> np.ndarray:
    """Puts the head axis last, so the features of the heads end up interleaved."""
    *lead, h, seq, d_k = x.shape
    return np.moveaxis(x, -3, -1).reshape(*lead, seq, h * d_k)


def merge_four_dims_only(x: np.ndarray) -> np.ndarray:
    """Hard-codes one batch axis: (batch, h, seq, d_k) only."""
    batch, h, seq, d_k = x.shape[0], x.shape[-3], x.shape[-2], x.shape[-1]
    return x.transpose(0, 2, 1, 3).reshape(batch, seq, h * d_k)


def merge_heads_reversed(x: np.ndarray) -> np.ndarray:
    """Concatenates the heads last to first."""
    return np.concatenate([x[..., i, :, :] for i in reversed(range(x.shape[-3]))], axis=-1)


def merge_concatenate(x: np.ndarray) -> np.ndarray:
    """Valid: concatenates the heads along the feature axis, first to last."""
    return np.concatenate([x[..., i, :, :] for i in range(x.shape[-3])], axis=-1)


def merge_swapaxes(x: np.ndarray) -> np.ndarray:
    """Valid: swapaxes then reshape with -1."""
    *lead, _, seq, _ = x.shape
    return np.swapaxes(x, -2, -3).reshape(*lead, seq, -1)


# --- multi_head_attention -------------------------------------------------------------------

def _attend(
    q: Array, k: Array, v: Array, mask: Array | None, scale: float, axis: int = -1
) -> tuple[Array, Array]:
    """Attention over split heads, with a head axis already inserted into ``mask``."""
    scores = q @ np.swapaxes(k, -1, -2) / scale
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    weights = softmax(scores, axis=axis)
    return weights @ v, weights


def _heads_mask(mask: Array | None) -> Array | None:
    return None if mask is None else np.expand_dims(np.asarray(mask, dtype=bool), -3)


def _mha(
    x_q: Array, x_kv: Array, W_q: Array, W_k: Array, W_v: Array, W_o: Array, num_heads: int,
    mask: Array | None, *, scale: float | None = None, axis: int = -1,
    head_mask: Callable[[Array | None], Array | None] = _heads_mask, project: bool = True,
) -> tuple[Array, Array]:
    q = split_heads(x_q @ W_q, num_heads)
    k = split_heads(x_kv @ W_k, num_heads)
    v = split_heads(x_kv @ W_v, num_heads)
    scale = math.sqrt(q.shape[-1]) if scale is None else scale
    heads, weights = _attend(q, k, v, head_mask(mask), scale, axis)
    merged = merge_heads(heads)
    return (merged @ W_o if project else merged), weights


def mha_no_output_projection(
    x_q: Array, x_kv: Array, W_q: Array, W_k: Array, W_v: Array, W_o: Array, num_heads: int,
    mask: Array | None = None,
) -> tuple[Array, Array]:
    """Returns the concatenated heads without multiplying by W_o."""
    return _mha(x_q, x_kv, W_q, W_k, W_v, W_o, num_heads, mask, project=False)


def mha_scale_by_d_model(
    x_q: Array, x_kv: Array, W_q: Array, W_k: Array, W_v: Array, W_o: Array, num_heads: int,
    mask: Array | None = None,
) -> tuple[Array, Array]:
    """Divides the scores by sqrt(d_model) instead of sqrt(d_k)."""
    return _mha(x_q, x_kv, W_q, W_k, W_v, W_o, num_heads, mask,
                scale=math.sqrt(W_q.shape[-1]))


def mha_mask_without_head_axis(
    x_q: Array, x_kv: Array, W_q: Array, W_k: Array, W_v: Array, W_o: Array, num_heads: int,
    mask: Array | None = None,
) -> tuple[Array, Array]:
    """Applies the mask as given, so a batched mask lines up its batch axis with the heads."""
    return _mha(x_q, x_kv, W_q, W_k, W_v, W_o, num_heads, mask,
                head_mask=lambda m: None if m is None else np.asarray(m, dtype=bool))


def mha_mask_ignored(
    x_q: Array, x_kv: Array, W_q: Array, W_k: Array, W_v: Array, W_o: Array, num_heads: int,
    mask: Array | None = None,
) -> tuple[Array, Array]:
    """Forgets to pass the mask on."""
    return _mha(x_q, x_kv, W_q, W_k, W_v, W_o, num_heads, None)


def mha_softmax_wrong_axis(
    x_q: Array, x_kv: Array, W_q: Array, W_k: Array, W_v: Array, W_o: Array, num_heads: int,
    mask: Array | None = None,
) -> tuple[Array, Array]:
    """Normalises over the queries instead of the keys."""
    return _mha(x_q, x_kv, W_q, W_k, W_v, W_o, num_heads, mask, axis=-2)


def mha_heads_reversed(
    x_q: Array, x_kv: Array, W_q: Array, W_k: Array, W_v: Array, W_o: Array, num_heads: int,
    mask: Array | None = None,
) -> tuple[Array, Array]:
    """Concatenates the heads last to first before the output projection."""
    q = split_heads(x_q @ W_q, num_heads)
    k = split_heads(x_kv @ W_k, num_heads)
    v = split_heads(x_kv @ W_v, num_heads)
    heads, weights = _attend(q, k, v, _heads_mask(mask), math.sqrt(q.shape[-1]))
    return merge_heads_reversed(heads) @ W_o, weights


def mha_merge_without_transpose(
    x_q: Array, x_kv: Array, W_q: Array, W_k: Array, W_v: Array, W_o: Array, num_heads: int,
    mask: Array | None = None,
) -> tuple[Array, Array]:
    """Merges the heads with a reshape alone: positions and heads get mixed before W_o."""
    q, k, v = (split_heads(x @ W, num_heads) for x, W in ((x_q, W_q), (x_kv, W_k), (x_kv, W_v)))
    heads, weights = _attend(q, k, v, _heads_mask(mask), math.sqrt(q.shape[-1]))
    *lead, h, n_q, d_k = heads.shape
    return heads.reshape(*lead, n_q, h * d_k) @ W_o, weights


def mha_self_attention_only(
    x_q: Array, x_kv: Array, W_q: Array, W_k: Array, W_v: Array, W_o: Array, num_heads: int,
    mask: Array | None = None,
) -> tuple[Array, Array]:
    """Takes keys and values from x_q, so cross-attention attends to the wrong sequence."""
    return _mha(x_q, x_q, W_q, W_k, W_v, W_o, num_heads, mask)


def mha_head_loop(
    x_q: Array, x_kv: Array, W_q: Array, W_k: Array, W_v: Array, W_o: Array, num_heads: int,
    mask: Array | None = None,
) -> tuple[Array, Array]:
    """Valid: one head at a time with column slices of the projections, as in chapter 3."""
    d_k = _head_size(W_q.shape[-1], num_heads)
    m = None if mask is None else np.asarray(mask, dtype=bool)
    outs, weights = [], []
    for i in range(num_heads):
        cols = slice(i * d_k, (i + 1) * d_k)
        q, k, v = x_q @ W_q[:, cols], x_kv @ W_k[:, cols], x_kv @ W_v[:, cols]
        out, w = _attend(q, k, v, m, math.sqrt(d_k))
        outs.append(out)
        weights.append(w)
    return np.concatenate(outs, axis=-1) @ W_o, np.stack(weights, axis=-3)


def mha_loop_without_check(
    x_q: Array, x_kv: Array, W_q: Array, W_k: Array, W_v: Array, W_o: Array, num_heads: int,
    mask: Array | None = None,
) -> tuple[Array, Array]:
    """Valid: the loop of the chapter's section 5, over chapter 3's attention_head, with no
    check of num_heads: when it does not divide d_model, the concatenated heads are narrower
    than W_o and the product raises, which the exercise accepts."""
    d_k = W_q.shape[1] // num_heads
    outs, weights = [], []
    for i in range(num_heads):
        cols = slice(i * d_k, (i + 1) * d_k)
        out, w = attention_head(x_q, x_kv, W_q[:, cols], W_k[:, cols], W_v[:, cols], mask)
        outs.append(out)
        weights.append(w)
    return np.concatenate(outs, axis=-1) @ W_o, np.stack(weights, axis=-3)


def mha_returns_for_any_num_heads(
    x_q: Array, x_kv: Array, W_q: Array, W_k: Array, W_v: Array, W_o: Array, num_heads: int,
    mask: Array | None = None,
) -> tuple[Array, Array]:
    """Drops the features that do not fill a head, so it answers for any num_heads."""
    d_model = W_q.shape[1]
    used = d_model - d_model % num_heads
    W_o = W_o[:used] if used != d_model else W_o
    return _mha(x_q, x_kv, W_q[:, :used], W_k[:, :used], W_v[:, :used], W_o, num_heads, mask)


def mha_einsum(
    x_q: Array, x_kv: Array, W_q: Array, W_k: Array, W_v: Array, W_o: Array, num_heads: int,
    mask: Array | None = None,
) -> tuple[Array, Array]:
    """Valid: einsum for the per-head projections and products, -inf for masked scores."""
    d_model = W_q.shape[-1]
    d_k = _head_size(d_model, num_heads)

    def heads_of(W: Array) -> Array:
        return W.reshape(W.shape[0], num_heads, d_k)

    q = np.einsum("...sd,dhk->...hsk", x_q, heads_of(W_q))
    k = np.einsum("...sd,dhk->...hsk", x_kv, heads_of(W_k))
    v = np.einsum("...sd,dhk->...hsk", x_kv, heads_of(W_v))
    scores = np.einsum("...hqk,...hsk->...hqs", q, k) / math.sqrt(d_k)
    if mask is not None:
        scores = np.where(_heads_mask(mask), scores, -np.inf)
    weights = softmax(scores, axis=-1)
    heads = np.einsum("...hqs,...hsk->...hqk", weights, v)
    out = np.einsum("...hqk,hkd->...qd", heads, W_o.reshape(num_heads, d_k, -1))
    return out, weights


def mha_float64(
    x_q: Array, x_kv: Array, W_q: Array, W_k: Array, W_v: Array, W_o: Array, num_heads: int,
    mask: Array | None = None,
) -> tuple[Array, Array]:
    """Valid: computes in float64 and returns the input's dtype."""
    dtype = np.result_type(x_q, W_q)
    args = [np.asarray(a, dtype=np.float64) for a in (x_q, x_kv, W_q, W_k, W_v, W_o)]
    out, weights = _mha(*args, num_heads, mask)
    return out.astype(dtype), weights.astype(dtype)


MUTANTS = [
    Mutant(EXERCISE_SPLIT, "reshape without transpose", split_no_transpose, False, "transpose"),
    Mutant(EXERCISE_SPLIT, "heads interleaved", split_interleaved, False, "interleaved"),
    Mutant(EXERCISE_SPLIT, "no divisibility check", split_no_divisibility_check, False,
           "ValueError"),
    Mutant(EXERCISE_SPLIT, "exactly one batch axis", split_three_dims_only, False, None),
    Mutant(EXERCISE_SPLIT, "error message without the numbers", split_message_without_numbers,
           False, "the message should show", every_secret=True),
    Mutant(EXERCISE_SPLIT, "loop over heads", split_loop, True, None),
    Mutant(EXERCISE_SPLIT, "reshape and moveaxis", split_moveaxis, True, None),
    Mutant(EXERCISE_MERGE, "reshape without transpose", merge_no_transpose, False, "transpose"),
    Mutant(EXERCISE_MERGE, "heads interleaved", merge_interleaved, False, "interleaved"),
    Mutant(EXERCISE_MERGE, "exactly one batch axis", merge_four_dims_only, False, None),
    Mutant(EXERCISE_MERGE, "heads in reverse order", merge_heads_reversed, False, "order"),
    Mutant(EXERCISE_MERGE, "concatenate heads", merge_concatenate, True, None),
    Mutant(EXERCISE_MERGE, "swapaxes and reshape", merge_swapaxes, True, None),
    Mutant(EXERCISE_MHA, "no output projection", mha_no_output_projection, False, "W_o"),
    Mutant(EXERCISE_MHA, "scaled by sqrt(d_model)", mha_scale_by_d_model, False, "sqrt(d_k)"),
    Mutant(EXERCISE_MHA, "mask without head axis", mha_mask_without_head_axis, False,
           "np.expand_dims(mask, -3)", every_secret=True),
    Mutant(EXERCISE_MHA, "heads merged without transpose", mha_merge_without_transpose, False,
           "swap the head and position axes", every_secret=True),
    Mutant(EXERCISE_MHA, "mask ignored", mha_mask_ignored, False, "mask"),
    Mutant(EXERCISE_MHA, "softmax over queries", mha_softmax_wrong_axis, False, "sum to 1"),
    Mutant(EXERCISE_MHA, "heads concatenated in reverse", mha_heads_reversed, False, "order"),
    Mutant(EXERCISE_MHA, "keys and values from x_q", mha_self_attention_only, False,
           "one per key", every_secret=True),
    Mutant(EXERCISE_MHA, "loop over heads", mha_head_loop, True, None),
    Mutant(EXERCISE_MHA, "section 5's loop, no divisibility check", mha_loop_without_check, True,
           every_secret=True),
    Mutant(EXERCISE_MHA, "a result for any num_heads", mha_returns_for_any_num_heads, False,
           "should raise an error", every_secret=True),
    Mutant(EXERCISE_MHA, "einsum", mha_einsum, True, None),
    Mutant(EXERCISE_MHA, "float64 inside", mha_float64, True, None),
]
