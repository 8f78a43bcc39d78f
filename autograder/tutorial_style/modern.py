"""Chapter 12's exercises written the way Meta's Llama code and Hugging Face's Llama code write
them, with the thinnest adapter to the course's names and signatures (see
:mod:`autograder.tutorial_style.implementations` for why the checks must judge such code).

Llama computes RMSNorm in float32 and casts back, builds its FFN with a hidden width from
``2 * 4 * d / 3`` and turns RoPE's pairs as complex numbers (interleaved pairs); Hugging Face
turns split halves (``rotate_half``), repeats key/value heads with ``repeat_kv`` and keeps a
``cache_position`` for the cache's offset. ARENA's interpretability course scores
induction heads along a diagonal stripe of the attention pattern.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class LlamaRMSNorm(nn.Module):
    """Meta's ``RMSNorm``: ``_norm`` in float32, ``type_as`` the input, times the weight."""

    def __init__(self, d_model: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def _norm(self, x: Tensor) -> Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x: Tensor) -> Tensor:
        return self._norm(x.float()).type_as(x) * self.weight


class LlamaFeedForward(nn.Module):
    """Meta's ``FeedForward``: ``hidden_dim = int(2 * hidden_dim / 3)`` from ``4 * dim``,
    rounded up to ``multiple_of`` (1 here: the course's width)."""

    def __init__(self, d_model: int, d_ff: int | None = None, multiple_of: int = 1) -> None:
        super().__init__()
        hidden_dim = d_ff
        if hidden_dim is None:
            hidden_dim = int(2 * (4 * d_model) / 3)
            hidden_dim = multiple_of * ((hidden_dim + multiple_of - 1) // multiple_of)
        self.w1 = nn.Linear(d_model, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, d_model, bias=False)
        self.w3 = nn.Linear(d_model, hidden_dim, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


def llama_apply_rope(x: Tensor, positions: Tensor, base: float = 10000.0) -> Tensor:
    """Meta's ``precompute_freqs_cis`` and ``apply_rotary_emb``: interleaved pairs as complex
    numbers, multiplied by ``exp(i * angle)``."""
    dim = x.size(-1)
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64)[: dim // 2] / dim))
    freqs_cis = torch.polar(torch.ones(1, dtype=torch.float64),
                            torch.outer(positions.double(), freqs))
    x_ = torch.view_as_complex(x.double().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(x_ * freqs_cis).flatten(-2).type_as(x)


def rotate_half(x: Tensor) -> Tensor:
    """Hugging Face's ``rotate_half``: ``(x1, x2) -> (-x2, x1)`` on the two halves."""
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def hf_apply_rope(x: Tensor, positions: Tensor, base: float = 10000.0) -> Tensor:
    """Hugging Face's ``LlamaRotaryEmbedding`` and ``apply_rotary_pos_emb`` (split halves)."""
    dim = x.size(-1)
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).double() / dim))
    freqs = positions.double()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    return (x * cos) + (rotate_half(x) * sin)


def repeat_kv(hidden_states: Tensor, n_rep: int) -> Tensor:
    """Hugging Face's ``repeat_kv``: ``(B, n_kv, S, d) -> (B, n_kv * n_rep, S, d)``."""
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep,
                                                           slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def hf_grouped_query_attention(q: Tensor, k: Tensor, v: Tensor,
                               mask: Tensor | None = None) -> Tensor:
    """Hugging Face's ``eager_attention_forward``: ``repeat_kv``, scaled scores, an additive
    mask, softmax, the values."""
    if q.size(1) % k.size(1):
        raise ValueError(f"num_heads ({q.size(1)}) must be divisible by num_key_value_heads "
                         f"({k.size(1)})")
    n_rep = q.size(1) // k.size(1)
    key_states, value_states = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
    attn_weights = torch.matmul(q, key_states.transpose(2, 3)) / math.sqrt(q.size(-1))
    if mask is not None:
        causal_mask = torch.zeros(mask.shape, dtype=q.dtype).masked_fill(~mask, float("-inf"))
        attn_weights = attn_weights + causal_mask
    attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(attn_weights, value_states)


def hf_cached_attention(attn: nn.Module, x: Tensor, past_k: Tensor | None,
                        past_v: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """Hugging Face's ``LlamaAttention.forward`` with a ``DynamicCache``: ``cache_position``
    from the cache's length gives the rotation, ``cache.update`` concatenates."""
    bsz, q_len, _ = x.size()
    past_seen_tokens = 0 if past_k is None else past_k.shape[-2]
    cache_position = torch.arange(past_seen_tokens, past_seen_tokens + q_len)
    query_states = attn.w_q(x).view(bsz, q_len, -1, attn.d_k).transpose(1, 2)
    key_states = attn.w_k(x).view(bsz, q_len, -1, attn.d_k).transpose(1, 2)
    value_states = attn.w_v(x).view(bsz, q_len, -1, attn.d_k).transpose(1, 2)
    query_states = hf_apply_rope(query_states, cache_position, attn.base)
    key_states = hf_apply_rope(key_states, cache_position, attn.base)
    if past_k is not None:
        key_states = torch.cat([past_k, key_states], dim=-2)
        value_states = torch.cat([past_v, value_states], dim=-2)
    kv_len = key_states.shape[-2]
    causal = torch.arange(kv_len)[None, :] <= cache_position[:, None]
    attn_output = hf_grouped_query_attention(query_states, key_states, value_states, causal)
    attn_output = attn_output.transpose(1, 2).reshape(bsz, q_len, -1).contiguous()
    return attn.w_o(attn_output), key_states, value_states


def arena_prefix_matching_score(pattern: Tensor, half: int) -> Tensor:
    """ARENA's induction score: the stripe ``pattern.diagonal(offset=1 - seq_len)`` averaged
    over positions (ARENA's sequences start with a BOS token, which puts exactly the second
    half's rows on that stripe; without it, the stripe's first entry is a first-half row)."""
    if pattern.shape[-2:] != (2 * half, 2 * half):
        raise ValueError(f"expected a pattern of {2 * half} positions, got {tuple(pattern.shape)}")
    induction_stripe = pattern.diagonal(dim1=-2, dim2=-1, offset=1 - half)[..., 1:]
    return induction_stripe.mean(dim=-1)
