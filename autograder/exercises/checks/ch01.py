"""Checks of chapter 1: the sinusoidal positional encoding and its relative-position matrix."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from autograder.exercises.checking import (
    CheckContext,
    Hint,
    add_hint,
    call,
    compare,
    expect_array,
    expect_raises,
    fail,
    tolerance_for,
)
from autograder.exercises.registry import register
from transformer_ref.numpy.positional import positional_encoding as reference_encoding

# Why the table should be float32 (a note, not a rule that costs points): the dtype models
# train in, half the memory of float64; later chapters add it to float32 embeddings.
FLOAT32_RULE = ("a float32 table is good practice, not graded: it is the dtype models train in "
                "and takes half the memory of float64")
FLOAT32_TABLE_ADVICE = ("np.arange, np.exp and np.power compute in float64 unless told "
                        "otherwise: convert the finished table with .astype(np.float32).")

FREQUENCY_HINT = (
    "the first column is right but later ones are not: check the frequencies "
    "w_i = 1 / 10000^(2i / d_model), where i counts sine/cosine pairs (column 2i holds "
    "sin(pos * w_i), column 2i + 1 holds cos(pos * w_i))."
)


def _encoding_hints(expected: np.ndarray, seq_len: int, d_model: int) -> list[Hint]:
    """Known bugs of positional_encoding, recognised by what they return."""
    pairs = expected.reshape(seq_len, d_model // 2, 2)
    return [
        Hint("sin and cos appear swapped: even columns (0, 2, ...) hold sin, odd columns cos.",
             buggy=pairs[..., ::-1].reshape(seq_len, d_model)),
        Hint("sines fill the first half and cosines the second: interleave them instead "
             "(even columns sin, odd columns cos).",
             buggy=np.concatenate([expected[:, 0::2], expected[:, 1::2]], axis=1)),
        Hint("row 0 must be position 0, i.e. [0, 1, 0, 1, ...]: positions start at 0.",
             buggy=reference_encoding(seq_len + 1, d_model)[1:]),
        Hint(FREQUENCY_HINT,
             predicate=lambda got: np.allclose(got[:, 0], expected[:, 0], atol=1e-4)
             and not np.allclose(got, expected, atol=1e-4)),
    ]


@register(
    "ch01.positional_encoding",
    title="Sinusoidal positional encoding",
    points=2,
    difficulty="easy",
    minutes=15,
    reference="transformer_ref.numpy.positional:positional_encoding",
)
def check_positional_encoding(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Values for several sizes (long sequences, wide and tiny models), then ValueError for an
    odd ``d_model``; a table of the right values in float64 passes with a note (float32 is
    recommended)."""
    rng = ctx.rng
    cases = [
        (int(rng.integers(20, 60)), 2 * int(rng.integers(4, 12))),
        (int(rng.integers(100, 200)), 2 * int(rng.integers(24, 64))),
        (1, 2),
        (int(rng.integers(2, 10)), 2),
    ]
    for seq_len, d_model in cases:
        got = call(fn, seq_len, d_model)
        expected = ctx.reference(seq_len, d_model)
        compare(got, expected, f"positional_encoding({seq_len}, {d_model})", dtype=np.float32,
                dtype_rule=FLOAT32_RULE, dtype_advice=FLOAT32_TABLE_ADVICE,
                hints=_encoding_hints(expected, seq_len, d_model))
    odd = 2 * int(rng.integers(1, 20)) + 1
    expect_raises(fn, ValueError, int(rng.integers(3, 20)), odd,
                  reason=f"d_model={odd} is odd, but sines and cosines come in pairs")


def _rotation_hints(expected: np.ndarray) -> list[Hint]:
    """Known bugs of relative_position_matrix, recognised by what they return."""
    d_model = expected.shape[0]

    pair = np.arange(d_model) // 2
    outside_blocks = pair[:, None] != pair[None, :]

    def orthogonal(got: np.ndarray) -> bool:
        return np.allclose(got @ got.T, np.eye(d_model), atol=1e-4)

    return [
        Hint("M looks transposed (it shifts by -k): with row vectors, PE[p] @ M, the block of "
             "each pair is [[cos(k w), -sin(k w)], [sin(k w), cos(k w)]].", buggy=expected.T),
        Hint("M has no sine terms: each 2x2 block on the diagonal is a rotation "
             "[[cos(k w), -sin(k w)], [sin(k w), cos(k w)]], not a diagonal matrix.",
             predicate=lambda got: np.allclose(got, np.diag(np.diag(got)))
             and not np.allclose(expected, np.diag(np.diag(expected)))),
        Hint("M must be block diagonal: the 2x2 block of pair i sits at rows and columns 2i "
             "and 2i + 1, and every other entry is 0.",
             predicate=lambda got: bool(np.any(np.abs(got[outside_blocks]) > 1e-6))),
        Hint("M is not a rotation (M @ M.T should be the identity): check the signs of the "
             "sine terms.", predicate=lambda got: not orthogonal(got)),
        Hint(FREQUENCY_HINT.replace("the first column is right but later ones are not",
                                    "the first 2x2 block is right but later ones are not"),
             predicate=lambda got: np.allclose(got[:2, :2], expected[:2, :2], atol=1e-5)),
    ]


@register(
    "ch01.relative_position_matrix",
    title="Relative positions as a linear map",
    points=3,
    difficulty="hard",
    minutes=30,
    reference="transformer_ref.numpy.positional:relative_position_matrix",
)
def check_relative_position_matrix(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """For several offsets k and widths: the defining property ``PE[p + k] = PE[p] @ M`` for
    many positions p, then the matrix itself against the reference (any float dtype); then
    ValueError for an odd ``d_model``."""
    rng = ctx.rng
    cases = [(1, 8), (int(rng.integers(2, 12)), 2 * int(rng.integers(5, 17))),
             (0, 6), (int(rng.integers(20, 60)), 2 * int(rng.integers(8, 33))), (3, 2)]
    for k, d_model in cases:
        what = f"relative_position_matrix({k}, {d_model})"
        got = expect_array(call(fn, k, d_model), what, shape=(d_model, d_model))
        expected = ctx.reference(k, d_model)
        hints = _rotation_hints(expected)
        positions = 50
        encodings = reference_encoding(positions + k, d_model).astype(np.float64)
        shifted = encodings[:positions] @ got
        rtol, atol = tolerance_for(np.dtype(np.float32))
        if not np.allclose(shifted, encodings[k:], rtol=rtol, atol=atol):
            error = np.abs(shifted - encodings[k:])
            p, column = np.unravel_index(np.argmax(error), error.shape)
            message = (f"{what}: PE[p + {k}] should equal PE[p] @ M for every position p, but "
                       f"for p = {p}, column {column}, PE[p] @ M gives {shifted[p, column]:.6g} "
                       f"and PE[p + {k}] is {encodings[p + k, column]:.6g}.")
            fail(add_hint(message, got, hints))
        compare(got, expected, what, hints=hints)
    odd = 2 * int(rng.integers(1, 20)) + 1
    expect_raises(fn, ValueError, int(rng.integers(1, 9)), odd,
                  reason=f"d_model={odd} is odd: the encoding has no sine/cosine pairs")
