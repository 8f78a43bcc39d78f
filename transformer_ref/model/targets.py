"""The decoder's inputs for teacher forcing: the target mask and the shift to the right.

Conventions: see :mod:`transformer_ref.masks`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_ref.data.vocab import BOS_ID, PAD_ID
from transformer_ref.model.basic_masks import require_token_batch, subsequent_mask


def make_tgt_mask(tgt_in: Tensor, pad_id: int = PAD_ID) -> Tensor:
    """Decoder self-attention mask: causal AND key-not-padding.

    Args:
        tgt_in: Long ``(B, T)`` decoder input ids (already shifted right).
        pad_id: id of the padding token.

    Returns:
        Bool ``(B, 1, T, T)``; entry ``[b, 0, i, j]`` is ``True`` when ``j <= i`` and
        ``tgt_in[b, j]`` is not padding.
    """
    require_token_batch(tgt_in, "tgt_in", "make_tgt_mask")
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
    require_token_batch(tgt, "tgt", "shift_right")
    bos = torch.full_like(tgt[:, :1], bos_id)
    return torch.cat([bos, tgt[:, :-1]], dim=1)
