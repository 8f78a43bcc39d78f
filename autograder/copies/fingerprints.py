"""Fingerprints and matches of normalised code, with copydetect's hashing.

copydetect (the MOSS approach: "Winnowing: Local Algorithms for Document Fingerprinting",
Schleimer, Wilkerson and Aiken, 2003) hashes every run of ``k`` consecutive tokens of a
document; two documents share code where they share hashes. Its hashing works on any sequence,
so it is given the tokens of :mod:`autograder.copies.normalise` rather than files
(:func:`fingerprint`). :func:`match` measures an overlap as ``copydetect.compare_files`` does
(the shared runs, each token counted once, over each side's counted tokens), in plain Python:
a check compares each learner's unit with hundreds of the course's, and on cells of a few
hundred tokens NumPy's per-call cost was most of the check's time.

Winnowing is not used (a window of 1 keeps every hash): a cell is a few hundred tokens, so
keeping all hashes costs nothing, and the set of hashes kept then does not depend on Python's
per-process string hashing, so the same code gives the same figures in every run.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from copydetect.utils import get_document_fingerprints

from autograder.copies.normalise import Unit


@dataclass(frozen=True)
class Fingerprint:
    """A unit's hashes, as copydetect's ``CodeFingerprint`` holds them.

    Attributes:
        unit: the code.
        k: tokens per hash (copydetect's noise threshold, in tokens).
        hashes: the hashes that count (boilerplate removed).
        hash_idx: hash -> the token indices where it starts.
        token_coverage: how many tokens the counted hashes cover: the size of the unit for
            comparisons (the stub the learner was given is not counted).
    """

    unit: Unit
    k: int
    hashes: set[int]
    hash_idx: dict[int, list[int]]
    token_coverage: int


def hashes_of(units: list[Unit], k: int) -> set[int]:
    """Every hash of ``units``: the boilerplate of an exercise is the hashes of its stub."""
    found: set[int] = set()
    for unit in units:
        found |= get_document_fingerprints(unit.words, k, 1)[0]
    return found


def fingerprint(unit: Unit, k: int, boilerplate: set[int] = frozenset()) -> Fingerprint:
    """The fingerprint of ``unit``, without the hashes in ``boilerplate``.

    copydetect's own boilerplate removal is not used: it also drops hashes that occur twice in
    the document (``np.intersect1d`` is told the hashes are unique), so repeated lines would
    vanish.
    """
    kept = {h: idx for h, idx in _hash_index(unit.words, k).items() if h not in boilerplate}
    printed = Fingerprint(unit, k, set(kept), kept, 0)
    return dataclasses.replace(printed, token_coverage=covered(printed, printed.hashes))


# The course's units are printed again for every cell a check compares, each time without
# that cell's boilerplate: hashing is the costly part, and it does not depend on the cell.
@functools.lru_cache(maxsize=4096)
def _hash_index(words: tuple[str, ...], k: int) -> dict[int, list[int]]:
    """hash -> the token indices where it starts (read only: it is shared)."""
    return get_document_fingerprints(words, k, 1)[1]


def covered(printed: Fingerprint, hashes: set[int] | frozenset[int]) -> int:
    """How many tokens of ``printed`` the runs of ``hashes`` cover."""
    return sum(end - start for start, end in _runs(printed, hashes))


def _runs(printed: Fingerprint, hashes: set[int] | frozenset[int]) -> list[tuple[int, int]]:
    """The token ranges ``[start, end)`` that the runs of ``hashes`` cover in ``printed``,
    joined where they overlap, as ``copydetect.utils.get_copied_slices`` joins them."""
    starts = sorted(i for h in hashes for i in printed.hash_idx.get(h, ()))
    runs: list[tuple[int, int]] = []
    for start in starts:
        if runs and start - (runs[-1][1] - printed.k) <= printed.k - 1:
            runs[-1] = (runs[-1][0], start + printed.k)
        else:
            runs.append((start, start + printed.k))
    return runs


@dataclass(frozen=True)
class Overlap:
    """What two fingerprints share.

    Attributes:
        tokens: ``(in a, in b)``: how many tokens of each lie in shared runs.
        shares: ``(of a, of b)``: those counts over each one's counted tokens (copydetect's
            similarities; each in [0, 1]).
        regions: ``(in a, in b)``: the shared runs as character ranges of each unit's text.
    """

    tokens: tuple[int, int]
    shares: tuple[float, float]
    regions: tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]


def _regions(unit: Unit, runs: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Token ranges as character ranges of ``unit.text``."""
    return tuple((unit.tokens[start].start, unit.tokens[end - 1].end) for start, end in runs)


def match(a: Fingerprint, b: Fingerprint) -> Overlap | None:
    """The overlap of ``a`` and ``b``, or None when they share no hash."""
    shared = a.hashes & b.hashes
    if not shared or not a.token_coverage or not b.token_coverage:
        return None
    runs_a, runs_b = _runs(a, shared), _runs(b, shared)
    tokens_a = sum(end - start for start, end in runs_a)
    tokens_b = sum(end - start for start, end in runs_b)
    return Overlap((tokens_a, tokens_b),
                   (min(1.0, tokens_a / a.token_coverage), min(1.0, tokens_b / b.token_coverage)),
                   (_regions(a.unit, runs_a), _regions(b.unit, runs_b)))
