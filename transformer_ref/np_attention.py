"""Attention in NumPy: softmax, masks, scaled dot-product attention, one head, many heads.

Conventions used throughout:

* batch first, with any number of leading batch dimensions ``...``;
* a query sequence of length ``n_q`` attends to a key/value sequence of length ``n_k``;
* masks are boolean (or 0/1) with **True = may attend**, broadcastable to ``(..., n_q, n_k)``;
* projections are right multiplications without bias, ``q = x @ W_q``;
* floating inputs keep their dtype (float32 in, float32 out); integers become float64.

This module gathers them in one place to import from. Each part lives in a module of its own
(named below), so that the grader can give a learner's code the building blocks of earlier
exercises without the reference answer of the exercise being graded.
"""

from transformer_ref.np_attention_head import attention_head
from transformer_ref.np_heads import merge_heads, multi_head_attention, split_heads
from transformer_ref.np_scaled_attention import (
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
    softmax,
)

__all__ = [
    "attention_head", "split_heads", "merge_heads", "multi_head_attention", "softmax",
    "causal_mask", "padding_mask", "scaled_dot_product_attention",
]
