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

from transformer_ref.model import make_model


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
