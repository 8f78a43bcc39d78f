"""Correct answers of the sample class's learners, each written in that learner's own way.

An honest learner does not hand in the course's solution: each writes the exercise in their
own words, so that copy detection (:mod:`autograder.pipeline.similarity`) has nothing to find
between them or against the course's code. :data:`OWN_WORK` maps a learner and an exercise to
the function of this module that is their answer; :func:`autograder.demo.sample_class.work`
pastes its source into the learner's notebook under the exercise's name. The functions call
``softmax`` and ``layer_norm`` as a learner's notebook does: the learner's own, from an
earlier cell.
"""

from __future__ import annotations

import math

import numpy as np


def softmax(x, axis=-1):  # the notebook's own softmax, for the attention answers below
    x = np.asarray(x)
    shifted = np.exp(x - x.max(axis=axis, keepdims=True))
    return shifted / shifted.sum(axis=axis, keepdims=True)


def layer_norm(x, gamma=None, beta=None, eps=1e-5):  # the notebook's own, as above
    x = np.asarray(x)
    centred = x - x.mean(axis=-1, keepdims=True)
    out = centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + eps)
    return out * (1 if gamma is None else gamma) + (0 if beta is None else beta)


# --- ada: methods of the array, one step per line ---------------------------------------------


def softmax_ada(x, axis=-1):
    z = np.asarray(x)
    z = z - z.max(axis=axis, keepdims=True)
    numerators = np.exp(z)
    return numerators / numerators.sum(axis=axis, keepdims=True)


def causal_mask_ada(n):
    return np.tril(np.ones((n, n), dtype=bool))


def padding_mask_ada(lengths, max_len):
    lengths = np.asarray(lengths)
    return (np.arange(max_len) < lengths[:, None])[:, None, :]


def sdpa_ada(q, k, v, mask=None):
    d = q.shape[-1]
    logits = np.matmul(q, np.swapaxes(k, -2, -1)) / math.sqrt(d)
    if mask is not None:
        logits = np.where(np.asarray(mask).astype(bool), logits, -np.inf)
    attn = softmax(logits, axis=-1)
    return np.matmul(attn, v), attn


def layer_norm_ada(x, gamma=None, beta=None, eps=1e-5):
    x = np.asarray(x)
    mu = x.mean(axis=-1, keepdims=True)
    sq = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    y = (x - mu) / np.sqrt(sq + eps)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y


def feed_forward_ada(x, W1, b1, W2, b2):
    inner = np.maximum(0, x @ W1 + b1)
    return inner @ W2 + b2


def add_and_norm_ada(x, sublayer_out, gamma, beta, eps=1e-5):
    return layer_norm(x + sublayer_out, gamma, beta, eps)


# --- cleo: NumPy's named functions ----------------------------------------------------------


def softmax_cleo(x, axis=-1):
    peak = np.amax(x, axis=axis, keepdims=True)
    e = np.exp(np.subtract(x, peak))
    total = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, total)


def causal_mask_cleo(n):
    rows = np.arange(n)
    return rows[:, np.newaxis] >= rows[np.newaxis, :]


def layer_norm_cleo(x, gamma=None, beta=None, eps=1e-5):
    x = np.asarray(x)
    width = x.shape[-1]
    average = np.sum(x, axis=-1, keepdims=True) / width
    spread = np.sum(np.square(x - average), axis=-1, keepdims=True) / width
    result = np.subtract(x, average) / np.sqrt(np.add(spread, eps))
    scale = np.ones(width, dtype=x.dtype) if gamma is None else gamma
    shift = np.zeros(width, dtype=x.dtype) if beta is None else beta
    return result * scale + shift


# --- dev: everything in one expression where it fits ----------------------------------------


def softmax_dev(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def sdpa_dev(q, k, v, mask=None):
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = np.einsum("...qd,...kd->...qk", q, k) * scale
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores)
    return np.einsum("...qk,...kd->...qd", weights, v), weights


def layer_norm_dev(x, gamma=None, beta=None, eps=1e-5):
    x = np.asarray(x)
    out = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    return out if gamma is None and beta is None else out * (
        1 if gamma is None else gamma) + (0 if beta is None else beta)


# --- hana: the axis moved to the end first --------------------------------------------------


def softmax_hana(x, axis=-1):
    a = np.moveaxis(np.asarray(x), axis, -1)
    a = np.exp(a - a.max(-1)[..., None])
    return np.moveaxis(a / a.sum(-1)[..., None], -1, axis)


def causal_mask_hana(n):
    return ~np.triu(np.ones((n, n), dtype=bool), k=1)


def padding_mask_hana(lengths, max_len):
    index = np.arange(max_len).reshape(1, 1, -1)
    return index < np.asarray(lengths).reshape(-1, 1, 1)


def sdpa_hana(q, k, v, mask=None):
    scores = q @ k.swapaxes(-1, -2) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = np.where(np.asarray(mask) == 0, -np.inf, scores)
    w = softmax(scores, axis=-1)
    return w @ v, w


def layer_norm_hana(x, gamma=None, beta=None, eps=1e-5):
    x = np.asarray(x)
    m = x.mean(-1)[..., None]
    s = np.sqrt(np.square(x - m).sum(-1)[..., None] / x.shape[-1] + eps)
    z = (x - m) / s
    z = z if gamma is None else z * gamma
    return z if beta is None else z + beta


# --- kim: a learner who names every intermediate ----------------------------------------------


def layer_norm_kim(x, gamma=None, beta=None, eps=1e-5):
    values = np.asarray(x)
    feature_mean = np.mean(values, axis=-1, keepdims=True)
    deviations = values - feature_mean
    feature_variance = np.mean(deviations * deviations, axis=-1, keepdims=True)
    standardised = deviations / np.sqrt(feature_variance + eps)
    if gamma is not None:
        standardised = standardised * gamma
    return standardised if beta is None else standardised + beta


def feed_forward_kim(x, W1, b1, W2, b2):
    pre_activation = np.matmul(x, W1) + b1
    activation = np.where(pre_activation > 0, pre_activation, 0)
    return np.matmul(activation, W2) + b2


def add_and_norm_kim(x, sublayer_out, gamma, beta, eps=1e-5):
    residual_sum = x + sublayer_out
    return layer_norm(residual_sum, gamma=gamma, beta=beta, eps=eps)


# learner -> exercise -> the name of their answer in this module.
OWN_WORK: dict[str, dict[str, str]] = {
    learner: {exercise: f"{name}_{learner}" for exercise, name in names.items()
              if f"{name}_{learner}" in globals()}
    for learner, names in {
        person: {"ch02.softmax": "softmax", "ch02.causal_mask": "causal_mask",
                 "ch02.padding_mask": "padding_mask",
                 "ch02.scaled_dot_product_attention": "sdpa", "ch05.layer_norm": "layer_norm",
                 "ch05.feed_forward": "feed_forward", "ch05.add_and_norm": "add_and_norm"}
        for person in ("ada", "cleo", "dev", "hana", "kim")}.items()
}
