"""Label-smoothed cross-entropy for sequence-to-sequence training.

With smoothing ``eps`` the target distribution for a token whose gold class is ``y`` is

* ``1 - eps`` on ``y``,
* ``eps / (V - 2)`` on every other class except the padding class,
* ``0`` on the padding class (the model should never predict padding).

The loss is the cross-entropy ``-sum_c q(c) log p(c)`` between that distribution and the
model's softmax, averaged over the target positions that are not padding. With ``eps = 0``
it is exactly ``torch.nn.functional.cross_entropy(..., ignore_index=pad_id)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from transformer_ref.data.vocab import PAD_ID

# Log-probabilities are floored here so that a class masked with a -inf logit contributes a
# large but finite penalty instead of inf (the same floor torch.nn.BCELoss uses).
LOG_PROB_FLOOR = -100.0


class LabelSmoothingLoss(nn.Module):
    """Cross-entropy against a label-smoothed target distribution, ignoring padding.

    Args:
        vocab_size: number of classes ``V`` (the last dimension of the logits).
        pad_id: class id of padding; target positions equal to it are ignored and the
            smoothed distribution gives it no mass.
        smoothing: ``eps`` in ``[0, 1)``; the gold class keeps ``1 - eps``.
        reduction: ``"mean"`` (over non-pad tokens) or ``"sum"`` (over non-pad tokens;
            the training loop divides by the global token count itself under DDP).
    """

    def __init__(
        self,
        vocab_size: int,
        pad_id: int = PAD_ID,
        smoothing: float = 0.1,
        reduction: str = "mean",
    ) -> None:
        super().__init__()
        if not 0.0 <= smoothing < 1.0:
            raise ValueError(f"smoothing must be in [0, 1), got {smoothing}; 0.1 is usual")
        if smoothing > 0 and vocab_size < 3:
            raise ValueError(
                f"label smoothing needs vocab_size >= 3 (gold, pad and at least one other "
                f"class), got {vocab_size}; use smoothing=0 for such a small vocabulary"
            )
        if not 0 <= pad_id < vocab_size:
            raise ValueError(f"pad_id must be in [0, {vocab_size}), got {pad_id}")
        if reduction not in ("mean", "sum"):
            raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
        self.vocab_size = vocab_size
        self.pad_id = pad_id
        self.smoothing = smoothing
        self.reduction = reduction

    def smoothed_targets(self, target: torch.Tensor) -> torch.Tensor:
        """The target distribution for each position.

        Args:
            target: Long ``(...)`` gold class ids.

        Returns:
            Float32 ``(..., V)``; rows of non-pad positions sum to 1, rows of pad
            positions are all zero.
        """
        target = target.long()
        if target.numel() and (target.min() < 0 or target.max() >= self.vocab_size):
            raise ValueError(
                f"target ids must be in [0, {self.vocab_size}), got range "
                f"[{int(target.min())}, {int(target.max())}]"
            )
        off_value = self.smoothing / (self.vocab_size - 2) if self.smoothing > 0 else 0.0
        dist = torch.full(
            (*target.shape, self.vocab_size), off_value, dtype=torch.float32, device=target.device
        )
        dist.scatter_(-1, target.unsqueeze(-1), 1.0 - self.smoothing)
        dist[..., self.pad_id] = 0.0
        dist[target == self.pad_id] = 0.0
        return dist

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Loss for raw logits ``(..., V)`` and gold ids ``(...)``; returns a float32 scalar.

        An all-padding batch gives 0 (still attached to the graph, so ``backward`` works).
        """
        if logits.shape[:-1] != target.shape or logits.shape[-1] != self.vocab_size:
            raise ValueError(
                f"expected logits (..., {self.vocab_size}) and target (...) with the same "
                f"leading shape, got logits {tuple(logits.shape)} and target "
                f"{tuple(target.shape)}"
            )
        keep = target != self.pad_id
        gold_ids = target[keep].long()
        # Only real tokens are scored, so padded rows (whatever their logits) cannot add NaN.
        # Finite stand-ins for +-inf keep a row that is entirely -inf well defined (uniform).
        flat_logits = torch.nan_to_num(logits[keep].float(), nan=0.0)
        log_probs = F.log_softmax(flat_logits, dim=-1).clamp(min=LOG_PROB_FLOOR)
        gold = log_probs.gather(-1, gold_ids.unsqueeze(-1)).squeeze(-1)
        per_token = -(1.0 - self.smoothing) * gold
        if self.smoothing > 0:
            # Sum over the smoothed classes without building the (N, V) target tensor:
            # every class except the gold one and padding gets eps / (V - 2).
            others = log_probs.sum(-1) - gold - log_probs[:, self.pad_id]
            per_token = per_token - self.smoothing / (self.vocab_size - 2) * others
        total = per_token.sum()
        if self.reduction == "sum":
            return total
        return total / keep.sum().clamp(min=1)
