"""Feedback pages of mutant submissions, every chapter: no hidden check shows, no pass sits
next to a lost point, and a failed verification reads as a sentence.

For each exercise, a seeded draw of one of its bugs (``tests/fixtures/mutants``). Each
chapter's page is rendered as nbgrader's feedback renders it (the course's ``LearnersView``
preprocessor, then :class:`FeedbackExporter` with nbgrader's feedback template) from graded
test cells whose outputs are those of the real ``check`` calls, run in this process as the
kernel would run them, in the three ways an exercise loses its points:

* the bug, graded as the grader runs the cell (the visible checks, then the hidden ones);
* the visible checks passed, the hidden checks failed on the bug;
* every check passed in the notebook, and the grader's own check (hidden) failed on the bug.

For one exercise of each chapter, the notebook printed the passes of a valid alternative where
a check passed in it, and one more cell passes, to show that its "all passed" stays where it
belongs.
"""

from __future__ import annotations

import contextlib
import copy
import html
import io
import random
import re
from collections import defaultdict
from pathlib import Path

import nbformat
import nbgrader
import pytest
from nbformat import NotebookNode
from nbgrader.utils import determine_grade

from autograder.course import ROOT, Course
from autograder.exercises.registry import (
    CheckFailed,
    all_exercises,
    get_exercise,
    grade_function,
    render_pass,
)
from autograder.grade.learner import fail_cell
from autograder.nbgrader_hooks.commands import LearnersView
from autograder.notebook import exercise_ids, graded_test_cells, nbgrader_metadata
from autograder.steps.feedback import NOT_CONFIRMED, FeedbackExporter
from tests.fixtures.mutants import Mutant, all_mutants

# Among the first 300 seeds, the draw whose checks run fastest (about 2 s on one core): the
# checks of some PyTorch answers take seconds each.
SEED = 77
CHAPTERS = sorted({exercise.chapter for exercise in all_exercises()})
# Inputs a check message names: calls such as causal_mask(4) and shapes such as (2, 3, 8, 7).
CALL = re.compile(r"\b\w+\([^()]*\)")
SHAPE = re.compile(r"\(\d+(?:, \d+)+\)")
# A graded cell of nbgrader's feedback template: its heading holds the cell's score.
PANEL = re.compile(r'<div class="panel panel-primary nbgrader_cell">(.*?)(?=<div class="panel '
                   r'panel-primary nbgrader_cell">|\Z)', re.S)
SCORE = re.compile(r"Score: ([\d.]+) / ([\d.]+)")


def drawn() -> dict[str, tuple[Mutant, Mutant | None]]:
    """Exercise id -> a bug and, for one exercise of each chapter, a valid alternative (the
    checks of a correct answer take seconds on the PyTorch chapters), drawn with
    :data:`SEED`."""
    found: dict[str, dict[bool, list[Mutant]]] = defaultdict(lambda: defaultdict(list))
    for mutant in all_mutants():
        found[mutant.exercise][mutant.valid].append(mutant)
    rng = random.Random(SEED)
    passing = {rng.choice(sorted(e.id for e in all_exercises() if e.chapter == chapter))
               for chapter in CHAPTERS}
    return {exercise: (rng.choice(kinds[False]),
                       rng.choice(kinds[True]) if exercise in passing else None)
            for exercise, kinds in sorted(found.items())}


def failure(failed: CheckFailed) -> NotebookNode:
    """The error output IPython shows for a :class:`CheckFailed`."""
    return nbformat.v4.new_output("error", ename="CheckFailed", evalue=str(failed),
                                  traceback=failed._render_traceback_())


def run(code: str, name: str, fn: object) -> list[NotebookNode]:
    """The outputs a kernel shows for ``code`` run with ``fn`` bound to ``name``: what it
    printed, then the check that failed."""
    printed, failed = io.StringIO(), None
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(code, "<cell>", "exec"), {name: fn})  # noqa: S102 - the cell's code
    except CheckFailed as exc:
        failed = exc
    outputs = [nbformat.v4.new_output("stream", name="stdout", text=printed.getvalue())]
    return [o for o in outputs if o.text] + ([failure(failed)] if failed else [])


def graded_cells(cell: NotebookNode, exercise: str, bug: Mutant,
                 valid: Mutant | None) -> tuple[list[NotebookNode], str]:
    """Copies of the graded test ``cell`` (its source as the grader runs it, hidden checks
    included): the three ways of losing its points, and, given ``valid``, a pass; and the
    message of the hidden checks that failed on ``bug``.

    With ``valid``, the notebook printed its passes first where a check passed in it: what
    ``check`` prints for ``valid``. The hidden failure is what ``check`` raises for ``bug``,
    from :func:`grade_function`, which judges a subclass of the course's own class like any
    other (``check`` refuses one first, as the first copy shows)."""
    passes = []
    for hidden in (False, True) if valid else ():
        result = grade_function(exercise, valid.fn, hidden=hidden)
        assert result.passed, f"{valid.id}: {result.message}"
        passes.append(nbformat.v4.new_output("stream", name="stdout",
                                             text=render_pass(result) + "\n"))
    secret = grade_function(exercise, bug.fn, hidden=True).message
    assert "(hidden checks) failed: " in secret, f"{bug.id}: {secret}"
    outputs = [run(cell.source, get_exercise(exercise).defines, bug.fn),
               [*passes[:1], failure(CheckFailed(secret))], passes] + [passes] * bool(passes)
    copies = []
    for number, given in enumerate(outputs):
        copied = copy.deepcopy(cell)
        copied.id = f"{cell.id}-{number}"
        nbgrader_metadata(copied)["grade_id"] += f"_{number}"
        copied.outputs = copy.deepcopy(given)
        copies.append(copied)
    fail_cell(copies[2], "VerificationFailed",
              "the notebook reported a pass, but the grader's own check outside the notebook "
              f"did not confirm it: {secret}")
    return copies, secret


def feedback_page(chapter: str, cells: list[NotebookNode]) -> str:
    """The feedback page of a notebook of ``cells``, as nbgrader's feedback renders it."""
    nb = nbformat.v4.new_notebook(cells=cells)
    nb, _ = LearnersView().preprocess(nb, {})
    scores = [determine_grade(cell) for cell in graded_test_cells(nb)]
    for cell, (score, _) in zip(graded_test_cells(nb), scores, strict=True):
        nbgrader_metadata(cell)["score"] = score
    formgrader = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader"
    exporter = FeedbackExporter(
        template_name="feedback", extra_template_basedirs=[str(formgrader / "templates")],
        extra_template_paths=[str(formgrader / "static" / "node_modules" / "bootstrap" / "dist"
                                  / "css")])
    page, _ = exporter.from_notebook_node(nb, resources={"nbgrader": {
        "notebook": chapter, "score": sum(s for s, _ in scores),
        "max_score": sum(m for _, m in scores), "late_penalty": 0}})
    return page


def text_of(fragment: str) -> str:
    """What a reader sees of an HTML fragment: its text, spaces collapsed."""
    fragment = re.sub(r"<(style|script)\b.*?</\1>", " ", fragment, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def secret_inputs(diagnosis: str, seen: str) -> set[str]:
    """The calls and shapes a hidden check's ``diagnosis`` names that ``seen`` (what the
    learner sees anyway: the cell and the visible checks' messages) does not."""
    named = set(CALL.findall(diagnosis)) | set(SHAPE.findall(diagnosis))
    return {found for found in named if found not in seen}


@pytest.fixture(scope="module")
def pages() -> dict[str, tuple[str, list[str], str]]:
    """Chapter -> its page, the hidden diagnoses of its bugs, and what its learner would see
    without any hidden check (cell sources and visible messages)."""
    mutants = drawn()
    found = {}
    for chapter in CHAPTERS:
        source = nbformat.read(Course.of(ROOT).source_notebook(chapter), as_version=4)
        ids = exercise_ids(source)
        cells, secrets = [], []
        for cell in graded_test_cells(source):
            exercise = ids[nbgrader_metadata(cell)["grade_id"]]
            copies, secret = graded_cells(cell, exercise, *mutants[exercise])
            cells += copies
            secrets.append(secret)
        seen = "\n".join([c.source for c in cells] + [
            o.get("text", "") + o.get("evalue", "") for c in cells for o in c.outputs
            if "hidden checks" not in o.get("evalue", "") and o.get("ename") != "Verification"
            "Failed"])
        found[chapter] = feedback_page(chapter, cells), secrets, seen
    return found


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_hidden_check_shows_on_the_feedback_page(pages, chapter):
    page, secrets, seen = pages[chapter]
    text = text_of(page)
    assert "(hidden checks) failed" not in text and "HIDDEN TESTS" not in text
    seen = " ".join(seen.split())
    for secret in secrets:
        diagnosis = " ".join(secret.partition(" failed: ")[2].partition(" Hint: ")[0].split())
        if diagnosis[:60] not in seen:  # the visible checks may have tried the same input
            assert diagnosis[:60] not in text, f"{chapter}'s page shows: {diagnosis}"
        shown = {found for found in secret_inputs(diagnosis, seen) if found in text}
        assert not shown, f"{chapter}'s page names hidden inputs {shown}: {diagnosis}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_pass_sits_next_to_a_lost_point_and_a_failed_verification_is_a_sentence(
        pages, chapter):
    page = pages[chapter][0]
    panels = PANEL.findall(page)
    assert len(panels) == 3 * len(pages[chapter][1]) + 1, "one panel per graded cell"
    for panel in panels:
        text = text_of(panel)
        score, points = map(float, SCORE.search(text).groups())
        if score < points:
            assert not re.search(r"\bpassed\.", text), f"a pass next to a lost point: {text}"
        else:
            assert "all passed" in text, text
    sentence = " ".join(NOT_CONFIRMED.split())
    assert text_of(page).count(sentence) == len(pages[chapter][1])
