"""The full encoder-decoder: embeddings, encoder, decoder and generator, put together.

Conventions (shapes, masks): see :mod:`transformer_ref.modules`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import Tensor, nn

if TYPE_CHECKING:
    # Only for the annotations: importing them would load reference classes that a model
    # assembled from a learner's own parts does not need.
    from transformer_ref.model.decoder import Decoder
    from transformer_ref.model.embeddings import Embeddings
    from transformer_ref.model.encoder import Encoder
    from transformer_ref.model.generator import Generator
    from transformer_ref.model.learned_positional import LearnedPositionalEncoding
    from transformer_ref.model.positional import PositionalEncoding


class EncoderDecoder(nn.Module):
    """The full translation model: embeddings, encoder, decoder and generator.

    ``config`` holds the :func:`make_model` arguments (and ``positions`` for a model with
    learned positions), so ``build_model(**model.config)`` rebuilds the same architecture (for
    example to load a saved ``state_dict``).
    """

    def __init__(
        self,
        encoder: Encoder,
        decoder: Decoder,
        src_embed: Embeddings,
        tgt_embed: Embeddings,
        pos_encoding: PositionalEncoding | LearnedPositionalEncoding,
        generator: Generator,
        config: dict | None = None,
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.src_embed = src_embed
        self.tgt_embed = tgt_embed
        self.pos_encoding = pos_encoding  # one module, used for both sides
        self.generator = generator
        self.config = dict(config or {})

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        """Long ``(B, S)``, bool ``(B, 1, 1, S)`` -> memory ``(B, S, d_model)``."""
        return self.encoder(self.pos_encoding(self.src_embed(src)), src_mask)

    def decode(self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
        """Long ``(B, T)``, ``(B, S, d_model)``, bool masks -> hidden states ``(B, T, d_model)``."""
        return self.decoder(self.pos_encoding(self.tgt_embed(tgt_in)), memory, src_mask, tgt_mask)

    def forward(self, src: Tensor, tgt_in: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
        """Teacher-forced pass: returns logits ``(B, T, tgt_vocab)``."""
        memory = self.encode(src, src_mask)
        return self.generator(self.decode(tgt_in, memory, src_mask, tgt_mask))
