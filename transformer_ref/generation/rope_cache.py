"""A key/value cache for a model with rotary positions: each new token rotated at its position.

Chapter 11's cache added the learned position of a new token from the cache's length. With
RoPE the position enters inside attention: the new queries and keys turn by the angles of
their absolute positions ``start .. start + t - 1``, where ``start`` is the number of cached
positions, and the cache keeps the keys already rotated. Rotating the new token at position
0 (the offset forgotten) still runs and writes fluent-looking text, but not the model's: the
classic bug of cached RoPE code.

Conventions (shapes, masks): see :mod:`transformer_ref.modules`; the model is a
:class:`~transformer_ref.model.modern_lm.ModernLanguageModel`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from transformer_ref.model.grouped_attention import grouped_query_attention
from transformer_ref.model.rope import apply_rope


def cached_rope_attention(attn: nn.Module, x: Tensor, past_k: Tensor | None,
                          past_v: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """One call of a :class:`~transformer_ref.model.grouped_attention.GroupedQueryAttention`
    on new positions, with the keys and values of the earlier ones from a cache.

    Args:
        attn: the attention module (``w_q, w_k, w_v, w_o, n_heads, n_kv_heads, d_k, base``).
        x: float ``(B, t, d_model)``: the normalised inputs of the ``t`` new positions.
        past_k, past_v: float ``(B, n_kv_heads, start, d_k)``, the rotated keys and the values
            of the ``start`` earlier positions, or both None (``start = 0``).

    Returns:
        ``(out, k, v)``: ``out`` ``(B, t, d_model)``, equal to what ``attn`` gives at these
        positions on the whole sequence; ``k, v`` ``(B, n_kv_heads, start + t, d_k)``, the
        cache extended by the new positions.
    """
    batch, t, _ = x.shape
    start = 0 if past_k is None else past_k.size(2)
    positions = torch.arange(start, start + t, device=x.device)

    def heads(z: Tensor, n: int) -> Tensor:  # (B, t, n * d_k) -> (B, n, t, d_k)
        return z.view(batch, t, n, attn.d_k).transpose(1, 2)

    q = apply_rope(heads(attn.w_q(x), attn.n_heads), positions, attn.base)
    k = apply_rope(heads(attn.w_k(x), attn.n_kv_heads), positions, attn.base)
    v = heads(attn.w_v(x), attn.n_kv_heads)
    if past_k is not None:
        k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
    # New query i (position start + i) sees every cached key and the new keys up to it.
    mask = torch.ones(t, start + t, dtype=torch.bool, device=x.device).tril(start)
    out = grouped_query_attention(q, k, v, mask)
    return attn.w_o(out.transpose(1, 2).reshape(batch, t, -1)), k, v


@torch.no_grad()
def generate_greedy(model: nn.Module, prompt: Tensor, max_new_tokens: int, cached: bool = True,
                    step: Callable[..., tuple[Tensor, Tensor, Tensor]] = cached_rope_attention
                    ) -> Tensor:
    """Greedy continuation of ``prompt`` (Long ``(B, T0)``) by ``max_new_tokens`` tokens.

    With ``cached`` the prompt runs once and every later call feeds the newest token only,
    through ``step`` (``cached_rope_attention`` or a function with its signature); without,
    the model runs on the whole sequence at every step. Both give the same tokens.

    Returns:
        Long ``(B, T0 + max_new_tokens)``.
    """
    ids, new = prompt, prompt
    cache: list[tuple[Tensor | None, Tensor | None]] = [(None, None)] * len(model.layers)
    for _ in range(max_new_tokens):
        if cached:
            x = model.embed(new)
            for i, layer in enumerate(model.layers):
                out, k, v = step(layer.self_attn, layer.norm1(x), *cache[i])
                cache[i] = (k, v)
                x = x + out
                x = x + layer.feed_forward(layer.norm2(x))
            logits = model.generator(model.norm(x))
        else:
            logits = model(ids)
        new = logits[:, -1].argmax(dim=-1, keepdim=True)
        ids = torch.cat([ids, new], dim=1)
    return ids
