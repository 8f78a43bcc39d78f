"""The sinusoidal positional encoding as a PyTorch module.

Conventions (shapes): see :mod:`transformer_ref.modules`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from transformer_ref.numpy.positional import positional_encoding


class PositionalEncoding(nn.Module):
    """Add the sinusoidal positional encoding, then apply dropout.

    The table ``pe`` ``(1, max_len, d_model)`` comes from
    :func:`transformer_ref.numpy.positional.positional_encoding`. It is a buffer, not a parameter:
    it moves with ``.to(device)`` but is never trained, and it is rebuilt rather than saved
    in the ``state_dict``.
    """

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000) -> None:
        super().__init__()
        table = torch.from_numpy(positional_encoding(max_len, d_model))
        self.register_buffer("pe", table.unsqueeze(0), persistent=False)
        self.dropout = nn.Dropout(dropout)
        self.max_len = max_len

    def forward(self, x: Tensor) -> Tensor:
        """``(B, L, d_model) -> (B, L, d_model)`` with ``L <= max_len``."""
        length = x.size(1)
        if length > self.max_len:
            raise ValueError(
                f"PositionalEncoding: the sequence has {length} positions but max_len is "
                f"{self.max_len}; shorten the input or build the model with max_len >= {length}"
            )
        return self.dropout(x + self.pe[:, :length].to(x.dtype))
