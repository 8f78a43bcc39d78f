"""Code that honest learners write alike: no evidence of copying, however close the match.

Short exercises (a softmax, the masks, ``shift_right``) have few correct answers, and every
honest learner writes one of them; a paste of the course's answer can only be told apart by
what it keeps that honest work lacks. The course ships a corpus of honest implementations, in
normalised form (:mod:`autograder.copies.normalise`), in ``common_code.json``: grade id -> the
words of every unit of every honest answer of that cell (learners who follow the hints, the
text to the letter, a tutorial's structure or their own way, and the valid alternatives the
checks accept). A shared passage is *rare* when no honest answer holds it, in any cell (the
split-heads lines of an honest multi-head attention are common in ``split_heads`` too); the
rare tokens of a pair are the evidence that short code is copied
(:attr:`autograder.copies.pairs.Pair.rare`).

``benchmarks/similarity_calibration.py --write-common`` writes the file from the honest
answers of the calibration; a test fails when it is out of date.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from copydetect.utils import get_document_fingerprints

from autograder.copies.normalise import normalise

COMMON_FILE = Path(__file__).with_name("common_code.json")


def common_words(cells: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """grade id -> the words (space-separated) of each normalised unit of the ``cells``
    (``(grade id, source)`` of honest answers), each once, sorted."""
    found: dict[str, set[str]] = {}
    for cell, source in cells:
        found.setdefault(cell, set()).update(" ".join(u.words) for u in normalise(source))
    return {cell: sorted(words) for cell, words in sorted(found.items())}


def write_common(words: dict[str, list[str]], path: Path = COMMON_FILE) -> None:
    path.write_text(json.dumps(words, indent=0, sort_keys=True) + "\n", encoding="utf-8")


@lru_cache(maxsize=1)
def shipped_common() -> dict[str, tuple[str, ...]]:
    """The corpus that ships with the course (:data:`COMMON_FILE`); empty without it."""
    if not COMMON_FILE.is_file():
        return {}
    data = json.loads(COMMON_FILE.read_text(encoding="utf-8"))
    return {cell: tuple(words) for cell, words in data.items()}


def common_hashes(words: Iterable[str], k: int) -> frozenset[int]:
    """The fingerprints (runs of ``k`` words) of the honest units ``words``."""
    found: set[int] = set()
    for text in words:
        found |= get_document_fingerprints(tuple(text.split(" ")), k, 1)[0]
    return frozenset(found)
