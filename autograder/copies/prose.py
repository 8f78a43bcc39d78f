"""The course's own words in a learner's cell: the docstrings and comments of a paste.

Short code is what every honest learner writes, so a paste of the course's softmax cannot be
told from honest work by its code (:mod:`autograder.copies.common`). What a paste often keeps
is the course's text around the code: a docstring, a comment. Honest learners write their own
words, or the words the release shows them (the stub's docstring, the notebook's text), which
never count. A run of :data:`PROSE_WORDS` words of the course's
own prose that the release does not show, found in a learner's cell, is that evidence; the
words such runs cover are the measure (:data:`MIN_PROSE_WORDS` flag,
:attr:`autograder.copies.pairs.Pair.prose`).

Text in double quotes inside the course's prose is left out: it quotes someone else (the
paper), whom a learner may quote as well.
"""

from __future__ import annotations

import ast
import io
import re
import textwrap
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass

from autograder.copies.normalise import MAX_CHARS
from autograder.grade.audit import parse_cell

# Words per run: shorter runs ("the sequence length of the batch") are common English.
PROSE_WORDS = 6
# Words of the course's own prose, in runs of PROSE_WORDS, from which a cell is flagged.
# benchmarks/similarity_calibration.py measures the honest answers' most (their comments
# and docstrings against the course's, the release's text set aside).
MIN_PROSE_WORDS = 12
# A comment or docstring of fewer words is no prose of the course's own (``# (batch, seq)``).
MIN_TEXT_WORDS = 4

_WORD = re.compile(r"[a-z0-9]+")
_QUOTED = re.compile(r'"[^"\n]{12,}?"')


def words(text: str) -> tuple[str, ...]:
    """The lower-case words of ``text``."""
    return tuple(_WORD.findall(text.lower()))


def prose(source: str) -> tuple[str, ...]:
    """The words of the comments and docstrings (any bare string) of Python ``source``, in
    the order of their lines; of code that does not parse, its comments up to the fault.

    Other strings (messages, keys) are left out: ``f"d_model={d_model} is not divisible by
    num_heads"`` is what anyone writes."""
    source = textwrap.dedent(source[:MAX_CHARS])  # a method's lines as written
    found: list[tuple[int, tuple[str, ...]]] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                found.append((token.start[0], words(token.string)))
    except (tokenize.TokenError, SyntaxError, ValueError):  # the comments up to the fault
        pass
    try:
        tree: ast.AST | None = ast.parse(source)
    except (SyntaxError, ValueError):  # IPython syntax, or no Python at all
        tree, _ = parse_cell(source)
    except (RecursionError, MemoryError):  # nested too deeply: its comments are enough
        tree = None
    for node in ast.walk(tree) if isinstance(tree, ast.Module) else ():
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(
                node.value.value, str):
            found.append((node.lineno, words(_QUOTED.sub(" ", node.value.value))))
    return tuple(word for _, text in sorted(found) if len(text) >= MIN_TEXT_WORDS
                 for word in text)


def runs(text: tuple[str, ...]) -> frozenset[tuple[str, ...]]:
    """Every run of :data:`PROSE_WORDS` consecutive words of ``text``."""
    return frozenset(text[i:i + PROSE_WORDS] for i in range(len(text) - PROSE_WORDS + 1))


def shown_runs(texts: Iterable[str], code: bool) -> frozenset[tuple[str, ...]]:
    """The runs of every word of ``texts`` (the release's cells): what every learner is shown
    never counts. Of ``code``, the runs of its prose alone too, so that a docstring the stub
    shows followed by a comment the stub also shows is shown as one."""
    return frozenset().union(*(runs(words(text)) | (runs(prose(text)) if code else frozenset())
                               for text in texts))


@dataclass(frozen=True)
class ProseMatch:
    """The course's prose found in a learner's cell.

    Attributes:
        words: how many words of the cell's prose lie in runs of the course's own prose.
        passages: those words, each stretch of consecutive ones as a string.
    """

    words: int
    passages: tuple[str, ...]


def found_prose(mine: tuple[str, ...], course: frozenset[tuple[str, ...]],
                shown: frozenset[tuple[str, ...]]) -> ProseMatch:
    """The words of ``mine`` (a cell's :func:`prose`) in runs that ``course`` (the
    :func:`runs` of a course unit's prose) holds and ``shown`` does not."""
    covered = [False] * len(mine)
    for i in range(len(mine) - PROSE_WORDS + 1):
        run = mine[i:i + PROSE_WORDS]
        if run in course and run not in shown:
            covered[i:i + PROSE_WORDS] = [True] * PROSE_WORDS
    passages, current = [], []
    for word, inside in zip(mine, covered, strict=True):
        if inside:
            current.append(word)
        elif current:
            passages.append(" ".join(current))
            current = []
    if current:
        passages.append(" ".join(current))
    return ProseMatch(sum(covered), tuple(passages))
