"""Checks of chapter 4: splitting into heads, merging them back, multi-head attention.

Shapes and values come from ``ctx.rng`` (fixed seed in visible mode, secret seed in hidden
mode). The cases are built to expose the usual bugs: two batch axes of size >= 2 (code that
assumes exactly one), at least two heads of width >= 2 and sequences of length >= 2 (heads
taken without the transpose, or interleaved), cross-attention with ``n_q != n_k``, padding
masks that differ along the batch (a mask without a head axis), float32 and float64.
:func:`draw`, :func:`batch_shape` and :func:`head_sizes` also serve chapters 5 and 6.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from autograder.exercises.checking import (
    CheckContext,
    ErrorHint,
    Hint,
    call,
    compare,
    expect_raises,
)
from autograder.exercises.checks.ch02 import attention_hints, call_with_mask, check_attention_result
from autograder.exercises.registry import register
from transformer_ref.np_attention import causal_mask, scaled_dot_product_attention, split_heads

# The course's building blocks the chapter's setup cell gives the learner's code; while an
# exercise of this chapter is graded, its process holds these and nothing else of the course.
BUILDING_BLOCKS = (
    "transformer_ref.numpy.attention_head:attention_head",
    "transformer_ref.numpy.scaled_attention:causal_mask",
    "transformer_ref.numpy.scaled_attention:scaled_dot_product_attention",
)


HEAD_AXIS_HINT = (
    "the mask needs a head axis: it is (..., n_q, n_k) (or (..., 1, n_k)) while the scores "
    "are (..., num_heads, n_q, n_k), so without one it lines up with the wrong axes. Insert "
    "it with np.expand_dims(mask, -3) (or mask[..., None, :, :]) before masking."
)

# A mask without the head axis often does not broadcast to the scores at all.
MASK_BROADCAST_HINT = ErrorHint(HEAD_AXIS_HINT, ("ValueError", "IndexError"),
                                r"broadcast|boolean index|mask")


def draw(rng: np.random.Generator, shape: tuple[int, ...], dtype: type = np.float64,
         scale: float = 1.0) -> np.ndarray:
    """Normal values with standard deviation ``scale``, of ``dtype``."""
    return (scale * rng.standard_normal(shape)).astype(dtype)


def batch_shape(rng: np.random.Generator, ndim: int) -> tuple[int, ...]:
    """``ndim`` batch sizes in 2 .. 3 (a size of 1 would hide broadcasting bugs)."""
    return tuple(int(n) for n in rng.integers(2, 4, size=ndim))


def head_sizes(rng: np.random.Generator) -> tuple[int, int]:
    """``(num_heads, d_k)``, both in 2 .. 4, so that head-order bugs change the result."""
    return int(rng.integers(2, 5)), int(rng.integers(2, 5))


def non_divisible(rng: np.random.Generator) -> tuple[int, int]:
    """``(d_model, num_heads)`` with ``d_model % num_heads != 0``."""
    num_heads = int(rng.integers(3, 6))
    return num_heads * int(rng.integers(2, 4)) + int(rng.integers(1, num_heads)), num_heads


# ----------------------------------------------------------------------------- split_heads


def _split_hints(x: np.ndarray, num_heads: int) -> list[Hint]:
    *lead, seq, d_model = x.shape
    d_k = d_model // num_heads
    return [
        Hint("the features were reshaped straight to (..., num_heads, seq, d_k), which mixes "
             "positions into heads: reshape to (..., seq, num_heads, d_k) first, then transpose "
             "(swap) the seq and head axes.", buggy=x.reshape(*lead, num_heads, seq, d_k)),
        Hint("head i got every num_heads-th feature (interleaved) instead of the contiguous "
             "block i*d_k ... (i+1)*d_k - 1: reshape to (..., seq, num_heads, d_k), not "
             "(..., seq, d_k, num_heads).",
             buggy=np.moveaxis(x.reshape(*lead, seq, d_k, num_heads), -1, -3)),
    ]


@register(
    "ch04.split_heads",
    title="Split the features into heads",
    points=2,
    difficulty="easy",
    minutes=10,
    reference="transformer_ref.numpy.heads:split_heads",
    allowed=BUILDING_BLOCKS,
    answered_by=("transformer_ref.model.attention",),  # MultiHeadAttention._split_heads
)
def check_split_heads(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Two batch axes, none (float32) and one; the dtype is kept; ``d_model`` not divisible by
    ``num_heads`` raises ValueError whose message shows both numbers."""
    rng = ctx.rng
    for ndim, dtype in ((2, np.float64), (0, np.float32), (1, np.float64)):
        num_heads, d_k = head_sizes(rng)
        x = draw(rng, batch_shape(rng, ndim) + (int(rng.integers(2, 7)), num_heads * d_k), dtype)
        compare(call(fn, x, num_heads), ctx.reference(x, num_heads),
                f"split_heads(x of shape {x.shape} ({x.dtype}), num_heads={num_heads})",
                dtype=x.dtype, hints=_split_hints(x, num_heads))
    d_model, num_heads = non_divisible(rng)
    expect_raises(fn, ValueError, draw(rng, (2, 3, d_model)), num_heads,
                  reason=f"d_model={d_model} is not divisible by num_heads={num_heads}",
                  mentions=(d_model, num_heads))


# ----------------------------------------------------------------------------- merge_heads


def _merge_hints(x: np.ndarray) -> list[Hint]:
    *lead, num_heads, seq, d_k = x.shape
    return [
        Hint("the heads were reshaped straight to (..., seq, num_heads * d_k), which mixes "
             "positions and heads: transpose (swap) the head and seq axes first, then reshape.",
             buggy=x.reshape(*lead, seq, num_heads * d_k)),
        Hint("the features of the heads ended up interleaved: bring the axes into the order "
             "(..., seq, num_heads, d_k) before reshaping, not (..., seq, d_k, num_heads).",
             buggy=np.moveaxis(x, -3, -1).reshape(*lead, seq, num_heads * d_k)),
        Hint("the heads are in the wrong order: head 0 must fill the first d_k features.",
             buggy=np.concatenate([x[..., i, :, :] for i in reversed(range(num_heads))], -1)),
    ]


@register(
    "ch04.merge_heads",
    title="Merge the heads back",
    points=2,
    difficulty="easy",
    minutes=10,
    reference="transformer_ref.numpy.heads:merge_heads",
    allowed=BUILDING_BLOCKS,
)
def check_merge_heads(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Two batch axes, none (float32) and one; the dtype is kept; and
    ``merge_heads(split_heads(x, h))`` gives ``x`` back."""
    rng = ctx.rng
    for ndim, dtype in ((2, np.float64), (0, np.float32), (1, np.float64)):
        num_heads, d_k = head_sizes(rng)
        x = draw(rng, batch_shape(rng, ndim) + (num_heads, int(rng.integers(2, 7)), d_k), dtype)
        compare(call(fn, x), ctx.reference(x), f"merge_heads(x of shape {x.shape} ({x.dtype}))",
                dtype=x.dtype, hints=_merge_hints(x))
    num_heads, d_k = head_sizes(rng)
    x = draw(rng, batch_shape(rng, 1) + (int(rng.integers(2, 7)), num_heads * d_k))
    compare(call(fn, split_heads(x, num_heads)), x,
            f"merge_heads(split_heads(x, {num_heads})) for x of shape {x.shape} (should give x "
            "back)", dtype=x.dtype)


# ----------------------------------------------------------------------------- multi-head


def padding(rng: np.random.Generator, batch: tuple[int, ...], n_k: int) -> np.ndarray:
    """A ``(*batch, 1, n_k)`` padding mask (True = real token) whose lengths differ along the
    last batch axis; ``n_k >= 3`` and ``batch[-1] >= 2``. No row is fully masked."""
    lengths = rng.integers(1, n_k + 1, size=batch)
    lengths[..., 0] = n_k
    lengths[..., 1] = n_k // 2
    return (np.arange(n_k) < lengths[..., None])[..., None, :]


def _mha_hints(
    args: tuple[Any, ...], reference: Callable[..., Any]
) -> tuple[list[Hint], list[Hint]]:
    """``(weight_hints, out_hints)``: bugs of the heads (recognised by running the reference on
    inputs that reproduce them), then the bugs of attention itself (from chapter 2)."""
    x_q, x_kv, W_q, W_k, W_v, W_o, num_heads, mask = args
    d_model = W_q.shape[1]
    reversed_W_o = W_o.reshape(num_heads, -1, W_o.shape[1])[::-1].reshape(W_o.shape)
    bugs = [
        ("the heads were concatenated but not multiplied by W_o (the output projection).",
         (x_q, x_kv, W_q, W_k, W_v, np.eye(d_model, dtype=W_o.dtype), num_heads, mask)),
        ("the scores were divided by sqrt(d_model) instead of sqrt(d_k) = "
         "sqrt(d_model // num_heads).",
         (x_q, x_kv, W_q / math.sqrt(num_heads), W_k, W_v, W_o, num_heads, mask)),
        ("the heads were concatenated in the wrong order: head 0 must fill the first d_k "
         "features before the multiplication by W_o.",
         (x_q, x_kv, W_q, W_k, W_v, reversed_W_o, num_heads, mask)),
    ]
    if mask is not None:
        bugs.append(("the result is what attention gives without the mask: apply the mask to "
                     "the scores of every head (give it a head axis: mask[..., None, :, :]).",
                     (x_q, x_kv, W_q, W_k, W_v, W_o, num_heads, None)))
    weight_hints, out_hints = [], []
    for message, buggy_args in bugs:
        buggy_out, buggy_weights = reference(*buggy_args)
        weight_hints.append(Hint(message, buggy=buggy_weights))
        out_hints.append(Hint(message, buggy=buggy_out))
    n_q, n_k = x_q.shape[-2], x_kv.shape[-2]
    if n_q != n_k:
        weight_hints.append(Hint(
            f"the weights have {n_q} columns, one per query, where attention gives one per "
            f"key ({n_k}): keys and values must come from x_kv, not x_q.",
            predicate=lambda got: got.shape[-2:] == (n_q, n_q)))
    heads_mask = None if mask is None else np.asarray(mask, dtype=bool)[..., None, :, :]
    q, k, v = (split_heads(x @ W, num_heads) for x, W in ((x_q, W_q), (x_kv, W_k), (x_kv, W_v)))
    if mask is not None and np.ndim(mask) >= 3:
        try:  # a mask without the head axis lines up with the wrong axes of the scores
            unexpanded = scaled_dot_product_attention(q, k, v, np.asarray(mask, dtype=bool))[1]
        except ValueError:
            pass
        else:
            weight_hints.insert(0, Hint(HEAD_AXIS_HINT, buggy=unexpanded))
    heads = scaled_dot_product_attention(q, k, v, heads_mask)[0]  # (..., h, n_q, d_k)
    out_hints.append(Hint(
        "the heads were merged without bringing the head axis next to the features: "
        "swap the head and position axes (np.swapaxes(heads, -2, -3)) before reshaping to "
        "(..., n_q, d_model).", buggy=heads.reshape(*heads.shape[:-3], n_q, d_model) @ W_o))
    weight_hints += attention_hints(q, k, v, heads_mask)[0]
    return weight_hints, out_hints


def _mha_cases(rng: np.random.Generator) -> list[tuple[str, tuple[Any, ...]]]:
    """``(description, args)``: self-attention, cross-attention, cross-attention with two batch
    axes and a padding mask, causal self-attention in float32."""
    specs = [  # description, cross-attention?, batch axes, mask, dtype
        ("self-attention", False, 1, None, np.float64),
        ("cross-attention (n_q != n_k)", True, 1, None, np.float64),
        ("cross-attention with a padding mask", True, 2, "padding", np.float64),
        ("self-attention with a 0/1 causal mask, float32", False, 1, "causal", np.float32),
    ]
    cases = []
    for what, cross, ndim, mask_kind, dtype in specs:
        batch = batch_shape(rng, ndim)
        num_heads, d_k = head_sizes(rng)
        d_model = num_heads * d_k
        n_q = int(rng.integers(2, 7))
        n_k = n_q + int(rng.integers(1, 4)) if cross else n_q
        x_q = draw(rng, batch + (n_q, d_model), dtype)
        x_kv = draw(rng, batch + (n_k, d_model), dtype) if cross else x_q
        matrices = [draw(rng, (d_model, d_model), dtype, 1.5 / math.sqrt(d_model))
                    for _ in range(4)]
        # The causal mask comes as 0/1 numbers: masks may be given that way.
        mask = {None: None, "causal": causal_mask(n_q).astype(dtype),
                "padding": padding(rng, batch, n_k)}[mask_kind]
        cases.append((what, (x_q, x_kv, *matrices, num_heads, mask)))
    return cases


@register(
    "ch04.multi_head_attention",
    title="Multi-head attention",
    points=5,
    difficulty="hard",
    minutes=30,
    reference="transformer_ref.numpy.heads:multi_head_attention",
    allowed=BUILDING_BLOCKS,
    depends=("ch04.split_heads", "ch04.merge_heads"),
    answered_by=("transformer_ref.model.attention",),  # with the weights loaded
)
def check_multi_head_attention(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Self- and cross-attention (``n_q != n_k``), a padding mask that differs between the
    sequences of two batch axes, a causal mask in float32; weights are compared before the
    output (a float64 result of float32 inputs passes with a note). A ``num_heads`` that does
    not divide ``d_model`` must raise an error, of any type: ``split_heads``'s ValueError, an
    assert, or the shape error a loop over heads meets at ``W_o``.

    Wrong heads are carried forward (the reference's steps with the learner's split and
    merge), as chapter 2's softmax is: these checks also run in the learner's notebook."""
    rng = ctx.rng
    for what, args in _mha_cases(rng):
        x_q, x_kv, num_heads, mask = args[0], args[1], args[6], args[7]
        where = (f"multi_head_attention, {what} (x_q {x_q.shape}, x_kv {x_kv.shape}, "
                 f"num_heads={num_heads}, mask {None if mask is None else mask.shape})")
        got = call(fn, *args) if mask is None else call_with_mask(
            fn, *args, mask_shape=mask.shape, hints=[MASK_BROADCAST_HINT])
        check_attention_result(got, ctx.reference(*args), where, _mha_hints(args, ctx.reference))
    d_model, num_heads = non_divisible(rng)
    x = draw(rng, (2, 3, d_model))
    W = draw(rng, (d_model, d_model), scale=1 / math.sqrt(d_model))
    expect_raises(fn, Exception, x, x, W, W, W, W, num_heads,
                  reason=f"num_heads={num_heads} does not divide d_model={d_model}, so heads "
                         f"of width d_model // num_heads cannot cover every feature; any error "
                         f"will do, split_heads's ValueError for instance")
