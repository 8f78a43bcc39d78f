"""Layer normalisation, the feed-forward network and the Transformer encoder, in NumPy.

The encoder follows the original paper (Vaswani et al., 2017, section 3.1), which normalises
*after* each residual connection ("post-LN")::

    x = LayerNorm(x + MultiHeadAttention(x, x, x))
    x = LayerNorm(x + FeedForward(x))

Floating inputs keep their dtype (float32 in, float32 out); integers become float64.

This module gathers them in one place to import from, loading each only when it is used (why:
:mod:`transformer_ref.lazy`).
"""

from transformer_ref.lazy import lend

__getattr__, __dir__, __all__ = lend(__name__, {
    "transformer_ref.numpy.sublayers": ("layer_norm", "feed_forward", "add_and_norm"),
    "transformer_ref.numpy.encoder": ("ENCODER_BLOCK_KEYS", "encoder_block", "encoder"),
})
