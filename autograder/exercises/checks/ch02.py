"""Checks of chapter 2: softmax, the causal and padding masks, scaled dot-product attention.

:func:`check_attention_result` and :func:`attention_hints` also serve the later attention
exercises (one head, many heads).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autograder.exercises.checking import (
    KEEP_DTYPE,
    CheckContext,
    ErrorHint,
    Hint,
    call,
    compare,
    error_hints,
    expect_tuple,
    random_batch_shape,
    random_mask,
)
from autograder.exercises.registry import register
from transformer_ref.np_attention import scaled_dot_product_attention as reference_attention
from transformer_ref.np_attention import softmax as reference_softmax

OVERFLOW_HINT = (
    "NaN or inf means that exp overflowed (or every term underflowed to 0): subtract the "
    "maximum of each slice, np.max(x, axis=axis, keepdims=True), before np.exp."
)


def _sums_to_one(got: np.ndarray, axis: int | tuple[int, ...]) -> bool:
    return bool(np.allclose(got.sum(axis=axis), 1.0, atol=1e-3))


def _softmax_hints(x: np.ndarray, axis: int) -> list[Hint]:
    hints = [Hint(OVERFLOW_HINT, predicate=lambda got: not np.isfinite(got).all())]
    maxima = np.max(x, axis=axis)
    try:  # np.max without keepdims broadcasts (wrongly) only for some shapes
        np.broadcast_shapes(x.shape, maxima.shape)
    except ValueError:
        pass
    else:
        shifted = np.exp(x - maxima)
        hints.append(Hint("np.max without keepdims=True subtracts the maximum of the wrong "
                          "slice: use np.max(x, axis=axis, keepdims=True).",
                          buggy=shifted / np.sum(shifted, axis=axis, keepdims=True)))
    return hints + [
        Hint(f"the values do not sum to 1 along axis {axis}: softmax over the wrong axis, or "
             f"np.max/np.sum without keepdims=True?",
             predicate=lambda got: not _sums_to_one(got, axis)),
    ]


@register(
    "ch02.softmax",
    title="Numerically stable softmax",
    points=2,
    difficulty="easy",
    minutes=10,
    reference="transformer_ref.numpy.scaled_attention:softmax",
)
def check_softmax(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Default and explicit axes on several leading dimensions, square slices (where a
    missing ``keepdims`` broadcasts silently), logits of size 1e3 (overflow), ``-inf``
    entries (masked logits) and float32."""
    rng = ctx.rng
    n = int(rng.integers(3, 7))
    x = rng.standard_normal(random_batch_shape(rng, min_dims=2) + (n, n))
    compare(call(fn, x), ctx.reference(x), f"softmax(x) with x of shape {x.shape}",
            hints=_softmax_hints(x, -1))

    x = rng.standard_normal(tuple(int(s) for s in rng.permutation([2, 3, 4]) + 1))
    for axis in (0, 1, -1):
        compare(call(fn, x, axis=axis), ctx.reference(x, axis=axis),
                f"softmax(x, axis={axis}) with x of shape {x.shape}",
                hints=_softmax_hints(x, axis))

    # Rows far apart: exp overflows without a shift, and a single global maximum underflows.
    rows = int(rng.integers(3, 6))
    big = 5.0 * rng.standard_normal((rows, 7)) + rng.uniform(-1000, 1000, size=(rows, 1))
    big[0] += 1000.0 - big[0].max()
    big[-1] -= 1000.0 + big[-1].max()
    compare(call(fn, big), ctx.reference(big), "softmax(x) with large logits (about ±1000)",
            hints=_softmax_hints(big, -1))

    masked = rng.standard_normal((3, 6))
    masked[rng.random(masked.shape) < 0.4] = -np.inf
    masked[np.arange(3), rng.integers(0, 6, size=3)] = rng.standard_normal(3)
    compare(call(fn, masked), ctx.reference(masked), "softmax(x) with some x = -inf",
            hints=[Hint("entries equal to -inf must get weight exactly 0.",
                        predicate=lambda got: np.isfinite(got).all())])

    x32 = (3.0 * rng.standard_normal((2, int(rng.integers(3, 9))))).astype(np.float32)
    compare(call(fn, x32), ctx.reference(x32), "softmax(x) with float32 x", dtype=np.float32,
            dtype_rule=KEEP_DTYPE, hints=_softmax_hints(x32, -1))


MASK_INVERTED = "your mask looks inverted: True must mean 'may attend'"


@register(
    "ch02.causal_mask",
    title="Causal mask",
    points=1,
    difficulty="easy",
    minutes=5,
    reference="transformer_ref.numpy.scaled_attention:causal_mask",
    answered_by=("transformer_ref.model.basic_masks",),  # subsequent_mask, in PyTorch
)
def check_causal_mask(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Boolean ``(n, n)``, True on and below the diagonal, for several sizes including 1 (a
    0/1 array of numbers fails: the masks the course builds are boolean)."""
    for n in (4, int(ctx.rng.integers(5, 13)), 2, 1):
        expected = ctx.reference(n)
        ones = np.ones((n, n), dtype=bool)
        compare(call(fn, n), expected, f"causal_mask({n})", hints=[
            Hint(f"{MASK_INVERTED} (query i may attend to keys 0 .. i).", buggy=~expected),
            Hint("the diagonal must be True: a position may attend to itself.",
                 buggy=np.tril(ones, k=-1)),
            Hint("your True entries fill the upper triangle (what np.triu gives); query i may "
                 "attend to keys 0 .. i, so True belongs on and below the diagonal (rows are "
                 "queries, columns are keys): the lower triangle.", buggy=np.triu(ones)),
        ])


@register(
    "ch02.padding_mask",
    title="Padding mask",
    points=1,
    difficulty="easy",
    minutes=10,
    reference="transformer_ref.numpy.scaled_attention:padding_mask",
)
def check_padding_mask(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Boolean ``(batch, 1, max_len)``, True for real tokens, for batches with full-length,
    length-1 and random lengths."""
    rng = ctx.rng
    max_len = int(rng.integers(5, 10))
    lengths = np.concatenate([[max_len, 1], rng.integers(1, max_len + 1, size=3)])
    cases = [(rng.permutation(lengths), max_len),
             (np.array([int(rng.integers(1, 4))]), int(rng.integers(4, 7)))]
    for lengths, max_len in cases:
        expected = ctx.reference(lengths, max_len)
        batch = len(lengths)
        later = np.arange(max_len)[None, None, :] <= lengths[:, None, None]
        compare(call(fn, lengths, max_len), expected,
                f"padding_mask(lengths={lengths.tolist()}, max_len={max_len})", hints=[
                    Hint("your mask is True at the padding (positions >= length) and False at "
                         "the real tokens: it is inverted. True must mean 'may attend', so the "
                         "real tokens (positions < length) are the True ones.", buggy=~expected),
                    Hint("off by one: position i is a real token when i < length "
                         "(positions start at 0).", buggy=later),
                    Hint(f"add the query axis of size 1: shape (batch, 1, max_len) = "
                         f"{(batch, 1, max_len)}, for example mask[:, None, :].",
                         predicate=lambda got, b=batch, m=max_len: got.shape == (b, m)),
                ])


# What a learner's attention weights that do not sum to 1 over the keys did instead.
NORMALISATION_HINTS = (
    Hint("your weights sum to 1 over the queries (axis -2), not over the keys: the softmax "
         "runs over the last axis, softmax(scores, axis=-1).",
         predicate=lambda got: _sums_to_one(got, -2) and not _sums_to_one(got, -1)),
    Hint("your weights sum to 1 over each whole score matrix, not along each row: if your "
         "attention calls softmax(scores, axis=-1), your softmax normalises over more than the "
         "axis it is given (its own check shows where).",
         predicate=lambda got: _sums_to_one(got, (-2, -1)) and not _sums_to_one(got, -1)),
    Hint("the rows of your weights do not sum to 1, and neither do their columns: if your "
         "attention calls softmax(scores, axis=-1), the fault is in your softmax (run its "
         "check).", predicate=lambda got: not _sums_to_one(got, -1)),
)


def attention_hints(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None
) -> tuple[list[Hint], list[Hint]]:
    """Hints that recognise the known bugs of scaled dot-product attention.

    Each bug is recognised by computing what it returns on the same inputs ``q, k, v, mask``.

    Returns:
        ``(weight_hints, out_hints)``: for the learner's weights and for the learner's output.
    """
    d_k, d_v = q.shape[-1], v.shape[-1]
    expected_out, expected_weights = reference_attention(q, k, v, mask)
    weight_hints = [
        Hint("this looks like the output: return (out, weights) in that order.",
             buggy=expected_out),
        Hint("the weights match attention without dividing the scores by sqrt(d_k).",
             buggy=reference_attention(q * math.sqrt(d_k), k, v, mask)[1]),
        Hint("the weights match scores divided by d_k: divide by sqrt(d_k) instead.",
             buggy=reference_attention(q / math.sqrt(d_k), k, v, mask)[1]),
    ]
    if d_v != d_k:
        scaled_by_d_v = reference_attention(q * math.sqrt(d_k / d_v), k, v, mask)[1]
        weight_hints.append(Hint(
            "the scores were scaled with d_v = v.shape[-1]: the scale is 1 / sqrt(d_k), with "
            "d_k = q.shape[-1].", buggy=scaled_by_d_v))
    if mask is not None:
        allowed = np.broadcast_to(np.asarray(mask, dtype=bool), expected_weights.shape)
        unmasked = reference_attention(q, k, v)[1]
        scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_k)
        weight_hints += [
            Hint(f"{MASK_INVERTED}.",
                 predicate=lambda got: bool(np.all(np.abs(got[allowed]) < 1e-6))),
            Hint("the mask was applied after the softmax: mask the scores before it, so that "
                 "each row still sums to 1.", buggy=unmasked * allowed),
            Hint("masked scores were set to 0: set them to -inf (or a very negative number) so "
                 "that their weights become 0.",
                 buggy=reference_softmax(np.where(allowed, scores, 0.0))),
            Hint("masked positions (mask False) received weight: set their scores to -inf "
                 "before the softmax, e.g. np.where(mask, scores, -np.inf).",
                 predicate=lambda got: bool(np.any(np.abs(got[~allowed]) > 1e-6))),
        ]
    weight_hints += [
        Hint("NaN or inf in the weights: these scores are large, so exp overflows unless the "
             "softmax subtracts the maximum of each row before np.exp.",
             predicate=lambda got: not np.isfinite(got).all()),
        *NORMALISATION_HINTS,
    ]
    out_hints = [
        Hint("this looks like the attention weights: return (out, weights) in that order.",
             buggy=expected_weights),
    ]
    if k.shape == v.shape:
        out_hints.append(Hint("out matches weights @ k: multiply the weights by the values v.",
                              buggy=expected_weights @ k))
    else:
        out_hints.append(Hint(
            "out has the width d_k of the keys: multiply the weights by the values v.",
            predicate=lambda got: got.shape == expected_out.shape[:-1] + (d_k,)))
    return weight_hints, out_hints


def check_attention_result(
    got: Any,
    expected: tuple[np.ndarray, np.ndarray],
    what: str,
    hints: tuple[list[Hint], list[Hint]],
) -> None:
    """Check the learner's ``(out, weights)`` against ``expected``: the weights first (their
    bugs are easier to name), then the output; both must keep the dtype of ``expected``
    (the inputs' float dtype)."""
    out, weights = expect_tuple(got, ("out", "weights"), what)
    weight_hints, out_hints = hints
    compare(weights, expected[1], f"weights of {what}", hints=weight_hints,
            dtype=expected[1].dtype, dtype_rule=KEEP_DTYPE)
    compare(out, expected[0], f"out of {what}", hints=out_hints, dtype=expected[0].dtype,
            dtype_rule=KEEP_DTYPE)


def call_with_mask(fn: Callable[..., Any], *args: Any, mask_shape: tuple[int, ...],
                   hints: Sequence[ErrorHint] = ()) -> Any:
    """:func:`call` for functions whose last argument is a mask that only broadcasts to the
    scores: an IndexError (boolean indexing with that mask) gets a hint about broadcasting,
    after the more specific ``hints``."""
    broadcast = ErrorHint(
        f"the mask has shape {mask_shape} and only broadcasts to the scores; use "
        "np.where(mask, scores, -np.inf), which broadcasts, rather than indexing with the mask.",
        ("IndexError",))
    with error_hints([*hints, broadcast]):
        return call(fn, *args)


@register(
    "ch02.scaled_dot_product_attention",
    title="Scaled dot-product attention",
    points=3,
    difficulty="medium",
    minutes=25,
    reference="transformer_ref.numpy.scaled_attention:scaled_dot_product_attention",
    depends=("ch02.softmax",),
    answered_by=("transformer_ref.model.attention",),  # attention(), in PyTorch
)
def check_scaled_dot_product_attention(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Several leading dimensions, ``n_q != n_k`` and ``d_v != d_k``; masks of full and of
    broadcast shape that hide some keys of every row; large scores; float32 (the result stays
    float32) with a 0/1 float mask, and ``d_k == d_v`` (to tell values from keys).

    A wrong softmax is carried forward rather than isolated: these checks also run in the
    learner's notebook, where the course's softmax must not take the place of theirs."""
    rng = ctx.rng
    batch = random_batch_shape(rng, min_dims=2)
    n_q, n_k = int(rng.integers(2, 6)), int(rng.integers(6, 9))
    d_k, d_v = int(rng.integers(4, 9)), int(rng.integers(2, 4))

    def draw(shape: tuple[int, ...], scale: float = 1.0, dtype: type = np.float64) -> np.ndarray:
        return (scale * rng.standard_normal(shape)).astype(dtype)

    q, k, v = draw(batch + (n_q, d_k)), draw(batch + (n_k, d_k)), draw(batch + (n_k, d_v))
    what = f"scaled_dot_product_attention(q {q.shape}, k {k.shape}, v {v.shape})"
    check_attention_result(call(fn, q, k, v), ctx.reference(q, k, v), what,
                           attention_hints(q, k, v, None))

    for mask in (random_mask(rng, batch + (n_q, n_k)), random_mask(rng, (n_q, n_k))):
        what = (f"scaled_dot_product_attention(q {q.shape}, k {k.shape}, v {v.shape}, "
                f"mask {mask.shape})")
        check_attention_result(call_with_mask(fn, q, k, v, mask, mask_shape=mask.shape),
                               ctx.reference(q, k, v, mask), what, attention_hints(q, k, v, mask))

    # Scores of a few thousand: exp overflows in float64 unless the softmax is stable.
    q, k, v = draw((n_q, d_k), 25.0), draw((n_k, d_k), 25.0), draw((n_k, d_v))
    check_attention_result(call(fn, q, k, v), ctx.reference(q, k, v),
                           "scaled_dot_product_attention with large scores",
                           attention_hints(q, k, v, None))

    # A 0/1 mask of numbers, as np.tril(np.ones(...)) makes: masks may come that way.
    d = int(rng.integers(3, 7))
    q, k, v = (draw(batch + (n, d), dtype=np.float32) for n in (n_q, n_k, n_k))
    mask = random_mask(rng, (1,) * len(batch) + (n_q, n_k)).astype(np.float32)
    check_attention_result(call_with_mask(fn, q, k, v, mask, mask_shape=mask.shape),
                           ctx.reference(q, k, v, mask),
                           "scaled_dot_product_attention with float32 inputs, d_v == d_k and a "
                           "0/1 float32 mask", attention_hints(q, k, v, mask))
