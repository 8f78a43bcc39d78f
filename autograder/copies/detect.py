"""Copy detection: every graded solution cell against the course's code and the class's.

After a chapter is graded, :func:`check_chapter` compares each learner's solution cells
(nbgrader solution cells, by grade id, as the autograded notebook holds them) with

* the course's own implementations (:func:`course_sources`): every definition of
  ``transformer_ref``, every solution cell of ``solutions/`` and every definition of
  :mod:`autograder.tutorial_style`, the second working implementation the course ships;
* the same cell of every other learner of the chapter in the course folder.

The code is normalised first (:mod:`autograder.copies.normalise`: names, comments,
docstrings, asserts, type hints, layout, equivalent spellings and the order of definitions do
not count) and compared per cell and per definition with copydetect's fingerprints
(:mod:`autograder.copies.fingerprints`); the stub the learner was given (the release's cell)
and the code the release shows every learner are base code and never count. Where an
exercise's text dictates its code line by line (:data:`DICTATED`), honest learners write the
course's answer, so there the course's answer is base code too: what is left to share is what
a copy keeps beyond it and honest work lacks.

A pair of units scores containment in both directions: the larger of the share of the other
code found in the learner's (how much of a course definition the cell holds) and the share of
the learner's code found in the other (how much of the cell comes from it, so that a copy
trimmed of the source's checks still counts). A cell is flagged when a pair scores at least
:data:`THRESHOLD` and the shared code is at least :data:`MIN_TOKENS` tokens long:
``copied_reference`` names the course file, the definition, both shares and the tokens in
common; ``similar_submissions`` names the other learner likewise. Between two learners,
shorter shared code flags when at least :data:`~autograder.copies.pairs.MIN_RARE_TOKENS` of
its tokens are rare: in runs that no answer of the course's honest corpus holds
(:mod:`autograder.copies.common`). Against the course's code, a cell that holds the course's
own words (docstrings and comments that the release does not show) flags however short
its code (:mod:`autograder.copies.prose`). Short exercises whose every correct answer is one
line, handed in without such words, never flag. The flags are for the instructor (the CSV,
the tables, the class report of :mod:`autograder.copies.report`) and never appear in a
learner's feedback; what they do to a score is the course's policy for copies
(:mod:`autograder.copies.policy`: by default nothing).
``benchmarks/similarity_calibration.py`` chose the figures.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.copies.common import common_hashes, shipped_common
from autograder.copies.fingerprints import (
    Fingerprint,
    Overlap,
    covered,
    fingerprint,
    hashes_of,
    match,
)
from autograder.copies.normalise import Unit, normalise
from autograder.copies.pairs import (
    COPIED_REFERENCE,
    DICTATED,
    NOISE_TOKENS,
    SIMILAR_SUBMISSIONS,
    THRESHOLD,
    ChapterCheck,
    Code,
    Pair,
)
from autograder.copies.policy import (
    DEFAULT_POLICY,
    apply_policy,
    copy_policy,
    policy_sentence,
    zeroed_cells,
    zeroes,
)
from autograder.copies.prose import (
    PROSE_WORDS,
    ProseMatch,
    found_prose,
    prose,
    runs,
    shown_runs,
)
from autograder.copies.report import write_report
from autograder.course import CHAPTERS, ROOT, Course
from autograder.exercises.reach import module_file
from autograder.flags import Flag, read_flags, write_flags
from autograder.notebook import cell_source, grade_id, solution_cells
from autograder.tutorial_style import COPY_SOURCES

# The course's implementations beside transformer_ref and the solution notebooks, as files of
# this installation relative to it (autograder.tutorial_style names them). The fixtures of
# tests/fixtures are not among them: the mutants, own_work, honest_styles and literal_followers
# stand for learners' own work (the sample class and the calibration are made of them).
TUTORIAL_STYLE_FILES = tuple(module_file(name).relative_to(ROOT).as_posix()
                             for name in COPY_SOURCES)


def _lines(text: str, unit: Unit) -> str:
    first, last = unit.lines
    return "\n".join(text.splitlines()[first - 1:last])


def _codes(owner: str, place: str, text: str, *, course: bool, whole: bool = True
           ) -> list[Code]:
    """The normalised units of ``text`` as :class:`Code`, placed at ``place`` (or, when it is
    empty, at the unit's name); without the whole when ``whole`` is False (a file: only its
    definitions count)."""
    return [Code(owner, place or unit.name, unit,
                 text if not unit.name else _lines(text, unit), course)
            for unit in normalise(text) if whole or unit.name]


def solution_cell(exercise: str) -> str:
    """The grade id of an exercise's solution cell (``ch08_decoder_layer_solution``)."""
    return exercise.replace(".", "_") + "_solution"


def solution_sources(notebook: Path, owner: str) -> list[Code]:
    """Every unit of every solution cell of a source notebook, placed by grade id."""
    return list(_notebook_codes(owner, notebook.read_text(encoding="utf-8")))


def _source_files(root: Path) -> list[tuple[Path, str]]:
    """``(path, name)`` of the files holding the course's implementations."""
    files = sorted((ROOT / "transformer_ref").rglob("*.py")) + [
        ROOT / name for name in TUTORIAL_STYLE_FILES]
    found = [(path, path.relative_to(ROOT).as_posix()) for path in files]
    return found + [(path, path.relative_to(root).as_posix())
                    for path in sorted(root.glob("solutions/ch*/ch*.ipynb"))]


def course_sources(course: Course) -> list[Code]:
    """The course's own implementations, one :class:`Code` per definition (and per method)
    : ``transformer_ref``'s modules and :data:`TUTORIAL_STYLE_FILES` of this
    installation, and every unit of the solution cells of ``<root>/solutions``. Kept in memory
    while the files are unchanged (the Formgrader's autograde checks the class after each
    learner)."""
    files = _source_files(course.root.resolve())
    stamp = tuple((str(path), path.stat().st_mtime_ns, path.stat().st_size)
                  for path, _ in files)
    if stamp not in _SOURCES:
        _SOURCES.clear()
        _SOURCES[stamp] = _read_sources(files)
    return _SOURCES[stamp]


_SOURCES: dict[tuple, list[Code]] = {}


def _read_sources(files: list[tuple[Path, str]]) -> list[Code]:
    found: list[Code] = []
    for path, name in files:
        if path.suffix == ".ipynb":
            found += solution_sources(path, name)
        else:
            found += _module_codes(name, path.read_text(encoding="utf-8"))
    return found


# Kept per file's content, so that a process that checks several courses (or one course whose
# solutions changed) normalises the reference package once: that is most of a check's time.
@functools.lru_cache(maxsize=256)
def _module_codes(name: str, text: str) -> tuple[Code, ...]:
    return tuple(_codes(name, "", text, course=True, whole=False))


@functools.lru_cache(maxsize=64)
def _notebook_codes(owner: str, text: str) -> tuple[Code, ...]:
    nb = nbformat.reads(text, as_version=4)
    return tuple(code for _, cell in solution_cells(nb)
                 for code in _codes(owner, grade_id(cell) or "?", cell_source(cell),
                                    course=True))


# ----------------------------------------------------------------------------- comparing


@dataclass(frozen=True)
class Boilerplate:
    """What every learner of one cell is given, which never counts: the hashes of the stub, of
    the code the release shows, and for a :data:`DICTATED` exercise of the course's answer;
    ``common``, what honest learners write alike (:mod:`autograder.copies.common`), which
    counts in a pair's similarity but not in its rare tokens; and ``shown``, the runs of words
    of the text the release shows (:func:`autograder.copies.prose.shown_runs`), which never
    count in the course's prose found in a cell."""

    hashes: frozenset[int]
    common: frozenset[int] = frozenset()
    shown: frozenset[tuple[str, ...]] = frozenset()


@dataclass(frozen=True)
class Printed:
    """A :class:`Code` with its fingerprint for one exercise (its boilerplate left out)."""

    code: Code
    print: Fingerprint


def _printed(codes: Iterable[Code], given: Boilerplate) -> list[Printed]:
    """The fingerprints of the ``codes`` that have anything left beyond ``given``."""
    found = [Printed(c, fingerprint(c.unit, NOISE_TOKENS, given.hashes)) for c in codes]
    return [p for p in found if p.print.token_coverage]


def _learner(student: str, cell: str, text: str, given: Boilerplate) -> list[Printed]:
    return _printed(_codes(student, cell, text, course=False), given)


def _index(printed: list[Printed]) -> dict[int, list[int]]:
    """hash -> the positions in ``printed`` of the units that have it."""
    index: dict[int, list[int]] = defaultdict(list)
    for position, item in enumerate(printed):
        for value in item.print.hashes:
            index[value].append(position)
    return index


def _candidates(item: Printed, index: dict[int, list[int]]) -> list[int]:
    return sorted({p for value in item.print.hashes for p in index.get(value, ())})


def _pair(cell: str, mine: Printed, other: Printed, common: frozenset[int]) -> Pair | None:
    """The score of ``mine`` (a learner's unit) against ``other``: containment in both
    directions, the larger share (how much of the other code is in mine, or how much of mine
    comes from the other code, so that a trimmed copy counts too), on the shared tokens; and
    how many of mine lie in shared runs that no honest answer holds (``common``)."""
    overlap = match(mine.print, other.print)
    if overlap is None:
        return None
    shared = frozenset(mine.print.hashes & other.print.hashes)
    return Pair(cell, mine.code, other.code, round(max(overlap.shares), 4),
                min(overlap.tokens), overlap, shared,
                rare=min(covered(mine.print, shared - common),
                         covered(other.print, shared - common)))


def _best(pairs: Iterable[Pair | None], threshold: float) -> Pair | None:
    """The pair that decides: flagged ones first, then the highest similarity, then the most
    shared tokens; ties broken by name, so that every run picks the same."""
    found = [p for p in pairs if p is not None]
    if not found:
        return None
    return max(found, key=lambda p: (p.flagged(threshold), p.similarity, p.tokens,
                                     p.other.label, p.learner.unit.name))


def reference_pairs(cells: dict[str, dict[str, str]], sources: list[Code],
                    boilerplate: dict[str, Boilerplate], threshold: float = THRESHOLD
                    ) -> list[Pair]:
    """For each learner's cell, its most similar course unit (cells sharing nothing are left
    out), with the course's own prose the cell holds (:mod:`autograder.copies.prose`).

    Args:
        cells: student -> grade id -> the cell's source.
        sources: the course's units (:func:`course_sources`).
        boilerplate: grade id -> how that cell is compared (:func:`stub_hashes`).
    """
    pairs = []
    said = prose_index(sources)
    for cell_id, given in sorted(boilerplate.items()):
        students = [student for student in sorted(cells) if cell_id in cells[student]]
        if not students:
            continue
        printed = _printed(sources, given)
        index = _index(printed)
        for student in students:
            text = cells[student][cell_id]
            mine = _learner(student, cell_id, text, given)
            found = [pair for unit in mine for p in _candidates(unit, index)
                     if (pair := _pair(cell_id, unit, printed[p], given.common))]
            best = _best(found + _with_prose(cell_id, student, text, found, sources,
                                             said, given), threshold)
            if best is not None:
                pairs.append(best)
    return pairs


def prose_index(sources: list[Code]) -> dict[tuple[str, ...], list[int]]:
    """run of words -> the positions in ``sources`` of the units whose prose holds it."""
    index: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for position, code in enumerate(sources):
        for run in _prose_runs(code.source):
            index[run].append(position)
    return index


@functools.lru_cache(maxsize=4096)
def _prose_runs(source: str) -> frozenset[tuple[str, ...]]:
    return runs(prose(source))


def closest_prose(text: str, sources: list[Code], index: dict[tuple[str, ...], list[int]],
                  shown: frozenset[tuple[str, ...]]) -> tuple[ProseMatch, Code] | None:
    """The course unit whose own prose (beyond ``shown``, what the release shows) the cell
    ``text`` holds most of, with what it holds; None when it holds none.

    Args:
        index: :func:`prose_index` of ``sources``.
    """
    mine = prose(text)
    positions = {p for i in range(len(mine) - PROSE_WORDS + 1)
                 if (run := mine[i:i + PROSE_WORDS]) not in shown
                 for p in index.get(run, ())}
    matches = [(found_prose(mine, _prose_runs(sources[p].source), shown), p)
               for p in sorted(positions)]
    if not matches:
        return None
    found, position = max(matches, key=lambda m: (m[0].words, -m[1]))
    return found, sources[position]


def _with_prose(cell: str, student: str, text: str, found: list[Pair], sources: list[Code],
                index: dict[tuple[str, ...], list[int]], given: Boilerplate) -> list[Pair]:
    """The pair of the cell with the course unit of :func:`closest_prose`, that prose counted
    (:attr:`Pair.prose`); none when the cell holds none. The pair is the closest of ``found``
    with that unit, or one of prose alone."""
    closest = closest_prose(text, sources, index, given.shown)
    if closest is None:
        return []
    words, course = closest
    alike = [p for p in found if p.other is course]
    if alike:
        pair = max(alike, key=lambda p: (p.similarity, p.tokens))
    else:
        learner = Code(student, cell, Unit("", text, (), (1, text.count("\n") + 1)), text)
        pair = Pair(cell, learner, course, 0.0, 0, Overlap((0, 0), (0.0, 0.0), ((), ())))
    return [dataclasses.replace(pair, prose=words.words, passages=words.passages)]


def learner_pairs(cells: dict[str, dict[str, str]], boilerplate: dict[str, Boilerplate],
                  sources: list[Code], threshold: float = THRESHOLD) -> list[Pair]:
    """For each cell, the most similar units of every two learners that share code (each
    pair once, the learner first in alphabetical order as :attr:`Pair.learner`).

    What both may have taken from the course's own code (``sources``) is set aside from the
    rare tokens of a pair: the course is their common source, judged by
    :func:`reference_pairs`, not evidence that one copied the other."""
    pairs = []
    # Printed once, with no cell's boilerplate: a superset of what any cell prints of it.
    course_code = frozenset().union(*(unit.print.hashes for unit in _printed(
        sources, Boilerplate(frozenset()))))
    for cell_id, given in sorted(boilerplate.items()):
        printed = [unit for student in sorted(cells) if cell_id in cells[student]
                   for unit in _learner(student, cell_id, cells[student][cell_id], given)]
        index = _index(printed)
        common = given.common | course_code
        found: dict[tuple[str, str], list[Pair | None]] = defaultdict(list)
        for item in printed:
            for position in _candidates(item, index):
                other = printed[position]
                if item.code.owner < other.code.owner:
                    found[item.code.owner, other.code.owner].append(
                        _pair(cell_id, item, other, common))
        pairs += [best for key in sorted(found) if (best := _best(found[key], threshold))]
    return pairs


def with_rarity(pairs: list[Pair], cells: dict[str, dict[str, str]],
                boilerplate: dict[str, Boilerplate]) -> list[Pair]:
    """``pairs`` with :attr:`Pair.elsewhere` set: how many other learners of the cell hold at
    least half of the pair's shared fingerprints, of how many (a passage many learners share
    is common, not copied from one place)."""
    held = {(cell_id, student): frozenset().union(*(p.print.hashes for p in _learner(
                student, cell_id, answers[cell_id], given)))
            for cell_id, given in boilerplate.items()
            for student, answers in cells.items() if cell_id in answers}
    found = []
    for pair in pairs:
        others = [hashes for (cell_id, student), hashes in held.items() if cell_id == pair.cell
                  and student not in (pair.learner.owner, pair.other.owner)]
        common = sum(1 for hashes in others if 2 * len(hashes & pair.shared) >= len(pair.shared))
        found.append(dataclasses.replace(pair, elsewhere=(common, len(others))))
    return found


def class_cells(course: Course, chapter: str
                ) -> tuple[dict[str, dict[str, str]], list[tuple[str, str]]]:
    """student -> grade id -> source of each solution cell in the autograded notebooks (the
    learner's code under the release's grade ids), and the notebooks that could not be read."""
    cells: dict[str, dict[str, str]] = {}
    unreadable = []
    for student in course.students("autograded", chapter):
        path = course.notebook("autograded", student, chapter)
        try:
            nb = nbformat.read(str(path), as_version=4)
            cells[student] = {cell_id: cell_source(cell) for _, cell in solution_cells(nb)
                              if (cell_id := grade_id(cell))}
        except Exception as exc:  # one odd file must not stop the check of the class
            unreadable.append((student, f"{type(exc).__name__}: {str(exc)[:200]}"))
    return cells, unreadable


def _hashes(codes: Iterable[str]) -> frozenset[int]:
    return frozenset(hashes_of([unit for code in codes for unit in normalise(code)],
                               NOISE_TOKENS))


def _answers(course: Course, chapter: str, cells: set[str]) -> dict[str, str]:
    """grade id -> the course's answer (the source notebook's solution cell) of ``cells``;
    none without a source notebook (then learners who follow the text share that answer with
    each other, and may be flagged)."""
    path = course.source_notebook(chapter)
    if not cells or not path.is_file():
        return {}
    nb = nbformat.read(str(path), as_version=4)
    return {cell_id: cell_source(cell) for _, cell in solution_cells(nb)
            if (cell_id := grade_id(cell)) in cells}


def stub_hashes(course: Course, chapter: str, dictated: Iterable[str] = DICTATED,
                common: dict[str, tuple[str, ...]] | None = None) -> dict[str, Boilerplate]:
    """grade id -> the base code of each solution cell: the release's stub of that cell and
    every other code cell of the release (code that every learner is given, such as the
    notebook's demonstrations, is no sign of copying), and for an exercise of ``dictated`` the
    course's own answer (which honest learners write too); with what honest answers write
    alike (``common``: grade id -> normalised words of honest answers, all cells' counting in
    each; by default the corpus that ships with the course,
    :func:`autograder.copies.common.shipped_common`).

    Raises:
        FileNotFoundError: the chapter has no release notebook.
    """
    path = course.release_notebook(chapter)
    if not path.is_file():
        raise FileNotFoundError(f"no release notebook at {path}; release the chapter first "
                                f"(python -m autograder release {chapter})")
    release = nbformat.read(str(path), as_version=4)
    stubs = {cell_id: cell_source(cell) for _, cell in solution_cells(release)
             if (cell_id := grade_id(cell))}
    shown = [cell_source(cell) for cell in release.cells if cell.cell_type == "code"
             and cell_source(cell) not in stubs.values()]
    answers = _answers(course, chapter, {solution_cell(e) for e in dictated} & set(stubs))
    shown_hashes = _hashes(shown)
    common = shipped_common() if common is None else common
    # Honest code is common in every cell: the split-heads lines of a multi-head attention
    # answer are what an honest split_heads holds too.
    alike = common_hashes((words for cell in common.values() for words in cell), NOISE_TOKENS)
    text = _released_text(
        tuple(path.read_text(encoding="utf-8") for path in (
            course.release_notebook(c) for c in CHAPTERS) if path.is_file()),
        tuple(path.read_text(encoding="utf-8") for path in (
            course.root / "README.md", *sorted((course.root / "docs").glob("*.md")))
            if path.is_file()))
    return {cell_id: Boilerplate(shown_hashes | _hashes([stub, answers.get(cell_id, "")]),
                                 alike, text | _answer_prose(answers.get(cell_id, "")))
            for cell_id, stub in stubs.items()}


@functools.lru_cache(maxsize=4)
def _released_text(notebooks: tuple[str, ...], documents: tuple[str, ...]
                   ) -> frozenset[tuple[str, ...]]:
    """The runs of words of every cell of the release's notebooks (every chapter's: a learner
    has read the earlier ones), text and code alike, and of the course's ``documents`` (its
    README and guides, which learners may quote too)."""
    cells = [cell for text in notebooks for cell in nbformat.reads(text, as_version=4).cells]
    return (shown_runs((cell_source(c) for c in cells if c.cell_type == "code"), code=True)
            | shown_runs([*(cell_source(c) for c in cells if c.cell_type != "code"),
                          *documents], code=False))


def _answer_prose(answer: str) -> frozenset[tuple[str, ...]]:
    """A dictated exercise's answer is given, its words too."""
    return shown_runs([answer], code=True) if answer else frozenset()


# How the code of a pair was compared.
HOW = ("once names, comments, docstrings, asserts, layout, equivalent spellings and the order "
       "of definitions are set aside, and beyond the code every learner is given")


def rarity(pair: Pair) -> str:
    """How rare the match of ``pair`` is, in words."""
    found, compared = pair.elsewhere
    rare = (f"{pair.rare} of the tokens in common lie in runs that no honest answer of the "
            "course's corpus holds; ")
    if not compared:
        return rare + "no other learner of the cell to compare with"
    return (f"{rare}{found} of the {compared} other learner(s) of the cell hold most of the "
            "shared code too")


# Words of the course's prose quoted in a flag (the report shows them all).
QUOTED_WORDS = 40


def prose_sentence(pair: Pair) -> str:
    """What of the course's own prose the learner's cell holds, in words ("" for none)."""
    if not pair.prose:
        return ""
    quoted = " ... ".join(pair.passages).split(" ")
    more = " ..." if len(quoted) > QUOTED_WORDS else ""
    return (f" The answer holds {pair.prose} words of the course's own docstrings and "
            f"comments, which the release does not show: \"{' '.join(quoted[:QUOTED_WORDS])}"
            f"{more}\".")


def _copied_reason(pair: Pair, report: str, policy: str, threshold: float) -> str:
    where = f"{pair.other.owner} ({pair.other.place})"
    mine, other = pair.overlap.shares
    text = (f"{pair.cell}: {other:.0%} of the course's own code in {where} is in this answer "
            f"and {mine:.0%} of this answer comes from it ({pair.tokens} tokens in common, "
            f"{HOW}; {rarity(pair)}).{prose_sentence(pair)} Compare them side by side in "
            f"{report}.")
    if pair.other.owner in TUTORIAL_STYLE_FILES:
        text += (" That file follows the structure of public tutorials, so code taken from "
                 "such a tutorial matches it as well.")
    return f"{text} {policy_sentence(policy, zeroes(pair, policy, threshold))}"


# Partners named in one similar_submissions reason; the report lists them all.
MAX_PARTNERS = 10


def _similar_reason(cell: str, found: list[tuple[str, Pair]], report: str, policy: str
                    ) -> str:
    others = ", ".join(f"{other} ({pair.similarity:.0%}: {min(pair.overlap.shares):.0%} "
                       f"and {max(pair.overlap.shares):.0%} of either, {pair.tokens} tokens "
                       f"in common; {rarity(pair)})" for other, pair in found[:MAX_PARTNERS])
    if len(found) > MAX_PARTNERS:
        others += f" and {len(found) - MAX_PARTNERS} other learner(s)"
    return (f"{cell}: this answer and that of {others} are alike {HOW}. Compare them side by "
            f"side in {report}. {policy_sentence(policy, False)}")


def flags_of(pairs: Iterable[Pair], chapter: str, threshold: float = THRESHOLD,
             policy: str = DEFAULT_POLICY) -> dict[str, list[Flag]]:
    """student -> their ``copied_reference`` and ``similar_submissions`` flags, by cell: one
    per cell and kind, a learner's partners most similar first; each says what the course's
    ``policy`` for copies did with the score."""
    report = f"similarity/{chapter}.html"
    flags: dict[str, list[Flag]] = defaultdict(list)
    partners: dict[tuple[str, str], list[tuple[str, Pair]]] = defaultdict(list)
    for pair in pairs:
        if not pair.flagged(threshold):
            continue
        if pair.other.course:
            flags[pair.learner.owner].append(
                Flag(COPIED_REFERENCE, pair.cell,
                     _copied_reason(pair, report, policy, threshold)))
        else:
            partners[pair.learner.owner, pair.cell].append((pair.other.owner, pair))
            partners[pair.other.owner, pair.cell].append((pair.learner.owner, pair))
    for (student, cell), found in partners.items():
        found.sort(key=lambda item: (-item[1].similarity, item[0]))
        flags[student].append(Flag(SIMILAR_SUBMISSIONS, cell,
                                   _similar_reason(cell, found, report, policy)))
    return {student: sorted(found, key=lambda f: (f.cell or "", f.code))
            for student, found in sorted(flags.items())}


def check_chapter(
    course: Course, chapter: str, *, threshold: float = THRESHOLD
) -> ChapterCheck:
    """Compare every graded learner of ``course``'s ``chapter`` with the course's code and with
    each other, write their ``similarity`` flags and the class report
    ``<course>/similarity/<chapter>.html``, and apply the course's policy for copies
    (:mod:`autograder.copies.policy`; by default a flag never changes a score).

    Idempotent: the same submissions give the same flags and the same report.

    Raises:
        FileNotFoundError: the chapter has no release notebook.
        ValueError: ``threshold`` is not in (0, 1].
    """
    if not 0 < threshold <= 1:
        raise ValueError(f"the threshold is a share of code, in (0, 1]; got {threshold}")
    course = course.resolved()
    boilerplate = stub_hashes(course, chapter)
    cells, unreadable = class_cells(course, chapter)
    sources = course_sources(course)
    pairs = with_rarity(reference_pairs(cells, sources, boilerplate, threshold)
                        + learner_pairs(cells, boilerplate, sources, threshold), cells,
                        boilerplate)
    pairs.sort(key=lambda p: (-p.similarity, -p.tokens, p.cell, p.learner.owner,
                              p.other.label))
    policy = copy_policy(course)
    flags = flags_of(pairs, chapter, threshold, policy)
    for student in sorted(cells):
        _store(course, student, chapter, flags.get(student, []))
    apply_policy(course, chapter, zeroed_cells(pairs, policy, threshold))
    check = ChapterCheck(chapter, threshold, sorted(cells), pairs, flags, unreadable)
    check.report = write_report(check, course.folder / "similarity" / f"{chapter}.html")
    return check


def _store(course: Course, student: str, chapter: str, flags: list[Flag]) -> None:
    """Replace a learner's ``similarity`` flags (no file is created for none)."""
    if flags or course.flags_file(student, chapter).is_file():
        write_flags(course, student, chapter, "similarity", flags)


def after_grading(course: Course, chapters: Iterable[str], summaries: list) -> list:
    """Check each graded chapter of ``course`` for copies (the whole class of the chapter, not
    only the learners just graded) and return ``summaries``
    (:class:`~autograder.grade.store.Summary`) with their learners' flags read again.

    A failure of the check is a warning that names the command to run again: the grades are
    stored by then, and copy detection never changes them.
    """
    for chapter in dict.fromkeys(chapters):
        try:
            check_chapter(course, chapter)
        except Exception as exc:  # the grades are safe; say how to finish the check
            warnings.warn(f"copy detection of {chapter} failed ({type(exc).__name__}: {exc}); "
                          f"the grades are stored. Run `python -m autograder similarity "
                          f"{chapter}` to check again", RuntimeWarning, stacklevel=2)
    return [dataclasses.replace(s, flags=tuple(read_flags(course, s.student, s.chapter)))
            for s in summaries]


def flag_rows(check: ChapterCheck) -> list[str]:
    """Aligned lines ``student  cell  flag  similar to  similarity  tokens`` of the flagged
    pairs of ``check``, most similar first."""
    header = ("student", "cell", "flag", "similar to", "similarity", "tokens")
    rows = []
    for pair in check.pairs:
        if pair.flagged(check.threshold):
            code = COPIED_REFERENCE if pair.other.course else SIMILAR_SUBMISSIONS
            rows.append((pair.learner.owner, pair.cell, code, pair.other.label,
                         f"{pair.similarity:.0%}", str(pair.tokens)))
    if not rows:
        return []
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
            for row in [header, *rows]]
