"""A key/value cache for a decoder-only language model: each step runs the newest token only.

Without a cache, generating token ``t + 1`` runs the whole model over all ``t`` tokens again,
although the keys and values of positions ``0 .. t - 1`` never change once computed (the causal
mask hides every later position from them). :class:`KeyValueCache` keeps, for every block,
the keys and values of the positions fed so far; a call feeds only new tokens, which take the
positions after those in the cache, attend to the cached keys and values and to each other
(causally), and extend the cache. Generation then costs ``O(t)`` per token instead of
``O(t^2)``, and the outputs are those of the model run on the whole sequence.

Conventions (shapes): see :mod:`transformer_ref.modules`; the model is a
:class:`~transformer_ref.model.language_model.LanguageModel` (or has its sub-modules).
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_ref.model.sublayers import residual


class KeyValueCache:
    """The keys and values that ``model``'s blocks computed for the positions fed so far.

    Args:
        model: a language model in eval mode, with ``embed``, ``pos_encoding`` (learned
            positions with a ``start`` offset), ``layers`` (each with ``self_attn``,
            ``feed_forward``, ``norm1``, ``norm2``, ``dropout``), ``norm``, ``generator`` and
            ``max_len``.

    Attributes:
        keys, values: per block, ``(B, h, length, d_k)`` (None before the first call).
        length: positions in the cache.
    """

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.keys: list[Tensor | None] = [None] * len(model.layers)
        self.values: list[Tensor | None] = [None] * len(model.layers)
        self.length = 0

    def __call__(self, ids: Tensor) -> Tensor:
        """Feed the next tokens of every sequence and return their logits.

        Args:
            ids: Long ``(B, t)``, ``t >= 1``: the tokens that follow those in the cache (the
                whole prompt on the first call, then one token per step); they take positions
                ``length .. length + t - 1``.

        Returns:
            Logits ``(B, t, V)``, equal to those the model gives at these positions when run
            on the whole sequence.

        Raises:
            ValueError: the positions would pass ``model.max_len``, or the batch size is not
                the cache's.
        """
        model, start, t = self.model, self.length, ids.size(1)
        if start + t > model.max_len:
            raise ValueError(f"KeyValueCache: positions up to {start + t} are needed but the "
                             f"model reads at most max_len={model.max_len}")
        if self.keys[0] is not None and self.keys[0].size(0) != ids.size(0):
            raise ValueError(f"KeyValueCache: the cache holds {self.keys[0].size(0)} sequences, "
                             f"got a batch of {ids.size(0)}; reorder the cache first")
        x = model.pos_encoding(model.embed(ids), start=start)
        # New query i (position start + i) sees every cached key and the new keys up to it.
        mask = torch.ones(t, start + t, dtype=torch.bool, device=ids.device).tril(start)
        for i, layer in enumerate(model.layers):
            attend = functools.partial(self._attend, i, layer.self_attn, mask)
            x = residual(x, attend, layer.norm1, layer.dropout, True)
            x = residual(x, layer.feed_forward, layer.norm2, layer.dropout, True)
        self.length = start + t
        return model.generator(model.norm(x))

    def _attend(self, i: int, attn: nn.Module, mask: Tensor, y: Tensor) -> Tensor:
        """Block ``i``'s self-attention for the new positions ``y`` ``(B, t, d_model)``,
        with their keys and values appended to the cache."""
        batch, t, _ = y.shape

        def heads(z: Tensor) -> Tensor:  # (B, t, d_model) -> (B, h, t, d_k)
            return z.view(batch, t, attn.h, attn.d_k).transpose(1, 2)

        q, k, v = heads(attn.w_q(y)), heads(attn.w_k(y)), heads(attn.w_v(y))
        if self.keys[i] is not None:
            k = torch.cat([self.keys[i], k], dim=2)
            v = torch.cat([self.values[i], v], dim=2)
        self.keys[i], self.values[i] = k, v
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, h, t, d_k)
        return attn.w_o(out.transpose(1, 2).reshape(batch, t, attn.h * attn.d_k))

    def reorder(self, rows: Tensor) -> None:
        """Row ``r`` of the cache becomes old row ``rows[r]`` (Long ``(B',)``): the cache
        follows sequences that are reordered, copied (beams) or dropped."""
        self.keys = [None if k is None else k.index_select(0, rows) for k in self.keys]
        self.values = [None if v is None else v.index_select(0, rows) for v in self.values]
