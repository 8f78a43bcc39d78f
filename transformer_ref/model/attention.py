"""Attention as PyTorch modules: the math and fused paths, and multi-head attention.

Conventions (shapes, masks): see :mod:`transformer_ref.modules`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_ref.validation import require_divisible


def _check_mask(mask: Tensor | None, where: str) -> None:
    """Reject masks of the wrong kind before they silently mean the opposite."""
    if mask is not None and mask.dtype != torch.bool:
        raise TypeError(
            f"{where}: mask must be a bool tensor (True = may attend), got dtype {mask.dtype}; "
            f"build it with transformer_ref.masks or convert a 0/1 mask with mask.bool()"
        )


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    dropout: nn.Module | None = None,
) -> tuple[Tensor, Tensor]:
    """Scaled dot-product attention, written out step by step.

    Args:
        q: queries ``(..., n_q, d_k)``.
        k: keys ``(..., n_k, d_k)``.
        v: values ``(..., n_k, d_v)``.
        mask: optional bool tensor broadcastable to ``(..., n_q, n_k)``; ``True`` = may attend.
        dropout: optional module applied to the attention weights (e.g. ``nn.Dropout``).

    Returns:
        ``(out, weights)``: ``out`` is ``(..., n_q, d_v)``; ``weights`` is ``(..., n_q, n_k)``,
        each row a probability distribution over the keys (before dropout).
    """
    _check_mask(mask, "attention")
    d_k = q.size(-1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., n_q, n_k)
    if mask is not None:
        # The most negative finite number instead of -inf: a row with every key masked then
        # becomes uniform rather than NaN, and exp() of it is exactly 0 next to any real score.
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    attended = weights if dropout is None else dropout(weights)
    return attended @ v, weights


def fused_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
) -> Tensor:
    """The same computation as :func:`attention` through PyTorch's fused kernel.

    Args:
        q, k, v, mask: as for :func:`attention`.
        dropout_p: probability of dropping an attention weight; pass 0.0 outside training.

    Returns:
        ``out`` of shape ``(..., n_q, d_v)`` (the fused kernel does not return the weights).
    """
    _check_mask(mask, "fused_attention")
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)


class MultiHeadAttention(nn.Module):
    """``h`` attention heads side by side, each of width ``d_k = d_model // h``.

    ``MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_o`` with
    ``head_i = Attention(Q W_q^i, K W_k^i, V W_v^i)``. The per-head projections are the
    column blocks of the ``d_model x d_model`` layers ``w_q``, ``w_k``, ``w_v``.

    Attributes:
        fast: use :func:`fused_attention` (``True``) or :func:`attention` (``False``).
        store_attention: when ``True``, the math path runs and its weights are kept in
            ``attn_weights``; turn it on for a whole model with :func:`store_attention`.
        attn_weights: the weights of the last forward pass, ``(B, h, n_q, n_k)``, detached;
            ``None`` until a pass with ``store_attention`` on.
    """

    def __init__(self, d_model: int, h: int, dropout: float = 0.0, fast: bool = True) -> None:
        super().__init__()
        require_divisible(d_model, h, "d_model", "h", "MultiHeadAttention")
        self.h = h
        self.d_k = d_model // h
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)
        self.fast = fast
        self.store_attention = False
        self.attn_weights: Tensor | None = None

    def _split_heads(self, x: Tensor) -> Tensor:
        """``(B, n, d_model) -> (B, h, n, d_k)``: a view, no copy."""
        batch, n, _ = x.shape
        return x.view(batch, n, self.h, self.d_k).transpose(1, 2)

    def forward(
        self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None
    ) -> Tensor:
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query: ``(B, n_q, d_model)``.
            key: ``(B, n_k, d_model)``.
            value: ``(B, n_k, d_model)``.
            mask: optional bool, broadcastable to ``(B, h, n_q, n_k)``, e.g. ``(B, 1, 1, n_k)``
                or ``(B, 1, n_q, n_k)``; ``True`` = may attend.

        Returns:
            ``(B, n_q, d_model)``.
        """
        q = self._split_heads(self.w_q(query))  # (B, h, n_q, d_k)
        k = self._split_heads(self.w_k(key))  # (B, h, n_k, d_k)
        v = self._split_heads(self.w_v(value))  # (B, h, n_k, d_k)

        if self.fast and not self.store_attention:
            dropout_p = self.dropout.p if self.training else 0.0
            out = fused_attention(q, k, v, mask, dropout_p)
        else:
            out, weights = attention(q, k, v, mask, self.dropout)
            if self.store_attention:
                self.attn_weights = weights.detach()

        batch, _, n_q, _ = out.shape
        out = out.transpose(1, 2).reshape(batch, n_q, self.h * self.d_k)  # merge the heads
        return self.w_o(out)


def store_attention(module: nn.Module, enabled: bool = True) -> nn.Module:
    """Switch weight storage on (or off) for every :class:`MultiHeadAttention` in ``module``.

    While it is on, each attention layer runs the math path and keeps its last weights in
    ``attn_weights`` ``(B, h, n_q, n_k)``, ready to plot::

        store_attention(model)
        model(src, tgt_in, src_mask, tgt_mask)
        weights = model.decoder.layers[0].cross_attn.attn_weights

    Switching it off also drops the stored weights. Returns ``module`` for chaining.
    """
    for layer in module.modules():
        if isinstance(layer, MultiHeadAttention):
            layer.store_attention = enabled
            if not enabled:
                layer.attn_weights = None
    return module
