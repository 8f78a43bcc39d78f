"""Evaluation metrics: corpus BLEU (through sacrebleu) and exact-sequence accuracy.

BLEU is computed the standard, comparable way: on detokenised, cased text with sacrebleu's
default ``13a`` tokenisation, and reported together with sacrebleu's signature, which records
every setting that affects the number (quote it next to any score you publish)::

    >>> score, signature = corpus_bleu(["A dog runs."], ["A dog runs."])
    >>> round(score, 6), signature
    (100.0, 'nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from sacrebleu.metrics import BLEU

from transformer_ref.data.vocab import EOS_ID


class BleuScore(NamedTuple):
    """A corpus BLEU score in ``[0, 100]`` and the sacrebleu signature it was computed with."""

    score: float
    signature: str


def _require_same_length(a: Sequence[Any], b: Sequence[Any], names: str, where: str) -> None:
    if len(a) != len(b):
        raise ValueError(
            f"{where}: got {len(a)} {names.split('/')[0]} but {len(b)} {names.split('/')[1]}; "
            f"pass exactly one per sentence, in the same order"
        )
    if len(a) == 0:
        raise ValueError(f"{where}: got an empty corpus; pass at least one sentence")


def _require_strings(items: Sequence[Any], name: str, where: str) -> None:
    if isinstance(items, str):
        raise TypeError(f"{where}: {name} must be a list of sentences, got a single str")
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise TypeError(
                f"{where}: {name}[{i}] is a {type(item).__name__}, expected a detokenised str; "
                f"turn ids into text with transformer_ref.data.tokenizer.decode first"
            )


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> BleuScore:
    """Corpus-level BLEU of system outputs against one reference each.

    Args:
        hypotheses: detokenised system translations, one ``str`` per sentence.
        references: detokenised reference translations, aligned with ``hypotheses``.

    Returns:
        ``BleuScore(score, signature)``: the score (0..100, cased, ``13a`` tokenisation) and
        sacrebleu's signature string.
    """
    where = "corpus_bleu"
    _require_strings(hypotheses, "hypotheses", where)
    _require_strings(references, "references", where)
    _require_same_length(hypotheses, references, "hypotheses/references", where)
    bleu = BLEU()
    result = bleu.corpus_score(list(hypotheses), [list(references)])
    return BleuScore(float(result.score), str(bleu.get_signature()))


def _until_eos(seq: Any) -> Any:
    """An id sequence up to (not including) its first EOS_ID; strings are returned unchanged."""
    if isinstance(seq, str):
        return seq
    ids = seq.tolist() if hasattr(seq, "tolist") else list(seq)
    return ids[: ids.index(EOS_ID)] if EOS_ID in ids else ids


def exact_match(predictions: Sequence[Any], targets: Sequence[Any]) -> float:
    """Fraction of predictions that equal their target exactly (for the synthetic tasks).

    Id sequences are compared up to their first ``EOS_ID``, so decoder outputs (cut before EOS)
    can be compared with targets from :func:`transformer_ref.data.datasets.synthetic_pairs`
    (which end with EOS). Strings are compared as they are.

    Args:
        predictions: sequences of ints (lists, tuples or 1-D tensors/arrays) or strings.
        targets: the same kind, aligned with ``predictions``.

    Returns:
        A float in ``[0, 1]``.
    """
    where = "exact_match"
    _require_same_length(predictions, targets, "predictions/targets", where)
    hits = sum(_until_eos(p) == _until_eos(t) for p, t in zip(predictions, targets, strict=True))
    return hits / len(targets)
