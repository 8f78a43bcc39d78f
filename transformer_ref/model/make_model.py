"""make_model: build the encoder-decoder Transformer of the paper, or a smaller one.

Conventions (shapes, masks): see :mod:`transformer_ref.modules`.
"""

from __future__ import annotations

from torch import nn

from transformer_ref.model.decoder import Decoder
from transformer_ref.model.embeddings import Embeddings
from transformer_ref.model.encoder import Encoder
from transformer_ref.model.encoder_decoder import EncoderDecoder
from transformer_ref.model.generator import Generator
from transformer_ref.model.positional import PositionalEncoding


def make_model(  # noqa: PLR0913 - chapter 8's graded signature
    src_vocab: int, tgt_vocab: int, N: int = 6, d_model: int = 512, d_ff: int = 2048,
    h: int = 8, dropout: float = 0.1, *, norm_first: bool = False,
    share_embeddings: bool = False, tie_weights: bool = False, max_len: int = 5000,
    fast_attention: bool = True,
) -> EncoderDecoder:
    """Build an encoder-decoder Transformer (defaults: the paper's base model).

    Args:
        src_vocab, tgt_vocab: vocabulary sizes.
        N: number of encoder layers and of decoder layers.
        d_model, d_ff, h: model width, feed-forward width, number of heads.
        dropout: dropout probability everywhere (sub-layer outputs, embeddings + positions,
            attention weights, feed-forward hidden layer).
        norm_first: pre-LN instead of the paper's post-LN residual connections.
        share_embeddings: one embedding table for source and target (needs equal vocabularies,
            e.g. a joint BPE vocabulary).
        tie_weights: the generator's weight matrix is the target embedding table.
        max_len: longest sequence the positional encoding covers.
        fast_attention: use the fused attention kernel (same results as the math path).

    Returns:
        An :class:`EncoderDecoder` whose weight matrices are Xavier-uniform initialised
        (biases and LayerNorm keep PyTorch's defaults).
    """
    if share_embeddings and src_vocab != tgt_vocab:
        raise ValueError(
            f"make_model: share_embeddings=True needs src_vocab == tgt_vocab, got "
            f"{src_vocab} and {tgt_vocab}; use a joint vocabulary or share_embeddings=False"
        )
    config = dict(
        src_vocab=src_vocab, tgt_vocab=tgt_vocab, N=N, d_model=d_model, d_ff=d_ff, h=h,
        dropout=dropout, norm_first=norm_first, share_embeddings=share_embeddings,
        tie_weights=tie_weights, max_len=max_len, fast_attention=fast_attention,
    )
    layer_args = (d_model, h, d_ff, dropout, norm_first, fast_attention)
    tgt_embed = Embeddings(tgt_vocab, d_model)
    model = EncoderDecoder(
        encoder=Encoder(N, *layer_args),
        decoder=Decoder(N, *layer_args),
        src_embed=tgt_embed if share_embeddings else Embeddings(src_vocab, d_model),
        tgt_embed=tgt_embed,
        pos_encoding=PositionalEncoding(d_model, dropout, max_len),
        generator=Generator(d_model, tgt_vocab),
        config=config,
    )
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    if tie_weights:
        model.generator.proj.weight = model.tgt_embed.lut.weight
    return model
