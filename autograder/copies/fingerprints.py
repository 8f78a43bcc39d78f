"""Fingerprints and matches of normalised code, with copydetect's winnowing.

copydetect (the MOSS approach: "Winnowing: Local Algorithms for Document Fingerprinting",
Schleimer, Wilkerson and Aiken, 2003) hashes every run of ``k`` consecutive tokens of a
document; two documents share code where they share hashes. Its functions work on any
sequence, so they are given the tokens of :mod:`autograder.copies.normalise` rather than
files: :func:`fingerprint` builds what :func:`copydetect.compare_files` reads, and :func:`match`
calls it.

Winnowing is not used (a window of 1 keeps every hash): a cell is a few hundred tokens, so
keeping all hashes costs nothing, and the set of hashes kept then does not depend on Python's
per-process string hashing, so the same code gives the same figures in every run.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

import numpy as np
from copydetect import compare_files
from copydetect.utils import get_document_fingerprints, get_token_coverage

from autograder.copies.normalise import Unit


@dataclass(frozen=True)
class Fingerprint:
    """A unit's hashes, with the attributes :func:`copydetect.compare_files` reads.

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
    offsets: np.ndarray = field(default_factory=lambda: np.array([]))

    @property
    def filtered_code(self) -> tuple[str, ...]:
        return self.unit.words


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
    kept = {h: printed.hash_idx[h] for h in hashes if h in printed.hash_idx}
    return int(get_token_coverage(kept, printed.k, len(printed.unit.words))) if kept else 0


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


def _regions(unit: Unit, slices: np.ndarray) -> tuple[tuple[int, int], ...]:
    """Token slices ``[[starts], [ends]]`` as character ranges of ``unit.text``."""
    if len(slices) == 0 or len(slices[0]) == 0:
        return ()
    return tuple((unit.tokens[int(start)].start, unit.tokens[int(end) - 1].end)
                 for start, end in zip(slices[0], slices[1], strict=True))


def match(a: Fingerprint, b: Fingerprint) -> Overlap | None:
    """The overlap of ``a`` and ``b``, or None when they share no hash."""
    if not a.hashes & b.hashes or not a.token_coverage or not b.token_coverage:
        return None
    _, shares, (slices_a, slices_b) = compare_files(a, b)
    tokens_a = int(np.sum(slices_a[1] - slices_a[0]))
    tokens_b = int(np.sum(slices_b[1] - slices_b[0]))
    return Overlap((tokens_a, tokens_b),
                   (min(1.0, float(shares[0])), min(1.0, float(shares[1]))),
                   (_regions(a.unit, slices_a), _regions(b.unit, slices_b)))
