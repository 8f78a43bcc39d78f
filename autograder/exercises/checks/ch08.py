"""Checks of chapter 8: the decoder side and the full encoder-decoder model.

Two mask helpers (``shift_right``, ``make_tgt_mask``) are compared exactly with
:mod:`transformer_ref.masks` on batches whose sequences end at different positions, with the
default special ids and with other ones (a hard-coded id shows). The modules (``Embeddings``,
``DecoderLayer``) and the model factory (``make_model``) are compared with their references in
:mod:`transformer_ref.modules` in float64 with equal weights (outputs and gradients, see
:mod:`autograder.exercises.torch_checking`), after property checks that name the idea behind a
bug: a future target token must not change earlier outputs (causality), padded source positions
must not change anything (padding invariance), and for the model the structure itself (tied and
shared tables, dropout, Xavier initialisation, the final norms of a pre-LN stack). Hints rebuild
each known bug from the reference's weights.

torch is imported inside the check functions, so importing this module stays torch-free.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from autograder.exercises.checking import (
    CheckContext,
    ErrorHint,
    Hint,
    describe,
    error_hints,
    expect_raises,
    fail,
)
from autograder.exercises.dropout_rules import check_model_dropout, training_dropout
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
    build_modules,
    call_torch,
    check_causal,
    compare_forward,
    compare_tensors,
    expect_deterministic,
    expect_dropout_probability,
    expect_tensor,
    key_padding_mask,
    manual_seed,
    padding_lengths,
    random_tensor,
    signature_hint,
)

if TYPE_CHECKING:
    from torch import Tensor, nn


# The course's building blocks the chapter's setup cell gives the learner's code; while an
# exercise of this chapter is graded, its process holds these and nothing else of the course.
BUILDING_BLOCKS = (
    "transformer_ref.model.basic_masks:make_src_mask",
    "transformer_ref.model.basic_masks:subsequent_mask",
    "transformer_ref.model.attention:MultiHeadAttention",
    "transformer_ref.model.attention:store_attention",
    "transformer_ref.model.sublayers:PositionwiseFeedForward",
    "transformer_ref.model.sublayers:residual",
    "transformer_ref.model.positional:PositionalEncoding",
    "transformer_ref.model.generator:Generator",
    "transformer_ref.model.encoder:Encoder",
    "transformer_ref.numpy.positional:positional_encoding",
    "transformer_ref.data.vocab",
)
# make_model may also assemble the course's decoder stack and encoder-decoder, so it is graded
# in a process of its own, apart from the decoder layer whose answer that stack holds. There the
# learner's own DecoderLayer and Embeddings are replaced by the course's (the grader's
# substitutes), so that a mistake in exercise 8.3 or 8.4 is not paid for again here.
MODEL_BLOCKS = (
    "transformer_ref.model.decoder:Decoder",
    "transformer_ref.model.decoder_layer:DecoderLayer",
    "transformer_ref.model.embeddings:Embeddings",
    "transformer_ref.model.encoder_decoder:EncoderDecoder",
)


# The decoder layer's sub-layers, each in a residual connection.
SUBLAYERS = ("self_attn", "cross_attn", "feed_forward")


def _dropout(rng: np.random.Generator) -> float:
    """A dropout probability away from 0.1 (rounded: readable messages)."""
    return round(float(rng.uniform(0.15, 0.3)), 3)


def _heads(rng: np.random.Generator) -> tuple[int, int]:
    """``(d_model, h)`` with ``h >= 2`` heads of even width ``d_k >= 2`` (even ``d_model``)."""
    h, d_k = int(rng.integers(2, 5)), 2 * int(rng.integers(1, 4))
    return h * d_k, h


def _token_batch(
    rng: np.random.Generator, lengths: list[int], length: int, vocab: int, *,
    pad_id: int = 0, eos_id: int = 2, low: int = 4,
) -> Tensor:
    """Long ``(B, length)``: random ids in ``low .. vocab - 1`` ending with ``eos_id``, then
    ``pad_id`` up to ``length``."""
    import torch

    ids = rng.integers(low, vocab, size=(len(lengths), length))
    for b, n in enumerate(lengths):
        ids[b, n - 1] = eos_id
        ids[b, n:] = pad_id
    return torch.from_numpy(ids).long()


def _compare_ids(got: Any, expected: Tensor, what: str, hints: list[Hint]) -> None:
    """Exact comparison of an integer or boolean tensor; hints also explain wrong shapes."""
    compare_tensors(got, expected, what, hints=hints)


def _causal_and_padding(lengths: list[int], n: int) -> Tensor:
    """Bool ``(B, 1, n, n)``: causal AND key-not-padding, as ``make_tgt_mask`` builds it."""
    import torch

    return key_padding_mask(lengths, n) & torch.ones(n, n, dtype=torch.bool).tril()


# ----------------------------------------------------------------------------- shift_right


def _shift_hints(tgt: Tensor, bos_id: int, default_bos: int) -> list[Hint]:
    import torch

    columns = tgt.shape[1]
    first = torch.full_like(tgt[:, :1], default_bos)
    hints = [
        Hint("the target was shifted left (the decoder would read the token it must predict): "
             "put bos_id in front and keep tgt[:, :-1] after it.",
             predicate=lambda g: g.shape == tuple(tgt.shape)
             and np.array_equal(g[:, :-1], tgt[:, 1:].numpy())),
        Hint("the result has T + 1 columns: after prepending bos_id, drop the last column of "
             "tgt so that the decoder input is as long as the target.",
             predicate=lambda g: g.shape == (tgt.shape[0], columns + 1)),
        Hint("the first token was overwritten with bos_id instead of shifting every token one "
             "position to the right.",
             predicate=lambda g: g.shape == tuple(tgt.shape)
             and np.array_equal(g[:, 1:], tgt[:, 1:].numpy())),
    ]
    if bos_id != default_bos:
        hints.insert(0, Hint(f"the first column holds {default_bos}, not the bos_id argument "
                             f"({bos_id}): use bos_id rather than a fixed number.",
                             torch.cat([first, tgt[:, :-1]], dim=1).numpy()))
    return hints


@register(
    "ch08.shift_right",
    title="Shift the target right (teacher forcing)",
    points=1,
    difficulty="easy",
    minutes=5,
    reference="transformer_ref.model.targets:shift_right",
    allowed=BUILDING_BLOCKS,
)
def check_shift_right(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Padded batches with the default BOS id and with another one; the result must be a
    Long tensor of the target's shape, and the target must stay unchanged."""
    from transformer_ref.data.vocab import BOS_ID

    rng = ctx.rng
    for bos_id in (None, int(rng.integers(5, 30))):
        batch, length = int(rng.integers(2, 5)), int(rng.integers(3, 9))
        tgt = _token_batch(rng, padding_lengths(rng, batch, length), length, 40)
        args, kwargs = (tgt,), ({} if bos_id is None else {"bos_id": bos_id})
        wanted = BOS_ID if bos_id is None else bos_id
        extra = "" if bos_id is None else f", bos_id={bos_id}"
        what = f"shift_right(tgt {tuple(tgt.shape)}{extra})"
        _compare_ids(call_torch(fn, *args, **kwargs), ctx.reference(*args, **kwargs), what,
                     _shift_hints(tgt, wanted, BOS_ID))


# ----------------------------------------------------------------------------- make_tgt_mask


def _mask_hints(tgt_in: Tensor, pad_id: int) -> list[Hint]:
    import torch

    batch, t = tgt_in.shape
    lower = torch.ones(t, t, dtype=torch.bool).tril()
    keys = (tgt_in != pad_id)[:, None, None, :]
    hints = []
    if pad_id != 0:
        hints.append(Hint("padding was detected with id 0, not with the pad_id argument: "
                          "compare tgt_in with pad_id.", (tgt_in != 0)[:, None, None, :] & lower))
    hints += [
        Hint("queries may attend to padded keys: AND the causal mask with the key-not-padding "
             "mask (tgt_in != pad_id)[:, None, None, :].",
             lower.expand(batch, 1, t, t)),
        Hint("queries can see the future: AND the padding mask with a causal mask (True on "
             "and below the diagonal, e.g. subsequent_mask(T) or torch.tril).",
             keys.expand(batch, 1, t, t)),
        Hint("the diagonal is False, so a position cannot attend to itself (and the first "
             "has nothing to attend to): use tril() without an offset.",
             keys & torch.ones(t, t, dtype=torch.bool).tril(-1)),
        Hint("the causal part was built with triu, the upper triangle, so each query sees "
             "itself and the positions after it; query i may attend to keys j <= i only, True "
             "on and below the diagonal: tril() (or subsequent_mask(T)).",
             keys & torch.ones(t, t, dtype=torch.bool).triu()),
        Hint("the padding hides query rows instead of key columns: padding belongs on the "
             "last axis (the keys), (tgt_in != pad_id)[:, None, None, :].",
             (tgt_in != pad_id)[:, None, :, None] & lower),
        Hint("the head axis is missing: return shape (B, 1, T, T) so that the mask broadcasts "
             "over the heads of (B, h, T, T) scores.",
             predicate=lambda g: g.shape == (batch, t, t)),
    ]
    return hints


@register(
    "ch08.make_tgt_mask",
    title="The decoder's target mask: causal and padding",
    points=2,
    difficulty="easy",
    minutes=10,
    reference="transformer_ref.model.targets:make_tgt_mask",
    allowed=BUILDING_BLOCKS,
)
def check_make_tgt_mask(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Shifted, padded batches (BOS first, sequences of different lengths) with padding id 0,
    then with another padding id while real tokens may be 0; exact bool ``(B, 1, T, T)``."""
    rng = ctx.rng
    for pad_id in (None, int(rng.integers(5, 30))):
        batch, length = int(rng.integers(2, 5)), int(rng.integers(4, 9))
        lengths = padding_lengths(rng, batch, length)
        if pad_id is None:
            tgt_in = _token_batch(rng, lengths, length, 40)
        else:
            ids = _token_batch(rng, lengths, length, 40, pad_id=pad_id, low=0)
            # Real tokens must not collide with the padding id; zeros among them must stay.
            tgt_in = ids.masked_fill((ids == pad_id) & ~key_padding_mask(lengths, length)[:, 0, 0],
                                     0)
        tgt_in[:, 0] = 1  # the decoder input starts with BOS
        args, kwargs = (tgt_in,), ({} if pad_id is None else {"pad_id": pad_id})
        what = (f"make_tgt_mask(tgt_in {tuple(tgt_in.shape)}"
                f"{'' if pad_id is None else f', pad_id={pad_id}'}) for sequence lengths "
                f"{lengths}")
        _compare_ids(call_torch(fn, *args, **kwargs), ctx.reference(*args, **kwargs), what,
                     _mask_hints(tgt_in, 0 if pad_id is None else pad_id))


# ----------------------------------------------------------------------------- Embeddings


def _embedding_hints(reference: nn.Module, ids: Tensor) -> list[Hint]:
    import torch

    from transformer_ref.numpy.positional import positional_encoding

    with torch.no_grad():
        rows = reference.lut(ids)
    vocab, d_model = reference.lut.weight.shape
    pe = torch.from_numpy(positional_encoding(ids.shape[1], d_model)).double()
    return [
        Hint("the rows are not scaled: multiply the looked-up embeddings by sqrt(d_model).",
             rows),
        Hint("the rows were multiplied by d_model; the factor is its square root, "
             "math.sqrt(d_model).", rows * d_model),
        Hint("the rows were divided by sqrt(d_model); multiply them instead.",
             rows / math.sqrt(d_model)),
        Hint("the factor uses the vocabulary size; it is sqrt(d_model), the embedding width.",
             rows * math.sqrt(vocab)),
        Hint("the positional encoding was added here as well: Embeddings only looks the rows "
             "up and scales them; the model adds positions in PositionalEncoding.",
             rows * math.sqrt(d_model) + pe),
    ]


@register(
    "ch08.embeddings",
    title="Token embeddings scaled by sqrt(d_model)",
    points=1,
    difficulty="easy",
    minutes=5,
    reference="transformer_ref.model.embeddings:Embeddings",
    allowed=BUILDING_BLOCKS,
)
def check_embeddings(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """``Embeddings(vocab, d_model)`` with a table ``lut``: outputs and the table's gradient
    on a batch of ids (vocabulary size different from the width)."""
    import torch

    rng = ctx.rng
    d_model = 2 * int(rng.integers(3, 9))
    vocab = d_model + int(rng.integers(5, 30))
    pair = build_modules(ctx, fn, vocab, d_model)
    ids = torch.from_numpy(rng.integers(0, vocab, size=(int(rng.integers(2, 4)),
                                                         int(rng.integers(3, 8))))).long()
    compare_forward(ctx, pair, (ids,), call_description=f"{pair.what} on ids {tuple(ids.shape)}",
                    hints=_embedding_hints(pair.reference, ids))


# ----------------------------------------------------------------------------- DecoderLayer


def _decoder_steps(
    layer: nn.Module, memory: Tensor, src_mask: Tensor | None, tgt_mask: Tensor | None, *,
    cross_kv: str = "memory", cross_mask: str = "src", cross_first: bool = False,
    swap_norms: bool = False, no_residual: int | None = None,
) -> list[Step]:
    """The steps of a decoder layer (masked self-attention, cross-attention, FFN), with one
    bug switched on: keys and values of cross-attention from the decoder (``cross_kv="x"``),
    another mask for it, the attentions in the other order, norm1 and norm2 swapped, no
    residual path around step ``no_residual`` (0, 1 or 2)."""
    masks = {"src": src_mask, "tgt": tgt_mask, "none": None}

    def cross(y: Tensor) -> Tensor:
        kv = memory if cross_kv == "memory" else y
        return layer.cross_attn(y, kv, kv, masks[cross_mask])

    attentions = [lambda y: layer.self_attn(y, y, y, tgt_mask), cross]
    norms = [layer.norm2, layer.norm1] if swap_norms else [layer.norm1, layer.norm2]
    if cross_first:
        attentions.reverse()
    steps = [(attentions[0], norms[0]), (attentions[1], norms[1]),
             (layer.feed_forward, layer.norm3)]
    return [Step(sublayer, norm, residual=i != no_residual)
            for i, (sublayer, norm) in enumerate(steps)]


# Each step of the decoder layer with its residual path written out, post-LN and pre-LN.
DECODER_STEPS = (
    ("masked self-attention", "norm1(x + dropout(self_attn(x, x, x, tgt_mask)))",
     "x + dropout(self_attn(y, y, y, tgt_mask)) with y = norm1(x)"),
    ("cross-attention", "norm2(x + dropout(cross_attn(x, memory, memory, src_mask)))",
     "x + dropout(cross_attn(norm2(x), memory, memory, src_mask))"),
    ("feed-forward", "norm3(x + dropout(feed_forward(x)))",
     "x + dropout(feed_forward(norm3(x)))"),
)


def _decoder_hints(
    layer: nn.Module, x: Tensor, memory: Tensor, src_mask: Tensor, tgt_mask: Tensor,
    norm_first: bool,
) -> list[Hint]:
    import torch

    def variant(steps: list[Step] | None = None, **switches: Any) -> Tensor:
        options = {"norm_first": norm_first, **switches}
        steps = steps or _decoder_steps(layer, memory, src_mask, tgt_mask)
        return run(x, steps, layer.dropout, **options)

    def bug(**switches: Any) -> Tensor:
        tgt = switches.pop("tgt_mask", tgt_mask)
        return variant(_decoder_steps(layer, memory, src_mask, tgt, **switches))

    with torch.no_grad():
        return norm_hints(variant, norm_first, f"norm_first={norm_first}") + [
            Hint("the self-attention ignores tgt_mask, so each position sees the future "
                 "(and the padding): pass tgt_mask to self_attn.", bug(tgt_mask=None)),
            Hint("cross-attention took its keys and values from the decoder states: queries "
                 "come from the decoder, keys and values from the encoder output memory, "
                 "cross_attn(y, memory, memory, src_mask).", bug(cross_kv="x", cross_mask="tgt")),
            Hint(CROSS_FROM_DECODER, bug(cross_kv="x", cross_mask="none")),
            Hint("the cross-attention ignores src_mask, so padded source tokens take weight: "
                 "pass src_mask to cross_attn.", bug(cross_mask="none")),
            Hint("the sub-layers run in the wrong order: masked self-attention first, then "
                 "cross-attention, then the feed-forward network.", bug(cross_first=True)),
            Hint("norm1 belongs to the self-attention step and norm2 to the cross-attention "
                 "step; they are swapped.", bug(swap_norms=True)),
            Hint("the residual connections are missing: each step adds its input back to the "
                 f"sub-layer's output, {DECODER_STEPS[0][1 + norm_first]}.",
                 variant(residual=False)),
            *(Hint(f"the {name} step has no residual connection: add its input x back, "
                   f"{written[norm_first]}.", bug(no_residual=i))
              for i, (name, *written) in enumerate(DECODER_STEPS)),
        ]


CROSS_FROM_DECODER = ("cross-attention took its keys and values from the decoder states: "
                      "queries come from the decoder, keys and values from the encoder output "
                      "memory.")


def _source_target_mismatch(t: int, s: int) -> ErrorHint:
    """A size error that pairs the target length with the source length: scores over the
    decoder states meeting the source mask, so keys and values came from the decoder."""
    def test(text: str) -> bool:
        sizes = [int(n) for n in re.findall(r"size of tensor [ab] \((\d+)\)", text)]
        return sorted(sizes) == sorted((t, s))
    return ErrorHint(f"{CROSS_FROM_DECODER} The scores then have one column per target "
                     f"position ({t}) while src_mask has one per source position ({s}).",
                     ("RuntimeError",), r"must match the size", test=test)


def _check_source_padding(
    learner: nn.Module, x: Tensor, memory: Tensor, src_lengths: list[int], src_mask: Tensor,
    tgt_mask: Tensor, what: str,
) -> None:
    """New values at padded source positions must leave every decoder output unchanged."""
    import torch

    changed = memory.detach().clone()
    for b, n in enumerate(src_lengths):
        changed[b, n:] = 5.0
    with torch.no_grad():
        before = expect_tensor(call_torch(learner, x, memory, src_mask, tgt_mask),
                               f"output of {what}")
        after = expect_tensor(call_torch(learner, x, changed, src_mask, tgt_mask),
                              f"output of {what}")
    compare_tensors(after, before, f"{what}: outputs after changing the padded positions of "
                                   f"memory (cross-attention must hide them with src_mask)")


@register(
    "ch08.decoder_layer",
    title="The decoder layer: masked self-attention, cross-attention, feed-forward",
    points=4,
    difficulty="medium",
    minutes=25,
    reference="transformer_ref.model.decoder_layer:DecoderLayer",
    allowed=BUILDING_BLOCKS,
)
def check_decoder_layer(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """``DecoderLayer(d_model, h, d_ff, dropout, norm_first)`` with sub-modules ``self_attn,
    cross_attn, feed_forward, norm1, norm2, norm3``, post-LN then pre-LN: causality,
    padding invariance over the source, then outputs and gradients (with respect to x,
    memory and every parameter) against the reference, first on nearly constant rows with
    the attentions silenced (the layer-norm formula shows); dropout off in eval mode; every
    dropout layer that drops has the dropout argument; in training mode the paper's dropout on
    each sub-layer's output before the residual add (dropout inside the attentions and the
    feed-forward network accepted, not required)."""
    rng = ctx.rng
    for norm_first in (False, True):
        d_model, h = _heads(rng)
        d_ff = int(rng.integers(d_model, 2 * d_model + 1))
        p = _dropout(rng)
        pair = build_modules(ctx, fn, d_model, h, d_ff, p, norm_first)
        batch, t = int(rng.integers(2, 4)), int(rng.integers(3, 7))
        s = t + int(rng.integers(1, 4))  # a source longer than the target: shapes tell apart
        tgt_lengths, src_lengths = padding_lengths(rng, batch, t), padding_lengths(rng, batch, s)
        tgt_mask, src_mask = _causal_and_padding(tgt_lengths, t), key_padding_mask(src_lengths, s)
        x = random_tensor(rng, (batch, t, d_model))
        memory = random_tensor(rng, (batch, s, d_model))
        inputs = (x, memory, src_mask, tgt_mask)
        what = (f"{pair.what} on x {tuple(x.shape)}, memory {tuple(memory.shape)}, "
                f"src_mask {tuple(src_mask.shape)}, tgt_mask {tuple(tgt_mask.shape)}")
        full_causal = _causal_and_padding([t] * batch, t)
        quiet = quiet_rows(rng, (batch, t, d_model))
        with error_hints([_source_target_mismatch(t, s)]):
            check_causal(pair.learner,
                         lambda y, m=memory, c=full_causal, k=src_mask: (y, m, k, c),
                         x, int(rng.integers(0, t - 1)), pair.what)
            _check_source_padding(pair.learner, x, memory, src_lengths, src_mask, tgt_mask,
                                  pair.what)
            with silenced(pair, ["self_attn", "cross_attn"]):
                compare_forward(ctx, pair, (quiet, memory, src_mask, tgt_mask),
                                call_description=f"{pair.what} with the w_o of both attentions "
                                                 f"set to 0, on x {tuple(quiet.shape)} whose "
                                                 f"rows are nearly constant (where eps sits in "
                                                 f"the layer norm shows)",
                                hints=_decoder_hints(pair.reference, quiet, memory, src_mask,
                                                     tgt_mask, norm_first), gradients=False)
            compare_forward(ctx, pair, inputs, call_description=what,
                            hints=_decoder_hints(pair.reference, *inputs, norm_first))
        expect_deterministic(pair.learner, inputs, pair.what)
        expect_dropout_probability(pair.learner, p, pair.what, LAYER_DROPOUT_PARTS)
        _check_decoder_dropout(ctx, fn, norm_first)


LAYER_DROPOUT_PARTS = "self_attn, cross_attn, feed_forward and self.dropout"


def _check_decoder_dropout(ctx: CheckContext, fn: Callable[..., Any], norm_first: bool) -> None:
    """Training mode, with sizes that let the dropout inside the sub-layers be read back (two
    heads of width 4 or 6, ``d_ff < d_model``): see
    :func:`~autograder.exercises.layer_variants.check_layer_dropout`."""
    rng = ctx.rng
    h, d_k = 2, 2 * int(rng.integers(2, 4))
    d_ff = int(rng.integers(3, h * d_k // 2 + 1))
    p = training_dropout(rng)
    pair = build_modules(ctx, fn, h * d_k, h, d_ff, p, norm_first)
    expect_dropout_probability(pair.learner, p, pair.what, LAYER_DROPOUT_PARTS)
    batch, t = int(rng.integers(2, 4)), int(rng.integers(3, 7))
    s = t + int(rng.integers(1, 4))
    src_mask = key_padding_mask(padding_lengths(rng, batch, s), s)
    tgt_mask = _causal_and_padding(padding_lengths(rng, batch, t), t)
    memory = random_tensor(rng, (batch, s, h * d_k))
    inputs = (random_tensor(rng, (batch, t, h * d_k)), memory, src_mask, tgt_mask)
    check_layer_dropout(ctx, pair, inputs, SUBLAYERS,
                        lambda layer: _decoder_steps(layer, memory, src_mask, tgt_mask),
                        norm_first, p, pair.what)


# ----------------------------------------------------------------------------- make_model


def _model_config(rng: np.random.Generator, case: int) -> dict[str, Any]:
    """Case 0: post-LN, separate tables, width >= 24 (for the initialisation statistics);
    case 1: pre-LN with a tied generator; case 2: shared embeddings, no tying."""
    d_model, h = (int(rng.choice([24, 32])), int(rng.choice([2, 4]))) if case == 0 \
        else _heads(rng)
    tgt_vocab = int(rng.integers(30, 60))
    return dict(
        src_vocab=tgt_vocab if case == 2 else tgt_vocab + int(rng.integers(3, 20)),
        tgt_vocab=tgt_vocab, N=int(rng.integers(1, 3)), d_model=d_model,
        d_ff=int(rng.integers(d_model, 2 * d_model + 1)), h=h, dropout=_dropout(rng),
        norm_first=case == 1 if case < 2 else bool(rng.integers(0, 2)),
        share_embeddings=case == 2, tie_weights=case == 1, max_len=64,
    )


def _config_words(config: dict[str, Any]) -> str:
    return "make_model(" + ", ".join(f"{k}={v!r}" for k, v in config.items()) + ")"


def _construct_model(ctx: CheckContext, fn: Callable[..., Any], config: dict[str, Any]) -> Any:
    """The learner's model with its own initialisation, from a seed drawn from ``ctx.rng``."""
    import torch

    seed = int(ctx.rng.integers(0, 2**31))
    with torch.random.fork_rng(devices=[]):
        manual_seed(fn, seed)  # the learner's own generators, wherever its code runs
        with signature_hint("make_model", ctx.reference):
            model = call_torch(fn, **config)
    if not isinstance(model, torch.nn.Module):
        fail(f"{_config_words(config)} returned {describe(model)}; return the model, an "
             f"EncoderDecoder (a torch.nn.Module).")
    return model


def _weight(model: nn.Module, path: str) -> Any:
    """The parameter at ``path`` (e.g. ``"tgt_embed.lut.weight"``), or None if absent."""
    found = dict(model.named_parameters(remove_duplicate=False))
    return found.get(path)


def _check_structure(model: nn.Module, reference: nn.Module, config: dict[str, Any]) -> None:
    """Final norms, shared and tied tables, dropout probabilities, the parameter count."""

    what = _config_words(config)
    for attribute in ("encode", "decode", "generator"):
        if not callable(getattr(model, attribute, None)):
            fail(f"{what}: the model has no {attribute}; build it with EncoderDecoder, which "
                 f"offers encode, decode and generator (decoding calls them one by one).")
    reference_keys = set(reference.state_dict())
    final_norms = {k for k in reference_keys if k.startswith(("encoder.norm.",
                                                                  "decoder.norm."))}
    if config["norm_first"] and not final_norms <= set(model.state_dict()):
        fail(f"{what}: the stacks have no final LayerNorm although norm_first=True: pass "
             f"norm_first on to Encoder and Decoder (their layers and final norm depend on it).")
    src, tgt = _weight(model, "src_embed.lut.weight"), _weight(model, "tgt_embed.lut.weight")
    proj = _weight(model, "generator.proj.weight")
    if src is None or tgt is None or proj is None:
        fail(f"{what}: expected the embedding tables src_embed.lut.weight and "
             f"tgt_embed.lut.weight and the generator matrix generator.proj.weight; got the "
             f"parameters {sorted(dict(model.named_parameters()))[:8]} ...")
    if config["share_embeddings"] and src is not tgt:
        fail(f"{what}: share_embeddings=True, but src_embed and tgt_embed hold two tables: use "
             f"one Embeddings module for both sides.")
    if not config["share_embeddings"] and src is tgt:
        fail(f"{what}: share_embeddings=False, but src_embed and tgt_embed share one table.")
    if config["tie_weights"] and proj is not tgt:
        where = ("the source table src_embed; tie it to the target table tgt_embed"
                 if proj is src else "a matrix of its own")
        fail(f"{what}: tie_weights=True, but the generator uses {where}: "
             f"model.generator.proj.weight = model.tgt_embed.lut.weight.")
    if not config["tie_weights"] and proj is tgt:
        fail(f"{what}: tie_weights=False, but the generator uses the target embedding table.")
    expect_dropout_probability(model, config["dropout"], what,
                               "Encoder, Decoder and PositionalEncoding")
    count = sum(p.numel() for p in model.parameters())
    expected = sum(p.numel() for p in reference.parameters())
    if count != expected:
        fail(f"{what}: the model has {count} parameters, the reference {expected}; check N, "
             f"d_ff and which tables are shared or tied.")


def _check_initialisation(model: nn.Module, config: dict[str, Any]) -> None:
    """Every weight matrix has the standard deviation of Xavier (Glorot) initialisation."""
    what = _config_words(config)
    for name, p in model.named_parameters():
        if p.dim() != 2:
            continue
        wanted = math.sqrt(2.0 / (p.shape[0] + p.shape[1]))
        std = float(p.detach().double().std())
        if not 0.8 * wanted <= std <= 1.25 * wanted:
            fail(f"{what}: the weight matrix {name} {tuple(p.shape)} has standard deviation "
                 f"{std:.3g}, but Xavier (Glorot) initialisation gives sqrt(2 / (fan_in + "
                 f"fan_out)) = {wanted:.3g}: apply nn.init.xavier_uniform_ to every parameter "
                 f"with p.dim() > 1 after building the model.")


def _model_hints(reference: nn.Module, inputs: tuple[Tensor, ...]) -> list[Hint]:
    import torch

    def sums_to_one(g: np.ndarray) -> bool:
        return bool(np.allclose(g.sum(axis=-1), 1.0, atol=1e-6) and (g >= 0).all())

    embeddings = [reference.src_embed, reference.tgt_embed]
    scales = [e.scale for e in embeddings]
    try:
        for e in embeddings:
            e.scale = 1.0
        with torch.no_grad():
            unscaled = reference(*inputs)
    finally:
        for e, scale in zip(embeddings, scales, strict=True):
            e.scale = scale
    return [
        Hint("the output rows sum to 1: the generator applies a softmax. Return raw logits "
             "(the loss and decoding apply the softmax themselves).", predicate=sums_to_one),
        Hint("the output is log-probabilities: the generator applies a log-softmax. Return raw "
             "logits (the loss applies log-softmax itself).",
             predicate=lambda g: sums_to_one(np.exp(g))),
        Hint("the embeddings are not multiplied by sqrt(d_model).", unscaled),
    ]


def _model_inputs(rng: np.random.Generator, config: dict[str, Any]) -> tuple[Tensor, ...]:
    from transformer_ref.masks import make_src_mask, make_tgt_mask, shift_right

    batch, s, t = int(rng.integers(2, 4)), int(rng.integers(4, 8)), int(rng.integers(3, 7))
    src = _token_batch(rng, padding_lengths(rng, batch, s), s, config["src_vocab"])
    tgt_in = shift_right(_token_batch(rng, padding_lengths(rng, batch, t), t,
                                      config["tgt_vocab"]))
    return src, tgt_in, make_src_mask(src), make_tgt_mask(tgt_in)


def _check_model_properties(
    rng: np.random.Generator, model: nn.Module, inputs: tuple[Tensor, ...], tgt_vocab: int,
    what: str,
) -> None:
    """Causality over target tokens, invariance to extra source padding."""
    import torch

    from transformer_ref.masks import make_src_mask, make_tgt_mask

    src, tgt_in, src_mask, _ = inputs
    full = torch.from_numpy(rng.integers(4, tgt_vocab, size=tuple(tgt_in.shape))).long()
    full[:, 0] = 1
    position = int(rng.integers(0, full.shape[1] - 1))
    changed = full.clone()
    changed[:, position + 1:] = torch.from_numpy(
        rng.integers(4, tgt_vocab, size=tuple(changed[:, position + 1:].shape)))
    with torch.no_grad():
        before = expect_tensor(call_torch(model, src, full, src_mask, make_tgt_mask(full)),
                               f"output of {what}")
        after = expect_tensor(call_torch(model, src, changed, src_mask, make_tgt_mask(changed)),
                              f"output of {what}")
    compare_tensors(after[:, : position + 1], before[:, : position + 1],
                    f"{what}: logits at target positions 0..{position} after changing the "
                    f"target tokens at later positions (a future token must not matter)")
    padded = torch.cat([src, torch.zeros(src.shape[0], 3, dtype=src.dtype)], dim=1)
    with torch.no_grad():
        longer = expect_tensor(call_torch(model, padded, full, make_src_mask(padded),
                                          make_tgt_mask(full)), f"output of {what}")
    compare_tensors(longer, before, f"{what}: logits after appending three padding tokens to "
                                    f"every source sentence (padding must not matter)")


@register(
    "ch08.make_model",
    title="Assemble the encoder-decoder with make_model",
    points=5,
    difficulty="hard",
    minutes=30,
    reference="transformer_ref.model.make_model:make_model",
    allowed=BUILDING_BLOCKS + MODEL_BLOCKS,
    depends=("ch08.embeddings", "ch08.decoder_layer"),
    isolated=True,
)
def check_make_model(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """ValueError for shared embeddings of two vocabulary sizes; then three configurations
    (post-LN with separate tables; pre-LN with a tied generator; shared embeddings): the
    model's structure, Xavier initialisation (first case), then
    no randomness in eval mode, logits and parameter gradients against the reference with
    equal weights, causality over the target, invariance to extra source padding; then, in
    training mode, the paper's
    dropout on the embeddings plus positions and on every sub-layer's output (dropout inside
    the attentions and feed-forward networks accepted, not required).

    Wrong embeddings or a wrong decoder layer are isolated rather than carried forward, as
    chapter 7's encoder layer does with its sub-modules: the learner's ``make_model`` is
    checked again with the course's ``Embeddings`` and ``DecoderLayer`` under those names
    (the grader's process swaps them, :data:`MODEL_BLOCKS`)."""
    import torch

    rng = ctx.rng
    configs = [_model_config(rng, case) for case in range(3)]
    first = _construct_model(ctx, fn, configs[0])  # a wrong signature shows here
    src_vocab = int(rng.integers(30, 60))
    shared = {**configs[2], "src_vocab": src_vocab, "tgt_vocab": src_vocab + 3}
    expect_raises(fn, ValueError, **shared,
                  reason=f"share_embeddings=True needs one vocabulary for both sides, but "
                         f"src_vocab={src_vocab} and tgt_vocab={src_vocab + 3}")
    for case, config in enumerate(configs):
        model = first if case == 0 else _construct_model(ctx, fn, config)
        with torch.random.fork_rng(devices=[]):
            with_reference_init = ctx.reference(**config)
        _check_structure(model, with_reference_init, config)
        if case == 0:
            _check_initialisation(model, config)
        pair = build_modules(ctx, fn, **config)
        inputs = _model_inputs(rng, config)
        what = (f"{_config_words(config)} applied to src {tuple(inputs[0].shape)}, tgt_in "
                f"{tuple(inputs[1].shape)} and their masks")
        expect_deterministic(pair.learner, inputs, _config_words(config))
        compare_forward(ctx, pair, inputs, call_description=what,
                        hints=_model_hints(pair.reference, inputs))
        _check_model_properties(rng, pair.learner, inputs, config["tgt_vocab"], what)
    _check_model_dropout(ctx, fn)


MODEL_DROPOUT_RULE = (
    "The paper drops the sums of the embeddings and the positional encodings and each "
    "sub-layer's output in every layer: pass the dropout argument on to PositionalEncoding, "
    "Encoder and Decoder (dropout on the attention weights and on the feed-forward networks' "
    "hidden activations is allowed as well, not required)."
)


def _check_model_dropout(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Training mode, on a model whose attention and feed-forward modules let their dropout
    be read back (one layer each side, two heads of width 4 or 6, ``d_ff < d_model``): the
    rules of :func:`~autograder.exercises.dropout_rules.check_model_dropout`."""
    rng = ctx.rng
    d_k = 2 * int(rng.integers(2, 4))
    tgt_vocab = int(rng.integers(30, 60))
    config = dict(src_vocab=tgt_vocab + int(rng.integers(3, 20)), tgt_vocab=tgt_vocab, N=1,
                  d_model=2 * d_k, d_ff=int(rng.integers(3, d_k + 1)), h=2,
                  dropout=training_dropout(rng), norm_first=bool(rng.integers(0, 2)),
                  share_embeddings=False, tie_weights=False, max_len=64)
    pair = build_modules(ctx, fn, **config)
    inputs = _model_inputs(rng, config)
    what = (f"{_config_words(config)} applied to src {tuple(inputs[0].shape)}, tgt_in "
            f"{tuple(inputs[1].shape)} and their masks")
    check_model_dropout(ctx, pair, inputs, config["dropout"], what,
                        hints=lambda without, _: _model_dropout_hints(pair.reference, without),
                        rule=MODEL_DROPOUT_RULE)


def _model_dropout_hints(reference: nn.Module, without: Callable[..., Tensor]) -> list[Hint]:
    """A model's missing dropout places (``without``: see
    :func:`~autograder.exercises.dropout_rules.check_model_dropout`)."""
    layers = [name for name, _ in reference.named_modules()
              if re.fullmatch(r"(encoder|decoder)\.layers\.\d+\.dropout", name)]
    return [
        Hint("the sums of the embeddings and the positional encodings get no dropout: "
             "PositionalEncoding drops x + pe (the paper's place), so pass it the dropout "
             "argument.", without("pos_encoding")),
        Hint("the sub-layer outputs get no dropout: every encoder and decoder layer drops "
             "each sub-layer's output before the residual add, so pass the dropout argument "
             "on to Encoder and Decoder.", without(*layers)),
        Hint("neither the sums of the embeddings and positions nor the sub-layer outputs "
             "get dropout: pass the dropout argument on to PositionalEncoding, Encoder and "
             "Decoder.", without("pos_encoding", *layers)),
    ]
