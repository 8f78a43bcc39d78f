"""Checks of chapter 5: layer normalisation, the feed-forward network, add & norm.

The inputs are built to separate the usual bugs: several batch axes of size >= 2 (statistics
over the wrong axis), rows with a tiny variance (``eps`` outside the square root), an ``eps``
argument other than the default (``eps`` ignored), ``gamma != 1`` and ``beta != 0`` with
different values (swapped), pre-activations and outputs of both signs (missing or extra ReLU).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from autograder.exercises.checking import CheckContext, Hint, call, compare
from autograder.exercises.checks.ch04 import batch_shape, draw
from autograder.exercises.registry import register

QUIET_STD = 1e-3
"""Standard deviation of the low-variance rows: var = 1e-6 is well below the default eps."""


# The course's building blocks the chapter's setup cell gives the learner's code; while an
# exercise of this chapter is graded, its process holds these and nothing else of the course.
BUILDING_BLOCKS = (
    "transformer_ref.numpy.heads:multi_head_attention",
)


def with_quiet_rows(rng: np.random.Generator, x: np.ndarray) -> np.ndarray:
    """A copy of ``x`` in which about a third of the rows (at least one) vary only by
    ``QUIET_STD`` around a constant, so that where ``eps`` is added matters."""
    x = x.copy()
    rows = x.reshape(-1, x.shape[-1])
    chosen = rng.random(len(rows)) < 1 / 3
    chosen[int(rng.integers(len(rows)))] = True
    offsets = rng.uniform(-1.0, 1.0, size=(int(chosen.sum()), 1))
    noise = QUIET_STD * rng.standard_normal((int(chosen.sum()), x.shape[-1]))
    rows[chosen] = offsets + noise
    return x


def gain_and_shift(rng: np.random.Generator, d: int, dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """``gamma`` around 1 and ``beta`` around 0, different from each other and from 1 and 0."""
    return 1.0 + draw(rng, (d,), dtype, 0.5), draw(rng, (d,), dtype, 0.5)


def normalise(x: np.ndarray, axis: Any = -1, ddof: int = 0, eps: float = 1e-5,
              eps_inside: bool = True) -> np.ndarray:
    """Layer-norm variants in float64 (for hints): statistics over ``axis``, ``ddof``, ``eps``
    inside or outside the square root."""
    x = x.astype(np.float64)
    centred = x - x.mean(axis=axis, keepdims=True)
    var = x.var(axis=axis, ddof=ddof, keepdims=True)
    return centred / (np.sqrt(var + eps) if eps_inside else np.sqrt(var) + eps)


def affine(x_hat: np.ndarray, gamma: np.ndarray | None, beta: np.ndarray | None) -> np.ndarray:
    """``x_hat * gamma + beta``, skipping the parts that are None."""
    if gamma is not None:
        x_hat = x_hat * gamma
    return x_hat if beta is None else x_hat + beta


def _describe_ln(x: np.ndarray, gamma: Any, beta: Any, eps: float | None) -> str:
    parts = [f"x of shape {x.shape} ({x.dtype})"]
    if gamma is not None:
        parts += ["gamma", "beta"]
    if eps is not None:
        parts.append(f"eps={eps:g}")
    return f"layer_norm({', '.join(parts)})"


# ----------------------------------------------------------------------------- layer_norm


def _layer_norm_hints(x: np.ndarray, gamma: Any, beta: Any, eps: float) -> list[Hint]:
    hints = [
        Hint("you divided by d - 1 (the unbiased variance, np.var(..., ddof=1)); layer norm "
             "uses the biased variance: divide by d (ddof=0).",
             affine(normalise(x, ddof=1, eps=eps), gamma, beta)),
        Hint("the mean and variance were taken over the first axis (as in batch norm): take "
             "them over the last axis (axis=-1, keepdims=True).",
             affine(normalise(x, axis=0, eps=eps), gamma, beta)),
        Hint("one mean and one variance were taken over the whole array: pass axis=-1 (with "
             "keepdims=True) to mean and var.",
             affine(normalise(x, axis=None, eps=eps), gamma, beta)),
        Hint("eps was added to the standard deviation; it belongs inside the square root: "
             "(x - mean) / sqrt(var + eps).",
             affine(normalise(x, eps=eps, eps_inside=False), gamma, beta)),
    ]
    if gamma is not None:
        hints.append(Hint("gamma and beta look swapped: multiply by gamma, then add beta.",
                          affine(normalise(x, eps=eps), beta, gamma)))
    if eps != 1e-5:
        hints.append(Hint("the result matches eps=1e-5, not the eps argument: use the eps "
                          "that was passed in.", affine(normalise(x), gamma, beta)))
    return hints


@register(
    "ch05.layer_norm",
    title="Layer normalisation",
    points=3,
    difficulty="medium",
    minutes=15,
    reference="transformer_ref.numpy.sublayers:layer_norm",
    allowed=BUILDING_BLOCKS,
)
def check_layer_norm(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Rows with a tiny variance in every case (eps placement); two batch axes without gamma
    and beta; gamma and beta on one batch axis, in float64 and in float32 (the result keeps
    the dtype); an ``eps`` other than the default."""
    rng = ctx.rng
    specs = [  # batch axes, gamma/beta?, explicit eps?, dtype
        (2, False, False, np.float64),
        (1, True, False, np.float64),
        (2, True, False, np.float32),
        (2, True, True, np.float32),
    ]
    for ndim, affine_params, explicit_eps, dtype in specs:
        d = int(rng.integers(4, 13))
        x = draw(rng, batch_shape(rng, ndim) + (d,), scale=2.0) + 1.0
        x = with_quiet_rows(rng, x).astype(dtype)
        gamma, beta = gain_and_shift(rng, d, dtype) if affine_params else (None, None)
        eps = float(rng.choice([1e-3, 1e-2, 1e-1])) if explicit_eps else None
        args = (x, gamma, beta) if affine_params else (x,)
        kwargs = {} if eps is None else {"eps": eps}
        compare(call(fn, *args, **kwargs), ctx.reference(*args, **kwargs),
                _describe_ln(x, gamma, beta, eps), dtype=x.dtype,
                hints=_layer_norm_hints(x, gamma, beta, 1e-5 if eps is None else eps))


# ----------------------------------------------------------------------------- feed_forward


def _ffn_hints(*args: np.ndarray) -> list[Hint]:
    x, W1, b1, W2, b2 = (a.astype(np.float64) for a in args)
    hidden = np.maximum(0.0, x @ W1 + b1)
    return [
        Hint("the ReLU between the two layers is missing: max(0, x @ W1 + b1).",
             (x @ W1 + b1) @ W2 + b2),
        Hint("a ReLU was applied to the output as well; only the hidden layer has one.",
             np.maximum(0.0, hidden @ W2 + b2)),
        Hint("b1 was added after the ReLU; add it before: max(0, x @ W1 + b1).",
             (np.maximum(0.0, x @ W1) + b1) @ W2 + b2),
        Hint("the output bias b2 is missing.", hidden @ W2),
    ]


@register(
    "ch05.feed_forward",
    title="Position-wise feed-forward network",
    points=2,
    difficulty="easy",
    minutes=10,
    reference="transformer_ref.numpy.sublayers:feed_forward",
    allowed=BUILDING_BLOCKS,
    answered_by=("transformer_ref.model.sublayers",),  # PositionwiseFeedForward, loaded
)
def check_feed_forward(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Pre-activations and outputs of both signs, ``d_ff != d_model``, two, one and three
    batch axes, float32 (the result keeps the dtype)."""
    rng = ctx.rng
    for ndim, dtype in ((2, np.float64), (1, np.float32), (3, np.float64)):
        d_model = int(rng.integers(3, 9))
        d_ff = d_model + int(rng.integers(1, 9))
        args = (draw(rng, batch_shape(rng, ndim) + (d_model,), dtype),
                draw(rng, (d_model, d_ff), dtype, 1 / math.sqrt(d_model)),
                draw(rng, (d_ff,), dtype, 0.5),
                draw(rng, (d_ff, d_model), dtype, 1 / math.sqrt(d_ff)),
                draw(rng, (d_model,), dtype, 0.5))
        what = (f"feed_forward(x {args[0].shape}, W1 {args[1].shape}, b1, W2 {args[3].shape}, "
                f"b2) in {np.dtype(dtype)}")
        compare(call(fn, *args), ctx.reference(*args), what, dtype=dtype,
                hints=_ffn_hints(*args))


# ----------------------------------------------------------------------------- add_and_norm


def _add_and_norm_hints(
    x: np.ndarray, sublayer_out: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float
) -> list[Hint]:
    x, sublayer_out = x.astype(np.float64), sublayer_out.astype(np.float64)
    total = x + sublayer_out
    hints = [
        Hint("the result is x + layer_norm(sublayer_out) (pre-LN style): normalise the sum, "
             "layer_norm(x + sublayer_out).",
             x + affine(normalise(sublayer_out, eps=eps), gamma, beta)),
        Hint("the result is layer_norm(sublayer_out): the residual connection is missing, add "
             "x before normalising.", affine(normalise(sublayer_out, eps=eps), gamma, beta)),
        Hint("the sum was not normalised: apply layer_norm to x + sublayer_out.", total),
        Hint("gamma and beta look swapped: layer_norm(x + sublayer_out, gamma, beta).",
             affine(normalise(total, eps=eps), beta, gamma)),
    ]
    if eps != 1e-5:
        hints.append(Hint("the result matches eps=1e-5, not the eps argument: pass eps on to "
                          "layer_norm.", affine(normalise(total), gamma, beta)))
    return hints


@register(
    "ch05.add_and_norm",
    title="Residual connection and layer norm",
    points=2,
    difficulty="easy",
    minutes=10,
    reference="transformer_ref.numpy.sublayers:add_and_norm",
    allowed=BUILDING_BLOCKS,
    depends=("ch05.layer_norm",),
)
def check_add_and_norm(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Sums ``x + sublayer_out`` with some nearly constant rows, gamma and beta, float64 and
    float32 (the result keeps the dtype), and an ``eps`` other than the default.

    A wrong layer norm is carried forward, as chapter 2's softmax is: these checks also run
    in the learner's notebook, where the course's layer norm must not take the place of
    theirs."""
    rng = ctx.rng
    for explicit_eps, dtype in ((False, np.float64), (False, np.float32), (True, np.float32)):
        d = int(rng.integers(4, 13))
        x = draw(rng, batch_shape(rng, 2) + (d,))
        # Some sums x + sublayer_out are nearly constant rows, where eps matters.
        total = with_quiet_rows(rng, x + draw(rng, x.shape))
        x, sublayer_out = x.astype(dtype), (total - x).astype(dtype)
        gamma, beta = gain_and_shift(rng, d, dtype)
        eps = float(rng.choice([1e-3, 1e-2, 1e-1])) if explicit_eps else None
        kwargs = {} if eps is None else {"eps": eps}
        what = (f"add_and_norm(x {x.shape}, sublayer_out, gamma, beta"
                f"{'' if eps is None else f', eps={eps:g}'}) in {np.dtype(dtype)}")
        compare(call(fn, x, sublayer_out, gamma, beta, **kwargs),
                ctx.reference(x, sublayer_out, gamma, beta, **kwargs), what, dtype=dtype,
                hints=_add_and_norm_hints(x, sublayer_out, gamma, beta,
                                          1e-5 if eps is None else eps))
