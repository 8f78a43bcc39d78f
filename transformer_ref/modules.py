"""The encoder-decoder Transformer of "Attention Is All You Need" as PyTorch modules.

The modules mirror the NumPy chapters one to one: attention, multi-head attention, the
position-wise feed-forward network, residual connections with layer normalisation, encoder
and decoder layers, embeddings with the sinusoidal positional encoding, and the generator.

Shapes used throughout (batch first):

* ``B`` batch size, ``S`` source length, ``T`` target length;
* ``d_model`` model width, ``h`` number of heads, ``d_k = d_model // h`` width of one head;
* masks are boolean, ``True`` = may attend (see :mod:`transformer_ref.masks`): the source mask
  is ``(B, 1, 1, S)``, the target mask ``(B, 1, T, T)``.

Two ways of computing attention are provided:

* :func:`attention` spells out ``softmax(Q K^T / sqrt(d_k)) V`` and returns the weights, so it
  is the one to read and the one used when attention maps are stored for plotting;
* :func:`fused_attention` calls :func:`torch.nn.functional.scaled_dot_product_attention`,
  which gives the same numbers faster and with less memory (it never returns the weights).

Example::

    >>> from transformer_ref.masks import make_src_mask, make_tgt_mask
    >>> model = make_model(src_vocab=100, tgt_vocab=100, N=2, d_model=64, d_ff=128, h=4)
    >>> src, tgt_in = torch.randint(4, 100, (2, 7)), torch.randint(4, 100, (2, 5))
    >>> logits = model(src, tgt_in, make_src_mask(src), make_tgt_mask(tgt_in))
    >>> logits.shape
    torch.Size([2, 5, 100])

This module gathers them in one place to import from, loading each only when it is used (why:
:mod:`transformer_ref.lazy`).
"""

from transformer_ref.lazy import lend

__getattr__, __dir__, __all__ = lend(__name__, {
    "transformer_ref.model.attention": (
        "attention", "fused_attention", "MultiHeadAttention", "store_attention"),
    "transformer_ref.model.sublayers": ("PositionwiseFeedForward", "residual"),
    "transformer_ref.model.positional": ("PositionalEncoding",),
    "transformer_ref.model.encoder_layer": ("EncoderLayer",),
    "transformer_ref.model.encoder": ("Encoder",),
    "transformer_ref.model.decoder_layer": ("DecoderLayer",),
    "transformer_ref.model.decoder": ("Decoder",),
    "transformer_ref.model.embeddings": ("Embeddings",),
    "transformer_ref.model.generator": ("Generator",),
    "transformer_ref.model.encoder_decoder": ("EncoderDecoder",),
    "transformer_ref.model.make_model": ("make_model",),
})
