"""Sinusoidal positional encoding (Vaswani et al., 2017, section 3.5), in NumPy.

    PE[pos, 2i]     = sin(pos * w_i)
    PE[pos, 2i + 1] = cos(pos * w_i),      w_i = 1 / 10000^(2i / d_model)

Each pair of dimensions (2i, 2i + 1) is a point on a circle that turns with angular speed w_i
as the position grows. Moving k positions forward turns every circle by the angle k * w_i,
which is a linear map: :func:`relative_position_matrix` builds it.
"""

from __future__ import annotations

import numbers

import numpy as np

from transformer_ref.validation import require_even, require_int


def _frequencies(d_model: int) -> np.ndarray:
    """Angular frequencies w_i = 1 / 10000^(2i / d_model), i = 0 .. d_model/2 - 1; float64."""
    two_i = np.arange(0, d_model, 2, dtype=np.float64)
    return 1.0 / 10000.0 ** (two_i / d_model)


def _check_d_model(d_model: int, where: str) -> int:
    d_model = require_int(d_model, "d_model", where, minimum=1)
    require_even(d_model, "d_model", where)
    return d_model


def positional_encoding(seq_len: int, d_model: int) -> np.ndarray:
    """Sinusoidal positional encodings for positions ``0 .. seq_len - 1``.

    Args:
        seq_len: number of positions (``>= 0``).
        d_model: model width; must be even and positive.

    Returns:
        float32 array of shape ``(seq_len, d_model)``: sines in the even columns, cosines in
        the odd columns, every value in ``[-1, 1]``.

    Raises:
        ValueError: ``seq_len`` negative, or ``d_model`` odd or not positive.
    """
    where = "positional_encoding"
    seq_len = require_int(seq_len, "seq_len", where, minimum=0)
    d_model = _check_d_model(d_model, where)

    # Angles in float64 first: large positions times w_0 = 1 lose precision in float32.
    angles = np.arange(seq_len, dtype=np.float64)[:, None] * _frequencies(d_model)[None, :]
    pe = np.empty((seq_len, d_model), dtype=np.float64)
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)
    return pe.astype(np.float32)


def relative_position_matrix(k: float, d_model: int) -> np.ndarray:
    """The matrix ``M`` that moves an encoding ``k`` positions on: ``PE[p + k] = PE[p] @ M``.

    Row-vector convention: an encoding is a row, and ``M`` multiplies it from the right.
    ``M`` does not depend on ``p``, which is why attention can pick out relative positions
    with a linear map. It is block diagonal; the block for the pair (2i, 2i + 1) is a rotation
    by the angle ``k * w_i`` (from the angle-addition formulas for sine and cosine)::

        [s, c] @ [[ cos(k w),  -sin(k w)],   = [sin(p w + k w), cos(p w + k w)]
                  [ sin(k w),   cos(k w)]]

    Args:
        k: the offset in positions (any real number; negative moves backwards).
        d_model: model width; must be even and positive.

    Returns:
        float64 array of shape ``(d_model, d_model)``, orthogonal (``M @ M.T = I``).
    """
    where = "relative_position_matrix"
    if isinstance(k, bool) or not isinstance(k, numbers.Real):
        raise TypeError(f"{where}: k must be a number of positions, got {k!r}")
    d_model = _check_d_model(d_model, where)

    angles = float(k) * _frequencies(d_model)
    cos, sin = np.cos(angles), np.sin(angles)
    m = np.zeros((d_model, d_model), dtype=np.float64)
    even = np.arange(0, d_model, 2)
    m[even, even] = cos
    m[even, even + 1] = -sin
    m[even + 1, even] = sin
    m[even + 1, even + 1] = cos
    return m
