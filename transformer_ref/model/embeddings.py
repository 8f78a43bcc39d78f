"""Token embeddings, scaled by sqrt(d_model).

Conventions (shapes): see :mod:`transformer_ref.modules`.
"""

from __future__ import annotations

import math

from torch import Tensor, nn


class Embeddings(nn.Module):
    """Token embedding table ``lut`` ``(vocab, d_model)``, scaled by ``sqrt(d_model)``.

    The scaling keeps the embeddings on the same scale as the positional encoding (entries
    in ``[-1, 1]``) when the table is initialised with small values.
    """

    def __init__(self, vocab: int, d_model: int) -> None:
        super().__init__()
        self.lut = nn.Embedding(vocab, d_model)
        self.scale = math.sqrt(d_model)

    def forward(self, ids: Tensor) -> Tensor:
        """Long ``(B, L)`` -> float ``(B, L, d_model)``."""
        return self.lut(ids) * self.scale
