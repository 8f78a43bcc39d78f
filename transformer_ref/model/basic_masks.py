"""The two masks every model needs: the causal (subsequent) mask and the source padding mask.

Conventions: see :mod:`transformer_ref.masks`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_ref.data.vocab import PAD_ID


def require_token_batch(ids: Tensor, name: str, where: str) -> None:
    """Check that ``ids`` is a ``(B, L)`` tensor of integer token ids."""
    if not isinstance(ids, Tensor):
        raise TypeError(
            f"{where}: {name} must be a torch.Tensor of token ids, got {type(ids).__name__}; "
            f"wrap it with torch.tensor(...)"
        )
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise TypeError(
            f"{where}: {name} must hold integer token ids, got dtype {ids.dtype}; "
            f"convert with {name}.long()"
        )
    if ids.dim() != 2:
        raise ValueError(
            f"{where}: {name} must have shape (batch, length), got shape {tuple(ids.shape)}; "
            f"add a batch axis with {name}.unsqueeze(0)"
        )


def subsequent_mask(size: int, device: torch.device | str | None = None) -> Tensor:
    """Causal mask: position ``i`` may attend to positions ``0..i``.

    Args:
        size: sequence length ``T`` (at least 1).
        device: where to create the mask (default: the current default device).

    Returns:
        Bool tensor ``(1, T, T)``, ``True`` on and below the diagonal.
    """
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"subsequent_mask: size must be a positive int, got {size!r}")
    return torch.ones(1, size, size, dtype=torch.bool, device=device).tril()


def make_src_mask(src: Tensor, pad_id: int = PAD_ID) -> Tensor:
    """Padding mask for the encoder (and the decoder's cross-attention).

    Args:
        src: Long ``(B, S)`` source token ids.
        pad_id: id of the padding token.

    Returns:
        Bool ``(B, 1, 1, S)``: ``True`` where the key is a real token. The two size-1 axes
        broadcast over the heads and over the queries.
    """
    require_token_batch(src, "src", "make_src_mask")
    return (src != pad_id)[:, None, None, :]
