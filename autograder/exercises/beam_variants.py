"""Beam search written out per sentence, with switches for the rules learners get wrong.

The hints of the beam-search check compare a learner's hypotheses with what each known bug
gives (:data:`BUGS`), and the chapter 10 mutants are these bugs. With every switch at its
default, :func:`beam_variant` follows the course's rules (see
:mod:`transformer_ref.generation.beam`):
every hypothesis proposes every next token, the ``beam_size`` candidates of a sentence with the
best normalised score ``log P / ((5 + length) / 6) ** alpha`` survive, a hypothesis that
emitted EOS keeps its score and length but stays in the beam, decoding stops once every
hypothesis has ended (or after ``max_len`` tokens), and the best normalised score wins.

torch is imported inside the functions, so importing this module stays torch-free.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from transformer_ref.data.vocab import BOS_ID, EOS_ID

if TYPE_CHECKING:
    from torch import Tensor, nn

# A hypothesis: generated ids (EOS included), summed log-probability, ended?
Hypothesis = tuple[list[int], float, bool]

PENALTIES: dict[str, Callable[[int, float], float]] = {
    "gnmt": lambda length, alpha: ((5.0 + length) / 6.0) ** alpha,
    "power": lambda length, alpha: max(length, 1) ** alpha,
    "none": lambda length, alpha: 1.0,
}


def _next_log_probs(model: Any, tokens: list[int], memory: Tensor, src_mask: Tensor,
                    bos_id: int) -> list[float]:
    """Log-probabilities of the token after ``tokens`` (one sentence)."""
    import torch

    from transformer_ref.masks import subsequent_mask

    ys = torch.tensor([[bos_id, *tokens]], dtype=torch.long)
    tgt_mask = subsequent_mask(ys.size(1))[:, None]
    hidden = model.decode(ys, memory, src_mask, tgt_mask)
    return torch.log_softmax(model.generator(hidden[:, -1]), dim=-1)[0].tolist()


@dataclass(frozen=True)
class Switches:
    """The rules :func:`beam_variant` can break; the defaults follow the course's rules.

    Attributes:
        penalty: ``"gnmt"``, ``"power"`` (``length ** alpha``) or ``"none"``.
        prune: rank the candidates of a step by the ``"normalised"`` or the ``"raw"`` score.
        pick: the final answer: best ``"normalised"`` or ``"raw"`` score, or ``"unfinished"``
            (the best hypothesis that has not ended, when there is one).
        stop: ``"all"`` hypotheses ended, or the ``"best"`` one (by normalised score) ended.
        freeze: False extends hypotheses after their EOS (score and length keep changing).
        global_top_k: False lets each hypothesis keep only its own best continuation.
        finished: ``"stay"`` in the beam, or ``"leave"`` it for a list of finished
            hypotheses: of the ``2 * beam_size`` best candidates, those that end join the list
            and the others fill the beam; decoding stops once ``beam_size`` have finished,
            and the best finished one wins.
        steps: decoding steps instead of ``max_len``.
    """

    penalty: str = "gnmt"
    prune: str = "normalised"
    pick: str = "normalised"
    stop: str = "all"
    freeze: bool = True
    global_top_k: bool = True
    finished: str = "stay"
    steps: int | None = None


RULES = Switches()


def beam_variant(
    model: nn.Module, src: Tensor, src_mask: Tensor, max_len: int, beam_size: int = 4,
    length_penalty: float = 0.6, bos_id: int = BOS_ID, eos_id: int = EOS_ID,
    switches: Switches = RULES,
) -> list[list[int]]:
    """Beam search one sentence at a time over Python lists, with the rules switchable; the
    arguments before ``switches`` are those of the graded ``beam_search``.

    Returns:
        One list of ids per sentence, cut before its first EOS.
    """
    import torch

    search = _Search(model, beam_size, length_penalty, bos_id, eos_id, switches)
    with torch.no_grad():
        return [search.sentence(src[b : b + 1], src_mask[b : b + 1], max_len)
                for b in range(src.size(0))]


@dataclass(frozen=True)
class _Search:
    """One beam search: how its hypotheses are scored, extended and chosen."""

    model: Any
    beam_size: int
    length_penalty: float
    bos_id: int
    eos_id: int
    switches: Switches

    def score(self, hyp: Hypothesis, how: str = "normalised") -> float:
        if how == "raw":
            return hyp[1]
        return hyp[1] / PENALTIES[self.switches.penalty](len(hyp[0]), self.length_penalty)

    def sentence(self, src: Tensor, mask: Tensor, max_len: int) -> list[int]:
        """The ids found for one sentence (``src`` ``(1, S)``), cut before the first EOS."""
        rules = self.switches
        memory = self.model.encode(src, mask)
        beam: list[Hypothesis] = [([], 0.0, False)]
        ended: list[Hypothesis] = []
        for _ in range(max_len if rules.steps is None else rules.steps):
            if all(done for _, _, done in beam) or len(ended) >= self.beam_size:
                break
            if rules.stop == "best" and max(beam, key=self.score)[2]:
                break
            ranked = sorted(self._candidates(beam, memory, mask),
                            key=lambda h: self.score(h, rules.prune), reverse=True)
            if rules.finished == "leave":
                ended += [h for h in ranked[: 2 * self.beam_size] if h[2]]
                beam = [h for h in ranked if not h[2]][: self.beam_size] or beam
            else:
                beam = ranked[: self.beam_size]
        tokens = self._answer(beam, ended)
        return tokens[: tokens.index(self.eos_id)] if self.eos_id in tokens else tokens

    def _candidates(self, beam: list[Hypothesis], memory: Tensor, mask: Tensor,
                    ) -> list[Hypothesis]:
        """Every continuation the hypotheses of ``beam`` propose for the next step."""
        candidates: list[Hypothesis] = []
        for tokens, log_p, done in beam:
            if done and self.switches.freeze:
                candidates.append((tokens, log_p, True))
                continue
            row = _next_log_probs(self.model, tokens, memory, mask, self.bos_id)
            options = [(tokens + [v], log_p + p, done or v == self.eos_id)
                       for v, p in enumerate(row)]
            if not self.switches.global_top_k and len(beam) > 1:
                options = [max(options, key=self.score)]
            candidates.extend(options)
        return candidates

    def _answer(self, beam: list[Hypothesis], ended: list[Hypothesis]) -> list[int]:
        """The tokens of the hypothesis picked as the answer."""
        pick = self.switches.pick
        pool = ended or beam
        if pick == "unfinished" and not all(done for _, _, done in beam):
            pool = [h for h in beam if not h[2]]
        return max(pool, key=lambda h: self.score(h, "raw" if pick == "raw" else "normalised"))[0]


@dataclass(frozen=True)
class Bug:
    """A known bug: the switches of a variant (here :func:`beam_variant`) that make it, and
    the hint that names it."""

    name: str
    switches: Switches
    hint: str


BUGS = (
    Bug("stop when the best has ended", Switches(stop="best"),
        "decoding stopped as soon as the best hypothesis of each sentence had ended; go on "
        "until every hypothesis in the beam has ended (or max_len tokens were generated): a "
        "longer hypothesis can still overtake it once the length penalty rewards its length."),
    Bug("survivors ranked by raw log P", Switches(prune="raw"),
        "the survivors of each step were chosen by the raw log P: rank the candidates by the "
        "normalised score log P / ((5 + length) / 6) ** alpha when choosing the survivors too. "
        "Raw log P favours a hypothesis that ended early, whose length no longer grows."),
    Bug("final pick by raw log P", Switches(pick="raw"),
        "the answer was picked by the raw log P: pick the hypothesis with the best normalised "
        "score log P / ((5 + length) / 6) ** alpha."),
    Bug("final pick among unfinished hypotheses", Switches(pick="unfinished"),
        "the answer was the best hypothesis that had not ended: finished hypotheses compete "
        "too; pick the best normalised score among all hypotheses of the beam."),
    Bug("finished hypotheses extended", Switches(freeze=False),
        "hypotheses went on after their EOS (their score or length kept changing): a "
        "hypothesis that emitted EOS keeps its score and length and is not extended; it stays "
        "in the beam with a single free continuation."),
    Bug("length ** alpha penalty", Switches(penalty="power"),
        "these hypotheses come from the penalty length ** alpha; use GNMT's "
        "((5 + length) / 6) ** alpha, with length = generated tokens including EOS."),
    Bug("no length normalisation", Switches(penalty="none"),
        "these are the hypotheses of beam search without length normalisation: rank every "
        "candidate by log P / ((5 + length) / 6) ** length_penalty, both when choosing the "
        "survivors at each step and when picking the final answer."),
    Bug("finished hypotheses leave the beam", Switches(finished="leave"),
        "hypotheses that ended were moved out of the beam, and unfinished ones took their "
        "places: here a hypothesis that emitted EOS stays in the beam, where it still "
        "competes for a place, and decoding stops once every hypothesis in the beam has ended."),
    Bug("each hypothesis keeps its own best continuation", Switches(global_top_k=False),
        "each hypothesis kept only its own best continuation: all beam_size * vocab "
        "candidates of a sentence compete together for the beam_size places."),
)
