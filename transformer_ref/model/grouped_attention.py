"""Grouped-query attention (GQA, Ainslie et al., 2023) with rotary positions.

Multi-head attention gives every head its own keys and values, and a key/value cache stores
all of them. GQA lets each group of ``n_heads / n_kv_heads`` query heads share one key head
and one value head, which divides the cache by that factor. ``n_kv_heads = n_heads`` is
multi-head attention (MHA), ``n_kv_heads = 1`` multi-query attention (MQA, Shazeer, 2019).
Query head ``j`` reads key/value head ``j // (n_heads // n_kv_heads)``: consecutive query
heads form a group, as ``repeat_interleave`` (Hugging Face's ``repeat_kv``) lays them out.

Conventions (shapes, masks: True = may attend): see :mod:`transformer_ref.modules`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from transformer_ref.model.rope import apply_rope


def grouped_query_attention(q: Tensor, k: Tensor, v: Tensor,
                            mask: Tensor | None = None) -> Tensor:
    """Scaled dot-product attention where groups of query heads share key/value heads.

    Args:
        q: float ``(B, n_heads, T, d_k)``.
        k, v: float ``(B, n_kv_heads, S, d_k)``, ``n_kv_heads`` divides ``n_heads``.
        mask: bool, broadcastable to ``(B, n_heads, T, S)``; True where a query may attend.

    Returns:
        Float ``(B, n_heads, T, d_k)``.

    Raises:
        ValueError: ``n_kv_heads`` does not divide ``n_heads``.
    """
    n_heads, n_kv_heads = q.size(1), k.size(1)
    if n_heads % n_kv_heads:
        raise ValueError(f"grouped_query_attention: {n_kv_heads} key/value heads do not divide "
                         f"{n_heads} query heads")
    group = n_heads // n_kv_heads
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(dim=-1) @ v


class GroupedQueryAttention(nn.Module):
    """Causal self-attention with ``n_kv_heads`` key/value heads and RoPE on queries and keys.

    Args:
        d_model: model width; n_heads: query heads (``d_k = d_model // n_heads``);
        n_kv_heads: key/value heads, dividing ``n_heads``; base: RoPE's frequency base.

    Attributes:
        w_q ``(d_model -> n_heads * d_k)``, w_k, w_v ``(d_model -> n_kv_heads * d_k)``,
        w_o ``(n_heads * d_k -> d_model)``, all without bias (as in Llama); n_heads,
        n_kv_heads, d_k, base.
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int,
                 base: float = 10000.0) -> None:
        super().__init__()
        if d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError(f"GroupedQueryAttention: n_heads={n_heads} must divide "
                             f"d_model={d_model} and n_kv_heads={n_kv_heads} n_heads")
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.d_k, self.base = d_model // n_heads, base
        self.w_q = nn.Linear(d_model, n_heads * self.d_k, bias=False)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.d_k, bias=False)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.d_k, bias=False)
        self.w_o = nn.Linear(n_heads * self.d_k, d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        """``(B, T, d_model) -> (B, T, d_model)``; position ``i`` sees ``0 .. i``."""
        batch, t, _ = x.shape
        positions = torch.arange(t, device=x.device)

        def heads(z: Tensor, n: int) -> Tensor:  # (B, T, n * d_k) -> (B, n, T, d_k)
            return z.view(batch, t, n, self.d_k).transpose(1, 2)

        q = apply_rope(heads(self.w_q(x), self.n_heads), positions, self.base)
        k = apply_rope(heads(self.w_k(x), self.n_kv_heads), positions, self.base)
        v = heads(self.w_v(x), self.n_kv_heads)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        out = grouped_query_attention(q, k, v, mask)
        return self.w_o(out.transpose(1, 2).reshape(batch, t, -1))
