"""Checks of chapter 11: a decoder-only language model, sampling, and a key/value cache.

The block (``DecoderOnlyBlock``) and the model (``LanguageModel``) are compared with their
references in float64 with equal weights, as chapter 8 compares its modules (outputs and
gradients, see :mod:`autograder.exercises.torch_checking`), after property checks: a later
input must not change an earlier output (causality), the structure (tied tables, dropout
rates, the position table, ``max_len``), and where dropout acts in training mode: the paper's
places required (embeddings + positions, each sub-layer's output before the residual add),
the tutorials' accepted (attention weights, the FFN's hidden activations, a sub-layer that
drops its own output as minGPT's do), see :mod:`autograder.exercises.dropout_rules`.

``sample`` is checked through what it draws. Its model is a table
(:class:`~autograder.exercises.lm_models.TableLM`, the next-token logits are a row of a
table), so the distribution of every draw is known. Designed distributions (:data:`DESIGNS`)
each separate some known bugs from the rules; thousands of rows share one prompt, and the
counts of the first new token must match the expected distribution. A token the rules give
probability 0 must never be drawn (exact), a likely one must be drawn, and the total
variation distance between the counts and the expected probabilities must stay below a bound
that a correct sampler passes but for a chance smaller than 1e-12. Then: a model that makes
every draw certain gives exactly the reference's tokens (the context is cropped to
``max_len``, the newest token is fed back), every later draw keeps to its own top-k, and the
same ``torch.Generator`` seed gives the same tokens whatever torch's global random state.

``KeyValueCache`` is driven step by step on a random float64 language model: its logits for
the prompt and for every newly fed token must equal those of the model run on the whole
sequence, with the prompt fed in one call or in pieces, after ``reorder``, with two caches
on one model, and through a whole sampled generation, which must give the tokens of
generation without a cache. Hints replay the known mistakes
(:mod:`autograder.exercises.cache_variants`).

torch is imported inside the check functions, so importing this module stays torch-free.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from autograder.exercises.cache_variants import CACHE_BUGS, CacheVariant
from autograder.exercises.checking import (
    CheckContext,
    ErrorHint,
    Hint,
    describe,
    error_hints,
    expect_raises,
    fail,
)
from autograder.exercises.dropout_rules import check_model_dropout, readable_layer, training_dropout
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
    construct,
    describe_tensor,
    expect_deterministic,
    expect_dropout_probability,
    expect_tensor,
    graded_model_class,
    manual_seed,
    one_thread,
    random_tensor,
    randomize_parameters,
)

if TYPE_CHECKING:
    from torch import Tensor, nn


# The course's building blocks the chapter's setup cell gives the learner's code; while an
# exercise of this chapter is graded, its process holds these and nothing else of the course.
BUILDING_BLOCKS = (
    "transformer_ref.model.attention:MultiHeadAttention",
    "transformer_ref.model.basic_masks:subsequent_mask",
    "transformer_ref.model.sublayers:PositionwiseFeedForward",
    "transformer_ref.model.sublayers:residual",
    "transformer_ref.data.vocab",
)
# The parts of a language model. Its stack may be built of chapter 7's encoder layer, which
# with a causal mask and pre-LN computes a decoder-only block, or of the learner's own block:
# the grader's process gives that the course's block in its place (exercise 11.1 is graded in
# a process of its own), so that a mistake in the block costs points once.
MODEL_PARTS = (
    "transformer_ref.model.embeddings:Embeddings",
    "transformer_ref.model.learned_positional:LearnedPositionalEncoding",
    "transformer_ref.model.generator:Generator",
    "transformer_ref.model.encoder_layer:EncoderLayer",
    "transformer_ref.model.lm_block:DecoderOnlyBlock",
)
SUBLAYERS = ("self_attn", "feed_forward")
BLOCK_DROPOUT_PARTS = "self_attn, feed_forward and self.dropout"
LM_DROPOUT_PARTS = "LearnedPositionalEncoding and every block"
PRE_LN = "a decoder-only block normalises first (pre-LN)"
GELU = ("the feed-forward network uses GELU, as GPT-2 does, where the course's (and the "
        "paper's) uses ReLU: use PositionwiseFeedForward.")
STRICT_MASK = ("no position may attend to itself (and the first to nothing): the causal mask "
               "includes the diagonal, tril() rather than tril(-1).")


def _dropout(rng: np.random.Generator) -> float:
    """A dropout probability away from the default 0.1 (rounded: readable messages)."""
    return round(float(rng.uniform(0.15, 0.3)), 3)


def _width(rng: np.random.Generator) -> tuple[int, int, int]:
    """``(d_model, h, d_ff)``: ``h >= 2`` heads of even width, ``d_ff`` not ``4 * d_model``."""
    h, d_k = int(rng.integers(2, 5)), 2 * int(rng.integers(1, 4))
    d_model = h * d_k
    return d_model, h, int(rng.integers(d_model + 1, 3 * d_model))


# ----------------------------------------------------------------------------- the block


def _block_steps(layer: nn.Module, *, mask: str = "causal", order: str = "attention first",
                 swap_norms: bool = False, gelu: str = "") -> list[Step]:
    """The block's two steps, with one known difference switched on: the attention mask
    (``"causal"``, ``"none"``, ``"strict"``: without the diagonal, ``"future"``: the upper
    triangle), the FFN first, the two norms swapped, GELU in the FFN (``"none"``, the exact
    one, or ``"tanh"``, GPT-2's approximation)."""
    import torch
    import torch.nn.functional as F

    def attention(y: Tensor) -> Tensor:
        t = y.size(1)
        lower = torch.ones(t, t, dtype=torch.bool)
        masks = {"causal": lower.tril(), "none": None, "strict": lower.tril(-1),
                 "future": lower.triu()}
        return layer.self_attn(y, y, y, masks[mask])

    def feed_forward(y: Tensor) -> Tensor:
        ffn = layer.feed_forward
        return ffn.w_2(F.gelu(ffn.w_1(y), approximate=gelu)) if gelu else ffn(y)

    norms = (layer.norm2, layer.norm1) if swap_norms else (layer.norm1, layer.norm2)
    steps = [Step(attention, norms[0]), Step(feed_forward, norms[1])]
    return steps[::-1] if order == "ffn first" else steps


def _block_hints(layer: nn.Module, x: Tensor) -> list[Hint]:
    import torch

    def variant(**switches: Any) -> Tensor:
        return run(x, _block_steps(layer), layer.dropout, **switches)

    def bug(**switches: Any) -> Tensor:
        return run(x, _block_steps(layer, **switches), layer.dropout, norm_first=True)

    with torch.no_grad():
        return [
            Hint(STRICT_MASK, predicate=lambda g: bool(np.isnan(g[:, 0]).all())),
            Hint(STRICT_MASK, bug(mask="strict")),
            *norm_hints(variant, True, PRE_LN),
            Hint("the self-attention has no mask, so every position sees the future: pass a "
                 "causal mask, e.g. subsequent_mask(T) (shape (1, T, T)).", bug(mask="none")),
            Hint("the mask lets positions see the future and not the past: the causal mask is "
                 "True on and below the diagonal (tril), not above it.", bug(mask="future")),
            Hint("the feed-forward network runs before the attention: attention first, then "
                 "the FFN.", bug(order="ffn first")),
            Hint("norm1 belongs to the attention step and norm2 to the feed-forward step; they "
                 "are swapped.", bug(swap_norms=True)),
            *(Hint(GELU, bug(gelu=kind)) for kind in ("none", "tanh")),
            Hint("there is no residual connection: each step adds its (dropped-out) output to "
                 "x, x = x + dropout(sublayer(norm(x))).", variant(norm_first=True,
                                                                    residual=False)),
        ]


@register(
    "ch11.decoder_only_block",
    title="The decoder-only block: causal self-attention and the FFN, pre-LN",
    points=3,
    difficulty="medium",
    minutes=20,
    reference="transformer_ref.model.lm_block:DecoderOnlyBlock",
    allowed=BUILDING_BLOCKS,
)
def check_decoder_only_block(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """``DecoderOnlyBlock(d_model, h, d_ff, dropout)`` with sub-modules ``self_attn,
    feed_forward, norm1, norm2, dropout`` and ``forward(x)``, twice with other sizes:
    causality, then outputs and gradients against the reference (first on nearly constant
    rows with the attention silenced, where the order of norm and sub-layer and the layer-norm
    formula show); dropout off in eval mode; every dropout layer that drops has the dropout
    argument; in training mode the paper's dropout on each sub-layer's output before the
    residual add (dropout inside self_attn and feed_forward accepted, not required)."""
    rng = ctx.rng
    for _ in range(2):
        d_model, h, d_ff = _width(rng)
        p = _dropout(rng)
        pair = build_modules(ctx, fn, d_model, h, d_ff, p)
        batch, t = int(rng.integers(2, 4)), int(rng.integers(4, 8))
        x = random_tensor(rng, (batch, t, d_model))
        what = f"{pair.what} on x {tuple(x.shape)}"
        check_causal(pair.learner, lambda y: (y,), x, int(rng.integers(0, t - 1)), pair.what)
        quiet = quiet_rows(rng, (batch, t, d_model))
        with silenced(pair, ["self_attn"]):
            compare_forward(ctx, pair, (quiet,),
                            call_description=f"{pair.what} with the attention's w_o set to 0, on "
                                             f"x {tuple(quiet.shape)} whose rows are nearly "
                                             f"constant (where the norm sits shows)",
                            hints=_block_hints(pair.reference, quiet), gradients=False)
        compare_forward(ctx, pair, (x,), call_description=what,
                        hints=_block_hints(pair.reference, x), input_names=["x"])
        expect_deterministic(pair.learner, (x,), pair.what)
        expect_dropout_probability(pair.learner, p, pair.what, BLOCK_DROPOUT_PARTS)
    _check_block_dropout(ctx, fn)


def _check_block_dropout(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Training mode (:func:`~autograder.exercises.dropout_rules.readable_layer`): see
    :func:`~autograder.exercises.layer_variants.check_layer_dropout`."""
    pair, d_model, p = readable_layer(ctx, fn, BLOCK_DROPOUT_PARTS)
    x = random_tensor(ctx.rng, (int(ctx.rng.integers(2, 4)), int(ctx.rng.integers(4, 8)),
                                d_model))
    check_layer_dropout(ctx, pair, (x,), SUBLAYERS, _block_steps, True, p, pair.what)


# ----------------------------------------------------------------------------- the model


def _lm_config(rng: np.random.Generator, tie_weights: bool) -> dict[str, Any]:
    d_model, h, d_ff = _width(rng)
    return dict(vocab=int(rng.integers(30, 60)), N=int(rng.integers(1, 3)), d_model=d_model,
                d_ff=d_ff, h=h, dropout=_dropout(rng), max_len=int(rng.integers(9, 17)),
                tie_weights=tie_weights)


def _config_words(config: dict[str, Any]) -> str:
    return "LanguageModel(" + ", ".join(f"{k}={v!r}" for k, v in config.items()) + ")"


def _check_lm_structure(model: nn.Module, reference: nn.Module, config: dict[str, Any]) -> None:
    """The tied table, ``max_len``, dropout probabilities and the parameter count."""
    what = _config_words(config)
    found = dict(model.named_parameters(remove_duplicate=False))
    table, proj = found.get("embed.lut.weight"), found.get("generator.proj.weight")
    if table is None or proj is None:
        fail(f"{what}: expected the embedding table embed.lut.weight (an Embeddings module "
             f"named embed) and the output matrix generator.proj.weight (a Generator named "
             f"generator); got the parameters {sorted(found)[:8]} ...")
    if config["tie_weights"] and proj is not table:
        fail(f"{what}: tie_weights=True, but the generator has a matrix of its own: after "
             f"building the parts, self.generator.proj.weight = self.embed.lut.weight.")
    if not config["tie_weights"] and proj is table:
        fail(f"{what}: tie_weights=False, but the generator uses the embedding table.")
    if getattr(model, "max_len", None) != config["max_len"]:
        fail(f"{what}: model.max_len is {getattr(model, 'max_len', None)!r}; store max_len "
             f"(self.max_len = max_len): samplers and caches read it to know the longest "
             f"context the model takes.")
    expect_dropout_probability(model, config["dropout"], what,
                               LM_DROPOUT_PARTS)
    count = sum(p.numel() for p in model.parameters())
    expected = sum(p.numel() for p in reference.parameters())
    if count != expected:
        fail(f"{what}: the model has {count} parameters, the reference {expected}; check N, "
             f"d_ff, the final norm and whether the table is tied.")


def _lm_hints(reference: nn.Module, ids: Tensor) -> list[Hint]:
    import torch

    def forward(scale: bool = True, final_norm: bool = True) -> Tensor:
        x = reference.embed.lut(ids) * (reference.embed.scale if scale else 1.0)
        x = reference.pos_encoding(x)
        for layer in reference.layers:
            x = layer(x)
        return reference.generator(reference.norm(x) if final_norm else x)

    def sums_to_one(g: np.ndarray) -> bool:
        return bool(np.allclose(g.sum(axis=-1), 1.0, atol=1e-6) and (g >= 0).all())

    with torch.no_grad():
        return [
            Hint("the output rows sum to 1: the model applies a softmax. Return raw logits "
                 "(the loss and the sampler apply it themselves).", predicate=sums_to_one),
            Hint("the output is log-probabilities: return raw logits (cross_entropy applies "
                 "log-softmax itself).", predicate=lambda g: sums_to_one(np.exp(g))),
            Hint("the embeddings are not multiplied by sqrt(d_model): use the course's "
                 "Embeddings module (as chapter 8).", forward(scale=False)),
            Hint("the final LayerNorm is missing: pre-LN blocks leave their output "
                 "un-normalised, so the stack ends with self.norm before the generator.",
                 forward(final_norm=False)),
        ]


def _check_lm_causal(rng: np.random.Generator, model: nn.Module, config: dict[str, Any],
                     what: str) -> None:
    """Changing later tokens leaves the logits of earlier positions unchanged."""
    import torch

    batch, t = 2, config["max_len"]
    ids = torch.from_numpy(rng.integers(0, config["vocab"], size=(batch, t))).long()
    position = int(rng.integers(0, t - 1))
    changed = ids.clone()
    changed[:, position + 1:] = (changed[:, position + 1:] + 1) % config["vocab"]
    with torch.no_grad():
        before = expect_tensor(call_torch(model, ids), f"output of {what}")
        after = expect_tensor(call_torch(model, changed), f"output of {what}")
    compare_tensors(after[:, : position + 1], before[:, : position + 1],
                    f"{what}: logits at positions 0..{position} after changing the tokens at "
                    f"later positions (a language model must not see the future)")


LM_DROPOUT_RULE = (
    "The paper drops the sums of the embeddings and the positions and each sub-layer's output "
    "in every block: pass the dropout argument on to LearnedPositionalEncoding and to every "
    "block (dropout on the attention weights and on the feed-forward networks' hidden "
    "activations is allowed as well, not required)."
)


def _check_lm_dropout(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Training mode, on a model whose attention and feed-forward modules let their dropout be
    read back (two heads of width 5 to 7, ``d_ff < d_model``): the paper's places required,
    the tutorials' accepted (see
    :func:`~autograder.exercises.dropout_rules.check_model_dropout`)."""
    import torch

    rng = ctx.rng
    h, d_k = 2, int(rng.integers(5, 8))
    config = dict(vocab=int(rng.integers(30, 60)), N=int(rng.integers(1, 3)), d_model=h * d_k,
                  d_ff=int(rng.integers(3, d_k + 1)), h=h, dropout=training_dropout(rng),
                  max_len=int(rng.integers(6, 11)), tie_weights=bool(rng.integers(0, 2)))
    pair = build_modules(ctx, fn, **config)
    ids = torch.from_numpy(rng.integers(0, config["vocab"], size=(3, config["max_len"]))).long()
    what = f"{_config_words(config)} applied to ids {tuple(ids.shape)}"
    expect_dropout_probability(pair.learner, config["dropout"], what, LM_DROPOUT_PARTS)
    check_model_dropout(ctx, pair, (ids,), config["dropout"], what,
                        hints=lambda without, again: _lm_dropout_hints(pair.reference, without,
                                                                       again),
                        rule=LM_DROPOUT_RULE,
                        layers=[f"layers.{i}" for i in range(config["N"])])


def _lm_dropout_hints(reference: nn.Module, without: Callable[..., Tensor],
                      again: Callable[..., Tensor]) -> list[Hint]:
    """The language model's misplaced dropout (``without``, ``again``: see
    :func:`~autograder.exercises.dropout_rules.check_model_dropout`)."""
    blocks = [f"layers.{i}.dropout" for i in range(len(reference.layers))]
    return [
        Hint("the sums of the embeddings and the positions get no dropout: "
             "LearnedPositionalEncoding drops x + pe (the paper's place), so pass it the "
             "dropout argument.", without("pos_encoding")),
        Hint("the sub-layer outputs get no dropout: every block drops each sub-layer's output "
             "before the residual add, so pass the dropout argument on to every block.",
             without(*blocks)),
        Hint("neither the sums of the embeddings and positions nor the sub-layer outputs get "
             "dropout: pass the dropout argument on to LearnedPositionalEncoding and to every "
             "block.", without("pos_encoding", *blocks)),
        Hint("dropout acts twice on the sums of the embeddings and the positions: "
             "LearnedPositionalEncoding drops them already, so drop them once.",
             again("pos_encoding")),
    ]


@register(
    "ch11.language_model",
    title="The language model: embeddings, learned positions, blocks, tied output",
    points=4,
    difficulty="medium",
    minutes=25,
    reference="transformer_ref.model.language_model:LanguageModel",
    allowed=BUILDING_BLOCKS + MODEL_PARTS,
    depends=("ch11.decoder_only_block",),
    isolated=True,
)
def check_language_model(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """``LanguageModel(vocab, N, d_model, d_ff, h, dropout, max_len, tie_weights)`` with
    ``embed, pos_encoding, layers, norm, generator`` and ``max_len``, tied and untied: the
    structure, then logits and gradients against the reference with equal weights,
    causality over the tokens; in training mode the paper's dropout on embeddings + positions
    and on every block's sub-layer outputs (dropout inside the attentions and feed-forward
    networks accepted, not required).

    A model built of the learner's own wrong ``DecoderOnlyBlock`` is isolated rather than
    carried forward, as chapter 7's encoder layer is: checked again with the course's block
    under that name (the grader's process swaps it, :data:`MODEL_PARTS`)."""
    import torch

    rng = ctx.rng
    for tie_weights in (True, False):
        config = _lm_config(rng, tie_weights)
        model = construct(ctx, fn, **config)
        with torch.random.fork_rng(devices=[]):
            with_reference_init = ctx.reference(**config)
        _check_lm_structure(model, with_reference_init, config)
        pair = build_modules(ctx, fn, **config)
        t = int(rng.integers(2, config["max_len"] + 1))
        ids = torch.from_numpy(rng.integers(0, config["vocab"], size=(2, t))).long()
        what = f"{_config_words(config)} applied to ids {tuple(ids.shape)}"
        compare_forward(ctx, pair, (ids,), call_description=what,
                        hints=_lm_hints(pair.reference, ids))
        _check_lm_causal(rng, pair.learner, config, _config_words(config))
    _check_lm_dropout(ctx, fn)


# ----------------------------------------------------------------------------- sampling

SAMPLE = "ch11.sample"
DRAWS = 4000  # rows that share one prompt in a designed case: 4000 draws of the first token
# A correct sampler's counts stay within this bound of the expected distribution but for a
# chance below exp(-2 * DRAWS * SLACK ** 2) < 1e-12 (McDiarmid's inequality)
SLACK = math.sqrt(math.log(1e12) / (2 * DRAWS))
# A token this likely is drawn at least once in DRAWS draws but for a chance below 1e-70.
LIKELY = 0.04


@dataclass(frozen=True)
class SamplingDesign:
    """A next-token distribution that separates some known bugs from the rules.

    ``logits`` are given from the most to the least likely token; the check gives them to
    token ids drawn at random, so that the vocabulary order says nothing about the ranking.
    ``catches`` names the bugs of :data:`SAMPLING_BUGS` it separates
    (``tests/exercises/test_sampling_designs.py`` proves it, with the margin the counts need).
    """

    what: str
    logits: tuple[float, ...]
    temperature: float
    top_k: int | None
    top_p: float | None
    catches: tuple[str, ...]


DESIGNS = (
    SamplingDesign("a low temperature, every logit positive",
                   (3.4, 3.0, 2.6, 2.2, 1.8, 1.4, 1.0, 0.8, 0.6, 0.4, 0.2, 0.1), 0.5, None, None,
                   ("temperature after the softmax", "temperature multiplied",
                    "sampling from the logits")),
    SamplingDesign("top-k with a likely (k+1)-th token and unlikely others",
                   (2.0, 1.6, 1.3, 1.1, -1.5, -1.8, -2.0, -2.2, -2.5, -2.7, -3.0, -3.2), 1.0, 3,
                   None, ("top-k keeps k+1", "top-k masks with 0", "top-k keeps the smallest")),
    SamplingDesign("top-p after a temperature, a likely token crossing p",
                   (2.0, 1.8, 1.6, 0.9, 0.5, 0.2, -0.2, -0.5, -0.9, -1.2, -1.5, -2.0), 0.7,
                   None, 0.8, ("top-p drops the crossing token", "top-p before temperature",
                               "top-p in vocabulary order", "top-p keeps one more")),
    SamplingDesign("top-k and then top-p (the same tokens whether top-p renormalises after "
                   "top-k or not)",
                   (2.4, 2.2, 1.0, 0.8, 0.7, 0.3, 0.1, -0.3, -0.6, -1.0, -1.4, -1.8), 1.0, 5,
                   0.5, ("top-p drops the crossing token", "top-p in vocabulary order")),
    SamplingDesign("top_k larger than the vocabulary and top_p = 1 keep every token",
                   (1.5, 1.2, 1.0, 0.8, 0.6, 0.4, 0.3, 0.2, 0.1, 0.0, -0.2, -0.4), 1.3, 15,
                   1.0, ()),
)


def _filtered_probs(logits: Tensor, temperature: float, top_k: int | None,
                    top_p: float | None, bug: str = "") -> Tensor:
    """The distribution a sampler draws from ``logits`` ``(V,)``: by the rules, or with the
    known bug named ``bug`` (see :data:`SAMPLING_BUGS`)."""
    import torch

    from transformer_ref.generation.sampling import filter_logits

    if bug == "sampling from the logits":
        weights = filter_logits(logits, temperature, top_k, top_p).clamp_min(0.0)
        return weights / weights.sum()
    if bug == "temperature after the softmax":
        temperature = 1.0
    elif bug == "temperature multiplied":
        temperature = 1.0 / temperature
    scaled = logits / temperature
    vocab = scaled.numel()
    if top_k is not None and top_k < vocab:
        k = min(vocab, top_k + (bug == "top-k keeps k+1"))
        sign = -1.0 if bug == "top-k keeps the smallest" else 1.0
        keep = sign * scaled >= (sign * scaled).topk(k).values[-1]
        scaled = scaled.masked_fill(~keep, 0.0 if bug == "top-k masks with 0" else -math.inf)
    if top_p is not None and top_p < 1:
        basis = scaled
        if bug == "top-p before temperature":
            basis = logits.masked_fill(torch.isinf(scaled), -math.inf)
        probs = basis.softmax(-1)
        order = torch.arange(vocab)
        if bug != "top-p in vocabulary order":
            order = probs.argsort(descending=True)
        ranked = probs[order]
        cumulative = ranked.cumsum(-1)
        kept = int(((cumulative - ranked) < top_p).sum())  # up to the token that crosses p
        if bug == "top-p drops the crossing token":
            kept = max(1, int((cumulative < top_p).sum()))
        elif bug == "top-p keeps one more":
            kept += 1
        scaled = scaled.clone()
        scaled[order[kept:]] = -math.inf
    return scaled.softmax(-1)


# Known sampling mistakes (names as :func:`_filtered_probs` knows them) and their hints.
SAMPLING_BUGS = {
    "temperature after the softmax":
        "the temperature has no effect on what was drawn: it must divide the logits before "
        "the softmax (dividing probabilities by T changes nothing once torch.multinomial "
        "normalises them).",
    "temperature multiplied":
        "the logits were multiplied by the temperature: divide them by it, so that T < 1 "
        "sharpens the distribution.",
    "sampling from the logits":
        "the draws follow the logits themselves: torch.multinomial takes weights, so give it "
        "the probabilities, the softmax of the filtered logits.",
    "top-k keeps k+1":
        "the (k+1)-th most likely token was drawn: top-k keeps exactly k tokens (the k-th "
        "largest logit is the threshold, topk(...).values[..., -1:]).",
    "top-k masks with 0":
        "tokens outside the top k were drawn about as often as with a logit of 0: mask them "
        "with float('-inf'), whose probability is exactly 0 (a logit of 0 still has weight "
        "exp(0) = 1).",
    "top-k keeps the smallest":
        "the least likely tokens were kept: top-k keeps the k largest logits.",
    "top-p drops the crossing token":
        "the token whose probability makes the running sum cross p was never drawn: keep it "
        "(a token stays while the probability of the tokens ranked above it is below p; at "
        "least one token always stays).",
    "top-p before temperature":
        "the nucleus was chosen from the probabilities before the temperature: apply the "
        "temperature first, then top-k, then top-p on what is left.",
    "top-p in vocabulary order":
        "the running sum of top-p went through the tokens in vocabulary order: sort the "
        "probabilities from the largest first (sort(descending=True)).",
    "top-p keeps one more":
        "a token after the nucleus was drawn: keep the tokens up to and including the one "
        "that crosses p, no more.",
}
SAMPLING_ERROR_HINTS = (
    ErrorHint("torch.multinomial was given something that is not a distribution: give it the "
              "probabilities (softmax of the filtered logits), never the logits, whose masked "
              "entries are -inf and others may be negative.", ("RuntimeError",),
              r"probability tensor contains|invalid multinomial distribution"),
    ErrorHint("top_k may be larger than the vocabulary, and then every token stays: take "
              "min(top_k, logits.size(-1)) before topk.", ("RuntimeError", "IndexError"),
              r"selected index k out of range|out of range"),
)


def _design_case(rng: np.random.Generator, design: SamplingDesign) -> dict[str, Any]:
    """A table model whose row for the prompt's last token holds the design's logits (at
    random ids); the other rows are random."""
    import torch

    vocab = len(design.logits)
    table = torch.from_numpy(rng.standard_normal((vocab, vocab)))
    ids = rng.permutation(vocab)
    context = int(rng.integers(0, vocab))
    table[context, torch.from_numpy(ids)] = torch.tensor(design.logits, dtype=torch.float64)
    prompt_length = int(rng.integers(1, 4))
    prompt = torch.from_numpy(rng.integers(0, vocab, size=prompt_length)).long()
    prompt[-1] = context
    return {"table": table, "context": context, "prompt": prompt.expand(DRAWS, -1).clone()}


def _call_sample(fn: Callable[..., Any], model: Any, prompt: Tensor, steps: int, *,
                 temperature: float, top_k: int | None, top_p: float | None,
                 seed: int) -> tuple[Tensor, str]:
    """The learner's ``sample`` on these arguments, checked for its form: a Long ``(B, T +
    steps)`` tensor that starts with the prompt. Returns it and how the call is named."""
    import torch

    from autograder.exercises.lm_models import SeededGenerator

    kwargs = {"temperature": temperature, "top_k": top_k, "top_p": top_p,
              "generator": SeededGenerator(seed)}
    shown = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    what = (f"sample({model!r}, prompt_ids {describe_tensor(prompt)}, max_new_tokens={steps}, "
            f"{shown})")
    with error_hints(SAMPLING_ERROR_HINTS):
        got = call_torch(fn, model, prompt, steps, name="sample", **kwargs)
    batch, length = prompt.shape
    if not isinstance(got, torch.Tensor):
        fail(f"{what} returned {describe(got)}; return a Long tensor (B, T + max_new_tokens): "
             f"the prompt followed by the new tokens.")
    if got.dtype.is_floating_point or got.dtype == torch.bool:
        fail(f"{what} returned a {describe_tensor(got)}; token ids are a Long tensor (the "
             f"result of torch.multinomial is one; torch.cat keeps it).")
    if tuple(got.shape) == (batch, steps) and steps != length + steps:
        fail(f"{what} returned {describe_tensor(got)}: only the new tokens. Return the prompt "
             f"followed by them, shape (B, T + max_new_tokens), as nanoGPT's generate does.")
    if tuple(got.shape) != (batch, length + steps):
        fail(f"{what} returned {describe_tensor(got)}, expected shape {(batch, length + steps)}"
             f": the prompt followed by max_new_tokens new tokens per row.")
    if not torch.equal(got[:, :length].long(), prompt):
        fail(f"{what}: the first {length} columns differ from the prompt; keep the prompt and "
             f"append each new token (torch.cat([ids, next_id], dim=1)).")
    return got.long(), what


def _distribution_problem(counts: np.ndarray, expected: np.ndarray) -> str | None:
    """Why ``counts`` (of ``DRAWS`` draws) cannot come from ``expected``; None if they can."""
    n = counts.sum()
    impossible = np.flatnonzero((expected == 0) & (counts > 0))
    if impossible.size:
        return (f"{int(counts[impossible].sum())} of {n} draws are tokens that have probability "
                f"0 after the filters (ids {impossible.tolist()})")
    missing = np.flatnonzero((expected >= LIKELY) & (counts == 0))
    if missing.size:
        return (f"tokens {missing.tolist()}, with probabilities "
                f"{[round(float(expected[i]), 3) for i in missing]}, were never drawn")
    distance = 0.5 * np.abs(counts / n - expected).sum()
    bound = 0.5 * np.sqrt(expected * (1 - expected) / n).sum() + SLACK
    if distance > bound:
        return (f"the frequencies differ from the probabilities by a total variation distance "
                f"of {distance:.3f}, more than chance allows ({bound:.3f})")
    return None


def _sampling_hint(counts: np.ndarray, design: SamplingDesign, row: Tensor) -> str:
    """The hint of the known bug whose distribution the counts fit best, or the rules."""
    fitting = {}
    for bug in SAMPLING_BUGS:
        probs = _filtered_probs(row, design.temperature, design.top_k, design.top_p, bug)
        probs = probs.numpy()
        if _distribution_problem(counts, probs) is None:
            fitting[bug] = np.abs(counts / counts.sum() - probs).sum()
    if fitting:
        return SAMPLING_BUGS[min(fitting, key=fitting.__getitem__)]
    return ("divide the logits by the temperature, keep the top_k largest (others -inf), "
            "then the smallest set of most likely tokens whose probability reaches top_p "
            "(the one that crosses p included), and draw from the softmax of what is left "
            "with torch.multinomial(probs, 1, generator=generator).")


def _check_design(ctx: CheckContext, fn: Callable[..., Any], design: SamplingDesign) -> None:
    """The first new token of ``DRAWS`` rows with one prompt follows the design's
    distribution."""
    from autograder.exercises.lm_models import TableLM

    rng = ctx.rng
    case = _design_case(rng, design)
    model = TableLM(case["table"], max_len=8)
    got, what = _call_sample(fn, model, case["prompt"], 1, temperature=design.temperature,
                             top_k=design.top_k, top_p=design.top_p,
                             seed=int(rng.integers(0, 2**31)))
    row = case["table"][case["context"]]
    expected = _filtered_probs(row, design.temperature, design.top_k, design.top_p).numpy()
    drawn = got[:, -1].numpy()
    vocab = row.size(0)
    if drawn.min() < 0 or drawn.max() >= vocab:
        fail(f"{what}: drew ids outside the vocabulary 0..{vocab - 1}.")
    counts = np.bincount(drawn, minlength=vocab)
    problem = _distribution_problem(counts, expected)
    if problem is not None:
        shown = {int(i): round(float(expected[i]), 3) for i in np.flatnonzero(expected)}
        fail(f"{what}, {len(drawn)} rows with the same prompt ({design.what}): {problem}. "
             f"Expected probabilities (token: p) {shown}; drawn (token: count) "
             f"{ {int(i): int(counts[i]) for i in np.flatnonzero(counts)} }. "
             f"Hint: {_sampling_hint(counts, design, row)}")


def _peaked_table(rng: np.random.Generator, vocab: int) -> Tensor:
    """Random rows, each with one token 40 above the rest: every draw is all but certain
    (the others together have a chance below 1e-15 at the temperatures used). The likely
    successors go round one cycle through the whole vocabulary, so a sampler that reads the
    wrong token of the context never falls on the right one by chance."""
    import torch

    table = rng.standard_normal((vocab, vocab))
    cycle = rng.permutation(vocab)
    table[cycle, np.roll(cycle, -1)] += 40.0
    return torch.from_numpy(table)


def _sample_steps_hint(model: Any, prompt: Tensor, steps: int, got: Tensor) -> str:
    """What a learner's deterministic draws show: the wrong end of the context cropped, the
    logits of the first position, the prompt never extended."""
    import torch

    table = model.table

    def follow(next_of: Callable[[Tensor], Tensor]) -> Tensor:
        ids = prompt
        for _ in range(steps):
            ids = torch.cat([ids, next_of(ids)[:, None]], dim=1)
        return ids

    variants = {
        "the context was cut to its first max_len tokens: keep the last ones, "
        "ids[:, -model.max_len:]": lambda ids: table[ids[:, : model.max_len][:, -1]].argmax(-1),
        "each token was drawn from the logits of the first position: take the last position, "
        "logits[:, -1, :]": lambda ids: table[ids[:, -model.max_len:][:, 0]].argmax(-1),
        "every token was drawn after the prompt alone: feed the growing sequence back, "
        "ids = torch.cat([ids, next_id], dim=1)": lambda ids: table[prompt[:, -1]].argmax(-1),
    }
    for words, next_of in variants.items():
        if torch.equal(follow(next_of), got):
            return words
    return ("at each step run the model on the last max_len tokens, take the logits of the "
            "last position, draw the next token and append it.")


def _check_certain_draws(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Every draw all but certain: the reference's tokens exactly, with a context longer
    than ``max_len`` (it must be cropped to its last ``max_len`` tokens)."""
    import torch

    from autograder.exercises.lm_models import SeededGenerator, TableLM

    rng = ctx.rng
    vocab = int(rng.integers(8, 14))
    model = TableLM(_peaked_table(rng, vocab), max_len=int(rng.integers(4, 7)))
    batch, length = int(rng.integers(2, 5)), int(rng.integers(2, 4))
    prompt = torch.from_numpy(rng.integers(0, vocab, size=(batch, length))).long()
    steps = model.max_len + int(rng.integers(2, 5))
    settings = dict(temperature=round(float(rng.uniform(0.7, 1.5)), 2),
                    top_k=int(rng.integers(2, 5)), top_p=0.9)
    seed = int(rng.integers(0, 2**31))
    got, what = _call_sample(fn, model, prompt, steps, seed=seed, **settings)
    expected = ctx.reference(model, prompt, steps, generator=SeededGenerator(seed), **settings)
    if not torch.equal(got, expected):
        row = int((got != expected).any(dim=1).nonzero()[0, 0])
        fail(f"{what}, a model whose every draw is all but certain: row {row} is "
             f"{got[row].tolist()}, expected {expected[row].tolist()}. Hint: "
             f"{_sample_steps_hint(model, prompt, steps, got)}")
    _call_sample(fn, model, prompt, 0, seed=seed, **settings)  # nothing to add: the prompt


def _check_every_step(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Over several steps, every draw is among the top k of the row of the token before it."""
    import torch

    from autograder.exercises.lm_models import TableLM

    rng = ctx.rng
    vocab, top_k = int(rng.integers(10, 16)), 3
    model = TableLM(torch.from_numpy(2.0 * rng.standard_normal((vocab, vocab))), max_len=16)
    prompt = torch.from_numpy(rng.integers(0, vocab, size=(300, 2))).long()
    steps = 6
    got, what = _call_sample(fn, model, prompt, steps, temperature=1.0, top_k=top_k,
                             top_p=None, seed=int(rng.integers(0, 2**31)))
    allowed = model.table.topk(top_k, dim=-1).indices  # (V, k)
    for step in range(prompt.size(1), got.size(1)):
        before, drawn = got[:, step - 1], got[:, step]
        ok = (allowed[before] == drawn[:, None]).any(dim=1)
        if not bool(ok.all()):
            row = int((~ok).nonzero()[0, 0])
            fail(f"{what}: at step {step - prompt.size(1) + 1}, row {row} drew token "
                 f"{int(drawn[row])} after token {int(before[row])}, which is not among the "
                 f"top {top_k} tokens after it ({sorted(allowed[before[row]].tolist())}). Each "
                 f"step must use the logits after the newest token (logits[:, -1, :] of the "
                 f"sequence so far).")


def _check_generator(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """The same generator seed gives the same tokens whatever torch's global random state; a
    different seed gives other tokens."""
    import torch

    from autograder.exercises.lm_models import TableLM

    rng = ctx.rng
    vocab = int(rng.integers(10, 16))
    model = TableLM(torch.from_numpy(0.5 * rng.standard_normal((vocab, vocab))), max_len=16)
    prompt = torch.from_numpy(rng.integers(0, vocab, size=(64, 2))).long()
    seed, other = (int(s) for s in rng.choice(2**31, size=2, replace=False))
    settings = dict(temperature=1.0, top_k=None, top_p=None)
    outputs = []
    for global_seed, generator_seed in ((1, seed), (2, seed), (1, other)):
        with torch.random.fork_rng(devices=[]):
            manual_seed(fn, global_seed)
            outputs.append(_call_sample(fn, model, prompt, 4, seed=generator_seed, **settings))
    (first, what), (again, _), (changed, _) = outputs
    if not torch.equal(first, again):
        fail(f"{what}: two calls with generators seeded alike gave different tokens (torch's "
             f"global random state differed between them). Draw with the generator passed in: "
             f"torch.multinomial(probs, 1, generator=generator).")
    if torch.equal(first, changed):
        fail(f"{what}: generators with different seeds gave the same tokens, so the draws do "
             f"not come from the generator passed in: torch.multinomial(probs, 1, "
             f"generator=generator).")


@register(
    SAMPLE,
    title="Sampling with temperature, top-k and top-p",
    points=4,
    difficulty="medium",
    minutes=30,
    reference="transformer_ref.generation.sampling:sample",
    allowed=("transformer_ref.data.vocab",),
    builders=("autograder.exercises.lm_models:TableLM",
              "autograder.exercises.lm_models:SeededGenerator"),
)
def check_sample(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """``sample(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None, top_p=None,
    generator=None)``: the first draw of many rows follows each designed distribution
    (temperature, top-k, top-p after the temperature, both filters, filters that keep every
    token); with certain draws, the reference's tokens exactly (context cropped to max_len);
    later draws keep to their own top-k; the generator makes the draws reproducible."""
    with one_thread():
        for design in DESIGNS:
            _check_design(ctx, fn, design)
        _check_certain_draws(ctx, fn)
        _check_every_step(ctx, fn)
        _check_generator(ctx, fn)


# ----------------------------------------------------------------------------- the cache


def _describe_lm(config: dict[str, Any]) -> str:
    return (f"<language model N={config['N']} d_model={config['d_model']} "
            f"vocab={config['vocab']} max_len={config['max_len']}>")


# What the learner's process builds of the model a cache is checked on: its parts, no forward
# pass (the course's LanguageModel is the answer to ch11.language_model, which a class's view
# must not hold while the chapter is open).
CACHE_MODEL = "autograder.exercises.lm_models:PartsOnlyLanguageModel"


def _random_lm(rng: np.random.Generator) -> nn.Module:
    """A random float64 language model in eval mode (dropout > 0, which eval mode turns off);
    the learner's process gets its parts (:data:`CACHE_MODEL`)."""
    import torch

    from transformer_ref.model.language_model import LanguageModel

    d_model, h, d_ff = _width(rng)
    config = dict(vocab=int(rng.integers(20, 40)), N=int(rng.integers(2, 4)), d_model=d_model,
                  d_ff=d_ff, h=h, dropout=_dropout(rng), max_len=int(rng.integers(14, 20)),
                  tie_weights=bool(rng.integers(0, 2)))
    with torch.random.fork_rng(devices=[]):
        model = LanguageModel(**config)
    randomize_parameters(model, rng)
    model.__class__ = graded_model_class(LanguageModel, CACHE_MODEL, _describe_lm)
    return model.double().eval()


class _Driver:
    """Feeds one cache (the learner's) and, in step, the cache variants of the known bugs;
    compares the learner's logits with the model run on the whole sequences."""

    def __init__(self, fn: Callable[..., Any], model: nn.Module, name: str = "cache") -> None:
        self.model, self.name = model, name
        what = f"KeyValueCache({model!r})"
        cache = call_torch(fn, model, name="KeyValueCache")
        if not callable(cache):
            fail(f"{what} returned {describe(cache)}, which cannot be called: define "
                 f"__call__(self, ids), which feeds the next tokens and returns their logits.")
        self.cache = cache
        self.variants = {bug.name: CacheVariant(model, **bug.switches) for bug in CACHE_BUGS}
        self.sequences: Tensor | None = None
        self.calls: list[str] = [what]

    def feed(self, ids: Tensor) -> Tensor:
        """Feed ``ids`` ``(B, t)``; check the learner's logits; return them."""
        import torch

        step = f"{self.name}({describe_tensor(ids)})"
        self.calls.append(step)
        self.sequences = ids if self.sequences is None else torch.cat([self.sequences, ids], 1)
        with torch.no_grad():
            got = call_torch(self.cache, ids, name=f"{self.name}.__call__")
            expected = self.model(self.sequences)[:, -ids.size(1):]
            hints = [Hint(bug.hint, output) for bug, output in self._variants(ids)]
        history = " -> ".join(self.calls[-4:])
        compare_tensors(got, expected, f"logits of {step} after {len(self.calls) - 2} earlier "
                                       f"call(s) ({history}), compared with the model run on the "
                                       f"whole sequences", hints=hints)
        return got

    def _variants(self, ids: Tensor) -> list[tuple[Any, Tensor]]:
        """What each known bug gives for ``ids``; a bug whose cache no longer fits the batch
        (a reorder it ignored) is dropped."""
        outputs = []
        for bug in CACHE_BUGS:
            variant = self.variants.get(bug.name)
            if variant is None:
                continue
            try:
                outputs.append((bug, variant(ids)))
            except RuntimeError:
                del self.variants[bug.name]
        return outputs

    def reorder(self, rows: Tensor) -> None:
        self.calls.append(f"{self.name}.reorder({rows.tolist()})")
        reorder = getattr(self.cache, "reorder", None)
        if reorder is None:
            fail(f"{self.calls[0]} has no method reorder(rows); add it: row r of every cached "
                 f"key and value becomes old row rows[r].")
        call_torch(reorder, rows, name=f"{self.name}.reorder")
        for variant in self.variants.values():
            variant.reorder(rows)
        self.sequences = self.sequences.index_select(0, rows)


def _tokens(rng: np.random.Generator, model: nn.Module, batch: int, t: int) -> Tensor:
    import torch

    return torch.from_numpy(rng.integers(0, model.config["vocab"], size=(batch, t))).long()


def _check_generation(ctx: CheckContext, fn: Callable[..., Any], model: nn.Module) -> None:
    """A sampled generation through the learner's cache gives the tokens of generation without
    a cache (the reference's ``sample`` on the model), from the same generator seed."""
    import torch

    from transformer_ref.generation.sampling import pick_next

    rng = ctx.rng
    prompt = _tokens(rng, model, 3, int(rng.integers(2, 5)))
    steps = model.max_len - prompt.size(1)
    seed = int(rng.integers(0, 2**31))
    settings = dict(temperature=0.9, top_k=None, top_p=0.95)
    expected = _uncached_sample(model, prompt, steps, seed, settings)
    driver = _Driver(fn, model, "generation_cache")
    generator = torch.Generator().manual_seed(seed)
    ids, logits = prompt, driver.feed(prompt)[:, -1]
    for step in range(steps):
        next_id = pick_next(logits.double(), generator=generator, **settings)
        ids = torch.cat([ids, next_id], dim=1)
        if step + 1 < steps:
            logits = driver.feed(next_id)[:, -1]
    if not torch.equal(ids, expected):
        fail(f"sampling {steps} tokens with your cache gave {ids.tolist()}, without a cache "
             f"{expected.tolist()} (same generator seed, temperature 0.9, top-p 0.95).")


def _uncached_sample(model: nn.Module, prompt: Tensor, steps: int, seed: int,
               settings: dict[str, Any]) -> Tensor:
    """The reference's generation without a cache."""
    import torch

    from transformer_ref.generation.sampling import sample

    return sample(model, prompt, steps, generator=torch.Generator().manual_seed(seed),
                  **settings)


@register(
    "ch11.key_value_cache",
    title="A key/value cache: each step runs the newest token only",
    points=5,
    difficulty="hard",
    minutes=40,
    reference="transformer_ref.generation.lm_cache:KeyValueCache",
    allowed=BUILDING_BLOCKS + MODEL_PARTS,
    builders=(CACHE_MODEL,),
)
def check_key_value_cache(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """``KeyValueCache(model)``; ``cache(ids)`` feeds the next tokens ``(B, t)`` and returns
    their logits ``(B, t, V)``; ``cache.reorder(rows)``. On random float64 models: the prompt
    in one call and then one token per call; the prompt in pieces; after reordering rows
    (copied and dropped, as beams do); two caches on one model; ValueError past ``max_len``;
    a sampled generation equal to one without a cache."""
    import torch

    rng = ctx.rng
    with one_thread(), torch.no_grad():
        model = _random_lm(rng)
        # The prompt at once, then one token per call up to max_len.
        driver = _Driver(fn, model)
        batch = int(rng.integers(2, 4))
        driver.feed(_tokens(rng, model, batch, int(rng.integers(2, 5))))
        while driver.sequences.size(1) < model.max_len:
            driver.feed(_tokens(rng, model, batch, 1))
        def cache(ids: Tensor) -> Tensor:  # named as the messages above name it
            return driver.cache(ids)

        expect_raises(cache, ValueError, _tokens(rng, model, batch, 1),
                      reason=f"the cache already holds max_len={model.max_len} positions; the "
                             f"model's position table has no more")

        # The prompt in two pieces, then reordered rows (one copied, one dropped), two caches.
        first, second = _Driver(fn, model, "cache_a"), _Driver(fn, model, "cache_b")
        first.feed(_tokens(rng, model, 3, 2))
        second.feed(_tokens(rng, model, 2, 3))
        first.feed(_tokens(rng, model, 3, 3))
        kept, copied = (int(r) for r in rng.permutation(3)[:2])
        first.reorder(torch.tensor([kept, copied, copied]))  # as beams move: one row dropped
        for _ in range(2):
            first.feed(_tokens(rng, model, 3, 1))
            second.feed(_tokens(rng, model, 2, 1))
        first.reorder(torch.tensor([2, 0, 1, 1]))  # and the batch may grow
        first.feed(_tokens(rng, model, 4, 1))
        _check_generation(ctx, fn, _random_lm(rng))
