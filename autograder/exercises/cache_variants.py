"""A key/value cache with switches for the mistakes learners make, for the hints of the cache
check and for the chapter 11 mutants.

With every switch at its default, :class:`CacheVariant` is the course's cache
(:mod:`transformer_ref.generation.lm_cache`): new tokens take the positions after the cached ones,
their keys and values are appended to each block's cache, they attend causally among themselves, and
``reorder`` moves the cached rows. The switches break one rule each (see :data:`CACHE_BUGS`,
:class:`~autograder.exercises.beam_variants.Bug` each).

torch is imported inside the functions, so importing this module stays torch-free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from autograder.exercises.beam_variants import Bug

if TYPE_CHECKING:
    from torch import Tensor, nn


class CacheVariant:
    """A cache for ``model`` (a language model with the course's sub-module names).

    Args:
        positions: ``"continue"`` (right: after the cached ones) or ``"restart"`` (every call
            starts at position 0).
        store: ``"append"`` (right), ``"first"`` (only the first call's keys and values are ever
            kept) or ``"replace"`` (each call's keys and values replace the cache).
        causal: mask the new tokens causally among themselves (right) or not.
        reorder_rows: follow ``reorder`` (right) or ignore it.
    """

    def __init__(self, model: nn.Module, *, positions: str = "continue", store: str = "append",
                 causal: bool = True, reorder_rows: bool = True) -> None:
        self.model = model
        self.positions, self.store, self.causal = positions, store, causal
        self.reorder_rows = reorder_rows
        self.keys: list[Any] = [None] * len(model.layers)
        self.values: list[Any] = [None] * len(model.layers)
        self.length = 0

    def __call__(self, ids: Tensor) -> Tensor:
        import torch
        import torch.nn.functional as F

        model, t = self.model, ids.size(1)
        start = self.length if self.positions == "continue" else 0
        x = model.pos_encoding(model.embed(ids), start=start)
        cached = 0 if self.keys[0] is None else self.keys[0].size(2)
        mask = torch.ones(t, cached + t, dtype=torch.bool, device=ids.device)
        if self.causal:
            mask = mask.tril(cached)
        for i, layer in enumerate(model.layers):
            attn = layer.self_attn
            y = layer.norm1(x)
            batch = y.size(0)
            q, k, v = (z.view(batch, t, attn.h, attn.d_k).transpose(1, 2)
                       for z in (attn.w_q(y), attn.w_k(y), attn.w_v(y)))
            if self.keys[i] is not None:
                k = torch.cat([self.keys[i], k], dim=2)
                v = torch.cat([self.values[i], v], dim=2)
            first = self.keys[i] is None
            if self.store == "append" or (self.store == "first" and first):
                self.keys[i], self.values[i] = k, v
            elif self.store == "replace":
                self.keys[i], self.values[i] = k[:, :, -t:], v[:, :, -t:]
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            out = attn.w_o(out.transpose(1, 2).reshape(batch, t, attn.h * attn.d_k))
            x = x + layer.dropout(out)
            x = x + layer.dropout(layer.feed_forward(layer.norm2(x)))
        self.length += t
        return model.generator(model.norm(x))

    def reorder(self, rows: Tensor) -> None:
        if self.reorder_rows:
            self.keys = [None if k is None else k.index_select(0, rows) for k in self.keys]
            self.values = [None if v is None else v.index_select(0, rows) for v in self.values]


CACHE_BUGS = (
    Bug("positions restart at 0", {"positions": "restart"},
             "the new tokens took positions 0, 1, ... again: they follow the cached ones, so "
             "pass start=length to the positional encoding (model.pos_encoding(x, start=...)) "
             "and count the positions the cache holds."),
    Bug("cache not extended", {"store": "first"},
             "the keys and values of later calls never reach the cache: after computing them, "
             "store the concatenation of the cached and the new ones for the next call."),
    Bug("cache replaced", {"store": "replace"},
             "each call replaces the cached keys and values by those of its own tokens, so a "
             "token sees only itself and the tokens of its own call: append to the cache "
             "(torch.cat along the position axis) instead."),
    Bug("no causal mask among new tokens", {"causal": False},
             "new tokens fed together attend to each other in both directions: new token i "
             "may see every cached key and the new keys up to itself, a mask such as "
             "torch.ones(t, length + t).tril(length)."),
    Bug("reorder ignored", {"reorder_rows": False},
             "reorder(rows) left the cache as it was: row r of every block's keys and values "
             "must become old row rows[r] (index_select along the batch axis)."),
)
