"""Greedy decoding: the most likely next token at each step (see transformer_ref.decoding)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_ref.data.vocab import BOS_ID, EOS_ID
from transformer_ref.model.basic_masks import subsequent_mask
from transformer_ref.validation import require_int


def check_source(src: Tensor, src_mask: Tensor, where: str) -> None:
    """Check that ``src`` is a ``(B, S)`` id tensor and ``src_mask`` a matching ``(B, 1, 1, S)``."""
    if not isinstance(src, Tensor) or src.dim() != 2 or src.dtype.is_floating_point:
        raise TypeError(
            f"{where}: src must be a Long tensor of shape (batch, src_len), got "
            f"{type(src).__name__} {tuple(getattr(src, 'shape', ()))}; pad the ids into one tensor"
        )
    expected = (src.size(0), 1, 1, src.size(1))
    if not isinstance(src_mask, Tensor) or tuple(src_mask.shape) != expected:
        raise ValueError(
            f"{where}: src_mask must have shape {expected}, got "
            f"{tuple(getattr(src_mask, 'shape', ()))}; build it with "
            f"transformer_ref.masks.make_src_mask(src)"
        )


# Outputs may be somewhat longer than their sources; this many extra tokens is ample for
# Multi30k captions.
EXTRA_OUTPUT_TOKENS = 50


def check_max_len(model: nn.Module, max_len: int, where: str) -> int:
    """Return ``max_len`` as an int after checking that the model's positions cover it."""
    max_len = require_int(max_len, "max_len", where, minimum=1)
    limit = getattr(model, "config", {}).get("max_len")
    if limit is not None and max_len + 1 > limit:
        raise ValueError(
            f"{where}: max_len={max_len} needs {max_len + 1} decoder positions but the model's "
            f"positional encoding covers {limit}; pass max_len <= {limit - 1}"
        )
    return max_len


def next_log_probs(
    model: nn.Module, ys: Tensor, memory: Tensor, src_mask: Tensor
) -> Tensor:
    """Log-probabilities ``(B, V)`` (float32) of the token after each prefix ``ys`` ``(B, t)``."""
    t = ys.size(1)
    tgt_mask = subsequent_mask(t, device=ys.device)[:, None].expand(ys.size(0), 1, t, t)
    hidden = model.decode(ys, memory, src_mask, tgt_mask)
    return F.log_softmax(model.generator(hidden[:, -1]).float(), dim=-1)


def cut_at_eos(rows: Tensor, eos_id: int) -> list[list[int]]:
    """Id lists from a ``(B, L)`` tensor, each cut before its first ``eos_id``."""
    out = []
    for row in rows.tolist():
        out.append(row[: row.index(eos_id)] if eos_id in row else row)
    return out


@torch.no_grad()
def greedy_decode(
    model: nn.Module,
    src: Tensor,
    src_mask: Tensor,
    max_len: int,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
) -> list[list[int]]:
    """Pick the most probable next token at every step.

    Args:
        model: an encoder–decoder (see the module docstring), in eval mode.
        src: Long ``(B, S)`` source ids (padded with ``PAD_ID``).
        src_mask: Bool ``(B, 1, 1, S)``, e.g. ``make_src_mask(src)``.
        max_len: at most this many tokens are generated per sentence (EOS included).
        bos_id, eos_id: start and end tokens.

    Returns:
        ``B`` lists of ids, without BOS and cut before the first EOS.
    """
    check_source(src, src_mask, "greedy_decode")
    max_len = check_max_len(model, max_len, "greedy_decode")
    memory = model.encode(src, src_mask)
    return greedy_loop(lambda ys: next_log_probs(model, ys, memory, src_mask),
                       src.size(0), max_len, bos_id, eos_id, src.device)


def greedy_loop(
    step: Callable[[Tensor], Tensor],
    batch: int,
    max_len: int,
    bos_id: int,
    eos_id: int,
    device: torch.device,
) -> list[list[int]]:
    """The greedy decoding loop over any next-token scorer.

    Args:
        step: Long prefixes ``(B, t)`` -> log-probabilities ``(B, V)`` of the next token; it
            is called with prefixes that grow by one token per call.
        batch, max_len, bos_id, eos_id, device: as for :func:`greedy_decode`.

    Returns:
        ``batch`` lists of ids, without BOS and cut before the first EOS.
    """
    ys = torch.full((batch, 1), bos_id, dtype=torch.long, device=device)
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    for _ in range(max_len):
        next_ids = step(ys).argmax(dim=-1)
        # Sentences that already ended keep emitting EOS, which the final cut removes.
        next_ids = next_ids.masked_fill(done, eos_id)
        ys = torch.cat([ys, next_ids[:, None]], dim=1)
        done |= next_ids == eos_id
        if bool(done.all()):
            break
    return cut_at_eos(ys[:, 1:], eos_id)
