"""Calibrate copy detection: how similar copies and honest answers score, and what flags.

    .venv/bin/python benchmarks/similarity_calibration.py [--rates] [--sweep] [--time-class N]

Copies (must be flagged): for every exercise, its reference in ``transformer_ref`` and its
solution cell, pasted into the exercise's cell four ways: as they are; reformatted (docstrings
and comments gone, another layout); reformatted with every local name and argument renamed;
and that pasted after a helper of the learner's own, with a print, in one longer cell. Then
the disguises of ``tests/fixtures/copies.py`` (:data:`DISGUISES`: trimmed of argument checks,
helpers inlined, equivalent spellings, asserts and an unused counter added, every local,
argument, private helper and attribute renamed, docstrings and comments dropped), each alone
and all combined, with the rates of pastes flagged by library (NumPy chapters 1-6, PyTorch
7-11), and of collusion pairs (an honest answer and a copy of it disguised the same way)
flagged. ``--rates`` also measures how many words of the course's own docstrings and comments
the honest answers hold (:mod:`autograder.copies.prose`), against the figure that flags.

Honest work (must not be flagged): the sample class's learners who write their own answers or
the mutants' valid alternatives and bugs (``tests/fixtures/sample_class.py``), every mutant
(``tests/fixtures/mutants``), and the answers of learners who follow the notebook's hints,
to the letter or in their own way, or a tutorial's structure with their own lines
(``tests/fixtures/honest_styles.py``, ``tests/fixtures/literal_followers.py``), each
against the course's code and against each other.

Prints, per group, the pairs' similarities (:mod:`autograder.copies.detect`: containment
in both directions) with the shared tokens, the closest honest pairs, and what the current
figures flag; then the exercises whose text dictates their code (where an honest answer
reaches the flag when the course's answer counts), which ``copy_pairs.DICTATED`` must list.
``--rates`` prints only the rates and the honest pairs flagged. ``--sweep`` also counts, for
other noise, size and threshold figures, the copies flagged and the honest answers flagged.
As a baseline, copydetect on the code as written (its own tokeniser, its defaults of 25
characters) scores the same copies.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import io
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autograder.copies import detect as similarity  # noqa: E402
from autograder.copies import pairs as copy_pairs  # noqa: E402
from autograder.copies.common import common_hashes, common_words, write_common  # noqa: E402
from autograder.copies.fingerprints import hashes_of  # noqa: E402
from autograder.copies.normalise import normalise  # noqa: E402
from autograder.copies.prose import MIN_PROSE_WORDS, prose  # noqa: E402
from autograder.course import ROOT, Course  # noqa: E402
from autograder.exercises.registry import all_exercises  # noqa: E402
from autograder.notebook import cell_source, grade_id, solution_cells  # noqa: E402
from tests.fixtures.copies import DISGUISES, FORMS, disguise  # noqa: E402
from tests.fixtures.honest_styles import HONEST, honest_corpus, honest_source  # noqa: E402
from tests.fixtures.mutants import all_mutants  # noqa: E402
from tests.fixtures.sample_class import HONEST_KINDS, build_class, mutant_source  # noqa: E402

Cells = dict[str, dict[str, str]]


def cell_of(exercise: str) -> str:
    return exercise.replace(".", "_") + "_solution"


# ----------------------------------------------------------------------------- copies


def originals() -> list[tuple[str, str, str]]:
    """``(exercise, origin, code)`` of what a copier pastes: each exercise's reference in
    ``transformer_ref`` and its solution cell."""
    import nbformat

    solutions = {}
    for notebook in sorted(ROOT.glob("solutions/ch*/ch*.ipynb")):
        nb = nbformat.read(str(notebook), as_version=4)
        solutions |= {grade_id(c): cell_source(c) for _, c in solution_cells(nb)}
    found = []
    for exercise in all_exercises():
        module, attribute = exercise.reference.split(":")
        reference = textwrap.dedent(inspect.getsource(
            getattr(importlib.import_module(module), attribute)))
        found += [(exercise.id, "reference", reference),
                  (exercise.id, "solution", solutions[cell_of(exercise.id)])]
    return found


def copies() -> Cells:
    """``copy <exercise> <origin> <form>`` -> {cell: pasted code}."""
    return {f"copy {exercise} {origin} {form}": {cell_of(exercise): change(code)}
            for exercise, origin, code in originals() for form, change in FORMS.items()}


# The way that leaves a paste none of the course's words: what its code alone gives away.
CODE_ALONE = "docstrings and comments dropped"
# Each way of :data:`DISGUISES` alone, then all of them but dropping the docstrings (a hasty
# copier's), then all of them.
WAYS: dict[str, tuple[str, ...]] = {"verbatim": ()} | {way: (way,) for way in DISGUISES} | {
    "all but the docstrings": tuple(w for w in DISGUISES if w != CODE_ALONE),
    "all combined": tuple(DISGUISES)}


def disguised(code: str, way: str) -> str:
    return code if way == "verbatim" else disguise(code, *WAYS[way])


# ----------------------------------------------------------------------------- honest work


def sample_class_cells() -> tuple[dict[str, Cells], list[str]]:
    """chapter -> the honest learners' cells in the sample class, and their names."""
    import nbformat

    by_chapter: dict[str, Cells] = {}
    learners = []
    with tempfile.TemporaryDirectory() as folder:
        rows = build_class(Path(folder) / "class")
        for row in rows:
            if row.kind not in HONEST_KINDS:
                continue
            path = Path(folder) / "class" / row.learner / row.chapter / f"{row.chapter}.ipynb"
            nb = nbformat.read(str(path), as_version=4)
            by_chapter.setdefault(row.chapter, {})[f"{row.learner} ({row.kind})"] = {
                grade_id(c): cell_source(c) for _, c in solution_cells(nb)}
            learners.append(f"{row.learner}/{row.chapter}")
    return by_chapter, learners


def mutant_cells() -> Cells:
    cells: Cells = {}
    for mutant in all_mutants():
        try:  # a function, with the helpers it calls, as the sample class pastes it
            code = mutant_source(mutant.exercise, mutant.fn.__name__)
        except (AttributeError, AssertionError):  # a class, or made by a factory: as written
            code = textwrap.dedent(inspect.getsource(mutant.fn))
        kind = "valid" if mutant.valid else "bug"
        cells[f"mutant {mutant.exercise} {kind}: {mutant.name}"] = {cell_of(mutant.exercise): code}
    return cells


def honest_cells() -> Cells:
    return {f"{entry.learner} {entry.exercise}": {cell_of(entry.exercise): honest_source(entry)}
            for entry in HONEST}


# ----------------------------------------------------------------------------- measuring


def exercise_of(cell: str) -> str:
    """``ch08_decoder_layer_solution`` -> ``ch08.decoder_layer``."""
    return cell.removesuffix("_solution").replace("_", ".", 1)


def all_stubs(dictated=copy_pairs.DICTATED) -> dict[str, similarity.Boilerplate]:
    """grade id -> the base code of that cell, for every chapter; the course's answer of
    ``dictated`` among it; what honest answers write alike is the whole corpus of
    :func:`honest_corpus` (:func:`without` leaves authors out)."""
    course = Course.of(ROOT)
    found: dict[str, similarity.Boilerplate] = {}
    for chapter in sorted(p.name for p in (ROOT / "notebooks").glob("ch*")):
        found |= similarity.stub_hashes(course, chapter, dictated, common={})
    return without(found, frozenset())


def author(learner: str) -> str:
    """Who wrote an answer of the calibration: the first word of its learner's name (a
    corpus author's name, ``hint-a``, ``ada``; ``mutant`` or ``copy`` for the others)."""
    return learner.split()[0]


_CORPUS: list[tuple[str, str, str]] = []


def corpus_words() -> list[tuple[str, str, str]]:
    """``(author, grade id, words)`` of each normalised unit of the honest corpus."""
    if not _CORPUS:
        for name, cell, code in honest_corpus():
            _CORPUS.extend((name, cell, words) for words in
                           common_words([(cell, code)]).get(cell, []))
    return _CORPUS


def shipped_corpus() -> dict[str, list[str]]:
    """What ``autograder/copies/common_code.json`` holds: the whole honest corpus."""
    return common_words((cell, code) for _, cell, code in honest_corpus())


_WITHOUT: dict[frozenset[str], frozenset[int]] = {}


def without(boilerplate: dict[str, similarity.Boilerplate], authors: frozenset[str]
            ) -> dict[str, similarity.Boilerplate]:
    """``boilerplate`` whose common code is the honest corpus but the answers of ``authors``
    (an honest answer is measured against what the others write alike, never its own)."""
    if authors not in _WITHOUT:
        _WITHOUT[authors] = common_hashes((text for name, _, text in corpus_words()
                                           if name not in authors), copy_pairs.NOISE_TOKENS)
    return {cell: dataclasses.replace(given, common=_WITHOUT[authors])
            for cell, given in boilerplate.items()}


def by_chapter(cells: Cells) -> dict[str, Cells]:
    grouped: dict[str, Cells] = {}
    for learner, answers in cells.items():
        for cell, code in answers.items():
            grouped.setdefault(cell.split("_")[0], {}).setdefault(learner, {})[cell] = code
    return grouped


def honest_work() -> list[tuple[str, list[Cells], bool]]:
    """``(group, its classes, whether its learners are compared with each other)`` of the
    honest answers: the sample class by chapter, the mutants, and the hint-following and
    tutorial-style learners by chapter."""
    class_cells, _ = sample_class_cells()
    return [("sample class", list(class_cells.values()), True),
            ("mutants", [mutant_cells()], False),
            ("hints and tutorials", list(by_chapter(honest_cells()).values()), True)]


def compared(work, sources, boilerplate) -> dict[str, list]:
    """group -> its pairs: each answer against the course's code, and the learners of one
    class against each other."""
    group_of = {learner: group for group, classes, _ in work for cells in classes
                for learner in cells}
    everyone: Cells = {}  # a learner of several chapters answers all their cells
    for _, classes, _ in work:
        for cells in classes:
            for learner, answers in cells.items():
                everyone.setdefault(learner, {}).update(answers)
    found: dict[str, list] = {}
    # Against the course's code rarity flags nothing (Pair.flagged), so one comparison serves.
    for p in similarity.reference_pairs(everyone, sources, boilerplate):
        found.setdefault(f"{group_of[p.learner.owner]} vs course", []).append(p)
    for group, classes, paired in work:
        for cells in classes if paired else ():
            # The learners of a class are measured against the corpus without any of them.
            authors = frozenset(author(learner) for learner in cells)
            found.setdefault(f"{group}, learner pairs", []).extend(
                similarity.learner_pairs(cells, without(boilerplate, authors), sources))
    return found


def dictated_exercises(sources, work=None) -> set[str]:
    """The exercises where an honest answer reaches the flag in normalised form, against the
    course's code or another honest learner's: :data:`copy_pairs.DICTATED` when up to date."""
    groups = compared(work or honest_work(), sources, all_stubs(dictated=()))
    return {exercise_of(p.cell) for pairs in groups.values() for p in pairs
            if p.flagged(copy_pairs.THRESHOLD)}


def measure(sources, boilerplate, work) -> dict[str, list]:
    """group -> its pairs (similarity, tokens, learner, other) under the current figures, the
    """
    groups = {"copies vs course": similarity.reference_pairs(copies(), sources, boilerplate)}
    measured: dict[str, list] = {}
    for group, pairs in (groups | compared(work, sources, boilerplate)).items():
        for p in pairs:
            measured.setdefault(group, []).append(
                (p.similarity, p.tokens, p.learner.label, p.other.label))
    return measured


def baseline(copy_cells: Cells) -> dict[str, list[float]]:
    """form -> copydetect's own share of the original found in each paste, on the code as
    written (its tokeniser, 25-character runs), for comparison with the normalised figures."""
    from copydetect import CodeFingerprint, compare_files

    def printed(code: str) -> CodeFingerprint:
        return CodeFingerprint("cell.py", 25, 1, fp=io.StringIO(code), language="python")

    shares: dict[str, list[float]] = {}
    for learner, answers in copy_cells.items():
        form = next(f for f in FORMS if learner.endswith(f" {f}"))
        original = next(iter(copy_cells[learner[: -len(form)] + "verbatim"].values()))
        overlap = compare_files(printed(next(iter(answers.values()))), printed(original))
        shares.setdefault(form, []).append(float(overlap[1][1]))
    return shares


def quantiles(values: list[float]) -> str:
    if not values:
        return "none"
    ordered = sorted(values)
    pick = [ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1)))] for q in
            (0.0, 0.5, 0.9, 1.0)]
    return "min {:.2f}  median {:.2f}  90% {:.2f}  max {:.2f}".format(*pick)


def flagged(pairs, min_tokens: int, threshold: float) -> list:
    return [p for p in pairs if p[0] >= threshold and p[1] >= min_tokens]


def report(groups: dict[str, list]) -> None:
    figures = (copy_pairs.NOISE_TOKENS, copy_pairs.MIN_TOKENS, copy_pairs.THRESHOLD)
    print("noise {} tokens, at least {} shared tokens, threshold {:.2f}".format(*figures))
    for group, pairs in groups.items():
        sized = [p for p in pairs if p[1] >= copy_pairs.MIN_TOKENS]
        hit = flagged(pairs, copy_pairs.MIN_TOKENS, copy_pairs.THRESHOLD)
        print(f"\n{group}: {len(pairs)} pair(s), {len(sized)} with >= {copy_pairs.MIN_TOKENS} "
              f"shared tokens, {len(hit)} flagged")
        print(f"  similarity (pairs with enough tokens): {quantiles([p[0] for p in sized])}")
        if group.startswith("copies"):
            missed = [p for p in pairs if p not in hit]
            for p in missed:
                print(f"  not flagged: {p[0]:.2f} {p[1]:4d} tokens  {p[2]}  ~ {p[3]}")
            continue
        closest = sorted(sized, key=lambda p: (-p[0], -p[1]))[:5]
        for p in closest:
            print(f"  closest: {p[0]:.2f} {p[1]:4d} tokens  {p[2]}  ~ {p[3]}")


def sweep_line(groups: dict[str, list], min_tokens: int) -> str:
    """``threshold: copies flagged/copies with enough tokens honest pairs flagged`` for each
    threshold of the sweep."""
    copies_ = [p for name, pairs in groups.items() if name.startswith("copies") for p in pairs]
    honest = [p for name, pairs in groups.items() if not name.startswith("copies")
              for p in pairs]
    big = sum(1 for p in copies_ if p[1] >= min_tokens)
    return "   ".join(f"{threshold:.2f}: {len(flagged(copies_, min_tokens, threshold))}/{big} "
                      f"{len(flagged(honest, min_tokens, threshold))}"
                      for threshold in (0.8, 0.85, 0.9, 0.95, 1.0))


def sweep(sources, work) -> None:
    """The copies and honest pairs flagged for other figures."""
    print("\nsweep: copies flagged (of those with enough tokens) / honest pairs flagged")
    chosen = copy_pairs.NOISE_TOKENS
    for noise in (8, 10, 12, 15):
        copy_pairs.NOISE_TOKENS = noise
        groups = measure(sources, all_stubs(), work)
        for min_tokens in (40, 50, 60, 80):
            print(f"  noise {noise:2d}  min {min_tokens:3d}  " + sweep_line(groups, min_tokens))
    copy_pairs.NOISE_TOKENS = chosen


def time_class(size: int) -> None:
    """Seconds to check a chapter 2 class of ``size`` learners (the sample class's readable
    notebooks over and over), the course's sources read first, then kept in memory."""
    import nbformat

    with tempfile.TemporaryDirectory() as folder:
        build_class(Path(folder) / "class", chapters=["ch02_attention"])
        notebooks = sorted((Path(folder) / "class").glob("*/ch02_attention/*.ipynb"))
        readable = []
        for path in notebooks:
            try:
                readable.append(nbformat.read(str(path), as_version=4))
            except Exception:  # the broken files of the class
                continue
        course = Course.of(ROOT, Path(folder) / "course")
        for number in range(size):
            path = course.notebook("autograded", f"learner{number:04d}", "ch02_attention")
            path.parent.mkdir(parents=True)
            nbformat.write(readable[number % len(readable)], path)
        similarity._SOURCES.clear()
        for attempt in ("first run", "second run"):
            started, cpu = time.perf_counter(), time.process_time()
            check = similarity.check_chapter(Course.of(ROOT, course.folder), "ch02_attention")
            print(f"{size} learners, {attempt}: {time.perf_counter() - started:.1f} s "
                  f"({time.process_time() - cpu:.1f} s of CPU), {len(check.pairs)} pairs, "
                  f"{len(check.flags)} learners flagged, report "
                  f"{check.report.stat().st_size / 2**20:.1f} MiB")


def library(cell: str) -> str:
    return "NumPy" if cell[:4] <= "ch06" else "PyTorch"


def rate(hit: int, total: int) -> str:
    return f"{hit}/{total} ({hit / total:.0%})" if total else "none"


def honest_alike(boilerplate) -> set[str]:
    """The pastes (``exercise origin``) that honest answers write: every fingerprint of their
    normalised code beyond the base code is in the honest corpus (no evidence can tell them
    from honest work)."""
    found = set()
    for exercise, origin, code in originals():
        given = boilerplate[cell_of(exercise)]
        if hashes_of(normalise(code)[:1], copy_pairs.NOISE_TOKENS) - given.hashes <= (
                given.common):
            found.add(f"{exercise} {origin}")
    return found


def _groups(learner: str, cell: str, verbatim: set[str], by_code: set[str], alike: set[str]
            ) -> list[str]:
    """The groups a paste counts in: its library (or dictated solution), and among those
    flagged verbatim, those flagged by their code alone and those beyond honest work."""
    exercise, origin = learner.split()
    key = ("dictated solution" if origin == "solution" and exercise in copy_pairs.DICTATED
           else library(cell))
    return [key] + [f"{key} {kind}" for kind, inside in (
        ("flagged verbatim", learner in verbatim), ("flagged by code", learner in by_code),
        ("beyond honest work", learner not in alike)) if inside and key != "dictated solution"]


def disguise_rates(sources, boilerplate) -> None:
    """Per way of disguise: pastes of the course's code flagged, by library (the solution
    cells of the dictated exercises apart: an honest literal follower writes them); of the
    pastes flagged verbatim, and of those flagged by their code alone (once their docstrings
    and comments are dropped: the copies long and rare enough to be evidence without the
    course's words), how many are still flagged once disguised; and of the pastes beyond
    honest work (not :func:`honest_alike`)."""
    alike = honest_alike(boilerplate)
    print(f"\npastes flagged, each way of disguise alone and combined (NumPy, PyTorch; the "
          f"solution cells of dictated exercises apart; of the pastes flagged verbatim; of "
          f"those flagged by their code alone, {CODE_ALONE}; of the pastes beyond honest "
          f"work; {len(alike)} pastes are what honest answers write: {sorted(alike)}):")

    def pasted(way: str) -> tuple[Cells, set[str]]:
        cells = {f"{exercise} {origin}": {cell_of(exercise): disguised(code, way)}
                 for exercise, origin, code in originals()}
        return cells, {p.learner.owner for p in similarity.reference_pairs(
            cells, sources, boilerplate) if p.flagged(copy_pairs.THRESHOLD)}

    verbatim, by_code = pasted("verbatim")[1], pasted(CODE_ALONE)[1]
    for way in WAYS:
        cells, hit = pasted(way)
        counts: dict[str, list[int]] = {}
        for learner, answers in cells.items():
            for group in _groups(learner, next(iter(answers)), verbatim, by_code, alike):
                counts.setdefault(group, [0, 0])[0] += learner in hit
                counts[group][1] += 1
        print(f"  {way:32} " + "   ".join(f"{key} {rate(*counts[key])}"
                                           for key in sorted(counts)))
        if way == "all combined":
            print("    not flagged all combined, beyond honest work: " + ", ".join(
                sorted(learner for learner in cells if learner not in hit | alike)))


def collusion_rates(boilerplate, sources) -> None:
    """Per way of disguise: pairs of an honest answer and a disguised copy of it flagged (and
    of the pairs flagged undisguised)."""
    print("\ncollusion pairs flagged (an honest answer and a disguised copy of it; then of the "
          "pairs flagged undisguised):")
    entries = [entry for entry in HONEST if cell_of(entry.exercise) in boilerplate]
    evidence: set[int] = set()
    for way in WAYS:
        cells = {}
        for number, entry in enumerate(entries):
            code = honest_source(entry)
            cells[f"a{number}"] = {cell_of(entry.exercise): code}
            cells[f"b{number}"] = {cell_of(entry.exercise): disguised(code, way)}
        found = {(p.learner.owner, p.other.owner)
                 for name in {entry.learner for entry in entries}
                 for p in similarity.learner_pairs(
                     {key: answers for key, answers in cells.items()
                      if entries[int(key[1:])].learner == name},
                     without(boilerplate, frozenset({name})), sources)
                 if p.flagged(copy_pairs.THRESHOLD)}
        hit = {n for n in range(len(entries)) if (f"a{n}", f"b{n}") in found}
        evidence = evidence or hit
        counts: dict[str, list[int]] = {}
        for number, entry in enumerate(entries):
            key = library(cell_of(entry.exercise))
            for group in (key, f"{key} flagged undisguised") if number in evidence else (key,):
                counts.setdefault(group, [0, 0])[0] += number in hit
                counts[group][1] += 1
        print(f"  {way:32} " + "   ".join(f"{key} {rate(*counts[key])}"
                                           for key in sorted(counts)))


def honest_rates(sources, boilerplate, work) -> None:
    """Honest answers flagged, per group, with the closest ones."""
    print("\nhonest pairs flagged:")
    for group, pairs in compared(work, sources, boilerplate).items():
        hit = [p for p in pairs if p.flagged(copy_pairs.THRESHOLD)]
        print(f"  {group:40} {rate(len(hit), len(pairs))}")
        for p in hit:
            print(f"    {p.similarity:.2f} {p.tokens:4d} tokens  {p.learner.label}  ~ "
                  f"{p.other.label}")
        found = [p for p in pairs if p.found_in_learner >= copy_pairs.THRESHOLD]
        rarest = max(found, key=lambda p: p.rare, default=None)
        if rarest is not None:
            print(f"    most rare tokens at the threshold: {rarest.rare} "
                  f"({rarest.learner.label} ~ {rarest.other.label})")


def prose_margin(sources, boilerplate, work) -> None:
    """How much of the course's own prose (docstrings and comments the release does not show)
    honest answers hold, against the :data:`MIN_PROSE_WORDS` that flag: the margin."""
    answers = [(learner, cell, text) for _, classes, _ in work for cells in classes
               for learner, found in cells.items() for cell, text in found.items()]
    written = [prose(text) for _, _, text in answers]
    index = similarity.prose_index(sources)
    found = [(closest, learner) for learner, cell, text in answers if (
        closest := similarity.closest_prose(text, sources, index, boilerplate[cell].shown))]
    (most, course), learner = max(found, key=lambda f: f[0][0].words)
    print(f"\nhonest answers' own prose: {len(answers)} answers, {sum(map(bool, written))} with "
          f"comments or docstrings, {sum(map(len, written)):,} words; most words in runs of the "
          f"course's own prose: {most.words} ({learner} ~ {course.label}: {most.passages}), "
          f"{MIN_PROSE_WORDS} flag")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", action="store_true",
                        help="also count flags for other noise, size and threshold figures")
    parser.add_argument("--rates", action="store_true",
                        help="only the rates of disguised copies, collusions and honest work")
    parser.add_argument("--write-common", action="store_true",
                        help="only write autograder/copies/common_code.json from the honest "
                             "corpus")
    parser.add_argument("--time-class", type=int, metavar="N",
                        help="only time the check of a chapter 2 class of N learners")
    args = parser.parse_args(argv)
    if args.write_common:
        write_common(shipped_corpus())
        return 0
    if args.time_class:
        time_class(args.time_class)
        return 0
    started = time.perf_counter()
    sources = similarity.course_sources(Course.of(ROOT))
    print(f"{len(sources)} units of course code")
    work = honest_work()
    boilerplate = all_stubs()
    disguise_rates(sources, boilerplate)
    collusion_rates(boilerplate, sources)
    if args.rates:
        honest_rates(sources, boilerplate, work)
        prose_margin(sources, boilerplate, work)
        return 0
    report(measure(sources, boilerplate, work))
    dictated = dictated_exercises(sources, work)
    print(f"\ndictated (an honest answer reaches the flag in normalised form): {sorted(dictated)}")
    if dictated != copy_pairs.DICTATED:
        print(f"  copy_pairs.DICTATED is out of date: it lists {sorted(copy_pairs.DICTATED)}")
    copy_cells = copies()
    print("\nbaseline, copydetect on the code as written (share of the original in the paste):")
    for form, shares in baseline(copy_cells).items():
        print(f"  {form:17} {quantiles(shares)}")
    if args.sweep:
        sweep(sources, work)
    print(f"\n{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
