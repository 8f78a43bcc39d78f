"""Checks of chapter 7: the NumPy building blocks as PyTorch modules.

Each exercise is an ``nn.Module`` class with the constructor signature and parameter names of
its reference in :mod:`transformer_ref.modules`. The checks build both with one configuration
(heads, widths, a dropout probability between 0.1 and 0.3 that must do nothing in eval mode),
copy the reference weights into the learner's module and compare outputs and gradients in
float64 (:mod:`autograder.exercises.torch_checking`). The inputs separate the usual bugs: distinct
query, key and value tensors, masks that hide different keys per sequence and per query, and
several heads of width >= 2. Hints rebuild each known bug from the reference's weights.
Training mode follows the paper's dropout rules (:mod:`autograder.exercises.dropout_rules`):
required on ``x + pe`` and on each sub-layer's output in the encoder layer; accepted, not
required, on the attention weights and the feed-forward network's hidden activations.

torch is imported inside the check functions, so importing this module stays torch-free.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from autograder.exercises.checking import CheckContext, Hint, fail
from autograder.exercises.dropout_rules import (
    check_attention_dropout,
    check_feed_forward_dropout,
    readable_layer,
    training_dropout,
)
from autograder.exercises.layer_variants import (
    Step,
    check_layer_dropout,
    norm_hints,
    quiet_rows,
    run,
    silenced,
)
from autograder.exercises.registry import register
from autograder.exercises.torch_checking import (
    NOT_DROPPED,
    ModulePair,
    build_modules,
    check_padding_invariant,
    compare_forward,
    dropout_problem,
    expect_buffer,
    expect_deterministic,
    expect_dropout_probability,
    key_padding_mask,
    padding_lengths,
    random_tensor,
    training_output,
)
from transformer_ref.numpy.positional import positional_encoding

if TYPE_CHECKING:
    from torch import Tensor, nn


# The NumPy building blocks of earlier chapters that the setup cell gives the learner's code;
# while an exercise of this chapter is graded, its process holds these and nothing else of the
# course.
NUMPY_BLOCKS = (
    "transformer_ref.numpy.heads:multi_head_attention",
    "transformer_ref.numpy.encoder:encoder_block",
    "transformer_ref.numpy.sublayers:feed_forward",
    "transformer_ref.numpy.positional:positional_encoding",
)
# The encoder layer (exercise 7.4) may also build on the course's attention and feed-forward
# modules (``ref.MultiHeadAttention``, ``ref.PositionwiseFeedForward``), so it is graded in a
# process of its own, apart from exercises 7.1 and 7.2 whose answers those are.
MODULE_BLOCKS = (
    "transformer_ref.model.attention:MultiHeadAttention",
    "transformer_ref.model.sublayers:PositionwiseFeedForward",
)


def _dropout(rng: np.random.Generator) -> float:
    """A dropout probability the module must ignore in eval mode (rounded: readable messages)."""
    return round(float(rng.uniform(0.1, 0.3)), 3)


def _seed(rng: np.random.Generator) -> int:
    return int(rng.integers(0, 2**31))


def _heads(rng: np.random.Generator) -> tuple[int, int]:
    """``(d_model, h)`` with ``h >= 2`` heads of width ``d_k >= 2``."""
    h, d_k = int(rng.integers(2, 5)), int(rng.integers(2, 6))
    return h * d_k, h


def _causal_and_padding(lengths: list[int], n: int) -> Tensor:
    """Bool ``(B, 1, n, n)``: causal and key-not-padding, like a target mask."""
    import torch

    causal = torch.ones(n, n, dtype=torch.bool).tril()
    return key_padding_mask(lengths, n) & causal


# ----------------------------------------------------------------------------- attention


def _attention_variant(
    mha: nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None,
    *,
    scale: bool = True,
    transpose: bool = True,
    merge: bool = True,
    project: bool = True,
    inverted: bool = False,
) -> Tensor:
    """Multi-head attention with the reference's weights and one known bug switched on
    (``merge=False``: heads merged with a reshape alone, without the transpose)."""
    import torch

    batch, n_q, d_model = query.shape
    h, d_k = mha.h, mha.d_k

    def split(x: Tensor) -> Tensor:
        if transpose:
            return x.reshape(batch, x.shape[1], h, d_k).transpose(1, 2)
        return x.reshape(batch, h, x.shape[1], d_k)

    with torch.no_grad():
        q, k, v = split(mha.w_q(query)), split(mha.w_k(key)), split(mha.w_v(value))
        scores = q @ k.transpose(-2, -1) / (math.sqrt(d_k) if scale else 1.0)
        if mask is not None:
            allowed = ~mask if inverted else mask
            scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
        out = scores.softmax(dim=-1) @ v
        out = (out.transpose(1, 2) if merge else out).reshape(batch, n_q, d_model)
        return mha.w_o(out) if project else out


def _attention_hints(
    mha: nn.Module, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None
) -> list[Hint]:
    def variant(mask: Tensor | None = mask, **bug: bool) -> Tensor:
        return _attention_variant(mha, query, key, value, mask, **bug)

    hints = [
        Hint("the scores were not divided by sqrt(d_k), the width of one head "
             "(d_model // h).", buggy=variant(scale=False)),
        Hint("the heads were split with a reshape to (B, h, n, d_k) alone: reshape to "
             "(B, n, h, d_k) and then transpose(1, 2), so that each head gets whole "
             "positions.", buggy=variant(transpose=False)),
        Hint("the heads were merged with a reshape alone: transpose(1, 2) back to "
             "(B, n_q, h, d_k) first, then reshape to (B, n_q, d_model), so that each "
             "position gets its own features from every head.", buggy=variant(merge=False)),
        Hint("the output projection w_o is missing: apply self.w_o after merging the heads.",
             buggy=variant(project=False)),
    ]

    if mask is not None:
        hints += [
            Hint("the mask was ignored: fill the scores where mask is False with a very "
                 "negative number before the softmax.", buggy=variant(mask=None)),
            Hint("the mask looks inverted: True must mean 'may attend' (mask the scores "
                 "where the mask is False).", buggy=variant(inverted=True)),
            Hint("NaN appears when every key of a query is masked (a softmax over only -inf). "
                 "No query here has all its keys hidden, so the mask looks inverted: True "
                 "must mean 'may attend'.", predicate=lambda got: not np.isfinite(got).all()),
        ]
    return hints


def _compare_attention(
    ctx: CheckContext, pair: ModulePair, query: Tensor, key: Tensor, value: Tensor,
    mask: Tensor | None, what: str,
) -> None:
    inputs = (query, key, value) if mask is None else (query, key, value, mask)
    compare_forward(ctx, pair, inputs, call_description=f"{pair.what} on {what}",
                    hints=_attention_hints(pair.reference, query, key, value, mask),
                    input_names=("query", "key", "value", "mask"))


@register(
    "ch07.multi_head_attention",
    title="Multi-head attention as an nn.Module",
    points=4,
    difficulty="hard",
    minutes=30,
    reference="transformer_ref.model.attention:MultiHeadAttention",
    allowed=NUMPY_BLOCKS,
)
def check_multi_head_attention(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """``MultiHeadAttention(d_model, h, dropout)`` with parameters ``w_q, w_k, w_v, w_o``:
    self-attention without a mask, cross-attention with different query and key lengths,
    distinct key and value tensors and a padding mask ``(B, 1, 1, n_k)``, and a causal and
    padding mask ``(B, 1, n, n)``; outputs and gradients; no randomness in eval mode, and in
    training mode dropout on the attention weights or nowhere (nowhere else)."""
    rng = ctx.rng
    d_model, h = _heads(rng)
    pair = build_modules(ctx, fn, d_model, h, _dropout(rng))
    batch, n_q, n_k = int(rng.integers(2, 4)), int(rng.integers(3, 6)), int(rng.integers(4, 8))

    x = random_tensor(rng, (batch, n_q, d_model))
    expect_deterministic(pair.learner, (x, x, x), pair.what)
    _compare_attention(ctx, pair, x, x, x, None,
                       f"self-attention (query = key = value of shape {tuple(x.shape)})")

    query = random_tensor(rng, (batch, n_q, d_model))
    key, value = (random_tensor(rng, (batch, n_k, d_model)) for _ in range(2))
    mask = key_padding_mask(padding_lengths(rng, batch, n_k), n_k)
    _compare_attention(ctx, pair, query, key, value, mask,
                       f"query {tuple(query.shape)}, key and value {tuple(key.shape)} and a "
                       f"padding mask {tuple(mask.shape)}")

    mask = _causal_and_padding(padding_lengths(rng, batch, n_q), n_q)
    _compare_attention(ctx, pair, x, x, x, mask,
                       f"self-attention on {tuple(x.shape)} with a causal and padding mask "
                       f"{tuple(mask.shape)}")
    _check_attention_dropout(ctx, fn)


def _check_attention_dropout(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Training mode: dropout on the attention weights or nowhere, read back from the output
    (two heads of width 5 to 7, fewer keys than that: see
    :func:`~autograder.exercises.dropout_rules.check_attention_dropout`)."""
    rng = ctx.rng
    h, d_k = 2, int(rng.integers(5, 8))
    p = training_dropout(rng)
    pair = build_modules(ctx, fn, h * d_k, h, p)
    expect_dropout_probability(pair.learner, p, pair.what, "self.dropout")
    check_attention_dropout(pair.learner, pair.reference, rng, p, pair.what)


# ----------------------------------------------------------------------------- feed-forward


def _ffn_hints(ffn: nn.Module, x: Tensor) -> list[Hint]:
    import torch

    with torch.no_grad():
        hidden = ffn.w_1(x)
        return [
            Hint("the ReLU between the two layers is missing: w_2(relu(w_1(x))).",
                 buggy=ffn.w_2(hidden)),
            Hint("the ReLU was applied after w_2: it belongs between w_1 and w_2.",
                 buggy=torch.relu(ffn.w_2(hidden))),
            # The two GELUs differ by less than the float32 tolerance: match each exactly.
            Hint("this is GELU: the paper's network uses ReLU (torch.relu).",
                 buggy=ffn.w_2(torch.nn.functional.gelu(hidden)), tolerance=(1e-9, 1e-12)),
            Hint("this is GELU in its tanh approximation (as GPT-2 uses it): the paper's "
                 "network uses ReLU (torch.relu).",
                 buggy=ffn.w_2(torch.nn.functional.gelu(hidden, approximate="tanh")),
                 tolerance=(1e-9, 1e-12)),
        ]


@register(
    "ch07.positionwise_feed_forward",
    title="Position-wise feed-forward network as an nn.Module",
    points=2,
    difficulty="easy",
    minutes=10,
    reference="transformer_ref.model.sublayers:PositionwiseFeedForward",
    allowed=NUMPY_BLOCKS,
)
def check_positionwise_feed_forward(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """``PositionwiseFeedForward(d_model, d_ff, dropout)`` with parameters ``w_1, w_2``:
    inputs with one, two and three leading axes; outputs and gradients; dropout off in eval
    mode and, in training mode, on the hidden activations or nowhere (nowhere else)."""
    rng = ctx.rng
    d_model, d_ff = 2 * int(rng.integers(2, 7)), int(rng.integers(5, 17))
    pair = build_modules(ctx, fn, d_model, d_ff, _dropout(rng))
    for leading in ((int(rng.integers(2, 6)),), (2, int(rng.integers(3, 6))), (2, 1, 3)):
        x = random_tensor(rng, leading + (d_model,))
        expect_deterministic(pair.learner, (x,), pair.what)
        compare_forward(ctx, pair, (x,), hints=_ffn_hints(pair.reference, x))
    _check_ffn_dropout(ctx, fn)


def _check_ffn_dropout(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Training mode: dropout on the hidden activations relu(w_1(x)) or nowhere, read back
    from the output with ``d_ff < d_model`` (see
    :func:`~autograder.exercises.dropout_rules.check_feed_forward_dropout`)."""
    rng = ctx.rng
    d_model = 2 * int(rng.integers(5, 8))
    d_ff = int(rng.integers(3, d_model // 2 + 1))
    p = training_dropout(rng)
    pair = build_modules(ctx, fn, d_model, d_ff, p)
    expect_dropout_probability(pair.learner, p, pair.what, "self.dropout")
    check_feed_forward_dropout(pair.learner, pair.reference, rng, p, pair.what)


# ----------------------------------------------------------------------------- positions


def _positional_hints(x: Tensor) -> list[Hint]:
    import torch

    length, d_model = x.shape[-2], x.shape[-1]
    pe = torch.from_numpy(positional_encoding(length, d_model).astype(np.float64))
    swapped = torch.empty_like(pe)
    swapped[:, 0::2], swapped[:, 1::2] = pe[:, 1::2], pe[:, 0::2]
    halves = torch.cat([pe[:, 0::2], pe[:, 1::2]], dim=-1)
    x = x.detach()
    return [
        Hint("sin and cos are swapped: even features (0, 2, 4, ...) take the sine, odd "
             "features the cosine.", buggy=x + swapped),
        Hint("the sines fill the first half of the features and the cosines the second: "
             "interleave them (sines at even, cosines at odd feature indices).",
             buggy=x + halves),
        Hint("this is the table without x: forward returns x + pe[:, :L].",
             buggy=pe.expand_as(x)),
        Hint("x was scaled by sqrt(d_model): that scaling belongs to the embeddings, not to "
             "the positional encoding.", buggy=x * math.sqrt(d_model) + pe),
    ]


@register(
    "ch07.positional_encoding",
    title="Positional encoding as a module with a buffer",
    points=2,
    difficulty="medium",
    minutes=15,
    reference="transformer_ref.model.positional:PositionalEncoding",
    allowed=NUMPY_BLOCKS,
)
def check_positional_encoding(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """``PositionalEncoding(d_model, dropout, max_len)`` holding the table as a buffer named
    ``pe`` (not a parameter): sequences of several lengths up to ``max_len``; outputs and
    gradients; dropout off in eval mode and, in training mode, on the sum ``x + pe``."""
    rng = ctx.rng
    d_model, max_len = 2 * int(rng.integers(2, 9)), int(rng.integers(20, 61))
    pair = build_modules(ctx, fn, d_model, _dropout(rng), max_len)
    expect_buffer(pair.learner, "pe", pair.what)
    for length in (int(rng.integers(2, 10)), max_len):
        x = random_tensor(rng, (int(rng.integers(1, 4)), length, d_model))
        expect_deterministic(pair.learner, (x,), pair.what)
        compare_forward(ctx, pair, (x,), hints=_positional_hints(x))
    _check_positional_dropout(ctx, fn)


def _check_positional_dropout(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Training mode: dropout acts on the sum x + pe, so every output is 0 or
    (x + pe) / (1 - p)."""
    rng = ctx.rng
    d_model, length = 2 * int(rng.integers(3, 7)), int(rng.integers(6, 12))
    p = training_dropout(rng)
    pair = build_modules(ctx, fn, d_model, p, length + int(rng.integers(0, 10)))
    x = random_tensor(rng, (3, length, d_model))
    got = training_output(pair.learner, (x,), _seed(rng), pair.what)
    what = f"{pair.what} in training mode on x {tuple(x.shape)}"
    pe = pair.reference.pe[:, :length]
    problem = dropout_problem(got, x + pe, p)
    if problem is None:
        return
    advice = (f"Apply self.dropout (p={p}) to the sum: dropout(x + pe[:, :L]), once (the paper "
              f"drops the sums of the embeddings and the positional encodings).")
    if problem == NOT_DROPPED:
        fail(f"{what}: {problem}: the sum x + pe gets no dropout in training mode. {advice}")
    if dropout_problem(got - pe, x, p) is None:
        fail(f"{what}: dropout was applied to x before the positional encoding was added, so "
             f"the table itself is never dropped. {advice}")
    fail(f"{what}: {problem}. {advice}")


# ----------------------------------------------------------------------------- encoder layer


def _encoder_steps(layer: nn.Module, mask: Tensor | None, swap_norms: bool = False
                   ) -> list[Step]:
    """The steps of an encoder layer: self-attention with ``mask``, then the FFN."""
    norms = [layer.norm2, layer.norm1] if swap_norms else [layer.norm1, layer.norm2]
    return [Step(lambda y: layer.self_attn(y, y, y, mask), norms[0]),
            Step(layer.feed_forward, norms[1])]


def _encoder_hints(layer: nn.Module, x: Tensor, mask: Tensor | None) -> list[Hint]:
    import torch

    def variant(steps: list[Step] | None = None, **switches: Any) -> Tensor:
        options = {"norm_first": False, **switches}
        return run(x, steps or _encoder_steps(layer, mask), layer.dropout, **options)

    with torch.no_grad():
        hints = norm_hints(variant, norm_first=False) + [
            Hint("the residual connections are missing: each sub-layer's output is added to "
                 "its input before the normalisation, norm(x + sublayer(x)).",
                 buggy=variant(residual=False)),
            Hint("norm1 and norm2 are swapped: norm1 follows self-attention, norm2 the "
                 "feed-forward network.", buggy=variant(_encoder_steps(layer, mask, True))),
        ]
        if mask is not None:
            hints.append(Hint("the mask was not passed to self-attention.",
                              buggy=variant(_encoder_steps(layer, None))))
    return hints


@register(
    "ch07.encoder_layer",
    title="Post-LN encoder layer as an nn.Module",
    points=3,
    difficulty="medium",
    minutes=20,
    reference="transformer_ref.model.encoder_layer:EncoderLayer",
    allowed=NUMPY_BLOCKS + MODULE_BLOCKS,
    depends=("ch07.multi_head_attention", "ch07.positionwise_feed_forward"),
    isolated=True,
)
def check_encoder_layer(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """``EncoderLayer(d_model, h, d_ff, dropout)`` with sub-modules ``self_attn,
    feed_forward, norm1, norm2``: nearly constant rows with the attention silenced (the
    layer-norm formula shows), then a padding mask ``(B, 1, 1, S)`` and no mask; outputs and
    gradients; padded positions do not change the others; dropout off in eval mode; every
    dropout layer that drops has the dropout argument; in training mode the paper's dropout on
    each sub-layer's output before the residual add (dropout inside self_attn and
    feed_forward accepted, not required).

    A wrong attention or feed-forward network is isolated rather than carried forward: the
    learner's layer is checked again with the course's modules under those names. Carrying
    it forward would need the reference layer built around the learner's own sub-modules,
    with their weights kept in step between the grader and the learner's process; a swap of
    names needs nothing of the kind (the grader's process makes it, :data:`MODULE_BLOCKS`)."""
    rng = ctx.rng
    d_model, h = _heads(rng)
    d_ff = int(rng.integers(d_model, 2 * d_model + 1))
    p = _dropout(rng)
    pair = build_modules(ctx, fn, d_model, h, d_ff, p)
    batch, length = int(rng.integers(2, 4)), int(rng.integers(4, 8))
    lengths = padding_lengths(rng, batch, length)
    mask = key_padding_mask(lengths, length)
    x = random_tensor(rng, (batch, length, d_model))
    expect_deterministic(pair.learner, (x, mask), pair.what)
    quiet = quiet_rows(rng, (batch, length, d_model))
    with silenced(pair, ["self_attn"]):
        compare_forward(ctx, pair, (quiet, mask),
                        call_description=f"{pair.what} with self_attn.w_o set to 0, on x "
                                         f"{tuple(quiet.shape)} whose rows are nearly constant "
                                         f"(where eps sits in the layer norm shows)",
                        hints=_encoder_hints(pair.reference, quiet, mask), gradients=False)
    compare_forward(ctx, pair, (x, mask),
                    call_description=f"{pair.what} on x {tuple(x.shape)} with a padding mask "
                                     f"{tuple(mask.shape)}",
                    hints=_encoder_hints(pair.reference, x, mask))
    y = random_tensor(rng, (1, int(rng.integers(2, 6)), d_model))
    compare_forward(ctx, pair, (y,), call_description=f"{pair.what} on x {tuple(y.shape)} "
                                                      f"without a mask",
                    hints=_encoder_hints(pair.reference, y, None))
    check_padding_invariant(pair.learner, lambda z: (z, mask), x, lengths, pair.what)
    expect_dropout_probability(pair.learner, p, pair.what,
                               "self_attn, feed_forward and self.dropout")
    _check_encoder_dropout(ctx, fn)


def _check_encoder_dropout(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Training mode (:func:`~autograder.exercises.dropout_rules.readable_layer`): see
    :func:`~autograder.exercises.layer_variants.check_layer_dropout`."""
    rng = ctx.rng
    pair, d_model, p = readable_layer(ctx, fn, "self_attn, feed_forward and self.dropout")
    batch, length = int(rng.integers(2, 4)), int(rng.integers(4, 8))
    mask = key_padding_mask(padding_lengths(rng, batch, length), length)
    inputs = (random_tensor(rng, (batch, length, d_model)), mask)
    check_layer_dropout(ctx, pair, inputs, ("self_attn", "feed_forward"),
                        lambda layer: _encoder_steps(layer, mask), False, p, pair.what)
