"""The generator: the final projection from hidden states to logits.

Conventions (shapes): see :mod:`transformer_ref.modules`.
"""

from __future__ import annotations

from torch import Tensor, nn


class Generator(nn.Module):
    """Final projection ``proj``: ``(..., d_model) -> (..., vocab)`` raw logits.

    No softmax here: the loss (cross-entropy on logits) and decoding apply it as needed.
    """

    def __init__(self, d_model: int, vocab: int) -> None:
        super().__init__()
        self.proj = nn.Linear(d_model, vocab)

    def forward(self, x: Tensor) -> Tensor:
        """``(..., d_model) -> (..., vocab)``."""
        return self.proj(x)
