"""Two parts the tutorial-style implementations (:mod:`autograder.tutorial_style.implementations`)
build on, shared with the sample class's mutants: the Annotated Transformer's layer norm and a
decoder-only model's parts under the course's names.

Copy detection does not count this module as the course's code (it is not in
:data:`autograder.tutorial_style.COPY_SOURCES`): the mutants that subclass or use these parts
stand for learners' own work, and a learner's cell that holds one of them is not a copy.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from transformer_ref.model.embeddings import Embeddings
from transformer_ref.model.generator import Generator
from transformer_ref.model.learned_positional import LearnedPositionalEncoding
from transformer_ref.model.lm_block import DecoderOnlyBlock


class StdLayerNorm(nn.Module):
    """Layer norm as (x - mean) / (std + eps), with nn.LayerNorm's parameter names."""

    def __init__(self, d_model: int, eps: float = 1e-6, unbiased: bool = True) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
        self.eps, self.unbiased = eps, unbiased

    def forward(self, x: Tensor) -> Tensor:
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True, unbiased=self.unbiased)
        return self.weight * (x - mean) / (std + self.eps) + self.bias


class LanguageModelParts(nn.Module):
    """The model's parts under the course's names; subclasses write ``forward``."""

    def __init__(self, vocab: int, N: int = 6, d_model: int = 512, d_ff: int = 2048,
                 h: int = 8, dropout: float = 0.1, max_len: int = 256,
                 tie_weights: bool = True) -> None:
        super().__init__()
        self.embed = Embeddings(vocab, d_model)
        self.pos_encoding = LearnedPositionalEncoding(d_model, dropout, max_len)
        self.layers = nn.ModuleList(DecoderOnlyBlock(d_model, h, d_ff, dropout)
                                    for _ in range(N))
        self.norm = nn.LayerNorm(d_model)
        self.generator = Generator(d_model, vocab)
        self.max_len = max_len
        if tie_weights:
            self.generator.proj.weight = self.embed.lut.weight

    def blocks(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return x

    def forward(self, ids: Tensor) -> Tensor:
        return self.generator(self.norm(self.blocks(self.pos_encoding(self.embed(ids)))))

