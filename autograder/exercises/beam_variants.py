"""Beam search written out per sentence, with switches for the rules learners get wrong.

The hints of the beam-search check compare a learner's hypotheses with what each known bug
gives (:data:`BUGS`), and the chapter 10 mutants are these bugs. With every switch at its
default, :func:`beam_variant` follows the course's rules (see :mod:`transformer_ref.beam`):
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

from transformer_ref.vocab import BOS_ID, EOS_ID

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


def beam_variant(
    model: nn.Module, src: Tensor, src_mask: Tensor, max_len: int, beam_size: int = 4,
    length_penalty: float = 0.6, bos_id: int = BOS_ID, eos_id: int = EOS_ID, *,
    penalty: str = "gnmt",
    prune: str = "normalised", pick: str = "normalised", stop: str = "all",
    freeze: bool = True, global_top_k: bool = True, finished: str = "stay",
    steps: int | None = None,
) -> list[list[int]]:
    """Beam search one sentence at a time over Python lists, with the rules switchable.

    Args:
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

    Returns:
        One list of ids per sentence, cut before its first EOS.
    """
    import torch

    lp = PENALTIES[penalty]

    def score(hyp: Hypothesis, how: str = "normalised") -> float:
        return hyp[1] if how == "raw" else hyp[1] / lp(len(hyp[0]), length_penalty)

    results = []
    with torch.no_grad():
        for b in range(src.size(0)):
            mask = src_mask[b : b + 1]
            memory = model.encode(src[b : b + 1], mask)
            beam: list[Hypothesis] = [([], 0.0, False)]
            ended: list[Hypothesis] = []
            for _ in range(max_len if steps is None else steps):
                if all(done for _, _, done in beam) or len(ended) >= beam_size:
                    break
                if stop == "best" and max(beam, key=score)[2]:
                    break
                candidates: list[Hypothesis] = []
                for tokens, log_p, done in beam:
                    if done and freeze:
                        candidates.append((tokens, log_p, True))
                        continue
                    row = _next_log_probs(model, tokens, memory, mask, bos_id)
                    options = [(tokens + [v], log_p + p, done or v == eos_id)
                               for v, p in enumerate(row)]
                    if not global_top_k and len(beam) > 1:
                        options = [max(options, key=score)]
                    candidates.extend(options)
                ranked = sorted(candidates, key=lambda h: score(h, prune), reverse=True)
                if finished == "leave":
                    ended += [h for h in ranked[: 2 * beam_size] if h[2]]
                    beam = [h for h in ranked if not h[2]][:beam_size] or beam
                else:
                    beam = ranked[:beam_size]
            pool = ended or beam
            if pick == "unfinished" and not all(done for _, _, done in beam):
                pool = [h for h in beam if not h[2]]
            best = max(pool, key=lambda h: score(h, "raw" if pick == "raw" else "normalised"))
            tokens = best[0]
            results.append(tokens[: tokens.index(eos_id)] if eos_id in tokens else tokens)
    return results


@dataclass(frozen=True)
class Bug:
    """A known bug: the switches of a variant (here :func:`beam_variant`) that make it, and
    the hint that names it."""

    name: str
    switches: dict[str, Any]
    hint: str


BUGS = (
    Bug("stop when the best has ended", {"stop": "best"},
        "decoding stopped as soon as the best hypothesis of each sentence had ended; go on "
        "until every hypothesis in the beam has ended (or max_len tokens were generated): a "
        "longer hypothesis can still overtake it once the length penalty rewards its length."),
    Bug("survivors ranked by raw log P", {"prune": "raw"},
        "the survivors of each step were chosen by the raw log P: rank the candidates by the "
        "normalised score log P / ((5 + length) / 6) ** alpha when choosing the survivors too. "
        "Raw log P favours a hypothesis that ended early, whose length no longer grows."),
    Bug("final pick by raw log P", {"pick": "raw"},
        "the answer was picked by the raw log P: pick the hypothesis with the best normalised "
        "score log P / ((5 + length) / 6) ** alpha."),
    Bug("final pick among unfinished hypotheses", {"pick": "unfinished"},
        "the answer was the best hypothesis that had not ended: finished hypotheses compete "
        "too; pick the best normalised score among all hypotheses of the beam."),
    Bug("finished hypotheses extended", {"freeze": False},
        "hypotheses went on after their EOS (their score or length kept changing): a "
        "hypothesis that emitted EOS keeps its score and length and is not extended; it stays "
        "in the beam with a single free continuation."),
    Bug("length ** alpha penalty", {"penalty": "power"},
        "these hypotheses come from the penalty length ** alpha; use GNMT's "
        "((5 + length) / 6) ** alpha, with length = generated tokens including EOS."),
    Bug("no length normalisation", {"penalty": "none"},
        "these are the hypotheses of beam search without length normalisation: rank every "
        "candidate by log P / ((5 + length) / 6) ** length_penalty, both when choosing the "
        "survivors at each step and when picking the final answer."),
    Bug("finished hypotheses leave the beam", {"finished": "leave"},
        "hypotheses that ended were moved out of the beam, and unfinished ones took their "
        "places: here a hypothesis that emitted EOS stays in the beam, where it still "
        "competes for a place, and decoding stops once every hypothesis in the beam has ended."),
    Bug("each hypothesis keeps its own best continuation", {"global_top_k": False},
        "each hypothesis kept only its own best continuation: all beam_size * vocab "
        "candidates of a sentence compete together for the beam_size places."),
)
