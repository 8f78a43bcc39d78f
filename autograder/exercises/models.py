"""Models that the checks hand to a learner's decoding function (see ``builders`` of
:class:`autograder.exercises.registry.Exercise`).

The learner's code runs in its own process, so such a model is built there too, from the
settings and weights the grader sends (each model's ``grading_recipe``). This module is
therefore loaded by that process as well: it imports only torch and the course's model.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from transformer_ref.model.make_model import make_model


class ScriptedModel:
    """A model for checking decoders: a random Transformer with scripted sentence ends.

    ``encode``, ``decode`` and ``generator`` run a small float64 :class:`EncoderDecoder`
    (``inner``) and add two pieces of bookkeeping that the caller passes along without
    noticing: the memory carries the number of real source tokens seen by ``encode``, the
    hidden states carry the position and the step at which the sentence ends. The generator
    then scripts ``eos_id``: a sentence whose source has ``n`` real tokens ends after
    ``stops[n]`` tokens (one length never ends within ``max_len``), padding and ``bos_id``
    are never produced, and after
    its end a sentence continues with ordinary tokens. Passing no source mask or a different
    one to ``encode`` and ``decode``, or starting without ``bos_id``, ends every affected
    sentence at once.

    It is a plain object (not an ``nn.Module``) that compares equal to a copy with the same
    settings and weights, so that the hidden checks' inputs can be compared. The grader builds
    it with random weights; the learner's process gets the same model from
    :meth:`grading_recipe` (its settings and weights).

    Args:
        vocab: vocabulary size; h: heads of the inner model (``d_model = 4 * h``).
        stops: ``stops[n]`` is the number of tokens before EOS of a sentence whose source has
            ``n`` real tokens.
        bos_id, eos_id: the start and end tokens.
    """

    def __init__(self, vocab: int, h: int, stops: list[int], bos_id: int, eos_id: int) -> None:
        d_model = 4 * h
        with torch.random.fork_rng(devices=[]):
            self.inner = make_model(vocab, vocab, N=2, d_model=d_model, d_ff=2 * d_model, h=h,
                                    dropout=0.0, max_len=64, fast_attention=False)
        self.inner.double().eval()
        self.vocab, self.h, self.d_model = vocab, h, d_model
        self.bos_id, self.eos_id = bos_id, eos_id
        self.stops = [int(s) for s in stops]
        self.config = dict(self.inner.config)

    def grading_recipe(self) -> dict[str, Any]:
        """How the learner's process builds this model (see :mod:`autograder.sandbox.wire`)."""
        return {"builder": f"{__name__}:ScriptedModel", "args": (),
                "kwargs": {"vocab": self.vocab, "h": self.h, "stops": self.stops,
                           "bos_id": self.bos_id, "eos_id": self.eos_id},
                "state": self.inner.state_dict(), "dtype": torch.float64, "training": False}

    def load_state_dict(self, state: dict[str, Tensor]) -> Any:
        return self.inner.load_state_dict(state)

    def to(self, *args: Any, **kwargs: Any) -> ScriptedModel:
        self.inner.to(*args, **kwargs)
        return self

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ScriptedModel):
            return NotImplemented
        mine, theirs = self.inner.state_dict(), other.inner.state_dict()
        return ((self.stops, self.bos_id, self.eos_id, self.config)
                == (other.stops, other.bos_id, other.eos_id, other.config)
                and mine.keys() == theirs.keys()
                and all(torch.equal(mine[k], theirs[k]) for k in mine))

    __hash__ = None  # equal copies, mutable state

    # The parts of the nn.Module interface a decoder may reasonably touch.
    def eval(self) -> ScriptedModel:
        return self

    def train(self, mode: bool = True) -> ScriptedModel:
        return self

    def parameters(self) -> Any:
        return self.inner.parameters()

    @staticmethod
    def _real_tokens(src_mask: Tensor | None, batch: int, length: int) -> Tensor:
        if src_mask is None:
            return torch.full((batch,), float(length), dtype=torch.float64)
        return src_mask.reshape(batch, -1).sum(-1).to(torch.float64)

    def encode(self, src: Tensor, src_mask: Tensor | None) -> Tensor:
        """Long ``(B, S)`` -> ``(B, S, d_model + 1)``; the last feature counts real tokens."""
        memory = self.inner.encode(src, src_mask)
        seen = self._real_tokens(src_mask, *src.shape)
        return torch_cat_feature(memory, seen[:, None].expand(-1, src.size(1)))

    def decode(self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor | None,
               tgt_mask: Tensor | None) -> Tensor:
        """``(B, T)`` decoder input -> ``(B, T, d_model + 2)`` hidden states."""
        batch, length = tgt_in.shape
        hidden = self.inner.decode(tgt_in, memory[..., :-1], src_mask, tgt_mask)
        seen_encode = memory[:, 0, -1]
        seen_decode = self._real_tokens(src_mask, batch, memory.size(1))
        stops = torch.tensor(self.stops, dtype=torch.float64)
        n = seen_decode.long().clamp(0, len(self.stops) - 1)
        stop = torch.where((seen_encode == seen_decode) & (tgt_in[:, 0] == self.bos_id),
                           stops[n], torch.zeros_like(stops[n]))
        position = torch.arange(length, dtype=torch.float64)
        hidden = torch_cat_feature(hidden, position[None].expand(batch, -1))
        return torch_cat_feature(hidden, stop[:, None].expand(-1, length))

    def generator(self, hidden: Tensor) -> Tensor:
        """``(..., d_model + 2)`` -> logits ``(..., V)`` with the scripted ends."""
        logits = self.inner.generator(hidden[..., : self.d_model])
        position, stop = hidden[..., self.d_model], hidden[..., self.d_model + 1]
        low, high = logits.amin(-1) - 10.0, logits.amax(-1) + 10.0
        logits = logits.clone()
        logits[..., 0] = low
        logits[..., self.bos_id] = low
        logits[..., self.eos_id] = torch.where(position == stop, high, low)
        return logits

    def __call__(self, src: Tensor, tgt_in: Tensor, src_mask: Tensor | None,
                 tgt_mask: Tensor | None) -> Tensor:
        memory = self.encode(src, src_mask)
        return self.generator(self.decode(tgt_in, memory, src_mask, tgt_mask))

    forward = __call__


def torch_cat_feature(x: Tensor, feature: Tensor) -> Tensor:
    """``(..., d)`` and ``(...)`` -> ``(..., d + 1)``: ``feature`` as one more last entry."""
    import torch

    return torch.cat([x, feature[..., None].to(x.dtype)], dim=-1)


# Log-probability of a token a table model never offers (padding, BOS): finite, so that a
# learner's arithmetic never meets inf - inf, and far below anything that can win.
NEVER = -1.0e4
# Probability that a prefix the table does not list goes on instead of ending.
UNLISTED_GOES_ON = 1.0e-6


class TableModel:
    """A model for checking beam search: its next-token log-probabilities come from a table.

    ``entries`` holds rows ``[sentence, prefix, token, log_prob]``: after the generated ids
    ``prefix`` (without BOS) of the sentence whose source starts with the id ``sentence``,
    ``token`` has log-probability ``log_prob``. The probability the listed tokens leave is
    shared evenly by the other ordinary tokens (the "fillers": not padding 0, BOS or EOS); a
    prefix the table does not list ends: EOS gets all but :data:`UNLISTED_GOES_ON`. So beam
    search on it follows a designed tree whose scores the checks know.

    ``encode``, ``decode`` and ``generator`` carry what the table needs: the memory holds the
    sentence id, the hidden states the position and the prefix. A decoder input that does not
    start with ``bos_id`` reaches only unlisted prefixes. Like :class:`ScriptedModel` it is a
    plain object that compares equal to a copy with the same settings, and the learner's
    process builds it from :meth:`grading_recipe`.
    """

    def __init__(self, vocab: int, entries: list[list[Any]], bos_id: int, eos_id: int) -> None:
        self.vocab, self.bos_id, self.eos_id = vocab, bos_id, eos_id
        self.entries = [[int(s), [int(t) for t in p], int(tok), float(lp)]
                        for s, p, tok, lp in entries]
        self.rows: dict[tuple[int, tuple[int, ...]], Tensor] = {}
        listed: dict[tuple[int, tuple[int, ...]], dict[int, float]] = {}
        for sentence, prefix, token, log_prob in self.entries:
            listed.setdefault((sentence, tuple(prefix)), {})[token] = log_prob
        for key, tokens in listed.items():
            self.rows[key] = self._row(tokens)
        self.unlisted = self._row({eos_id: float(torch.log1p(torch.tensor(-UNLISTED_GOES_ON)))})
        self.weight = torch.zeros(1, dtype=torch.float64)  # for code that asks for a device

    def _row(self, tokens: dict[int, float]) -> Tensor:
        """Log-probabilities over the vocabulary: ``tokens`` and the fillers' equal shares."""
        row = torch.full((self.vocab,), NEVER, dtype=torch.float64)
        fillers = [t for t in range(self.vocab)
                   if t not in (0, self.bos_id, self.eos_id) and t not in tokens]
        left = 1.0 - sum(float(torch.tensor(lp).exp()) for lp in tokens.values())
        if left <= 0.0 or not fillers:
            raise ValueError(f"the listed probabilities {tokens} leave nothing for the fillers")
        row[fillers] = float(torch.tensor(left / len(fillers)).log())
        for token, log_prob in tokens.items():
            row[token] = log_prob
        return row

    def grading_recipe(self) -> dict[str, Any]:
        """How the learner's process builds this model (see :mod:`autograder.sandbox.wire`)."""
        return {"builder": f"{__name__}:TableModel", "args": (),
                "kwargs": {"vocab": self.vocab, "entries": self.entries, "bos_id": self.bos_id,
                           "eos_id": self.eos_id},
                "state": {}, "dtype": torch.float64, "training": False}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        """Nothing to load: the table is the model."""

    def to(self, *args: Any, **kwargs: Any) -> TableModel:
        return self

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TableModel):
            return NotImplemented
        return ((self.vocab, self.entries, self.bos_id, self.eos_id)
                == (other.vocab, other.entries, other.bos_id, other.eos_id))

    __hash__ = None  # equal copies

    def __repr__(self) -> str:
        return f"<table model, vocab {self.vocab}>"

    def eval(self) -> TableModel:
        return self

    def train(self, mode: bool = True) -> TableModel:
        return self

    def parameters(self) -> Any:
        return iter([self.weight])

    def encode(self, src: Tensor, src_mask: Tensor | None) -> Tensor:
        """Long ``(B, S)`` -> ``(B, S, 1)``: the sentence id (the first source token)."""
        return src[:, :1, None].to(torch.float64).expand(-1, src.size(1), 1)

    def decode(self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor | None,
               tgt_mask: Tensor | None) -> Tensor:
        """``(B, T)`` -> ``(B, T, 2 + T)``: sentence id, position, then the generated ids so
        far (-1 beyond the position; sentence -1 without a leading BOS)."""
        batch, length = tgt_in.shape
        sentence = torch.where(tgt_in[:, 0] == self.bos_id, memory[:, 0, 0],
                               torch.full_like(memory[:, 0, 0], -1.0))
        position = torch.arange(length, dtype=torch.float64)
        generated = tgt_in[:, 1:].to(torch.float64)  # (B, T - 1)
        shown = torch.arange(length - 1)[None, :] < torch.arange(length)[:, None]  # (T, T-1)
        prefixes = torch.where(shown[None], generated[:, None, :], -1.0)
        return torch.cat([sentence[:, None, None].expand(-1, length, 1),
                          position[None, :, None].expand(batch, -1, 1), prefixes], dim=-1)

    def generator(self, hidden: Tensor) -> Tensor:
        """``(..., 2 + T)`` hidden states -> ``(..., V)`` log-probabilities from the table."""
        flat = hidden.reshape(-1, hidden.size(-1)).tolist()
        rows = []
        for sentence, position, *prefix in flat:
            key = (int(sentence), tuple(int(t) for t in prefix[: int(position)]))
            rows.append(self.rows.get(key, self.unlisted))
        return torch.stack(rows).reshape(*hidden.shape[:-1], self.vocab)

    def __call__(self, src: Tensor, tgt_in: Tensor, src_mask: Tensor | None,
                 tgt_mask: Tensor | None) -> Tensor:
        return self.generator(self.decode(tgt_in, self.encode(src, src_mask), src_mask,
                                          tgt_mask))

    forward = __call__
