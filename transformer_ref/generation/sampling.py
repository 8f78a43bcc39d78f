"""Drawing text from a language model: temperature, top-k and top-p (nucleus) sampling.

At each step the model scores every token of the vocabulary; :func:`filter_logits` turns
those scores into the distribution to draw from, in three steps applied in this order (as
Hugging Face's ``generate`` applies them):

1. **temperature** ``T``: divide the logits by ``T`` *before* the softmax. ``T < 1`` sharpens
   the distribution (``T -> 0`` is greedy decoding), ``T > 1`` flattens it.
2. **top-k**: keep the ``k`` largest logits and give every other token the logit ``-inf``
   (probability exactly 0; a logit of 0 would still leave it ``exp(0)`` of weight).
3. **top-p** (Holtzman et al., 2020): sort the remaining probabilities from the largest, and
   keep the smallest set of tokens whose probabilities add up to at least ``p``; the token
   that crosses ``p`` is kept (so at least one token always is).

:func:`pick_next` then draws one token per row from the softmax of what is left, with
``torch.multinomial`` and the caller's ``torch.Generator``, so that the same generator state
gives the same text. :func:`sample` repeats this ``max_new_tokens`` times.
"""

from __future__ import annotations

import numbers

import torch
from torch import Tensor

from transformer_ref.validation import require_int


def check_sampling(temperature: float, top_k: int | None, top_p: float | None,
                   where: str) -> None:
    """Raise ``ValueError``/``TypeError`` for settings that define no distribution."""
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) \
            or not temperature > 0:
        raise ValueError(f"{where}: temperature must be a number > 0, got {temperature!r}; "
                         f"for greedy decoding take the argmax instead")
    if top_k is not None:
        require_int(top_k, "top_k", where, minimum=1)
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, numbers.Real)
                              or not 0 < top_p <= 1):
        raise ValueError(f"{where}: top_p must be a number in (0, 1], got {top_p!r}")


def filter_logits(logits: Tensor, temperature: float = 1.0, top_k: int | None = None,
                  top_p: float | None = None) -> Tensor:
    """The logits to sample from: scaled by ``1 / temperature``, then top-k, then top-p.

    Args:
        logits: ``(..., V)`` raw scores of the next token.
        temperature: > 0.
        top_k: keep the ``top_k`` largest logits (None, or ``top_k >= V``: keep all).
        top_p: keep the smallest set of most probable tokens whose probability reaches
            ``top_p`` (None, or 1: keep all).

    Returns:
        ``(..., V)``: the scaled logits, ``-inf`` where a token is removed.
    """
    check_sampling(temperature, top_k, top_p, "filter_logits")
    logits = logits / temperature
    if top_k is not None and top_k < logits.size(-1):
        kth = logits.topk(top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1:
        probs = logits.softmax(dim=-1)
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        above = sorted_probs.cumsum(dim=-1) - sorted_probs  # mass of the tokens ranked higher
        drop = (above >= top_p).scatter(-1, order, above >= top_p)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def pick_next(logits: Tensor, temperature: float = 1.0, top_k: int | None = None,
              top_p: float | None = None, generator: torch.Generator | None = None) -> Tensor:
    """One token per row drawn from ``softmax(filter_logits(logits, ...))``.

    Args:
        logits: ``(B, V)`` scores of the next token.
        generator: the random source (None: torch's global one).

    Returns:
        Long ``(B, 1)``.
    """
    probs = filter_logits(logits, temperature, top_k, top_p).softmax(dim=-1)
    return torch.multinomial(probs, 1, generator=generator)


@torch.no_grad()
def sample(
    model: torch.nn.Module,
    prompt_ids: Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Continue every row of ``prompt_ids`` by ``max_new_tokens`` sampled tokens.

    Each step runs the model on the last ``model.max_len`` tokens at most (the positions its
    table covers), takes the logits of the last position and draws the next token with
    :func:`pick_next`.

    Args:
        model: maps Long ``(B, t)`` to logits ``(B, t, V)`` and has ``max_len`` (the longest
            context it reads); in eval mode.
        prompt_ids: Long ``(B, T)``, ``T >= 1`` (e.g. BOS followed by a prompt's tokens).
        max_new_tokens: how many tokens to add (``>= 0``).
        temperature, top_k, top_p: see :func:`filter_logits`.
        generator: a ``torch.Generator``; the same state gives the same tokens.

    Returns:
        Long ``(B, T + max_new_tokens)``: the prompt followed by the new tokens.
    """
    where = "sample"
    check_sampling(temperature, top_k, top_p, where)
    steps = require_int(max_new_tokens, "max_new_tokens", where, minimum=0)
    if not isinstance(prompt_ids, Tensor) or prompt_ids.dim() != 2 or prompt_ids.size(1) < 1 \
            or prompt_ids.dtype.is_floating_point:
        raise ValueError(f"{where}: prompt_ids must be a Long tensor (batch, length >= 1), got "
                         f"{type(prompt_ids).__name__} {tuple(getattr(prompt_ids, 'shape', ()))}")
    ids = prompt_ids
    for _ in range(steps):
        logits = model(ids[:, -model.max_len:])[:, -1, :]
        ids = torch.cat([ids, pick_next(logits, temperature, top_k, top_p, generator)], dim=1)
    return ids
