"""The two layers in which a modern language model's block differs from GPT-2's outside
attention: RMSNorm in place of LayerNorm, and a gated feed-forward network (SwiGLU).

Both come from Llama (Touvron et al., 2023) and are used, with small variations, by Mistral,
Qwen and most open language models since.

Conventions (shapes): see :mod:`transformer_ref.modules`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class RmsNorm(nn.Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last axis (Zhang & Sennrich, 2019).

    LayerNorm without the mean and without the bias: only the scale of each row is
    normalised. ``eps`` is added inside the square root, as Llama's code does.

    Args:
        d_model: width of the last axis.
        eps: added to the mean square, so that a zero row stays finite.

    Attributes:
        weight: the learned gain, ``(d_model,)``, initialised to ones.
    """

    def __init__(self, d_model: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: Tensor) -> Tensor:
        """``(..., d_model) -> (..., d_model)``."""
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def swiglu_width(d_model: int) -> int:
    """The hidden width of a SwiGLU FFN with the parameters of a ReLU FFN of width
    ``4 * d_model``: three matrices instead of two, so ``2/3 * 4 * d_model``, rounded down
    (Llama rounds further up to a multiple of 256)."""
    return int(8 * d_model / 3)


class Swiglu(nn.Module):
    """The gated feed-forward network ``w2(silu(w1(x)) * w3(x))`` (Shazeer, 2020), no biases.

    Args:
        d_model: input and output width.
        d_ff: hidden width; None takes :func:`swiglu_width` ``(d_model)``.

    Attributes:
        w1: the gate's projection, w3: the value's projection (both ``d_model -> d_ff``),
        w2: the output projection ``d_ff -> d_model``; Llama's names.
    """

    def __init__(self, d_model: int, d_ff: int | None = None) -> None:
        super().__init__()
        d_ff = swiglu_width(d_model) if d_ff is None else d_ff
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)
        self.w3 = nn.Linear(d_model, d_ff, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        """``(..., d_model) -> (..., d_model)``."""
        return self.w2(F.silu(self.w1(x)) * self.w3(x))
