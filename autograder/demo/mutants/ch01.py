"""Buggy and valid implementations of the chapter 1 exercises (positional encoding).

``positional_encoding(seq_len, d_model)`` returns float32 ``(seq_len, d_model)`` with
``PE[pos, 2i] = sin(pos * w_i)``, ``PE[pos, 2i + 1] = cos(pos * w_i)``,
``w_i = 1 / 10000^(2i / d_model)``, and raises ValueError for odd ``d_model``.
``relative_position_matrix(k, d_model)`` returns ``M`` with ``PE[p + k] = PE[p] @ M``.
"""

from __future__ import annotations

import math

import numpy as np

from autograder.demo.mutants import Mutant

PE = "ch01.positional_encoding"
REL = "ch01.relative_position_matrix"


def _require_even(d_model: int) -> None:
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")


def _angles(seq_len: int, d_model: int, exponent_scale: float = 2.0) -> np.ndarray:
    """pos * w_i as (seq_len, d_model // 2), with w_i = 10000^(-exponent_scale * i / d_model)."""
    i = np.arange(d_model // 2)
    w = 1.0 / 10000.0 ** (exponent_scale * i / d_model)
    return np.arange(seq_len)[:, None] * w[None, :]


def _interleave(even: np.ndarray, odd: np.ndarray) -> np.ndarray:
    return np.stack([even, odd], axis=-1).reshape(even.shape[0], -1).astype(np.float32)


# --- positional_encoding: bugs ----------------------------------------------------------------

def pe_sin_cos_swapped(seq_len: int, d_model: int) -> np.ndarray:
    """Cosines in the even columns, sines in the odd ones."""
    _require_even(d_model)
    angles = _angles(seq_len, d_model)
    return _interleave(np.cos(angles), np.sin(angles))


def pe_halves(seq_len: int, d_model: int) -> np.ndarray:
    """All sines, then all cosines (another published layout, not the course's)."""
    _require_even(d_model)
    angles = _angles(seq_len, d_model)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1).astype(np.float32)


def pe_positions_from_one(seq_len: int, d_model: int) -> np.ndarray:
    """Counts positions 1 .. seq_len."""
    _require_even(d_model)
    angles = _angles(seq_len + 1, d_model)[1:]
    return _interleave(np.sin(angles), np.cos(angles))


def pe_missing_factor_two(seq_len: int, d_model: int) -> np.ndarray:
    """w_i = 1 / 10000^(i / d_model): the pair index without the factor 2."""
    _require_even(d_model)
    angles = _angles(seq_len, d_model, exponent_scale=1.0)
    return _interleave(np.sin(angles), np.cos(angles))


def pe_column_exponent(seq_len: int, d_model: int) -> np.ndarray:
    """Each column j gets its own frequency 1 / 10000^(j / d_model), so cosines use 2i + 1."""
    _require_even(d_model)
    j = np.arange(d_model)
    angles = np.arange(seq_len)[:, None] / 10000.0 ** (j / d_model)[None, :]
    pe = np.where(j % 2 == 0, np.sin(angles), np.cos(angles))
    return pe.astype(np.float32)


def pe_float64(seq_len: int, d_model: int) -> np.ndarray:
    """Right values, but float64."""
    _require_even(d_model)
    angles = _angles(seq_len, d_model)
    return _interleave(np.sin(angles), np.cos(angles)).astype(np.float64)


def pe_odd_allowed(seq_len: int, d_model: int) -> np.ndarray:
    """No check for odd d_model: it silently drops the last column."""
    angles = _angles(seq_len, d_model - d_model % 2)
    return _interleave(np.sin(angles), np.cos(angles))


# --- positional_encoding: valid alternatives --------------------------------------------------

def pe_loops(seq_len: int, d_model: int) -> np.ndarray:
    """Two loops with math.sin and math.cos."""
    if d_model % 2 == 1:
        raise ValueError("d_model must be even")
    pe = np.zeros((seq_len, d_model), dtype=np.float32)
    for pos in range(seq_len):
        for i in range(0, d_model, 2):
            angle = pos / 10000 ** (i / d_model)
            pe[pos, i] = math.sin(angle)
            pe[pos, i + 1] = math.cos(angle)
    return pe


def pe_exp_log(seq_len: int, d_model: int) -> np.ndarray:
    """Frequencies as exp(-2i * log(10000) / d_model), slices assigned in float32."""
    _require_even(d_model)
    w = np.exp(np.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    angles = np.arange(seq_len)[:, None] * w
    pe = np.zeros((seq_len, d_model), dtype=np.float32)
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)
    return pe


def pe_all_float32(seq_len: int, d_model: int) -> np.ndarray:
    """Everything computed in float32 (less precise angles, still within tolerance)."""
    _require_even(d_model)
    w = (1.0 / np.power(np.float32(10000.0), np.arange(0, d_model, 2, dtype=np.float32)
                        / np.float32(d_model))).astype(np.float32)
    angles = np.arange(seq_len, dtype=np.float32)[:, None] * w[None, :]
    return _interleave(np.sin(angles), np.cos(angles))


# --- relative_position_matrix -----------------------------------------------------------------

def _frequencies(d_model: int, exponent_scale: float = 2.0) -> np.ndarray:
    return 1.0 / 10000.0 ** (exponent_scale * np.arange(d_model // 2) / d_model)


def _blocks(angles: np.ndarray, top_right_sign: float, bottom_left_sign: float) -> np.ndarray:
    d_model = 2 * len(angles)
    m = np.zeros((d_model, d_model))
    for i, a in enumerate(angles):
        m[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[math.cos(a), top_right_sign * math.sin(a)],
                                               [bottom_left_sign * math.sin(a), math.cos(a)]]
    return m


def rel_transposed(k: int, d_model: int) -> np.ndarray:
    """Column-vector rotation [[cos, -sin], [sin, cos]] used with row vectors: shifts by -k."""
    return _blocks(k * _frequencies(d_model), 1.0, -1.0)


def rel_cos_only(k: int, d_model: int) -> np.ndarray:
    """Only the cosines on the diagonal."""
    return np.diag(np.repeat(np.cos(k * _frequencies(d_model)), 2))


def rel_sign_error(k: int, d_model: int) -> np.ndarray:
    """Both sine terms positive: not a rotation."""
    return _blocks(k * _frequencies(d_model), 1.0, 1.0)


def rel_missing_factor_two(k: int, d_model: int) -> np.ndarray:
    """Frequencies 1 / 10000^(i / d_model)."""
    return _blocks(k * _frequencies(d_model, exponent_scale=1.0), -1.0, 1.0)


def rel_blocks_overlap(k: int, d_model: int) -> np.ndarray:
    """Block i placed at rows i, i + 1 instead of 2i, 2i + 1: blocks overlap."""
    m = np.zeros((d_model, d_model))
    for i, a in enumerate(k * _frequencies(d_model)):
        m[i:i + 2, i:i + 2] = [[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]]
    return m


def rel_loops(k: int, d_model: int) -> np.ndarray:
    """One 2x2 rotation block per pair, placed by a loop."""
    _require_even(d_model)
    return _blocks(k * _frequencies(d_model), -1.0, 1.0)


def rel_odd_accepted(k: int, d_model: int) -> np.ndarray:
    """Right blocks, but an odd d_model silently loses its last feature."""
    return _blocks(k * _frequencies(d_model - d_model % 2), -1.0, 1.0)


def rel_fancy_indexing(k: int, d_model: int) -> np.ndarray:
    """Blocks (d/2, 2, 2) written into a (d/2, 2, d/2, 2) view of M by fancy indexing."""
    half = d_model // 2
    a = k * np.exp(-np.arange(half) * 2 * math.log(10000.0) / d_model)
    c, s = np.cos(a), np.sin(a)
    blocks = np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2)
    m = np.zeros((half, 2, half, 2))
    i = np.arange(half)
    m[i, :, i, :] = blocks
    return m.reshape(d_model, d_model)


def rel_float32(k: int, d_model: int) -> np.ndarray:
    """The rotation blocks computed and returned in float32."""
    a = (np.float32(k) * _frequencies(d_model).astype(np.float32)).astype(np.float32)
    m = np.zeros((d_model, d_model), dtype=np.float32)
    even = np.arange(0, d_model, 2)
    m[even, even] = m[even + 1, even + 1] = np.cos(a)
    m[even, even + 1] = -np.sin(a)
    m[even + 1, even] = np.sin(a)
    return m


MUTANTS = [
    Mutant(PE, "sin and cos swapped", pe_sin_cos_swapped, False, "swapped"),
    Mutant(PE, "sines then cosines in halves", pe_halves, False, "interleave"),
    Mutant(PE, "positions start at 1", pe_positions_from_one, False, "position 0"),
    Mutant(PE, "exponent without the factor 2", pe_missing_factor_two, False, "frequencies"),
    Mutant(PE, "one frequency per column", pe_column_exponent, False, "frequencies"),
    Mutant(PE, "returns float64", pe_float64, True, every_secret=True,
           note=".astype(np.float32)"),
    Mutant(PE, "odd d_model accepted", pe_odd_allowed, False, "ValueError"),
    Mutant(PE, "loops with math.sin", pe_loops, True),
    Mutant(PE, "exp-log frequencies", pe_exp_log, True),
    Mutant(PE, "float32 throughout", pe_all_float32, True),
    Mutant(REL, "transposed blocks", rel_transposed, False, "transposed"),
    Mutant(REL, "cosines only", rel_cos_only, False, "no sine terms"),
    Mutant(REL, "sine signs wrong", rel_sign_error, False, "not a rotation"),
    Mutant(REL, "exponent without the factor 2", rel_missing_factor_two, False, "frequencies"),
    Mutant(REL, "overlapping blocks", rel_blocks_overlap, False, "block diagonal"),
    Mutant(REL, "odd d_model accepted", rel_odd_accepted, False, "should raise ValueError",
           every_secret=True),
    Mutant(REL, "loop over 2x2 blocks", rel_loops, True),
    Mutant(REL, "fancy indexing", rel_fancy_indexing, True),
    Mutant(REL, "float32", rel_float32, True),
]
