"""Attention in NumPy: softmax, masks, scaled dot-product attention, one head, many heads.

Conventions used throughout:

* batch first, with any number of leading batch dimensions ``...``;
* a query sequence of length ``n_q`` attends to a key/value sequence of length ``n_k``;
* masks are boolean (or 0/1) with **True = may attend**, broadcastable to ``(..., n_q, n_k)``;
* projections are right multiplications without bias, ``q = x @ W_q``;
* floating inputs keep their dtype (float32 in, float32 out); integers become float64.

This module gathers them in one place to import from, loading each only when it is used (why:
:mod:`transformer_ref.lazy`).
"""

from transformer_ref.lazy import lend

__getattr__, __dir__, __all__ = lend(__name__, {
    "transformer_ref.numpy.scaled_attention": (
        "softmax", "causal_mask", "padding_mask", "scaled_dot_product_attention"),
    "transformer_ref.numpy.attention_head": ("attention_head",),
    "transformer_ref.numpy.heads": ("split_heads", "merge_heads", "multi_head_attention"),
})
