"""What copy detection finds: the units compared, the pairs found, the figures that flag them.

Copy detection (:mod:`autograder.copies.detect`) builds these; its class report
(:mod:`autograder.copies.report`) reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from autograder.copies.fingerprints import Overlap
from autograder.copies.normalise import Unit
from autograder.flags import Flag

# Tokens per fingerprint (copydetect's noise threshold): shorter shared runs are not matches.
NOISE_TOKENS = 8
# Shared code shorter than this never flags: every correct answer to a short exercise looks
# alike once names are gone.
MIN_TOKENS = 60
# The similarity (share of the other code found in the learner's) from which a cell is flagged.
THRESHOLD = 0.95
COPIED_REFERENCE, SIMILAR_SUBMISSIONS = "copied_reference", "similar_submissions"
# The two forms code is compared in (:mod:`autograder.copies.normalise`,
# :mod:`autograder.copies.written`).
NORMALISED, WRITTEN = "normalised", "written"
# Exercises whose text dictates their code line by line: an honest answer of the calibration
# (a learner who follows the text to the letter, in tests/fixtures/literal_followers.py, or
# any other honest answer: chapter 11's sampling loop as a mutant writes it, a small module of
# chapter 8's mutants shaped like the course's Generator) reaches the threshold in normalised
# form, against the course's code or another honest answer, so that form is no evidence
# there. Their cells are compared as written instead, with the course's own answer among what
# every learner is given: what is left to share is what a copy keeps and honest work lacks
# (the source's docstrings, comments, type hints and names).
# benchmarks/similarity_calibration.py finds them; a test fails when this list is out of date.
DICTATED = frozenset({"ch02.scaled_dot_product_attention", "ch07.encoder_layer",
                      "ch07.positionwise_feed_forward", "ch08.decoder_layer", "ch08.make_model",
                      "ch10.bpe_encode", "ch10.learn_bpe", "ch11.sample",
                      "ch12.cached_rope_attention", "ch12.swiglu"})
CODES = (COPIED_REFERENCE, SIMILAR_SUBMISSIONS)


@dataclass(frozen=True)
class Code:
    """One unit of someone's code.

    Attributes:
        owner: a student id, or a course file relative to the repository
            (``transformer_ref/model/decoder.py``).
        place: the grade id of a learner's cell, or where a course unit comes from: the
            definition (``DecoderLayer.forward``) or the solution cell's grade id.
        unit: the code in ``form``.
        source: the code as written (a cell, or the definition's lines).
        course: whether the code is the course's own.
        form: the form of ``unit``, :data:`NORMALISED` or :data:`WRITTEN`.
    """

    owner: str
    place: str
    unit: Unit
    source: str = field(repr=False)
    course: bool = False
    form: str = NORMALISED

    @property
    def label(self) -> str:
        where = f"{self.place} ({self.unit.name})" if self.unit.name and (
            self.unit.name not in self.place) else self.place
        return f"{self.owner}: {where}"


@dataclass(frozen=True)
class Pair:
    """A learner's cell and the most similar code found for it.

    Attributes:
        cell: the learner's grade id.
        learner: the learner's unit.
        other: the other unit: a course source or another learner's.
        similarity: the pair's score in [0, 1] (see the module's docstring).
        tokens: how many tokens of shared code the score rests on.
        overlap: what copydetect found, for the report's highlights.
    """

    cell: str
    learner: Code
    other: Code
    similarity: float
    tokens: int
    overlap: Overlap

    def flagged(self, threshold: float) -> bool:
        return self.similarity >= threshold and self.tokens >= MIN_TOKENS


@dataclass
class ChapterCheck:
    """What checking one chapter found.

    Attributes:
        chapter: the chapter id.
        threshold: the similarity from which cells were flagged.
        students: the learners compared (those with an autograded notebook).
        pairs: every pair found, most similar first: each learner's cell with its closest
            course unit, and every two learners' cells that share code.
        flags: student -> the flags written for them (empty lists left out).
        unreadable: ``(student, reason)`` of autograded notebooks that could not be read.
        report: the class report written, or None.
    """

    chapter: str
    threshold: float
    students: list[str]
    pairs: list[Pair]
    flags: dict[str, list[Flag]]
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    report: Path | None = None

