"""The position-wise feed-forward network and the residual connection around a sub-layer.

Conventions (shapes, masks): see :mod:`transformer_ref.modules`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn


class PositionwiseFeedForward(nn.Module):
    """``FFN(x) = max(0, x W_1 + b_1) W_2 + b_2``, applied to every position separately.

    Input and output ``(..., d_model)``; the hidden layer has width ``d_ff``. Dropout acts on
    the hidden activations (as in ``torch.nn.TransformerEncoderLayer``).
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """``(..., d_model) -> (..., d_model)``."""
        return self.w_2(self.dropout(torch.relu(self.w_1(x))))


def residual(
    x: Tensor,
    sublayer: Callable[[Tensor], Tensor],
    norm: nn.LayerNorm,
    dropout: nn.Dropout,
    norm_first: bool,
) -> Tensor:
    """One residual connection around a sub-layer, in one of two orders.

    * post-LN (the paper): ``LayerNorm(x + Dropout(Sublayer(x)))``;
    * pre-LN: ``x + Dropout(Sublayer(LayerNorm(x)))``; the residual path stays an identity,
      which makes deep stacks train without a careful warm-up.

    ``x`` and the result are ``(B, n, d_model)``.
    """
    if norm_first:
        return x + dropout(sublayer(norm(x)))
    return norm(x + dropout(sublayer(x)))


def final_norm(d_model: int, norm_first: bool) -> nn.Module:
    # Pre-LN layers leave their output un-normalised, so the stack ends with one LayerNorm;
    # post-LN layers already end with one.
    return nn.LayerNorm(d_model) if norm_first else nn.Identity()
