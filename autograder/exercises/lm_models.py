"""What the chapter 11 checks hand to a learner's code: for ``sample``, a language model whose
next-token logits come from a table and a seeded random generator; for ``KeyValueCache``, the
parts of a language model (see ``builders`` of :class:`autograder.exercises.registry.Exercise`).

The learner's code runs in its own process (in a class, its own kernel), so these are built
there too, from the settings the grader sends (their ``grading_recipe``). This module is
therefore loaded by that process as well, and is part of a class's view while chapter 11 is
open: it imports only torch at the top, and nothing here computes a language model's forward
pass, which is the answer to an exercise of that chapter.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn


class TableLM:
    """A bigram language model: the logits after a sequence are the row of ``table`` of its
    last token, at every position. So the check knows each next-token distribution exactly.

    Like a real model it reads Long ``(B, t)`` ids and returns float64 logits ``(B, t, V)``,
    and it reads at most ``max_len`` tokens: a longer input raises ``ValueError`` (a sampler
    must crop its context to the last ``max_len`` tokens). It is a plain object (not an
    ``nn.Module``) that compares equal to a copy with the same table, with the parts of the
    module interface a sampler may touch (``eval``, ``parameters`` for the device, ``config``).

    Args:
        table: ``(V, V)`` logits; row ``i`` scores the token after token ``i``.
        max_len: the longest context it reads.
    """

    def __init__(self, table: Tensor, max_len: int) -> None:
        self.table = torch.as_tensor(table, dtype=torch.float64)
        self.max_len = int(max_len)
        self.config = {"vocab": self.table.size(0), "max_len": self.max_len}
        self.weight = torch.zeros(1, dtype=torch.float64)  # for code that asks for a device

    def grading_recipe(self) -> dict[str, Any]:
        """How the learner's process builds this model (see :mod:`autograder.sandbox.wire`)."""
        return {"builder": f"{__name__}:TableLM", "args": (),
                "kwargs": {"table": self.table, "max_len": self.max_len},
                "state": {}, "dtype": None, "training": False}

    def __call__(self, ids: Tensor) -> Tensor:
        if not isinstance(ids, Tensor) or ids.dim() != 2 or ids.dtype.is_floating_point:
            raise TypeError(f"the model takes a Long tensor of ids (batch, length), got "
                            f"{type(ids).__name__} {tuple(getattr(ids, 'shape', ()))}")
        if ids.size(1) > self.max_len:
            raise ValueError(f"the model reads at most max_len={self.max_len} tokens, got "
                             f"{ids.size(1)}: crop the context to its last model.max_len "
                             f"tokens, ids[:, -model.max_len:]")
        return self.table[ids]

    forward = __call__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TableLM):
            return NotImplemented
        return self.max_len == other.max_len and torch.equal(self.table, other.table)

    __hash__ = None  # equal copies

    def __repr__(self) -> str:
        return f"<bigram model, vocab {self.table.size(0)}, max_len {self.max_len}>"

    def eval(self) -> TableLM:
        return self

    def train(self, mode: bool = True) -> TableLM:
        return self

    def to(self, *args: Any, **kwargs: Any) -> TableLM:
        return self

    def parameters(self) -> Any:
        return iter([self.weight])


class SeededGenerator(torch.Generator):
    """A CPU ``torch.Generator`` seeded with ``seed``, which the learner's process rebuilds
    from its seed: the check's and the learner's draws then start from the same state."""

    def __new__(cls, seed: int) -> SeededGenerator:
        return super().__new__(cls, "cpu")

    def __init__(self, seed: int) -> None:
        self.manual_seed(int(seed))
        self.seed_value = int(seed)

    def grading_recipe(self) -> dict[str, Any]:
        """How the learner's process builds it (see :mod:`autograder.sandbox.wire`)."""
        return {"builder": f"{__name__}:SeededGenerator", "args": (self.seed_value,),
                "kwargs": {}, "state": {}, "dtype": None, "training": False}

    def train(self, mode: bool = True) -> SeededGenerator:
        """Nothing to do: the learner's process calls it on everything it builds."""
        return self

    def __deepcopy__(self, memo: dict) -> SeededGenerator:
        copy = SeededGenerator(self.seed_value)
        copy.set_state(self.get_state())
        return copy

    def __eq__(self, other: object) -> bool:
        """Equal when seeded alike and in the same state (the same draws follow)."""
        if not isinstance(other, SeededGenerator):
            return NotImplemented
        return self.seed_value == other.seed_value and torch.equal(self.get_state(),
                                                                   other.get_state())

    __hash__ = None  # equal copies, mutable state

    def __repr__(self) -> str:
        return f"<torch.Generator seeded with {self.seed_value}>"


class PartsOnlyLanguageModel(nn.Module):
    """The parts of chapter 11's ``LanguageModel`` under the exercise's names, without its
    forward pass: what the key/value cache check builds in the learner's process (its
    ``grading_recipe`` is that of the grader's model, whose weights it loads).

    ``embed``, ``pos_encoding`` (learned positions), ``layers`` (``N`` pre-LN blocks with
    ``self_attn``, ``feed_forward``, ``norm1``, ``norm2`` and ``dropout``: chapter 7's encoder
    layer, which with a causal mask computes a decoder-only block), ``norm``, ``generator``
    (tied to ``embed`` if ``tie_weights``), ``max_len`` and ``config``. A cache computes the
    logits from these parts; calling the model itself raises ``TypeError``.
    """

    def __init__(self, vocab: int, N: int, d_model: int, d_ff: int, h: int, dropout: float,
                 max_len: int, tie_weights: bool) -> None:
        from transformer_ref.model.embeddings import Embeddings
        from transformer_ref.model.encoder_layer import EncoderLayer
        from transformer_ref.model.generator import Generator
        from transformer_ref.model.learned_positional import LearnedPositionalEncoding

        super().__init__()
        self.embed = Embeddings(vocab, d_model)
        self.pos_encoding = LearnedPositionalEncoding(d_model, dropout, max_len)
        self.layers = nn.ModuleList(EncoderLayer(d_model, h, d_ff, dropout, norm_first=True)
                                    for _ in range(N))
        self.norm = nn.LayerNorm(d_model)
        self.generator = Generator(d_model, vocab)
        self.max_len = max_len
        self.config = dict(vocab=vocab, N=N, d_model=d_model, d_ff=d_ff, h=h, dropout=dropout,
                           max_len=max_len, tie_weights=tie_weights)
        if tie_weights:
            self.generator.proj.weight = self.embed.lut.weight

    def forward(self, ids: Tensor) -> Tensor:
        raise TypeError("the key/value cache check gives your KeyValueCache the parts of a "
                        "language model, not its forward pass: compute the logits from "
                        "model.embed, model.pos_encoding, model.layers, model.norm and "
                        "model.generator, as the exercise describes")
