"""Chapter 5 in NumPy: layer normalisation, the position-wise feed-forward network, and the
residual connection followed by layer normalisation.

Floating inputs keep their dtype (float32 in, float32 out); integers become float64.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from transformer_ref.validation import (
    require_array,
    require_matmul,
    require_ndim,
    require_vector,
)


def layer_norm(
    x: ArrayLike,
    gamma: ArrayLike | None = None,
    beta: ArrayLike | None = None,
    eps: float = 1e-5,
) -> np.ndarray:
    """Layer normalisation over the last axis (Ba et al., 2016).

    ``y = (x - mean) / sqrt(var + eps) * gamma + beta``, where ``mean`` and the *biased*
    variance ``var = mean((x - mean)^2)`` are taken over the last axis of each vector.
    Example: ``layer_norm([1, 2, 3])`` is about ``[-1.2247, 0, 1.2247]``.

    Args:
        x: ``(..., d)``.
        gamma: optional gain ``(d,)``, default all ones.
        beta: optional shift ``(d,)``, default all zeros.
        eps: added to the variance inside the square root, so constant vectors give 0, not NaN.

    Returns:
        Array of the shape and float dtype of ``x``.
    """
    where = "layer_norm"
    x = require_array(x, "x", where)
    require_ndim(x, 1, "x", where, "(..., d)")
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    y = (x - mean) / np.sqrt(var + float(eps))
    if gamma is not None:
        gamma = require_array(gamma, "gamma", where)
        require_vector(gamma, x.shape[-1], "gamma", where)
        y = y * gamma
    if beta is not None:
        beta = require_array(beta, "beta", where)
        require_vector(beta, x.shape[-1], "beta", where)
        y = y + beta
    return y


def feed_forward(
    x: ArrayLike, W1: ArrayLike, b1: ArrayLike, W2: ArrayLike, b2: ArrayLike
) -> np.ndarray:
    """Position-wise feed-forward network: ``FFN(x) = max(0, x W1 + b1) W2 + b2`` (eq. 2).

    The same two-layer network is applied to every position independently.

    Args:
        x: ``(..., d_model)``.
        W1: ``(d_model, d_ff)``; b1: ``(d_ff,)``.
        W2: ``(d_ff, d_model)``; b2: ``(d_model,)``.

    Returns:
        ``(..., d_model)`` (more generally ``(..., W2.shape[1])``).
    """
    where = "feed_forward"
    x, W1, b1, W2, b2 = (
        require_array(a, name, where)
        for a, name in ((x, "x"), (W1, "W1"), (b1, "b1"), (W2, "W2"), (b2, "b2"))
    )
    require_ndim(x, 1, "x", where, "(..., d_model)")
    require_matmul(x, W1, "x", "W1", where)
    require_vector(b1, W1.shape[1], "b1", where)
    require_matmul(W1, W2, "W1", "W2", where)
    require_vector(b2, W2.shape[1], "b2", where)
    hidden = np.maximum(0, x @ W1 + b1)
    return hidden @ W2 + b2


def add_and_norm(
    x: ArrayLike,
    sublayer_out: ArrayLike,
    gamma: ArrayLike | None,
    beta: ArrayLike | None,
    eps: float = 1e-5,
) -> np.ndarray:
    """Residual connection followed by layer normalisation: ``LayerNorm(x + sublayer_out)``.

    Args:
        x: the sublayer's input ``(..., d_model)``.
        sublayer_out: the sublayer's output, same shape as ``x``.
        gamma, beta: ``(d_model,)`` (or None, see :func:`layer_norm`).

    Returns:
        Array of shape ``(..., d_model)``.
    """
    where = "add_and_norm"
    x = require_array(x, "x", where)
    sublayer_out = require_array(sublayer_out, "sublayer_out", where)
    if x.shape != sublayer_out.shape:
        raise ValueError(
            f"{where}: x has shape {x.shape} but sublayer_out has shape {sublayer_out.shape}; "
            f"the residual connection adds them, so they must match"
        )
    return layer_norm(x + sublayer_out, gamma, beta, eps)
