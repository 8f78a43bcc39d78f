"""A sample class of learners for demonstrating and testing the grading pipeline.

:func:`build_class` writes, from the released notebooks of the NumPy chapters
``ch02_attention`` and ``ch05_layer_norm_ffn`` and of the PyTorch chapter
``ch11_language_model``, a folder of learner folders::

    <out>/<learner>/<chapter>/<chapter>.ipynb     the learner's notebook, its modification
                                                  time fixed (when it was handed in)
    <out>/expected.csv                            what grading should give

(the layout ``python -m autograder collect <out>`` reads), and optionally an LMS zip of
``<learner>_<chapter>.ipynb`` files. The class holds honest learners with full marks (answers
of their own from :mod:`autograder.demo.own_work`, or valid alternatives from
:mod:`autograder.demo.mutants`), partial work, buggy work (bugs from
:mod:`autograder.demo.mutants`, pasted as source), untouched stubs, cheaters (monkeypatching
the grader, reading the solution notebook, importing the reference, editing or deleting a
locked test cell, pasting the course's solutions) and broken files (bad JSON, a notebook
without cells, an empty file). Everything is deterministic: the same release gives
byte-identical files.

``expected.csv`` columns: ``learner, chapter, kind, expected_score, max_score,
expected_flags, description``. ``expected_score`` counts only exercises whose code is really
correct (a cheat scores 0); ``expected_flags`` lists flag codes that must be raised, separated
by ``;``; codes starting with ``audit:`` come from :func:`autograder.grade.audit.audit_notebook`,
``copied_reference`` from copy detection (:mod:`autograder.copies.detect`).
"""

from __future__ import annotations

import ast
import copy
import csv
import inspect
import json
import os
import re
import textwrap
import types
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode

from autograder.course import ROOT, Course
from autograder.exercises.registry import all_exercises, get_exercise
from autograder.notebook import cell_index

CHAPTERS: tuple[str, ...] = ("ch02_attention", "ch05_layer_norm_ffn", "ch11_language_model")
# The NumPy chapters alone, quick to grade: what the grading benchmarks measure.
NUMPY_CHAPTERS: tuple[str, ...] = CHAPTERS[:2]
EXPECTED_CSV = "expected.csv"
EXPECTED_COLUMNS = ("learner", "chapter", "kind", "expected_score", "max_score",
                    "expected_flags", "description")
# Kinds of learner whose flags must come from their own code, never from honest work.
HONEST_KINDS = ("honest", "alternative", "partial", "buggy", "stub")
LEARNERS: tuple[str, ...] = ("ada", "ben", "cleo", "dev", "eve", "finn", "gus", "hana", "ivy",
                             "jack", "kim", "lee", "mo")
# When each learner handed in (2025-03-01 12:00 UTC, one minute apart), as the files' times.
SUBMITTED_AT = 1_740_830_400
_ZIP_DATE = (2025, 3, 1, 12, 0, 0)

# What a learner did for an exercise.
SOLUTION, ALTERNATIVE, BUG, STUB, CHEAT = "solution", "alternative", "bug", "stub", "cheat"
PASSING = (SOLUTION, ALTERNATIVE)

# Correct alternatives and bugs, by exercise: names of functions in autograder.demo.mutants.chNN.
ALTERNATIVES = {
    "ch02.softmax": "softmax_loop",
    "ch02.causal_mask": "causal_arange",
    "ch02.padding_mask": "padding_greater_outer",
    "ch02.scaled_dot_product_attention": "sdpa_float64_loop",
    "ch05.layer_norm": "ln_manual_sums",
    "ch05.feed_forward": "ffn_where",
    "ch05.add_and_norm": "add_norm_inline",
    "ch11.decoder_only_block": "BlockNnMultiheadAttention",
    "ch11.language_model": "ModelSequential",
    "ch11.sample": "sample_inverse_cdf",
    "ch11.key_value_cache": "CacheStatic",
}
# Bugs in exercises that later exercises of the chapter do not call (a buggy softmax would also
# break the learner's attention, which calls it).
BUGS = {
    "ch02.causal_mask": "causal_strict",
    "ch02.padding_mask": "padding_off_by_one",
    "ch05.feed_forward": "ffn_no_relu",
    "ch05.add_and_norm": "add_norm_no_norm",
    "ch11.decoder_only_block": "BlockGelu",
    "ch11.sample": "sample_first_tokens",
}


@dataclass(frozen=True)
class Expected:
    """What grading one submission should give (a row of ``expected.csv``)."""

    learner: str
    chapter: str
    kind: str
    expected_score: float
    max_score: float
    expected_flags: tuple[str, ...]
    description: str


# ----------------------------------------------------------------------------- chapter material


@dataclass
class Chapter:
    """What building a learner's notebook of one chapter needs."""

    name: str
    release: NotebookNode
    exercises: list[str]  # exercise ids in notebook order
    points: dict[str, int]
    solutions: dict[str, str]  # exercise id -> solution cell source without markers

    @property
    def short(self) -> str:
        return self.name.split("_")[0]

    @property
    def max_score(self) -> int:
        return sum(self.points.values())


def function_name(exercise: str) -> str:
    """``"ch02.softmax"`` -> ``"softmax"``."""
    return exercise.split(".", 1)[1]


def _grade_id(exercise: str, role: str) -> str:
    return exercise.replace(".", "_") + f"_{role}"


def _cell_index(nb: NotebookNode, wanted: str) -> int:
    try:
        return cell_index(nb, wanted)
    except ValueError as exc:
        raise ValueError(f"{exc}; release the chapter again (python -m autograder release)"
                         ) from None


def _without_markers(source: str) -> str:
    lines = [line for line in source.splitlines()
             if not re.match(r"\s*#+\s*(BEGIN|END) SOLUTION", line)]
    return "\n".join(lines)


def load_chapter(name: str, root: str | os.PathLike = ROOT) -> Chapter:
    """Read the release and the solutions of chapter ``name`` under ``root``.

    Raises:
        FileNotFoundError: the release or the source notebook is missing.
    """
    course = Course.of(root)
    paths = [course.release_notebook(name), course.source_notebook(name)]
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(f"no notebook at {path}; the sample class needs the "
                                    f"released and the source notebook of {name} "
                                    "(python -m autograder release)")
    release, source = (nbformat.read(str(p), as_version=4) for p in paths)
    exercises = [e for e in all_exercises() if e.chapter == name]
    solutions = {e.id: _without_markers(source.cells[
        _cell_index(source, _grade_id(e.id, "solution"))].source) for e in exercises}
    return Chapter(name, release, [e.id for e in exercises], {e.id: e.points for e in exercises},
                   solutions)


def mutant_source(exercise: str, mutant_name: str) -> str:
    """The source of a mutant from :mod:`autograder.demo.mutants` (a function or a class),
    named as the exercise's solution defines it and preceded by the module-level helpers it
    uses (as a learner would write them).

    Type annotations are dropped: they name aliases of the mutant module that a notebook lacks.
    """
    import importlib

    module = importlib.import_module(f"autograder.demo.mutants.{exercise.split('.')[0]}")
    return _answer_source(module, mutant_name, exercise, with_helpers=True)


def own_source(exercise: str, learner: str) -> str | None:
    """The answer ``learner`` wrote to ``exercise`` (:mod:`autograder.demo.own_work`), named
    as the exercise's function; None when they have none of their own."""
    from autograder.demo import own_work

    name = own_work.OWN_WORK.get(learner, {}).get(exercise)
    if name is None:
        return None
    return _answer_source(own_work, name, exercise, with_helpers=False,
                          extra=[(cell_name, getattr(own_work, helper))
                                 for cell_name, helper in own_work.CELL_HELPERS.get(name, ())])


def _answer_source(module: types.ModuleType, name: str, exercise: str, *,
                   with_helpers: bool, extra: Iterable[tuple[str, Any]] = ()) -> str:
    """The cell: imports, the helpers (those ``fn`` uses, with ``with_helpers``; then
    ``extra``, each as ``(its name in the cell, the definition)``), then the answer named as
    the exercise defines it."""
    fn = getattr(module, name)
    helpers: list[Any] = []
    if with_helpers:
        _collect_helpers(fn, module, helpers)
    parts = ["import math\n\nimport numpy as np"]
    parts += [_plain_source(h, h.__name__) for h in helpers]
    parts += [_plain_source(definition, cell_name) for cell_name, definition in extra]
    parts.append(_plain_source(fn, get_exercise(exercise).defines))
    return "\n\n\n".join(parts) + "\n"


class _NoAnnotations(ast.NodeTransformer):
    """Drops the type annotations of arguments, returns and annotated assignments."""

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:  # noqa: N802
        node.returns = None
        arguments = node.args
        for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                    arguments.vararg, arguments.kwarg]:
            if arg is not None:
                arg.annotation = None
        self.generic_visit(node)
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST | None:  # noqa: N802
        if node.value is None:
            return None
        return ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node)


def _plain_source(obj: Any, name: str) -> str:
    """The source of a function or class ``obj`` named ``name``, without type annotations."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(obj)))
    definition = tree.body[0]
    assert isinstance(definition, (ast.FunctionDef, ast.ClassDef))
    definition.name = name
    return ast.unparse(ast.fix_missing_locations(_NoAnnotations().visit(tree)))


def _names_used(obj: Any) -> list[str]:
    """The global names a function (or the methods and bases of a class) refers to."""
    if isinstance(obj, type):
        names = [base.__name__ for base in obj.__bases__]
        members = [inspect.unwrap(getattr(v, "__func__", v)) for v in vars(obj).values()]
        codes = [m.__code__ for m in members if isinstance(m, types.FunctionType)]
    else:
        names, codes = [], [inspect.unwrap(obj).__code__]
    while codes:
        code = codes.pop(0)
        names += code.co_names
        codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return list(dict.fromkeys(names))


def _collect_helpers(obj: Any, module: types.ModuleType, found: list[Any]) -> None:
    """Append the functions and classes of ``module`` that ``obj`` uses (their own helpers
    first)."""
    for name in _names_used(obj):
        helper = getattr(module, name, None)
        if (isinstance(helper, (types.FunctionType, type))
                and helper.__module__ == module.__name__
                and helper not in found and helper is not obj):
            _collect_helpers(helper, module, found)
            if helper not in found:
                found.append(helper)


# ----------------------------------------------------------------------------- notebook edits


def _set_solution(nb: NotebookNode, exercise: str, source: str) -> None:
    nb.cells[_cell_index(nb, _grade_id(exercise, "solution"))].source = source


def _new_cell(nb: NotebookNode, after_grade_id: str | None, source: str, cell_id: str) -> None:
    """Insert a learner's code cell (after the given cell, or after the first code cell)."""
    if after_grade_id is None:
        index = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    else:
        index = _cell_index(nb, after_grade_id)
    cell = nbformat.v4.new_code_cell(source)
    cell.id = cell_id
    nb.cells.insert(index + 1, cell)


def work(chapter: Chapter, plan: dict[str, str], learner: str | None = None) -> NotebookNode:
    """The release with each exercise answered as ``plan`` says (missing ids stay stubs).

    ``plan`` maps an exercise id to ``"solution"``, ``"alternative"``, ``"bug"``, ``"stub"``
    or ``"cheat"`` (left a stub here). A ``"solution"`` is the learner's own correct answer
    (:mod:`autograder.demo.own_work`) where they wrote one, else the course's solution pasted
    in (which copy detection flags).
    """
    nb = copy.deepcopy(chapter.release)
    for exercise in chapter.exercises:
        state = plan.get(exercise, STUB)
        if state == SOLUTION:
            own = own_source(exercise, learner) if learner else None
            _set_solution(nb, exercise, own or chapter.solutions[exercise])
        elif state == ALTERNATIVE:
            _set_solution(nb, exercise, mutant_source(exercise, ALTERNATIVES[exercise]))
        elif state == BUG:
            _set_solution(nb, exercise, mutant_source(exercise, BUGS[exercise]))
        elif state not in (STUB, CHEAT):  # a cheat starts from the stub; the caller edits it
            raise ValueError(f"plan state must be solution, alternative, bug, stub or cheat; got "
                             f"{state!r} for {exercise}")
    return nb


# ----------------------------------------------------------------------------- the learners


@dataclass
class Submission:
    """One learner's hand-in for one chapter."""

    learner: str
    chapter: str
    kind: str
    description: str
    states: dict[str, str]  # exercise id -> what the learner did
    data: bytes  # the file's bytes
    flags: tuple[str, ...] = ()
    expected_score: float | None = None  # None: the points of the passing exercises

    def expected(self, chapter: Chapter) -> Expected:
        score = self.expected_score
        if score is None:
            score = sum(chapter.points[e] for e, s in self.states.items() if s in PASSING)
        return Expected(self.learner, self.chapter, self.kind, float(score),
                        float(chapter.max_score), self.flags, self.description)


def _notebook_bytes(nb: NotebookNode) -> bytes:
    nbformat.validate(nb)
    return (nbformat.writes(nb) + "\n").encode("utf-8")


def _all(chapter: Chapter, state: str) -> dict[str, str]:
    return dict.fromkeys(chapter.exercises, state)


def _honest(learner: str, kind: str, description: str, chapter: Chapter,
            plan: dict[str, str]) -> Submission:
    states = _all(chapter, STUB) | plan
    return Submission(learner, chapter.name, kind, description, states,
                      _notebook_bytes(work(chapter, states, learner)))


def _monkeypatcher(chapter: Chapter) -> Submission:
    nb = work(chapter, {})
    _new_cell(nb, None, (
        "import numpy as np\n"
        "from autograder.exercises import registry\n"
        "\n"
        "# every check passes from now on\n"
        "np.testing.assert_allclose = lambda *args, **kwargs: None\n"
        "registry.grade_function = lambda exercise_id, fn, hidden=False: registry.CheckResult(\n"
        "    True, f\"{exercise_id} (visible checks): all passed.\")\n"
    ), f"{chapter.short}-extra-01")
    return Submission("finn", chapter.name, "cheat-monkeypatch",
                      "stubs, plus a cell that replaces the grader's check with one that "
                      "always passes", _all(chapter, CHEAT), _notebook_bytes(nb),
                      ("audit:monkeypatch",))


def _solution_reader(chapter: Chapter) -> Submission:
    nb = work(chapter, {})
    for exercise in chapter.exercises:
        _set_solution(nb, exercise, (
            "import json\n"
            "from pathlib import Path\n"
            "\n"
            f"name = \"{chapter.name}\"\n"
            "for folder in [Path.cwd(), *Path.cwd().parents]:\n"
            "    found = folder / \"solutions\" / name / f\"{name}.ipynb\"\n"
            "    if found.is_file():\n"
            "        break\n"
            "cells = json.loads(found.read_text())[\"cells\"]\n"
            "sources = [\"\".join(c[\"source\"]) for c in cells]\n"
            f"exec(next(s for s in sources if \"def {function_name(exercise)}(\" in s))\n"
        ))
    return Submission("gus", chapter.name, "cheat-reads-solutions",
                      "every answer executes the function found in the solution notebook",
                      _all(chapter, CHEAT), _notebook_bytes(nb),
                      ("audit:solution-access", "audit:dynamic-code"))


def _reference_importer(chapter: Chapter) -> Submission:
    # Not the first exercise: later answers call it (add_and_norm calls layer_norm), and a
    # cheat there would take honest answers down with it.
    cheated = chapter.exercises[1:]
    states = _all(chapter, SOLUTION) | dict.fromkeys(cheated, CHEAT)
    nb = work(chapter, states, "hana")
    from autograder.exercises.registry import get_exercise

    for exercise in cheated:
        module, _, attribute = get_exercise(exercise).reference.partition(":")
        name = function_name(exercise)
        line = (f"from {module} import {attribute}" if attribute == name
                else f"from {module} import {attribute} as {name}")
        _set_solution(nb, exercise, line + "\n")
    return Submission("hana", chapter.name, "cheat-imports-reference",
                      f"imports the reference for {', '.join(cheated)}; the rest is her own",
                      states, _notebook_bytes(nb), ("audit:reference",))


def _test_cell_editor(chapter: Chapter) -> Submission:
    cheated = chapter.exercises[-1]
    states = _all(chapter, SOLUTION) | {cheated: CHEAT}
    nb = work(chapter, states)
    test = nb.cells[_cell_index(nb, _grade_id(cheated, "test"))]
    test.source = f'print("{cheated} (visible checks): all passed.")'
    return Submission("ivy", chapter.name, "cheat-edits-test-cell",
                      f"left {cheated} a stub and replaced its locked test cell by a print; "
                      "pasted the course's solutions for the rest",
                      states, _notebook_bytes(nb), ("test_cell_edited", "copied_reference"))


def _test_cell_deleter(chapter: Chapter) -> Submission:
    cheated = chapter.exercises[-1]
    states = _all(chapter, SOLUTION) | {cheated: CHEAT}
    nb = work(chapter, states)
    del nb.cells[_cell_index(nb, _grade_id(cheated, "test"))]
    return Submission("jack", chapter.name, "cheat-deletes-test-cell",
                      f"left {cheated} a stub and deleted its locked test cell; pasted the "
                      "course's solutions for the rest",
                      states, _notebook_bytes(nb), ("test_cell_deleted", "copied_reference"))


def _broken_json(chapter: Chapter) -> Submission:
    text = _notebook_bytes(work(chapter, _all(chapter, SOLUTION)))
    return Submission("kim", chapter.name, "broken-json",
                      "the file was cut off in the middle (invalid JSON)",
                      _all(chapter, STUB), text[: len(text) // 2], ("unreadable_notebook",), 0)


def _no_cells(chapter: Chapter) -> Submission:
    nb = copy.deepcopy(chapter.release)
    nb.cells = []
    return Submission("lee", chapter.name, "empty-notebook", "a notebook without cells",
                      _all(chapter, STUB), _notebook_bytes(nb), ("empty_notebook",), 0)


def _zero_bytes(chapter: Chapter) -> Submission:
    return Submission("mo", chapter.name, "empty-file", "a file of 0 bytes",
                      _all(chapter, STUB), b"", ("unreadable_notebook",), 0)


def _submissions(chapters: dict[str, Chapter]) -> list[Submission]:
    ch02, ch05 = chapters.get(CHAPTERS[0]), chapters.get(CHAPTERS[1])
    out: list[Submission] = []
    for chapter in chapters.values():
        ex = chapter.exercises
        out += [
            _honest("ada", "honest", "correct answers of her own", chapter,
                    _all(chapter, SOLUTION)),
            _honest("ben", "alternative", "correct answers written differently (loops, "
                    "np.where, manual sums)", chapter, _all(chapter, ALTERNATIVE)),
            _honest("cleo", "partial", "some exercises done, the others untouched", chapter,
                    dict.fromkeys(ex[: max(1, len(ex) // 2)], SOLUTION)),
            _honest("dev", "buggy", "common bugs in some exercises", chapter,
                    _all(chapter, SOLUTION) | dict.fromkeys((e for e in ex if e in BUGS), BUG)),
            _honest("eve", "stub", "the release, untouched", chapter, {}),
            _monkeypatcher(chapter),
        ]
    if ch02 is not None:
        out += [_honest("hana", "honest", "correct answers of her own", ch02,
                        _all(ch02, SOLUTION)),
                _solution_reader(ch02), _test_cell_editor(ch02), _broken_json(ch02),
                _zero_bytes(ch02)]
    if ch05 is not None:
        out += [_honest("kim", "honest", "correct answers of his own", ch05,
                        _all(ch05, SOLUTION)),
                _reference_importer(ch05), _test_cell_deleter(ch05), _no_cells(ch05)]
    return sorted(out, key=lambda s: (s.learner, s.chapter))


# ----------------------------------------------------------------------------- writing


def build_class(
    out_dir: str | os.PathLike,
    *,
    root: str | os.PathLike = ROOT,
    chapters: Iterable[str] = CHAPTERS,
    learners: Iterable[str] | None = None,
    zip_path: str | os.PathLike | None = None,
) -> list[Expected]:
    """Write the sample class into ``out_dir`` (and an LMS zip at ``zip_path``, if given).

    Args:
        out_dir: the folder of learner folders to create (it may exist; files are replaced).
        root: the course root whose ``notebooks/`` and ``solutions/`` the class starts from.
        chapters: any of :data:`CHAPTERS`.
        learners: only these learners (default: the whole class, :data:`LEARNERS`).
        zip_path: also write ``<learner>_<chapter>.ipynb`` files into this zip.

    Returns:
        The rows of ``expected.csv``, sorted by learner and chapter.

    Raises:
        ValueError: a chapter the sample class does not cover.
        FileNotFoundError: a chapter's release or source notebook is missing.
    """
    chosen = list(chapters)
    unknown = [c for c in chosen if c not in CHAPTERS]
    if unknown:
        raise ValueError(f"the sample class covers {', '.join(CHAPTERS)}; got {unknown}. "
                         "Pass chapters from that list")
    material = {name: load_chapter(name, root) for name in chosen}
    submissions = _submissions(material)
    if learners is not None:
        wanted = set(learners)
        unknown = sorted(wanted - set(LEARNERS))
        if unknown:
            raise ValueError(f"unknown learners {unknown}; the class is {', '.join(LEARNERS)}")
        submissions = [s for s in submissions if s.learner in wanted]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for sub in submissions:
        folder = out / sub.learner / sub.chapter
        folder.mkdir(parents=True, exist_ok=True)
        notebook = folder / f"{sub.chapter}.ipynb"
        notebook.write_bytes(sub.data)
        when = SUBMITTED_AT + 60 * LEARNERS.index(sub.learner)
        os.utime(notebook, (when, when))
    if zip_path is not None:
        with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as archive:
            for sub in submissions:
                info = zipfile.ZipInfo(f"{sub.learner}_{sub.chapter}.ipynb", _ZIP_DATE)
                archive.writestr(info, sub.data)
    rows = [s.expected(material[s.chapter]) for s in submissions]
    write_expected(out / EXPECTED_CSV, rows)
    return rows


def write_expected(path: str | os.PathLike, rows: Iterable[Expected]) -> None:
    """Write ``expected.csv``."""
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(EXPECTED_COLUMNS)
        for row in rows:
            writer.writerow([row.learner, row.chapter, row.kind, f"{row.expected_score:g}",
                             f"{row.max_score:g}", ";".join(row.expected_flags),
                             row.description])


def read_expected(path: str | os.PathLike) -> list[Expected]:
    """Read an ``expected.csv`` written by :func:`build_class`."""
    with open(path, encoding="utf-8", newline="") as handle:
        return [Expected(r["learner"], r["chapter"], r["kind"], float(r["expected_score"]),
                         float(r["max_score"]),
                         tuple(f for f in r["expected_flags"].split(";") if f),
                         r["description"])
                for r in csv.DictReader(handle)]


@dataclass
class Comparison:
    """How graded results compare with ``expected.csv``; ``problems`` empty means all agree."""

    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def compare(expected: Iterable[Expected], graded: dict[tuple[str, str], tuple[float, set[str]]]
            ) -> Comparison:
    """Compare ``graded`` (``(learner, chapter) -> (score, flag codes)``) with ``expected``.

    Scores must match. Every expected flag must be raised. Learners of the honest kinds must not
    get audit findings or integrity flags (flags about their own failing cells are allowed).
    """
    result = Comparison()
    for row in expected:
        key = (row.learner, row.chapter)
        if key not in graded:
            result.problems.append(f"{row.learner}/{row.chapter}: not graded")
            continue
        score, flags = graded[key]
        if score != row.expected_score:
            result.problems.append(f"{row.learner}/{row.chapter} ({row.kind}): score {score:g}, "
                                   f"expected {row.expected_score:g}")
        missing = [f for f in row.expected_flags if f not in flags]
        if missing:
            result.problems.append(f"{row.learner}/{row.chapter} ({row.kind}): flags "
                                   f"{sorted(flags)} lack {missing}")
        if row.kind in HONEST_KINDS:
            wrong = sorted(f for f in flags if f not in ("cell_error",))
            if wrong:
                result.problems.append(f"{row.learner}/{row.chapter} ({row.kind}): honest work "
                                       f"flagged {wrong}")
    return result


def main(argv: list[str] | None = None) -> int:
    """``python -m autograder.demo.sample_class OUT [--zip FILE]``: write the sample class."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m autograder.demo.sample_class",
                                     description="Write the sample class of learners.")
    parser.add_argument("out", help="folder to write the learner folders into")
    parser.add_argument("--zip", dest="zip_path", help="also write an LMS zip here")
    args = parser.parse_args(argv)
    rows = build_class(args.out, zip_path=args.zip_path)
    print(json.dumps({"submissions": len(rows), "learners": len({r.learner for r in rows})}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
