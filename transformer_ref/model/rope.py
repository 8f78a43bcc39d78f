"""Rotary position embedding (RoPE, Su et al., 2021): positions as rotations of queries and keys.

Chapter 1 built the rotation matrix :math:`M_k` and showed that
:math:`(M_m q)^\\top (M_n k)` depends only on :math:`n - m`. Here the rotation is applied
inside attention: each pair of features of a query or key at position ``p`` turns by the angle
``p * theta_i`` with ``theta_i = base ** (-2 i / d)``. Two pairings of the features are in
use and give the same attention scores up to a fixed permutation of the features:

- ``"interleaved"``: features ``(2i, 2i + 1)`` form pair ``i``, as in the RoFormer paper,
  chapter 1 and Meta's original Llama code (complex numbers);
- ``"halves"``: features ``i`` and ``i + d/2`` form pair ``i`` (``rotate_half``), as in GPT-NeoX
  and Hugging Face's Llama, Mistral and Qwen.

Conventions (shapes): see :mod:`transformer_ref.modules`.
"""

from __future__ import annotations

import torch
from torch import Tensor

PAIRINGS = ("interleaved", "halves")


def rope_angles(positions: Tensor, d: int, base: float = 10000.0) -> Tensor:
    """The rotation angles ``positions[t] * base ** (-2 i / d)``, float ``(T, d // 2)``."""
    i = torch.arange(d // 2, dtype=torch.float64, device=positions.device)
    return positions.to(torch.float64)[:, None] * base ** (-2 * i / d)


def apply_rope(x: Tensor, positions: Tensor, base: float = 10000.0,
               pairing: str = "interleaved") -> Tensor:
    """Rotate every pair of features of ``x`` by its position's angle.

    Args:
        x: float ``(..., T, d)`` with ``d`` even (queries or keys, e.g. ``(B, h, T, d_k)``).
        positions: Long ``(T,)``: the absolute position of each of the ``T`` rows (with a
            cache, the new tokens' positions start after the cached ones).
        base: the frequency base.
        pairing: ``"interleaved"`` or ``"halves"`` (see the module's docstring).

    Returns:
        Float ``(..., T, d)``, ``x``'s dtype.
    """
    if x.size(-1) % 2:
        raise ValueError(f"apply_rope: the last axis must be even, got {x.size(-1)}")
    if pairing not in PAIRINGS:
        raise ValueError(f"apply_rope: pairing must be one of {PAIRINGS}, got {pairing!r}")
    angles = rope_angles(positions, x.size(-1), base)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    if pairing == "interleaved":
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack([even * cos - odd * sin, even * sin + odd * cos], -1).flatten(-2)
    first, second = x.chunk(2, dim=-1)
    return torch.cat([first * cos - second * sin, first * sin + second * cos], -1)
