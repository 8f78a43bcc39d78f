"""Buggy and valid implementations of the chapter 5 exercises (layer norm, feed-forward, residual).

``layer_norm`` normalises over the last axis with the biased variance and ``eps`` inside the
square root; ``feed_forward`` is ``relu(x @ W1 + b1) @ W2 + b2``; ``add_and_norm`` is
``layer_norm(x + sublayer_out)`` (post-LN).
"""

from __future__ import annotations

import math

import numpy as np

from autograder.demo.mutants import Mutant
from transformer_ref.np_layers import layer_norm

Array = np.ndarray

EXERCISE_LN = "ch05.layer_norm"
EXERCISE_FFN = "ch05.feed_forward"
EXERCISE_ADD = "ch05.add_and_norm"


def _affine(x_hat: Array, gamma: Array | None, beta: Array | None) -> Array:
    if gamma is not None:
        x_hat = x_hat * gamma
    if beta is not None:
        x_hat = x_hat + beta
    return x_hat


# --- layer_norm -----------------------------------------------------------------------------

def ln_unbiased_variance(
    x: Array, gamma: Array | None = None, beta: Array | None = None, eps: float = 1e-5
) -> Array:
    """Divides by d - 1 (np.var with ddof=1)."""
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, ddof=1, keepdims=True)
    return _affine((x - mean) / np.sqrt(var + eps), gamma, beta)


def ln_over_batch_axis(
    x: Array, gamma: Array | None = None, beta: Array | None = None, eps: float = 1e-5
) -> Array:
    """Normalises each feature over the first axis (batch norm) instead of each row."""
    mean = x.mean(axis=0, keepdims=True)
    var = x.var(axis=0, keepdims=True)
    return _affine((x - mean) / np.sqrt(var + eps), gamma, beta)


def ln_eps_outside_sqrt(
    x: Array, gamma: Array | None = None, beta: Array | None = None, eps: float = 1e-5
) -> Array:
    """Adds eps to the standard deviation instead of the variance."""
    mean = x.mean(axis=-1, keepdims=True)
    return _affine((x - mean) / (x.std(axis=-1, keepdims=True) + eps), gamma, beta)


def ln_mean_without_keepdims(
    x: Array, gamma: Array | None = None, beta: Array | None = None, eps: float = 1e-5
) -> Array:
    """x.mean(axis=-1) without keepdims: the mean no longer broadcasts against x."""
    mean = x.mean(axis=-1)
    return _affine((x - mean) / np.sqrt(x.var(axis=-1, keepdims=True) + eps), gamma, beta)


def ln_float64_result(
    x: Array, gamma: Array | None = None, beta: Array | None = None, eps: float = 1e-5
) -> Array:
    """Computes in float64 and returns float64 for float32 inputs."""
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    return _affine((x - mean) / np.sqrt(x.var(axis=-1, keepdims=True) + eps), gamma, beta)


def ln_gamma_beta_swapped(
    x: Array, gamma: Array | None = None, beta: Array | None = None, eps: float = 1e-5
) -> Array:
    """Scales by beta and shifts by gamma."""
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return _affine((x - mean) / np.sqrt(var + eps), beta, gamma)


def ln_eps_ignored(
    x: Array, gamma: Array | None = None, beta: Array | None = None, eps: float = 1e-5
) -> Array:
    """Hard-codes eps = 1e-5 instead of using the argument."""
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return _affine((x - mean) / np.sqrt(var + 1e-5), gamma, beta)


def ln_statistics_of_whole_array(
    x: Array, gamma: Array | None = None, beta: Array | None = None, eps: float = 1e-5
) -> Array:
    """Leaves out the axis, so one mean and variance are taken over the whole array."""
    return _affine((x - x.mean()) / np.sqrt(x.var() + eps), gamma, beta)


def ln_manual_sums(
    x: Array, gamma: Array | None = None, beta: Array | None = None, eps: float = 1e-5
) -> Array:
    """Valid: explicit sums divided by the row length, gamma and beta defaulting to 1 and 0."""
    d = x.shape[-1]
    gamma = np.ones(d, dtype=x.dtype) if gamma is None else gamma
    beta = np.zeros(d, dtype=x.dtype) if beta is None else beta
    centred = x - x.sum(axis=-1, keepdims=True) / d
    var = (centred * centred).sum(axis=-1, keepdims=True) / d
    return gamma * centred / np.sqrt(var + eps) + beta


def ln_float64_moments(
    x: Array, gamma: Array | None = None, beta: Array | None = None, eps: float = 1e-5
) -> Array:
    """Valid: E[x^2] - E[x]^2 in float64, then back to the input's dtype."""
    x64 = np.asarray(x, dtype=np.float64)
    mean = x64.mean(axis=-1, keepdims=True)
    var = (x64**2).mean(axis=-1, keepdims=True) - mean**2
    return _affine((x64 - mean) / np.sqrt(var + eps), gamma, beta).astype(x.dtype)


def ln_std_with_rsqrt(
    x: Array, gamma: Array | None = None, beta: Array | None = None, eps: float = 1e-5
) -> Array:
    """Valid: multiplies by 1 / sqrt(var + eps) computed once per row."""
    mean = np.mean(x, axis=-1, keepdims=True)
    inv_std = 1.0 / np.sqrt(np.var(x, axis=-1, keepdims=True) + eps)
    return _affine((x - mean) * inv_std, gamma, beta)


# --- feed_forward ---------------------------------------------------------------------------

def ffn_no_relu(x: Array, W1: Array, b1: Array, W2: Array, b2: Array) -> Array:
    """Two affine maps with no non-linearity between them."""
    return (x @ W1 + b1) @ W2 + b2


def ffn_relu_on_output(x: Array, W1: Array, b1: Array, W2: Array, b2: Array) -> Array:
    """Applies ReLU after the second layer as well."""
    return np.maximum(np.maximum(x @ W1 + b1, 0) @ W2 + b2, 0)


def ffn_bias_after_relu(x: Array, W1: Array, b1: Array, W2: Array, b2: Array) -> Array:
    """Adds b1 after the ReLU."""
    return (np.maximum(x @ W1, 0) + b1) @ W2 + b2


def ffn_gelu(x: Array, W1: Array, b1: Array, W2: Array, b2: Array) -> Array:
    """Uses the tanh approximation of GELU instead of ReLU."""
    h = x @ W1 + b1
    gelu = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))
    return gelu @ W2 + b2


def ffn_missing_output_bias(x: Array, W1: Array, b1: Array, W2: Array, b2: Array) -> Array:
    """Forgets b2."""
    return np.maximum(x @ W1 + b1, 0) @ W2


def ffn_numpy_zero(x: Array, W1: Array, b1: Array, W2: Array, b2: Array) -> Array:
    """Adds b2 converted to float64: float32 inputs give a float64 output."""
    return np.maximum(x @ W1 + b1, 0.0) @ W2 + b2.astype(np.float64)


def ffn_where(x: Array, W1: Array, b1: Array, W2: Array, b2: Array) -> Array:
    """Valid: ReLU with np.where."""
    h = x @ W1 + b1
    return np.where(h > 0, h, 0) @ W2 + b2


def ffn_einsum_mask(x: Array, W1: Array, b1: Array, W2: Array, b2: Array) -> Array:
    """Valid: einsum and multiplication by the positive mask."""
    h = np.einsum("...d,df->...f", x, W1) + b1
    return np.einsum("...f,fd->...d", h * (h > 0), W2) + b2


def ffn_float64(x: Array, W1: Array, b1: Array, W2: Array, b2: Array) -> Array:
    """Valid: computes in float64 and returns the input's dtype."""
    x64, W1, b1, W2, b2 = (np.asarray(a, dtype=np.float64) for a in (x, W1, b1, W2, b2))
    return (np.maximum(0, x64 @ W1 + b1) @ W2 + b2).astype(x.dtype)


# --- add_and_norm ---------------------------------------------------------------------------

def add_norm_pre_ln(
    x: Array, sublayer_out: Array, gamma: Array, beta: Array, eps: float = 1e-5
) -> Array:
    """Normalises the sublayer output and adds x afterwards (the pre-LN residual)."""
    return x + layer_norm(sublayer_out, gamma, beta, eps)


def add_norm_sublayer_only(
    x: Array, sublayer_out: Array, gamma: Array, beta: Array, eps: float = 1e-5
) -> Array:
    """Drops the residual: normalises the sublayer output alone."""
    return layer_norm(sublayer_out, gamma, beta, eps)


def add_norm_no_norm(
    x: Array, sublayer_out: Array, gamma: Array, beta: Array, eps: float = 1e-5
) -> Array:
    """Adds without normalising."""
    return x + sublayer_out


def add_norm_gamma_beta_swapped(
    x: Array, sublayer_out: Array, gamma: Array, beta: Array, eps: float = 1e-5
) -> Array:
    """Passes beta as the scale and gamma as the shift."""
    return layer_norm(x + sublayer_out, beta, gamma, eps)


def add_norm_eps_dropped(
    x: Array, sublayer_out: Array, gamma: Array, beta: Array, eps: float = 1e-5
) -> Array:
    """Does not pass eps on, so layer_norm uses its default."""
    return layer_norm(x + sublayer_out, gamma, beta)


def add_norm_inline(
    x: Array, sublayer_out: Array, gamma: Array, beta: Array, eps: float = 1e-5
) -> Array:
    """Valid: the normalisation written out, with np.add."""
    s = np.add(x, sublayer_out)
    centred = s - s.mean(axis=-1, keepdims=True)
    return gamma * centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + eps) + beta


def add_norm_float64(
    x: Array, sublayer_out: Array, gamma: Array, beta: Array, eps: float = 1e-5
) -> Array:
    """Valid: sums in float64, returns the input's dtype."""
    s = np.asarray(x, dtype=np.float64) + sublayer_out
    g, b = np.asarray(gamma, dtype=np.float64), np.asarray(beta, dtype=np.float64)
    return layer_norm(s, g, b, eps).astype(np.result_type(x, sublayer_out))


MUTANTS = [
    Mutant(EXERCISE_LN, "unbiased variance", ln_unbiased_variance, False, "ddof"),
    Mutant(EXERCISE_LN, "normalised over the batch axis", ln_over_batch_axis, False, "axis"),
    Mutant(EXERCISE_LN, "eps outside the sqrt", ln_eps_outside_sqrt, False, "eps"),
    Mutant(EXERCISE_LN, "gamma and beta swapped", ln_gamma_beta_swapped, False, "swapped"),
    Mutant(EXERCISE_LN, "eps argument ignored", ln_eps_ignored, False, "eps"),
    Mutant(EXERCISE_LN, "statistics of the whole array", ln_statistics_of_whole_array, False,
           "axis"),
    Mutant(EXERCISE_LN, "mean without keepdims", ln_mean_without_keepdims, False,
           "drops its axis", every_secret=True),
    Mutant(EXERCISE_LN, "float32 input, float64 result", ln_float64_result, True,
           every_secret=True, note="costs no points"),
    Mutant(EXERCISE_LN, "manual sums", ln_manual_sums, True, None),
    Mutant(EXERCISE_LN, "float64 moments", ln_float64_moments, True, None),
    Mutant(EXERCISE_LN, "reciprocal sqrt", ln_std_with_rsqrt, True, None),
    Mutant(EXERCISE_FFN, "no ReLU", ffn_no_relu, False, "ReLU"),
    Mutant(EXERCISE_FFN, "ReLU on the output", ffn_relu_on_output, False, "ReLU"),
    Mutant(EXERCISE_FFN, "b1 after the ReLU", ffn_bias_after_relu, False, "b1"),
    Mutant(EXERCISE_FFN, "GELU instead of ReLU", ffn_gelu, False, None),
    Mutant(EXERCISE_FFN, "missing b2", ffn_missing_output_bias, False, "b2"),
    Mutant(EXERCISE_FFN, "float64 output bias", ffn_numpy_zero, True, every_secret=True,
           note="came back float64 where the exercise asks for float32"),
    Mutant(EXERCISE_FFN, "np.where ReLU", ffn_where, True, None),
    Mutant(EXERCISE_FFN, "einsum", ffn_einsum_mask, True, None),
    Mutant(EXERCISE_FFN, "float64 inside", ffn_float64, True, None),
    Mutant(EXERCISE_ADD, "pre-LN residual", add_norm_pre_ln, False, "x + sublayer_out"),
    Mutant(EXERCISE_ADD, "no residual", add_norm_sublayer_only, False, "residual"),
    Mutant(EXERCISE_ADD, "no normalisation", add_norm_no_norm, False, "layer_norm"),
    Mutant(EXERCISE_ADD, "gamma and beta swapped", add_norm_gamma_beta_swapped, False,
           "swapped"),
    Mutant(EXERCISE_ADD, "eps not passed on", add_norm_eps_dropped, False, "eps"),
    Mutant(EXERCISE_ADD, "written out", add_norm_inline, True, None),
    Mutant(EXERCISE_ADD, "float64 inside", add_norm_float64, True, None),
]
