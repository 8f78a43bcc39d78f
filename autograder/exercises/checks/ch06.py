"""Checks of chapter 6: the post-LN encoder block and the encoder stack.

Every case uses gains and shifts different from 1 and 0 and different between the two
sublayers (swapped parameters show), padding masks that differ between sequences (an ignored
mask shows), and for the encoder several layers with their own parameters (order, reuse and
overwriting show). The hints rebuild each known bug from the reference's building blocks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from autograder.exercises.checking import CheckContext, Hint, call, compare
from autograder.exercises.checks.ch04 import batch_shape, draw, head_sizes, padding
from autograder.exercises.checks.ch05 import gain_and_shift
from autograder.exercises.registry import register
from transformer_ref.np_attention import multi_head_attention
from transformer_ref.np_layers import encoder_block, feed_forward, layer_norm
from transformer_ref.numpy.positional import positional_encoding

# The course's building blocks the chapter's setup cell gives the learner's code; while an
# exercise of this chapter is graded, its process holds these and nothing else of the course.
BUILDING_BLOCKS = (
    "transformer_ref.numpy.heads:multi_head_attention",
    "transformer_ref.numpy.scaled_attention:padding_mask",
    "transformer_ref.numpy.sublayers:add_and_norm",
    "transformer_ref.numpy.sublayers:feed_forward",
    "transformer_ref.numpy.positional:positional_encoding",
)


def block_params(rng: np.random.Generator, d_model: int, d_ff: int, dtype: type) -> dict:
    """Random parameters of one encoder block, with the keys of the course's params dict."""
    p = {name: draw(rng, (d_model, d_model), dtype, 1.5 / math.sqrt(d_model))
         for name in ("W_q", "W_k", "W_v", "W_o")}
    p["W1"] = draw(rng, (d_model, d_ff), dtype, 1 / math.sqrt(d_model))
    p["b1"] = draw(rng, (d_ff,), dtype, 0.5)
    p["W2"] = draw(rng, (d_ff, d_model), dtype, 1 / math.sqrt(d_ff))
    p["b2"] = draw(rng, (d_model,), dtype, 0.5)
    p["gamma1"], p["beta1"] = gain_and_shift(rng, d_model, dtype)
    p["gamma2"], p["beta2"] = gain_and_shift(rng, d_model, dtype)
    return p


def _mask_words(mask: np.ndarray | None) -> str:
    return "no mask" if mask is None else f"a padding mask {mask.shape}"


# ----------------------------------------------------------------------------- encoder_block


def _sublayers(
    p: dict[str, Any], num_heads: int, mask: Any
) -> tuple[Callable[[np.ndarray], np.ndarray], Callable[[np.ndarray], np.ndarray]]:
    """The block's two sublayers, self-attention and feed-forward, as one-argument functions."""
    def attention(x: np.ndarray) -> np.ndarray:
        return multi_head_attention(x, x, p["W_q"], p["W_k"], p["W_v"], p["W_o"], num_heads,
                                    mask)[0]

    def ffn(x: np.ndarray) -> np.ndarray:
        return feed_forward(x, p["W1"], p["b1"], p["W2"], p["b2"])

    return attention, ffn


def _block_hints(x: np.ndarray, p: dict[str, Any], num_heads: int, mask: Any) -> list[Hint]:
    attention, ffn = _sublayers(p, num_heads, mask)

    def norm(h: np.ndarray, which: int) -> np.ndarray:
        return layer_norm(h, p[f"gamma{which}"], p[f"beta{which}"])

    pre = x + attention(norm(x, 1))
    y = norm(x + attention(x), 1)
    y_no_residual = norm(attention(x), 1)
    y_swapped = norm(x + attention(x), 2)
    y_ffn_first = norm(x + ffn(x), 1)
    hints = [
        Hint("the block normalises before each sublayer (pre-LN); this encoder is post-LN: "
             "x = layer_norm(x + sublayer(x)) after each sublayer.", pre + ffn(norm(pre, 2))),
        Hint("the residual connection around the attention is missing: "
             "layer_norm(x + attention(x)), not layer_norm(attention(x)).",
             norm(y_no_residual + ffn(y_no_residual), 2)),
        Hint("the layer-norm parameters of the two sublayers are swapped: gamma1/beta1 belong "
             "to the attention step, gamma2/beta2 to the feed-forward step.",
             layer_norm(y_swapped + ffn(y_swapped), p["gamma1"], p["beta1"])),
        Hint("the sublayers run in the wrong order: self-attention first, then the feed-forward "
             "network.", layer_norm(y_ffn_first + attention(y_ffn_first), p["gamma2"],
                                    p["beta2"])),
        Hint("the feed-forward network got the block input; it takes the output of the first "
             "add & norm.", norm(y + ffn(x), 2)),
    ]
    if mask is not None:
        hints.append(Hint("the result is what the block gives without the mask: pass the mask "
                          "to the self-attention.", encoder_block(x, p, num_heads)))
    return hints


@register(
    "ch06.encoder_block",
    title="The encoder block (post-LN)",
    points=4,
    difficulty="medium",
    minutes=20,
    reference="transformer_ref.numpy.encoder:encoder_block",
    allowed=BUILDING_BLOCKS,
    answered_by=("transformer_ref.model.encoder_layer",),  # EncoderLayer, loaded
)
def check_encoder_block(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """A padding mask that differs between sequences, in float64 with one batch axis and in
    float32 with two (the result keeps the dtype); no mask in float64. Gains and shifts differ
    between the sublayers."""
    rng = ctx.rng
    for ndim, masked, dtype in ((1, True, np.float64), (2, True, np.float32),
                                (1, False, np.float64)):
        batch = batch_shape(rng, ndim)
        seq = int(rng.integers(3, 8))
        num_heads, d_k = head_sizes(rng)
        d_model = num_heads * d_k
        x = draw(rng, batch + (seq, d_model), dtype)
        params = block_params(rng, d_model, int(rng.integers(d_model + 1, 3 * d_model)), dtype)
        mask = padding(rng, batch, seq) if masked else None
        what = (f"encoder_block(x {x.shape} in {x.dtype}, params, num_heads={num_heads}, "
                f"{_mask_words(mask)})")
        compare(call(fn, x, params, num_heads, mask), ctx.reference(x, params, num_heads, mask),
                what, dtype=dtype, hints=_block_hints(x, params, num_heads, mask))


# ----------------------------------------------------------------------------- encoder


def _encoder_hints(
    tokens: np.ndarray, embedding: np.ndarray, layers: list[dict[str, Any]], num_heads: int,
    mask: np.ndarray | None,
) -> list[Hint]:
    d_model = embedding.shape[1]
    emb = embedding[tokens]
    pe = positional_encoding(tokens.shape[-1], d_model).astype(embedding.dtype)
    root = math.sqrt(d_model)

    def blocks(x: np.ndarray, params_list: list[dict[str, Any]]) -> np.ndarray:
        for p in params_list:
            x = encoder_block(x, p, num_heads, mask)
        return x

    x0 = emb * root + pe
    return [
        Hint("the embeddings were not multiplied by sqrt(d_model) before adding the "
             "positional encoding.", blocks(emb + pe, layers)),
        Hint("the positional encoding was scaled as well: multiply only the embeddings by "
             "sqrt(d_model), then add the positional encoding.",
             blocks((emb + pe) * root, layers)),
        Hint("the positional encoding is missing: add positional_encoding(seq_len, d_model) to "
             "the scaled embeddings.", blocks(emb * root, layers)),
        Hint("only the last layer's result survives: feed each layer the output of the one "
             "before (x = encoder_block(x, ...)).", blocks(x0, layers[-1:])),
        Hint("every block used the first layer's parameters: each layer has its own "
             "parameter dict, layers[i].", blocks(x0, [layers[0]] * len(layers))),
        Hint("the layers ran in the wrong order: layers[0] comes first.",
             blocks(x0, layers[::-1])),
    ]


@register(
    "ch06.encoder",
    title="The encoder stack",
    points=4,
    difficulty="medium",
    minutes=20,
    reference="transformer_ref.numpy.encoder:encoder",
    allowed=BUILDING_BLOCKS,
    depends=("ch06.encoder_block",),
)
def check_encoder(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Two or three layers with their own parameters; a padding mask with one batch axis in
    float64 and with two in float32 (the result has the embedding's dtype); 1-D tokens without
    a mask.

    A wrong block is carried forward (the reference's stack of the learner's blocks), as
    chapter 2's softmax is: these checks also run in the learner's notebook."""
    rng = ctx.rng
    for ndim, masked, dtype in ((1, True, np.float64), (2, True, np.float32),
                                (0, False, np.float64)):
        batch = batch_shape(rng, ndim)
        seq, vocab, n_layers = (int(rng.integers(3, 8)), int(rng.integers(6, 20)),
                                int(rng.integers(2, 4)))
        num_heads, d_k = head_sizes(rng)
        d_model = num_heads * 2 * math.ceil(d_k / 2)  # even, as the positional encoding needs
        tokens = rng.integers(0, vocab, size=batch + (seq,))
        embedding = draw(rng, (vocab, d_model), dtype)
        layers = [block_params(rng, d_model, 2 * d_model, dtype) for _ in range(n_layers)]
        mask = padding(rng, batch, seq) if masked else None
        what = (f"encoder(tokens {tokens.shape}, embedding {embedding.shape} in "
                f"{embedding.dtype}, {n_layers} layers, num_heads={num_heads}, "
                f"{_mask_words(mask)})")
        args = (tokens, embedding, layers, num_heads, mask)
        compare(call(fn, *args), ctx.reference(*args), what, dtype=dtype,
                hints=_encoder_hints(*args))
