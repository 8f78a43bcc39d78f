"""Layer normalisation, the feed-forward network and the Transformer encoder, in NumPy.

The encoder follows the original paper (Vaswani et al., 2017, section 3.1), which normalises
*after* each residual connection ("post-LN")::

    x = LayerNorm(x + MultiHeadAttention(x, x, x))
    x = LayerNorm(x + FeedForward(x))

Floating inputs keep their dtype (float32 in, float32 out); integers become float64.

This module gathers them in one place to import from. Each part lives in a module of its own
(named below), so that the grader can give a learner's code the building blocks of earlier
exercises without the reference answer of the exercise being graded.
"""

from transformer_ref.np_encoder import ENCODER_BLOCK_KEYS, encoder, encoder_block
from transformer_ref.np_sublayers import add_and_norm, feed_forward, layer_norm

__all__ = [
    "ENCODER_BLOCK_KEYS", "encoder_block", "encoder", "layer_norm", "feed_forward",
    "add_and_norm",
]
