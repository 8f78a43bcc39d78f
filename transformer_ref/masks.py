"""Boolean attention masks and the decoder-input shift for the PyTorch model.

Every mask follows one convention: ``True`` marks a key position that a query **may attend to**.
The shapes are chosen to broadcast against the attention scores ``(B, h, n_q, n_k)``:

* source mask ``(B, 1, 1, S)``: hide padded source tokens from every query and every head;
* target mask ``(B, 1, T, T)``: a query sees itself and earlier positions (causal) *and* only
  keys that are not padding.

A worked example with ``PAD_ID = 0``::

    >>> tgt_in = torch.tensor([[1, 7, 0]])
    >>> make_tgt_mask(tgt_in)[0, 0].int()
    tensor([[1, 0, 0],
            [1, 1, 0],
            [1, 1, 0]], dtype=torch.int32)
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_ref.vocab import BOS_ID, PAD_ID


def _require_token_batch(ids: Tensor, name: str, where: str) -> None:
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
    _require_token_batch(src, "src", "make_src_mask")
    return (src != pad_id)[:, None, None, :]


def make_tgt_mask(tgt_in: Tensor, pad_id: int = PAD_ID) -> Tensor:
    """Decoder self-attention mask: causal AND key-not-padding.

    Args:
        tgt_in: Long ``(B, T)`` decoder input ids (already shifted right).
        pad_id: id of the padding token.

    Returns:
        Bool ``(B, 1, T, T)``; entry ``[b, 0, i, j]`` is ``True`` when ``j <= i`` and
        ``tgt_in[b, j]`` is not padding.
    """
    _require_token_batch(tgt_in, "tgt_in", "make_tgt_mask")
    not_pad = (tgt_in != pad_id)[:, None, None, :]  # (B, 1, 1, T)
    causal = subsequent_mask(tgt_in.size(1), device=tgt_in.device)[:, None]  # (1, 1, T, T)
    return not_pad & causal


def shift_right(tgt: Tensor, bos_id: int = BOS_ID) -> Tensor:
    """Build the decoder input from the target: prepend ``bos_id`` and drop the last column.

    With teacher forcing the decoder reads ``tgt_in[:, i]`` and must predict ``tgt[:, i]``,
    the token that follows it::

        tgt    = [a, b, c, <eos>]
        tgt_in = [<bos>, a, b, c]

    Args:
        tgt: Long ``(B, T)`` target ids (ending with EOS, possibly followed by padding).
        bos_id: id of the begin-of-sequence token.

    Returns:
        Long ``(B, T)`` tensor with the same dtype and device as ``tgt``.
    """
    _require_token_batch(tgt, "tgt", "shift_right")
    bos = torch.full_like(tgt[:, :1], bos_id)
    return torch.cat([bos, tgt[:, :-1]], dim=1)
