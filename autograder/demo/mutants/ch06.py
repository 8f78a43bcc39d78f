"""Buggy and valid implementations of the chapter 6 exercises (encoder block and encoder).

The post-LN block is ``y = LN1(x + MHA(x, x, mask))`` then ``LN2(y + FFN(y))``; the encoder
computes ``embedding[tokens] * sqrt(d_model) + PE`` and applies the blocks in order, each with
its own parameter dictionary. The pieces come from the reference, as they do in the notebooks.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from autograder.demo.mutants import Mutant
from transformer_ref.np_attention import multi_head_attention
from transformer_ref.np_layers import add_and_norm, encoder_block, feed_forward, layer_norm
from transformer_ref.numpy.positional import positional_encoding

Array = np.ndarray

EXERCISE_BLOCK = "ch06.encoder_block"
EXERCISE_ENCODER = "ch06.encoder"


def _attention(x: Array, p: dict[str, Array], num_heads: int, mask: Array | None) -> Array:
    return multi_head_attention(x, x, p["W_q"], p["W_k"], p["W_v"], p["W_o"], num_heads, mask)[0]


def _ffn(x: Array, p: dict[str, Array]) -> Array:
    return feed_forward(x, p["W1"], p["b1"], p["W2"], p["b2"])


# --- encoder_block --------------------------------------------------------------------------

def block_pre_ln(
    x: Array, params: dict[str, Array], num_heads: int, mask: Array | None = None
) -> Array:
    """Normalises before each sublayer (pre-LN) instead of after the residual sum."""
    p = params
    x = x + _attention(layer_norm(x, p["gamma1"], p["beta1"]), p, num_heads, mask)
    return x + _ffn(layer_norm(x, p["gamma2"], p["beta2"]), p)


def block_no_attention_residual(
    x: Array, params: dict[str, Array], num_heads: int, mask: Array | None = None
) -> Array:
    """Normalises the attention output without adding x back."""
    p = params
    y = layer_norm(_attention(x, p, num_heads, mask), p["gamma1"], p["beta1"])
    return layer_norm(y + _ffn(y, p), p["gamma2"], p["beta2"])


def block_norm_params_swapped(
    x: Array, params: dict[str, Array], num_heads: int, mask: Array | None = None
) -> Array:
    """Uses gamma2/beta2 after attention and gamma1/beta1 after the feed-forward network."""
    p = params
    y = layer_norm(x + _attention(x, p, num_heads, mask), p["gamma2"], p["beta2"])
    return layer_norm(y + _ffn(y, p), p["gamma1"], p["beta1"])


def block_ffn_first(
    x: Array, params: dict[str, Array], num_heads: int, mask: Array | None = None
) -> Array:
    """Runs the feed-forward sublayer before self-attention."""
    p = params
    y = layer_norm(x + _ffn(x, p), p["gamma1"], p["beta1"])
    return layer_norm(y + _attention(y, p, num_heads, mask), p["gamma2"], p["beta2"])


def block_mask_ignored(
    x: Array, params: dict[str, Array], num_heads: int, mask: Array | None = None
) -> Array:
    """Forgets to pass the mask to the attention."""
    p = params
    y = layer_norm(x + _attention(x, p, num_heads, None), p["gamma1"], p["beta1"])
    return layer_norm(y + _ffn(y, p), p["gamma2"], p["beta2"])


def block_ffn_on_input(
    x: Array, params: dict[str, Array], num_heads: int, mask: Array | None = None
) -> Array:
    """Feeds the block input, not the normalised attention result, to the feed-forward net."""
    p = params
    y = layer_norm(x + _attention(x, p, num_heads, mask), p["gamma1"], p["beta1"])
    return layer_norm(y + _ffn(x, p), p["gamma2"], p["beta2"])


def block_with_add_and_norm(
    x: Array, params: dict[str, Array], num_heads: int, mask: Array | None = None
) -> Array:
    """Valid: the two residual steps through add_and_norm."""
    p = params
    y = add_and_norm(x, _attention(x, p, num_heads, mask), p["gamma1"], p["beta1"])
    return add_and_norm(y, _ffn(y, p), p["gamma2"], p["beta2"])


def block_sublayer_loop(
    x: Array, params: dict[str, Array], num_heads: int, mask: Array | None = None
) -> Array:
    """Valid: a loop over (sublayer, gain, shift) triples."""
    sublayers = (
        (lambda h: _attention(h, params, num_heads, mask), "gamma1", "beta1"),
        (lambda h: _ffn(h, params), "gamma2", "beta2"),
    )
    for sublayer, gamma, beta in sublayers:
        x = layer_norm(x + sublayer(x), params[gamma], params[beta])
    return x


def block_float64(
    x: Array, params: dict[str, Array], num_heads: int, mask: Array | None = None
) -> Array:
    """Valid: computes in float64 and returns the input's dtype."""
    p = {key: np.asarray(value, dtype=np.float64) for key, value in params.items()}
    return block_with_add_and_norm(np.asarray(x, dtype=np.float64), p, num_heads, mask).astype(
        x.dtype
    )


# --- encoder --------------------------------------------------------------------------------

def _embed(
    tokens: Array, embedding: Array, *, scale: bool = True, positions: bool = True
) -> Array:
    x = embedding[tokens]
    d_model = embedding.shape[-1]
    if scale:
        x = x * math.sqrt(d_model)
    if positions:
        x = x + positional_encoding(x.shape[-2], d_model)
    return x


def encoder_no_scaling(
    tokens: Array, embedding: Array, layers: list[dict[str, Array]], num_heads: int,
    mask: Array | None = None,
) -> Array:
    """Adds the positional encoding to unscaled embeddings."""
    x = _embed(tokens, embedding, scale=False)
    for p in layers:
        x = encoder_block(x, p, num_heads, mask)
    return x


def encoder_numpy_sqrt(
    tokens: Array, embedding: Array, layers: list[dict[str, Array]], num_heads: int,
    mask: Array | None = None,
) -> Array:
    """Scales by np.sqrt(d_model), a NumPy float64 scalar: float32 embeddings become float64."""
    x = embedding[tokens] * np.sqrt(embedding.shape[-1])
    x = x + positional_encoding(x.shape[-2], embedding.shape[-1])
    for p in layers:
        x = encoder_block(x, p, num_heads, mask)
    return x


def encoder_scale_after_positions(
    tokens: Array, embedding: Array, layers: list[dict[str, Array]], num_heads: int,
    mask: Array | None = None,
) -> Array:
    """Scales the sum of embedding and positional encoding, not the embedding alone."""
    d_model = embedding.shape[-1]
    x = (embedding[tokens] + positional_encoding(tokens.shape[-1], d_model)) * math.sqrt(d_model)
    for p in layers:
        x = encoder_block(x, p, num_heads, mask)
    return x


def encoder_no_positions(
    tokens: Array, embedding: Array, layers: list[dict[str, Array]], num_heads: int,
    mask: Array | None = None,
) -> Array:
    """Leaves out the positional encoding."""
    x = _embed(tokens, embedding, positions=False)
    for p in layers:
        x = encoder_block(x, p, num_heads, mask)
    return x


def encoder_last_layer_only(
    tokens: Array, embedding: Array, layers: list[dict[str, Array]], num_heads: int,
    mask: Array | None = None,
) -> Array:
    """Overwrites the result in the loop, so only the last block counts."""
    x0 = _embed(tokens, embedding)
    x = x0
    for p in layers:
        x = encoder_block(x0, p, num_heads, mask)
    return x


def encoder_first_params_reused(
    tokens: Array, embedding: Array, layers: list[dict[str, Array]], num_heads: int,
    mask: Array | None = None,
) -> Array:
    """Applies the first layer's parameters in every block."""
    x = _embed(tokens, embedding)
    for _ in layers:
        x = encoder_block(x, layers[0], num_heads, mask)
    return x


def encoder_layers_reversed(
    tokens: Array, embedding: Array, layers: list[dict[str, Array]], num_heads: int,
    mask: Array | None = None,
) -> Array:
    """Applies the blocks last to first."""
    x = _embed(tokens, embedding)
    for p in reversed(layers):
        x = encoder_block(x, p, num_heads, mask)
    return x


def encoder_one_hot(
    tokens: Array, embedding: Array, layers: list[dict[str, Array]], num_heads: int,
    mask: Array | None = None,
) -> Array:
    """Valid: embedding lookup as a one-hot matrix product, scaling by d_model ** 0.5."""
    one_hot = np.eye(embedding.shape[0], dtype=embedding.dtype)[tokens]
    x = one_hot @ embedding * embedding.shape[-1] ** 0.5
    x = x + positional_encoding(tokens.shape[-1], embedding.shape[-1])
    for p in layers:
        x = encoder_block(x, p, num_heads, mask)
    return x


def encoder_reduce(
    tokens: Array, embedding: Array, layers: list[dict[str, Array]], num_heads: int,
    mask: Array | None = None,
) -> Array:
    """Valid: np.take for the lookup and functools.reduce over the layers."""
    d_model = embedding.shape[-1]
    x = np.take(embedding, tokens, axis=0) * math.sqrt(d_model)
    x = x + positional_encoding(x.shape[-2], d_model)
    return functools.reduce(lambda h, p: encoder_block(h, p, num_heads, mask), layers, x)


def encoder_own_block(
    tokens: Array, embedding: Array, layers: list[dict[str, Array]], num_heads: int,
    mask: Array | None = None,
) -> Array:
    """Valid: the blocks written out with add_and_norm rather than calling encoder_block."""
    x = _embed(tokens, embedding)
    for p in layers:
        x = block_with_add_and_norm(x, p, num_heads, mask)
    return x


MUTANTS = [
    Mutant(EXERCISE_BLOCK, "pre-LN", block_pre_ln, False, "post-LN"),
    Mutant(EXERCISE_BLOCK, "no residual around attention", block_no_attention_residual, False,
           "residual"),
    Mutant(EXERCISE_BLOCK, "norm parameters swapped", block_norm_params_swapped, False,
           "gamma1"),
    Mutant(EXERCISE_BLOCK, "feed-forward first", block_ffn_first, False, "order"),
    Mutant(EXERCISE_BLOCK, "mask ignored", block_mask_ignored, False, "mask"),
    Mutant(EXERCISE_BLOCK, "feed-forward on the block input", block_ffn_on_input, False, None),
    Mutant(EXERCISE_BLOCK, "add_and_norm", block_with_add_and_norm, True, None),
    Mutant(EXERCISE_BLOCK, "loop over sublayers", block_sublayer_loop, True, None),
    Mutant(EXERCISE_BLOCK, "float64 inside", block_float64, True, None),
    Mutant(EXERCISE_ENCODER, "no sqrt(d_model) scaling", encoder_no_scaling, False,
           "sqrt(d_model)"),
    Mutant(EXERCISE_ENCODER, "scaled after adding positions", encoder_scale_after_positions,
           False, "sqrt(d_model)"),
    Mutant(EXERCISE_ENCODER, "no positional encoding", encoder_no_positions, False,
           "positional"),
    Mutant(EXERCISE_ENCODER, "only the last layer", encoder_last_layer_only, False, "layer"),
    Mutant(EXERCISE_ENCODER, "first layer's parameters reused", encoder_first_params_reused,
           False, "layer"),
    Mutant(EXERCISE_ENCODER, "layers reversed", encoder_layers_reversed, False, "order"),
    Mutant(EXERCISE_ENCODER, "np.sqrt(d_model) makes float32 float64", encoder_numpy_sqrt, True,
           every_secret=True, note="np.sqrt(d_k)"),
    Mutant(EXERCISE_ENCODER, "one-hot lookup", encoder_one_hot, True, None),
    Mutant(EXERCISE_ENCODER, "np.take and reduce", encoder_reduce, True, None),
    Mutant(EXERCISE_ENCODER, "blocks written out", encoder_own_block, True, None),
]
