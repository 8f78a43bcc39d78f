"""A decoder-only language model (GPT): token embeddings, learned positions, a stack of
:class:`~transformer_ref.model.lm_block.DecoderOnlyBlock`, a final LayerNorm and the generator.

It reads a batch of token ids and returns, at every position, the logits of the token that
comes next. Trained with the next-token loss
(:func:`transformer_ref.training.lm_training.next_token_loss`) it learns the distribution of its
training text, and :func:`transformer_ref.generation.sampling.sample` draws new text from it.

Conventions (shapes): see :mod:`transformer_ref.modules`.
"""

from __future__ import annotations

from torch import Tensor, nn

from transformer_ref.model.embeddings import Embeddings
from transformer_ref.model.generator import Generator
from transformer_ref.model.learned_positional import LearnedPositionalEncoding
from transformer_ref.model.lm_block import DecoderOnlyBlock


def init_language_model(model: nn.Module, tie_weights: bool) -> None:
    """Xavier-uniform initialise every weight matrix of ``model``, as
    :func:`transformer_ref.model.make_model.make_model` does (vectors keep PyTorch's defaults),
    then, with ``tie_weights``, make the generator's matrix ``model.generator.proj.weight`` the
    embedding table ``model.embed.lut.weight`` ``(vocab, d_model)``."""
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    if tie_weights:
        model.generator.proj.weight = model.embed.lut.weight


class LanguageModel(nn.Module):
    """``logits = generator(norm(blocks(dropout(embed(ids) + pe))))``.

    Args:
        vocab: vocabulary size.
        N: number of blocks.
        d_model, d_ff, h: model width, feed-forward width, number of heads.
        dropout: on embeddings + positions and, in every block, on each sub-layer's output
            (and on the attention weights and the FFN's hidden layer, as the course's modules
            do).
        max_len: positions of the learned table: the longest context the model reads.
        tie_weights: the generator's weight matrix is the embedding table (GPT-2 ties them).

    Attributes:
        embed: :class:`~transformer_ref.model.embeddings.Embeddings` (``embed.lut``), scaled by
            ``sqrt(d_model)`` as in the paper.
        pos_encoding: :class:`~transformer_ref.model.learned_positional.LearnedPositionalEncoding`.
        layers: ``N`` blocks; norm: the final LayerNorm of the pre-LN stack;
        generator: the output projection ``generator.proj`` to raw logits.
        max_len: as above; config: the constructor's arguments, so that
            ``LanguageModel(**model.config)`` rebuilds the architecture.

    Initialised by :func:`init_language_model`.
    """

    def __init__(
        self,
        vocab: int,
        N: int = 6,
        d_model: int = 512,
        d_ff: int = 2048,
        h: int = 8,
        dropout: float = 0.1,
        max_len: int = 256,
        tie_weights: bool = True,
    ) -> None:
        super().__init__()
        self.embed = Embeddings(vocab, d_model)
        self.pos_encoding = LearnedPositionalEncoding(d_model, dropout, max_len)
        self.layers = nn.ModuleList(DecoderOnlyBlock(d_model, h, d_ff, dropout) for _ in range(N))
        self.norm = nn.LayerNorm(d_model)
        self.generator = Generator(d_model, vocab)
        self.max_len = max_len
        self.config = dict(vocab=vocab, N=N, d_model=d_model, d_ff=d_ff, h=h, dropout=dropout,
                           max_len=max_len, tie_weights=tie_weights)
        init_language_model(self, tie_weights)

    def forward(self, ids: Tensor) -> Tensor:
        """Long ``(B, T)`` with ``T <= max_len`` -> logits ``(B, T, vocab)``: row ``t`` scores
        the token that follows ``ids[:, : t + 1]``."""
        x = self.pos_encoding(self.embed(ids))
        for layer in self.layers:
            x = layer(x)
        return self.generator(self.norm(x))
