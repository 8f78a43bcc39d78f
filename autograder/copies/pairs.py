"""What copy detection finds: the units compared, the pairs found, the figures that flag them.

Copy detection (:mod:`autograder.copies.detect`) builds these; its class report
(:mod:`autograder.copies.report`) reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from autograder.copies.fingerprints import Overlap
from autograder.copies.normalise import Unit
from autograder.copies.prose import MIN_PROSE_WORDS
from autograder.flags import Flag

# Tokens per fingerprint (copydetect's noise threshold): shorter shared runs are not matches.
NOISE_TOKENS = 8
# Shared code shorter than this never flags: every correct answer to a short exercise looks
# alike once names are gone.
MIN_TOKENS = 70
# Shared code shorter than this never flags when only the learner's code is found in the
# course's (and not the course's in the learner's), nor against the course's tutorial-style
# code (:data:`PUBLIC_STRUCTURE`): short canonical code lies inside many longer
# implementations and in the public tutorials that many learners know, while a trimmed copy
# of a long definition is still long.
MIN_CONTAINED_TOKENS = 90
# Shared tokens that no honest answer holds (autograder/copies/common.py) from which two
# learners' match flags however short the code: what a copy keeps that honest work lacks.
# Against the course's code rarity is no evidence below MIN_TOKENS: honest learners who follow
# the text write the course's short answers, and the calibration's honest answers that the
# corpus lacks (each measured without its own author) hold up to 47 rare tokens of it, as
# many as the pastes beyond honest work.
MIN_RARE_TOKENS = 20
# Course files that follow the structure of public tutorials (autograder/tutorial_style).
PUBLIC_STRUCTURE = "autograder/tutorial_style/"
# The similarity (containment, in either direction) from which a cell is flagged.
THRESHOLD = 0.95
COPIED_REFERENCE, SIMILAR_SUBMISSIONS = "copied_reference", "similar_submissions"
# Exercises whose text dictates their code line by line: an honest answer of the calibration
# (a learner who follows the text to the letter, in tests/fixtures/literal_followers.py, or
# any other honest answer: chapter 11's sampling loop as a mutant writes it, a small module of
# chapter 8's mutants shaped like the course's Generator) reaches the threshold against the
# course's code or another honest answer when the course's answer counts. In their cells the
# course's own answer is among what every learner is given (base code that never counts):
# what is left to share is what a copy keeps beyond it and honest work lacks.
# benchmarks/similarity_calibration.py finds them; a test fails when this list is out of date.
DICTATED = frozenset({"ch02.scaled_dot_product_attention",
                      "ch07.multi_head_attention", "ch08.decoder_layer", "ch10.bpe_encode",
                      "ch10.learn_bpe", "ch11.sample",
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
        unit: the code, normalised.
        source: the code as written (a cell, or the definition's lines).
        course: whether the code is the course's own.
    """

    owner: str
    place: str
    unit: Unit
    source: str = field(repr=False)
    course: bool = False

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
        similarity: the pair's score in [0, 1]: containment in the direction that is larger
            (:func:`autograder.copies.detect._pair`).
        tokens: how many tokens of shared code the score rests on.
        overlap: what copydetect found, for the report's highlights.
        shared: the fingerprints the two share.
        elsewhere: ``(found, compared)``: how many of the other learners of the cell (beside
            the pair's) hold most of the shared code too, of how many: how rare the match is.
        rare: how many of the shared tokens (the fewer of either side's) lie in runs that no
            honest answer of the cell holds (:mod:`autograder.copies.common`): the evidence
            of a short copy.
        prose: how many words of the course unit's own docstrings and comments
            (beyond what the release shows) the learner's cell holds, in runs
            (:mod:`autograder.copies.prose`): what a paste keeps that honest work lacks.
        passages: those words, each stretch as a string.
    """

    cell: str
    learner: Code
    other: Code
    similarity: float
    tokens: int
    overlap: Overlap
    shared: frozenset[int] = field(default=frozenset(), repr=False)
    elsewhere: tuple[int, int] = (0, 0)
    rare: int = 0
    prose: int = 0
    passages: tuple[str, ...] = ()

    @property
    def found_in_learner(self) -> float:
        """The share of the other code found in the learner's (for two learners: the smaller
        share, found in each other): the strong direction."""
        mine, other = self.overlap.shares
        return other if self.other.course else min(mine, other)

    def flagged(self, threshold: float) -> bool:
        """Whether the other code is found in the learner's (at least :data:`MIN_TOKENS`
        shared; :data:`MIN_CONTAINED_TOKENS` for the tutorial-style code), or the learner's
        code in the course's (at least :data:`MIN_CONTAINED_TOKENS`); or, between two
        learners, each one's code found in the other's however short, with at least
        :data:`MIN_RARE_TOKENS` shared tokens that no honest answer holds and that fewer than
        half of the cell's other learners hold (what most of a class writes alike, such as the
        course's own short answer handed in by many, is common, not copied from one place);
        or the learner's cell holds at least :data:`MIN_PROSE_WORDS` words of the course
        unit's own prose, however short the code."""
        if self.other.course and self.prose >= MIN_PROSE_WORDS:
            return True
        public = self.other.owner.startswith(PUBLIC_STRUCTURE)
        found = self.found_in_learner >= threshold
        holders, others = self.elsewhere
        return (found and self.tokens >= (MIN_CONTAINED_TOKENS if public else MIN_TOKENS)) or (
            self.other.course and self.similarity >= threshold
            and self.tokens >= MIN_CONTAINED_TOKENS) or (
            found and not self.other.course and self.rare >= MIN_RARE_TOKENS
            and 2 * holders < max(others, 1))


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

