"""Checks of chapter 12: the pieces of today's block and a key/value cache with rotary positions.

``RMSNorm`` and ``SwiGLU`` are compared with their references in float64 with equal weights
(outputs and gradients, see :mod:`autograder.exercises.torch_checking`). Real code places
RMSNorm's ``eps`` in two ways: inside the square root (Llama, T5) or added to the root mean
square; both are accepted, and an ``eps`` large enough to tell them apart makes an ignored
``eps`` fail. ``apply_rope`` is accepted with either pairing of the features: interleaved
(RoFormer, chapter 1) or split halves (``rotate_half``, GPT-NeoX and Hugging Face's Llama);
positions that do not start at 0 and a base other than the default make a forgotten offset or
base show. ``grouped_query_attention`` runs with MHA, GQA and MQA head counts, with and
without a mask, and must refuse key/value heads that do not divide the query heads.

``cached_rope_attention`` is driven on a random float64 attention: the prompt in one call,
then one or two tokens a call; every output must equal the attention over the whole sequence
at those positions, and the returned cache must grow by the new positions. Its reference is
run with the learner's own RoPE pairing (either is right), and hints replay the classic
mistakes: the new token rotated at position 0 instead of its absolute position, and a causal
mask without the cache's offset.

torch is imported inside the check functions, so importing this module stays torch-free.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from autograder.exercises.checking import CheckContext, Hint, expect_raises, expect_tuple, fail
from autograder.exercises.registry import register
from autograder.exercises.torch_checking import (
    agrees,
    build_modules,
    call_torch,
    compare_forward,
    compare_tensors,
    construct,
    expect_tensor,
    graded_model_class,
    random_tensor,
    randomize_parameters,
)

if TYPE_CHECKING:
    from torch import Tensor, nn

ATTENTION_WEIGHTS = "autograder.exercises.rope_models:AttentionWeights"
PAIRINGS = ("interleaved", "halves")


def _right(got: Any, expected: Tensor) -> bool:
    """Whether the learner's ``got`` is a tensor that agrees with ``expected``: then the
    known mistakes need not be replayed for hints."""
    import torch

    return isinstance(got, torch.Tensor) and agrees(got, expected)


# ----------------------------------------------------------------------------- RMSNorm


def _rms_variants(pair_reference: nn.Module, x: Tensor) -> dict[str, Tensor]:
    """What the known conventions and mistakes compute on ``x`` with the reference's gain."""
    import torch

    weight, eps = pair_reference.weight.detach(), pair_reference.eps
    square = x.pow(2).mean(-1, keepdim=True)
    centred = x - x.mean(-1, keepdim=True)
    return {
        "outside": x / (square.sqrt() + eps) * weight,
        "layer norm": centred * torch.rsqrt(centred.pow(2).mean(-1, keepdim=True) + eps) * weight,
        "no gain": x * torch.rsqrt(square + eps),
        "no sqrt": x / (square + eps) * weight,
        "fixed eps": x * torch.rsqrt(square + 1e-6) * weight,
    }


def _rms_hints(variants: dict[str, Tensor]) -> list[Hint]:
    return [
        Hint("the mean was subtracted: that is LayerNorm. RMSNorm divides x by its root mean "
             "square only, x / sqrt(mean(x**2) + eps).", variants["layer norm"]),
        Hint("the learned gain is missing: multiply by self.weight.", variants["no gain"]),
        Hint("divided by the mean square: take its square root (torch.rsqrt or .sqrt()).",
             variants["no sqrt"]),
        Hint("eps is not the constructor's argument: store eps and use it in forward.",
             variants["fixed eps"]),
    ]


class _RMSNormOutside:
    """Builds the reference with ``eps`` added to the root mean square (not inside it)."""

    def __init__(self, reference: Any) -> None:
        self.reference = reference
        self.__name__ = reference.__name__

    def __call__(self, d_model: int, eps: float = 1e-6) -> nn.Module:
        module = self.reference(d_model, eps)
        module.forward = types.MethodType(
            lambda m, x: x / (x.pow(2).mean(-1, keepdim=True).sqrt() + m.eps) * m.weight, module)
        return module


@register(
    "ch12.rms_norm",
    title="RMSNorm: the root mean square and a learned gain",
    points=2,
    difficulty="easy",
    minutes=10,
    reference="transformer_ref.model.modern_layers:RmsNorm",
)
def check_rms_norm(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """``RMSNorm(d_model, eps=1e-6)`` with the parameter ``weight``: rows of very different
    scales, an ``eps`` that tells its placement (inside the root or added to it, both
    accepted), outputs and gradients; then the default ``eps`` keeps a zero row finite."""
    import torch

    rng = ctx.rng
    d_model, eps = int(rng.integers(4, 12)), round(float(rng.uniform(0.05, 0.3)), 3)
    x = random_tensor(rng, (2, int(rng.integers(3, 6)), d_model))
    x = x * torch.from_numpy(rng.uniform(0.2, 3.0, (2, x.size(1), 1)))
    pair = build_modules(ctx, fn, d_model, eps)
    variants = _rms_variants(pair.reference, x)
    with torch.no_grad():
        got = call_torch(pair.learner, x)
    if isinstance(got, torch.Tensor) and agrees(got, variants["outside"]):
        ctx = dataclasses.replace(ctx, reference=_RMSNormOutside(ctx.reference))
        pair = build_modules(ctx, fn, d_model, eps)
    compare_forward(ctx, pair, (x,), hints=_rms_hints(variants))
    module = construct(ctx, fn, d_model)
    zero = call_torch(module, torch.zeros(2, 3, d_model))
    if not bool(torch.isfinite(expect_tensor(zero, f"RmsNorm({d_model}) on zeros")).all()):
        fail(f"RmsNorm({d_model}) on a row of zeros gives NaN: the default eps (1e-6) must be "
             "added to the mean square (or to its root) so that the division stays finite.")


# ----------------------------------------------------------------------------- SwiGLU


def _swiglu_hints(ffn: nn.Module, x: Tensor) -> list[Hint]:
    import torch
    import torch.nn.functional as F

    a, b = ffn.w1(x).detach(), ffn.w3(x).detach()
    return [
        Hint("the gate and the value are swapped: silu goes on w1(x), which multiplies w3(x): "
             "w2(silu(w1(x)) * w3(x)).", ffn.w2(F.silu(b) * a)),
        Hint("SwiGLU's gate uses SiLU (x * sigmoid(x), F.silu), not ReLU.",
             ffn.w2(torch.relu(a) * b)),
        Hint("SwiGLU's gate uses SiLU (x * sigmoid(x), F.silu), not GELU.",
             ffn.w2(F.gelu(a) * b)),
        Hint("the gate is sigmoid(w1(x)); SwiGLU's is silu(w1(x)) = w1(x) * sigmoid(w1(x)).",
             ffn.w2(torch.sigmoid(a) * b)),
        Hint("w3 is unused: the hidden layer is silu(w1(x)) * w3(x), the gate times a value.",
             ffn.w2(F.silu(a))),
    ]


@register(
    "ch12.swiglu",
    title="SwiGLU: the gated feed-forward network and its hidden width",
    points=2,
    difficulty="easy",
    minutes=15,
    reference="transformer_ref.model.modern_layers:Swiglu",
)
def check_swiglu(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """``Swiglu(d_model, d_ff=None)`` with bias-free ``w1, w2, w3``: outputs and gradients
    with a given ``d_ff``, then the default width ``int(8 * d_model / 3)``."""
    rng = ctx.rng
    d_model, d_ff = int(rng.integers(4, 10)), int(rng.integers(5, 20))
    pair = build_modules(ctx, fn, d_model, d_ff)
    x = random_tensor(rng, (2, int(rng.integers(2, 5)), d_model))
    compare_forward(ctx, pair, (x,), hints=_swiglu_hints(pair.reference, x))
    d_model = 3 * int(rng.integers(3, 8)) + 1
    module = construct(ctx, fn, d_model)
    width = getattr(getattr(module, "w1", None), "out_features", None)
    wanted = int(8 * d_model / 3)
    if width != wanted:
        fail(f"Swiglu({d_model}) has a hidden width of {width}; the default is "
             f"int(8 * d_model / 3) = {wanted}: two thirds of a ReLU FFN's 4 * d_model, so that "
             "the three matrices hold as many weights as that FFN's two.")


# ----------------------------------------------------------------------------- RoPE


def _rope_hints(x: Tensor, positions: Tensor, base: float) -> list[Hint]:
    import torch

    from transformer_ref.model.rope import apply_rope

    d = x.size(-1)
    hints = []
    for pairing in PAIRINGS:
        hints += [
            Hint("the positions argument is ignored: rotate row t by the angle of positions[t] "
                 "(with a cache, the new rows do not start at 0).",
                 apply_rope(x, torch.arange(x.size(-2)), base, pairing)),
            Hint("the base argument is ignored: theta_i = base ** (-2 i / d).",
                 apply_rope(x, positions, 10000.0, pairing)),
            Hint("the frequencies are base ** (-i / d); the paper's are base ** (-2 i / d) for "
                 "pair i (i = 0 .. d/2 - 1).", apply_rope(x, positions, base ** 0.5, pairing)),
            Hint("the rotation turns the wrong way: (a, b) -> (a cos - b sin, a sin + b cos).",
                 apply_rope(x, -positions, base, pairing)),
        ]
    hints.append(Hint("the last axis has the wrong size: each pair of features turns; the "
                      f"result has x's shape (..., T, {d}).",
                      predicate=lambda g: g.shape[-1] != d))
    return hints


@register(
    "ch12.apply_rope",
    title="Rotary positions: each pair of features turned by its position's angle",
    points=3,
    difficulty="medium",
    minutes=20,
    reference="transformer_ref.model.rope:apply_rope",
)
def check_apply_rope(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """``apply_rope(x, positions, base=10000.0)``: queries ``(B, h, T, d)`` and ``(T, d)``,
    positions that start after 0 and that skip, the default and another base; the result must
    be one pairing's (interleaved or halves) throughout."""
    import torch

    rng = ctx.rng
    pairing = None
    for shape, base in (((2, 3), None), ((), round(float(rng.uniform(20, 200)), 1))):
        t, d = int(rng.integers(3, 7)), 2 * int(rng.integers(2, 5))
        x = random_tensor(rng, (*shape, t, d))
        start = int(rng.integers(3, 30))
        positions = torch.from_numpy(np.sort(rng.choice(np.arange(start, start + 40), t,
                                                        replace=False)))
        kwargs = {} if base is None else {"base": base}
        got = call_torch(fn, x, positions, **kwargs)
        expected = {p: ctx.reference(x, positions, base or 10000.0, p) for p in PAIRINGS}
        pairing = pairing or next((p for p in PAIRINGS if isinstance(got, torch.Tensor)
                                   and agrees(got, expected[p])), "interleaved")
        what = f"apply_rope(x {tuple(x.shape)}, positions {positions.tolist()}" + (
            f", base={base})" if base else ")")
        hints = ([] if _right(got, expected[pairing])
                 else _rope_hints(x, positions, base or 10000.0))
        compare_tensors(got, expected[pairing], what, hints=hints)


# ----------------------------------------------------------------------------- GQA


def _gqa_hints(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> list[Hint]:
    import math

    import torch

    group = q.size(1) // k.size(1)

    def attend(k_: Tensor, v_: Tensor, scale: float, keep: Tensor | None) -> Tensor:
        scores = q @ k_.transpose(-2, -1) / scale
        if keep is not None:
            scores = scores.masked_fill(~keep, float("-inf"))
        return scores.softmax(-1) @ v_

    tiled = (k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1))
    inter = (k.repeat_interleave(group, 1), v.repeat_interleave(group, 1))
    d_k = q.size(-1)
    hints = [Hint("the key/value heads were tiled (repeat), so query head j reads key head "
                  "j % n_kv_heads; a group is consecutive query heads: head j reads key head "
                  "j // (n_heads // n_kv_heads), as repeat_interleave lays them out.",
                  attend(*tiled, math.sqrt(d_k), mask)),
             Hint("the scores are not scaled: divide q @ k^T by sqrt(d_k).",
                  attend(*inter, 1.0, mask))]
    if mask is not None:
        hints.append(Hint("the mask is inverted: True marks the keys a query may attend to; "
                          "fill the scores where the mask is False with -inf.",
                          torch.nan_to_num(attend(*inter, math.sqrt(d_k), ~mask), nan=0.0)))
    return hints


@register(
    "ch12.grouped_query_attention",
    title="Grouped-query attention: query heads share key/value heads",
    points=3,
    difficulty="medium",
    minutes=20,
    reference="transformer_ref.model.grouped_attention:grouped_query_attention",
)
def check_grouped_query_attention(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """``grouped_query_attention(q, k, v, mask=None)`` with ``n_kv_heads`` = ``n_heads``
    (MHA), a divisor in between (GQA) and 1 (MQA), with a causal or random mask and without;
    then ``ValueError`` for key/value heads that do not divide the query heads."""
    import torch

    from autograder.exercises.checking import random_mask

    rng = ctx.rng
    group = int(rng.integers(2, 4))
    for n_heads, n_kv, masked in ((4, 4, True), (2 * group, 2, True), (group, 1, False),
                                  (3 * group, 3, True)):
        batch, t, s, d_k = 2, int(rng.integers(2, 5)), int(rng.integers(3, 7)), 4
        q = random_tensor(rng, (batch, n_heads, t, d_k))
        k, v = random_tensor(rng, (batch, n_kv, s, d_k)), random_tensor(rng, (batch, n_kv, s, d_k))
        mask = torch.from_numpy(random_mask(rng, (batch, 1, t, s))) if masked else None
        args = (q, k, v) if mask is None else (q, k, v, mask)
        what = (f"grouped_query_attention with {n_heads} query heads and {n_kv} key/value heads"
                + (", masked" if masked else ""))
        got, expected = call_torch(fn, *args), ctx.reference(*args)
        compare_tensors(got, expected, what,
                        hints=[] if _right(got, expected) else _gqa_hints(q, k, v, mask))
    q, k = random_tensor(rng, (1, 4, 2, 4)), random_tensor(rng, (1, 3, 2, 4))
    expect_raises(fn, ValueError, q, k, k, reason="3 key/value heads do not divide 4 query heads")


# ----------------------------------------------------------------------------- the cache


def _with_pairing(reference: Callable[..., Any], pairing: str) -> Callable[..., Any]:
    """``reference`` run with the course's RoPE in ``pairing`` (when it uses the course's)."""
    from transformer_ref.model.rope import apply_rope

    if reference.__globals__.get("apply_rope") is not apply_rope:
        return reference  # a learner's RoPE, carried forward: judged in its own pairing
    names = {**reference.__globals__,
             "apply_rope": functools.partial(apply_rope, pairing=pairing)}
    return types.FunctionType(reference.__code__, names, reference.__name__,
                              reference.__defaults__, reference.__closure__)


def _step_hints(reference: Callable[..., Any], attn: nn.Module, x: Tensor,
                past: tuple[Tensor, Tensor]) -> list[Hint]:
    """The outputs of the classic mistakes for new positions ``x`` after the cache ``past``."""
    import torch

    start, t = past[0].size(2), x.size(1)
    alone = reference(attn, x, None, None)[0]  # rotated from 0, attending to itself only
    names = reference.__globals__
    tril = types.FunctionType(reference.__code__, {**names, "torch": _NoOffsetTorch(torch)},
                              reference.__name__, reference.__defaults__, reference.__closure__)
    zero = {**names, "torch": _ZeroStartTorch(torch, start)}
    restart = types.FunctionType(reference.__code__, zero, reference.__name__,
                                 reference.__defaults__, reference.__closure__)
    return [
        Hint("the new tokens were rotated as if they were at positions 0, 1, ...: with a "
             f"cache of {start} positions they are at {start} .. {start + t - 1}; take "
             "positions = arange(start, start + t) with start = past_k.size(2).",
             restart(attn, x, *past)[0]),
        Hint("the causal mask ignores the cache: new query i sits at position start + i and "
             "sees every cached key, so the mask (t, start + t) is tril(start), not tril().",
             tril(attn, x, *past)[0]),
        Hint("the cached keys and values are not used: concatenate past_k and past_v before "
             "the new ones (along the positions, dim=2).", alone),
    ]


class _NoOffsetTorch:
    """``torch`` whose ``ones(...).tril(start)`` forgets its offset (a mistake's replay)."""

    def __init__(self, torch: Any) -> None:
        self._torch = torch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._torch, name)

    def ones(self, *args: Any, **kwargs: Any) -> Any:
        ones = self._torch.ones(*args, **kwargs)
        return types.SimpleNamespace(tril=lambda offset=0: ones.tril())


class _ZeroStartTorch(_NoOffsetTorch):
    """``torch`` whose ``arange(start, stop)`` restarts at 0: new tokens rotated from 0."""

    def __init__(self, torch: Any, start: int) -> None:
        super().__init__(torch)
        self._start = start

    def ones(self, *args: Any, **kwargs: Any) -> Any:
        return self._torch.ones(*args, **kwargs)

    def arange(self, start: int, stop: int, **kwargs: Any) -> Any:
        return self._torch.arange(start - self._start, stop - self._start, **kwargs)


def _attention_weights(rng: np.random.Generator) -> nn.Module:
    from autograder.exercises.rope_models import AttentionWeights

    n_kv = int(rng.integers(1, 3))
    n_heads, d_k = n_kv * int(rng.integers(2, 4)), 2 * int(rng.integers(2, 4))
    attn = AttentionWeights(n_heads * d_k, n_heads, n_kv, round(float(rng.uniform(8, 40)), 1))
    randomize_parameters(attn, rng)
    attn = attn.double().eval()
    attn.__class__ = graded_model_class(AttentionWeights, ATTENTION_WEIGHTS, _describe_attention)
    return attn


def _describe_attention(config: dict[str, Any]) -> str:
    return (f"GroupedQueryAttention(d_model={config['d_model']}, n_heads={config['n_heads']}, "
            f"n_kv_heads={config['n_kv_heads']}, base={config['base']})")


@register(
    "ch12.cached_rope_attention",
    title="A key/value cache with rotary positions at the cache's offset",
    points=4,
    difficulty="hard",
    minutes=35,
    reference="transformer_ref.generation.rope_cache:cached_rope_attention",
    builders=(ATTENTION_WEIGHTS,),
    depends=("ch12.apply_rope", "ch12.grouped_query_attention"),
)
def check_cached_rope_attention(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """``cached_rope_attention(attn, x, past_k, past_v) -> (out, k, v)``: a prompt of 2 to 4
    positions, then one or two positions a call; each output equals the whole sequence's
    attention at its positions (in the learner's RoPE pairing, read from the first call), and
    the cache grows to ``(B, n_kv_heads, length, d_k)``."""
    import torch

    rng = ctx.rng
    attn = _attention_weights(rng)
    total, prompt = int(rng.integers(6, 9)), int(rng.integers(2, 5))
    x = random_tensor(rng, (2, total, attn.config["d_model"]))
    whole = {p: _with_pairing(ctx.reference, p) for p in PAIRINGS}
    cuts = [0, prompt, *range(prompt + 1, total - 1), total - 1, total]
    cuts = sorted(set(cuts) - {total - 1}) if rng.integers(2) else sorted(set(cuts))
    with torch.no_grad():
        _drive_cache(fn, attn, x, cuts, whole)


def _drive_cache(fn: Callable[..., Any], attn: nn.Module, x: Tensor, cuts: list[int],
                 whole: dict[str, Callable[..., Any]]) -> None:
    """Feed ``x`` to the learner's cached attention in the pieces between ``cuts`` and
    compare every output and cache with the reference in the learner's pairing."""
    import torch

    reference, past, mine = whole["interleaved"], None, (None, None)
    for i, (a, b) in enumerate(zip(cuts, cuts[1:], strict=False)):
        what = (f"cached_rope_attention({attn!r}, x of positions {a} .. {b - 1}, "
                + ("past_k=None, past_v=None)" if a == 0 else f"the cache of {a} positions)"))
        got = expect_tuple(call_torch(fn, attn, x[:, a:b], *mine), ("out", "k", "v"), what)
        if i == 0:
            reference = next((r for r in whole.values() if isinstance(got[0], torch.Tensor)
                              and agrees(got[0], r(attn, x[:, :b], None, None)[0])),
                             reference)
        expected = reference(attn, x[:, a:b], *(past or (None, None)))
        # The mistakes' replays cost more than the check: only for an output that is wrong.
        hints = ([] if past is None or _right(got[0], expected[0])
                 else _step_hints(reference, attn, x[:, a:b], past))
        compare_tensors(got[0], expected[0], f"out of {what}", hints=hints)
        for name, tensor, wanted in zip("kv", got[1:], expected[1:], strict=True):
            compare_tensors(tensor, wanted, f"{name} (the cache after the call) of {what}")
        past, mine = expected[1:], got[1:]


# ----------------------------------------------------------------------------- induction


def _causal_pattern(rng: np.random.Generator, shape: tuple[int, ...]) -> Tensor:
    """Random causal attention weights ``(*shape, L, L)``: each row a softmax over keys
    ``<= `` its query."""
    import torch

    scores = random_tensor(rng, shape, scale=2.0)
    length = shape[-1]
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    return scores.masked_fill(~causal, float("-inf")).softmax(-1)


def _induction_hints(pattern: Tensor, half: int) -> list[Hint]:
    rows = np.arange(half, 2 * half)

    def mean_at(shift: int, p: Tensor = pattern) -> Tensor:
        return p[..., rows, rows - half + shift].mean(-1)

    diagonal = pattern.diagonal(offset=1 - half, dim1=-2, dim2=-1)
    return [
        Hint("this is the attention on the previous occurrence itself (position i - half): "
             "a duplicate-token head. An induction head attends to the token after it, "
             "i - half + 1.", mean_at(0)),
        Hint("the score reads position i - half + 2: the token after the previous occurrence "
             "is at i - half + 1.", mean_at(2)),
        Hint("queries and keys are swapped: rows are queries, columns keys, "
             "pattern[..., i, i - half + 1].", mean_at(1, pattern.transpose(-2, -1))),
        Hint("the mean includes query rows of the first half, which have no earlier "
             "occurrence: average over i = half .. 2 * half - 1 only.", diagonal.mean(-1)),
        Hint("summed instead of averaged: divide by the half's length.",
             mean_at(1) * half),
    ]


@register(
    "ch12.prefix_matching_score",
    title="The prefix-matching score of an induction head",
    points=2,
    difficulty="easy",
    minutes=15,
    reference="transformer_ref.induction:prefix_matching_score",
)
def check_prefix_matching_score(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """``prefix_matching_score(pattern, half)`` on random causal attention weights
    ``(n_heads, 2 half, 2 half)`` and with a leading batch axis, and on a pattern with one
    exact induction head (score 1); ``ValueError`` for a pattern of another length."""
    import torch

    rng = ctx.rng
    for leading in ((int(rng.integers(2, 5)),), (2, int(rng.integers(2, 4)))):
        half = int(rng.integers(3, 7))
        pattern = _causal_pattern(rng, (*leading, 2 * half, 2 * half))
        what = f"prefix_matching_score(pattern {tuple(pattern.shape)}, half={half})"
        compare_tensors(call_torch(fn, pattern, half), ctx.reference(pattern, half), what,
                        hints=_induction_hints(pattern, half))
    half = int(rng.integers(3, 6))
    induction = _causal_pattern(rng, (2, 2 * half, 2 * half))
    rows = torch.arange(half, 2 * half)
    induction[1, rows] = 0.0
    induction[1, rows, rows - half + 1] = 1.0
    what = f"prefix_matching_score of an exact induction head (head 1), half={half}"
    compare_tensors(call_torch(fn, induction, half), ctx.reference(induction, half), what,
                    hints=_induction_hints(induction, half))
    expect_raises(fn, ValueError, _causal_pattern(rng, (2, 2 * half + 1, 2 * half + 1)), half,
                  reason=f"the pattern is not (..., {2 * half}, {2 * half})")
