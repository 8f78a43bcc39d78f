"""Checks of chapter 3: one attention head (projections, then scaled dot-product attention)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from autograder.exercises.checking import CheckContext, Hint, call, random_batch_shape, random_mask
from autograder.exercises.checks.ch02 import attention_hints, call_with_mask, check_attention_result
from autograder.exercises.registry import register
from transformer_ref.np_attention import scaled_dot_product_attention as reference_attention

# The course's building blocks the chapter's setup cell gives the learner's code; while an
# exercise of this chapter is graded, its process holds these and nothing else of the course.
BUILDING_BLOCKS = (
    "transformer_ref.numpy.scaled_attention:causal_mask",
    "transformer_ref.numpy.scaled_attention:scaled_dot_product_attention",
    "transformer_ref.numpy.positional:positional_encoding",
)


def _head_hints(
    x_q: np.ndarray,
    x_kv: np.ndarray,
    weights: tuple[np.ndarray, np.ndarray, np.ndarray],
    mask: np.ndarray | None,
) -> tuple[list[Hint], list[Hint]]:
    """Hints for the bugs of a head (which input and matrix goes where, which width scales),
    followed by those of scaled dot-product attention on the projected q, k, v."""
    W_q, W_k, W_v = weights
    q, k, v = x_q @ W_q, x_kv @ W_k, x_kv @ W_v
    d_model, d_k = x_q.shape[-1], W_k.shape[1]
    weight_hints = [Hint(
        "the scores were divided by sqrt(d_model): divide by sqrt(d_k), the width of the "
        "projected keys (W_k.shape[1]).",
        buggy=reference_attention(q * math.sqrt(d_k / d_model), k, v, mask)[1])]
    if mask is None:
        weight_hints.append(Hint(
            "keys and values must come from x_kv (the sequence that is looked at); only the "
            "queries come from x_q.",
            buggy=reference_attention(q, x_q @ W_k, x_q @ W_v)[1]))
    if W_q.shape == W_k.shape:
        weight_hints.append(Hint(
            "W_q and W_k look swapped: q = x_q @ W_q and k = x_kv @ W_k.",
            buggy=reference_attention(x_q @ W_k, x_kv @ W_q, v, mask)[1]))
    if W_k.shape == W_v.shape:
        weight_hints.append(Hint(
            "W_k and W_v look swapped: k = x_kv @ W_k and v = x_kv @ W_v.",
            buggy=reference_attention(q, x_kv @ W_v, k, mask)[1]))
    attention_weight_hints, out_hints = attention_hints(q, k, v, mask)
    return weight_hints + attention_weight_hints, out_hints


@register(
    "ch03.attention_head",
    title="One attention head",
    points=2,
    difficulty="medium",
    minutes=15,
    reference="transformer_ref.numpy.attention_head:attention_head",
    allowed=BUILDING_BLOCKS,
    answered_by=("transformer_ref.model.attention",),  # one head of MultiHeadAttention
)
def check_attention_head(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Float32 cross-attention with ``n_q != n_k`` and ``d_k == d_v`` (to tell keys from
    values); causal self-attention with ``d_model``, ``d_k`` and ``d_v`` all different; masked
    cross-attention; all with several leading dimensions."""
    rng = ctx.rng
    batch = random_batch_shape(rng, min_dims=2)
    d_model = int(rng.integers(6, 11))
    d_k, d_v = int(rng.integers(2, 5)), int(rng.integers(5, 8))

    def matrices(d_k: int, d_v: int, dtype: type = np.float64) -> tuple[np.ndarray, ...]:
        return tuple((rng.standard_normal((d_model, d)) / math.sqrt(d_model)).astype(dtype)
                     for d in (d_k, d_k, d_v))

    n_q, n_k = int(rng.integers(2, 5)), int(rng.integers(5, 9))
    x_q = rng.standard_normal(batch + (n_q, d_model))
    x_kv = rng.standard_normal(batch + (n_k, d_model))
    W32 = matrices(d_v, d_v, np.float32)
    q32, kv32 = x_q.astype(np.float32), x_kv.astype(np.float32)
    what = f"attention_head(x_q {x_q.shape}, x_kv {x_kv.shape}, ...) in float32, no mask"
    check_attention_result(call(fn, q32, kv32, *W32), ctx.reference(q32, kv32, *W32), what,
                           _head_hints(q32, kv32, W32, None))

    W = matrices(d_k, d_v)
    n = int(rng.integers(3, 7))
    x = rng.standard_normal(batch + (n, d_model))
    causal = np.tril(np.ones((n, n), dtype=bool))
    what = f"attention_head(x, x, W_q, W_k, W_v, causal mask) with x of shape {x.shape}"
    check_attention_result(call_with_mask(fn, x, x, *W, causal, mask_shape=causal.shape),
                           ctx.reference(x, x, *W, causal), what, _head_hints(x, x, W, causal))

    mask = random_mask(rng, batch + (n_q, n_k))
    what = f"attention_head(x_q {x_q.shape}, x_kv {x_kv.shape}, W_q, W_k, W_v, mask)"
    check_attention_result(call(fn, x_q, x_kv, *W, mask), ctx.reference(x_q, x_kv, *W, mask),
                           what, _head_hints(x_q, x_kv, W, mask))
