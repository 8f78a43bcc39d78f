"""Chapter notebooks: solutions run and score full, stubs score 0, the release is current.

Every test is parametrised over the chapters that have a source notebook in ``solutions/``, so
new chapters are covered as soon as they exist. Grading runs nbgrader's own ``Autograde``, which
the course's configuration routes through its sandboxed, verified grading, in a temporary course
(its own root, submissions and gradebook); the real ``autograder/course`` is never used.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import sysconfig
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook
from nbgrader.apps.api import capture_log
from nbgrader.converters import Autograde
from nbgrader.coursedir import CourseDirectory
from nbgrader.nbgraderformat import MetadataValidator
from nbgrader.validator import Validator

from autograder.course import ROOT, Course, course_config
from autograder.exercises.checking import CHECKS_ENV
from autograder.exercises.registry import all_exercises, get_exercise
from autograder.notebook import strip_hidden_tests
from autograder.steps.release import chapters_in, generate
from autograder.steps.view import ChapterStates, plan_view, write_view

CHAPTERS = chapters_in(Course.of(ROOT))
TEST_SECRET = "notebook-tests-secret"

# A graded test cell, exactly as every chapter writes it (visible check, then hidden check).
GRADED_CELL = re.compile(
    r'from autograder import check\n'
    r'check\("(?P<id>ch\d\d\.\w+)", (?P<fn>\w+)\)\n'
    r"### BEGIN HIDDEN TESTS\n"
    r'check\("(?P=id)", (?P=fn), hidden=True\)\n'
    r"### END HIDDEN TESTS"
)

pytestmark = [
    pytest.mark.skipif(not CHAPTERS, reason="no chapter notebooks in solutions/"),
    # nbgrader's own gradebook code trips this SQLAlchemy warning while autograding.
    pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning"),
]


def source_path(chapter: str) -> Path:
    return ROOT / "solutions" / chapter / f"{chapter}.ipynb"


def release_path(chapter: str) -> Path:
    return ROOT / "notebooks" / chapter / f"{chapter}.ipynb"


def nbgrader_meta(cell) -> dict:
    return dict(cell.metadata.get("nbgrader", {}))


def graded_code_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code" and nbgrader_meta(c).get("grade")]


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture(autouse=True)
def fast_mode(monkeypatch, shared_multi30k: Path | None) -> None:
    """Chapters that train (9 and 10) run their tiny configurations inside the suite."""
    monkeypatch.setenv("TRANSFORMER_COURSE_FAST", "1")
    if shared_multi30k is not None:
        monkeypatch.setenv("MULTI30K_DIR", str(shared_multi30k))


@pytest.fixture(scope="module", params=CHAPTERS)
def course(request, tmp_path_factory) -> dict:
    """A temporary course for one chapter: its source copied, then released by nbgrader."""
    chapter = request.param
    root = tmp_path_factory.mktemp(chapter)
    shutil.copytree(ROOT / "solutions" / chapter, root / "solutions" / chapter)
    generate(Course.of(root, root / "course"), [chapter])
    return {"chapter": chapter, "root": root, "course_dir": root / "course"}


# ------------------------------------------------------------------ static checks, no kernel


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_committed_notebooks_carry_no_outputs(chapter: str) -> None:
    for path in (source_path(chapter), release_path(chapter)):
        assert path.is_file(), f"{path} is missing; run `python -m autograder release`"
        nb = nbformat.read(path, as_version=4)
        for index, cell in enumerate(nb.cells):
            if cell.cell_type == "code":
                assert cell.outputs == [], f"{path.name} cell {index} has outputs; clear them"
                assert cell.execution_count is None, f"{path.name} cell {index} has a count"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_source_metadata_is_valid_nbgrader(chapter: str) -> None:
    nb = nbformat.read(source_path(chapter), as_version=4)
    nbformat.validate(nb)
    MetadataValidator().validate_nb(nb)  # unique grade ids, points on grade cells, ...
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if meta:
            assert re.fullmatch(r"[a-z0-9_]+", meta["grade_id"]), meta["grade_id"]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_graded_cells_follow_the_registry(chapter: str) -> None:
    nb = nbformat.read(source_path(chapter), as_version=4)
    graded = {}
    for cell in graded_code_cells(nb):
        match = GRADED_CELL.fullmatch(cell.source.strip())
        assert match, f"graded cell is not in the standard form:\n{cell.source}"
        exercise = get_exercise(match["id"])
        meta = nbgrader_meta(cell)
        assert exercise.chapter == chapter, f"{exercise.id} belongs to {exercise.chapter}"
        assert meta["locked"], f"graded cell of {exercise.id} must be locked"
        assert meta["points"] == exercise.points, (
            f"{exercise.id}: the cell gives {meta['points']} points, the registry "
            f"{exercise.points}; rebuild the notebook with the registry's points"
        )
        assert exercise.id not in graded, f"{exercise.id} has two graded cells"
        graded[exercise.id] = match["fn"]

    registered = [e.id for e in all_exercises() if e.chapter == chapter]
    assert sorted(graded) == sorted(registered), "graded cells and registry disagree"
    for exercise_id, fn in graded.items():
        # The solution cell that defines the graded function is a solution cell.
        defining = [c for c in nb.cells if re.search(rf"^(?:def|class) {fn}\b", c.source, re.M)]
        assert defining, f"no cell defines {fn}() for {exercise_id}"
        assert all(nbgrader_meta(c).get("solution") for c in defining), (
            f"the cell defining {fn}() must be an nbgrader solution cell"
        )


# ------------------------------------------------------------------ release is current


def test_release_matches_a_fresh_generate_assignment(course: dict) -> None:
    chapter = course["chapter"]
    fresh_dir = course["root"] / "notebooks" / chapter
    committed_dir = ROOT / "notebooks" / chapter
    assert files_under(committed_dir) == files_under(fresh_dir), (
        f"notebooks/{chapter} should hold exactly what generate_assignment writes"
    )
    fresh = nbformat.read(fresh_dir / f"{chapter}.ipynb", as_version=4)
    committed = nbformat.read(committed_dir / f"{chapter}.ipynb", as_version=4)
    hint = f"notebooks/{chapter} is stale: run `python -m autograder release`"
    assert len(committed.cells) == len(fresh.cells), hint
    for index, (old, new) in enumerate(zip(committed.cells, fresh.cells, strict=True)):
        assert (old.cell_type, old.source) == (new.cell_type, new.source), f"{hint} (cell {index})"
        assert nbgrader_meta(old) == nbgrader_meta(new), f"{hint} (metadata of cell {index})"
    assert committed.metadata == fresh.metadata, hint
    assert (committed_dir / f"{chapter}.ipynb").read_bytes() == (
        fresh_dir / f"{chapter}.ipynb"
    ).read_bytes(), f"{hint} (the files differ byte for byte)"


def test_release_keeps_no_solutions_or_hidden_tests(course: dict) -> None:
    chapter = course["chapter"]
    nb = nbformat.read(release_path(chapter), as_version=4)
    text = "\n".join(cell.source for cell in nb.cells)
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "hidden=True"):
        assert marker not in text, f"the release of {chapter} still contains {marker!r}"
    for cell in nb.cells:
        if nbgrader_meta(cell).get("solution") and cell.cell_type == "code":
            assert "raise NotImplementedError()" in cell.source


# ------------------------------------------------------------------ running the notebooks


def view_kernel(chapter: str, folder: Path) -> str:
    """A kernel that sees the course as a class's learners see it while ``chapter`` is open
    (the chapters before it closed): only the class's view of the course (no editable install,
    no checks, no answers of ``chapter``), its checks answered by the class's checking service.
    Its name, with its kernelspec under ``folder/kernels`` (put ``folder`` on JUPYTER_PATH)."""
    k = CHAPTERS.index(chapter) + 1
    view = folder / "view"
    states = ChapterStates(frozenset(CHAPTERS[:k]), frozenset(CHAPTERS[:k - 1]))
    write_view(plan_view(Course.of(ROOT), states),
               view)
    start = (f"import sys; sys.path[:0] = [{str(view)!r}, {sysconfig.get_paths()['purelib']!r}]; "
             "from ipykernel.kernelapp import launch_new_instance; launch_new_instance()")
    spec = folder / "kernels" / "class-view"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-S", "-c", start, "-f", "{connection_file}"],
        "display_name": "a class's view", "language": "python"}))
    return "class-view"


@pytest.mark.slow
def test_source_notebook_runs_and_validates(course: dict, monkeypatch, tmp_path: Path,
                                            checking_service: Path) -> None:
    """nbgrader's validator executes every cell of the solution notebook as a learner has it
    (the hidden tests left out): no errors, no stderr, every graded cell passes.

    The kernel runs in a class's view of the course while the chapter is open, so a notebook
    that needed an answer it is graded on, or a check of the kernel's own, fails here; in
    self-study the learner has all of that view and more (and autograding, below, runs the
    notebook, hidden tests included, with the whole course)."""
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    monkeypatch.setenv(CHECKS_ENV, str(checking_service))
    chapter = course["chapter"]
    source = course["root"] / "solutions" / chapter / f"{chapter}.ipynb"
    nb = nbformat.read(source, as_version=4)
    for cell in nb.cells:
        cell.source = strip_hidden_tests(cell.source)
    learners = source.with_name(f"{chapter}.learner.ipynb")  # beside its data files
    nbformat.write(nb, learners)
    config = course_config(course["root"], course["course_dir"])
    config.Execute.kernel_name = view_kernel(chapter, tmp_path)
    validator = Validator(config=config)
    validator.validate_all = True
    try:
        results = validator.validate(str(learners))
    finally:
        learners.unlink()
    assert results == {}, f"{chapter}: {results}"


@pytest.mark.slow
def test_autograde_gives_full_points_to_solutions_and_zero_to_stubs(
    course: dict, monkeypatch
) -> None:
    monkeypatch.setenv("AUTOGRADER_SECRET", TEST_SECRET)
    chapter, root = course["chapter"], course["root"]
    config = course_config(root, course["course_dir"])
    submitted = root / config.CourseDirectory.submitted_directory
    shutil.copytree(root / "solutions" / chapter, submitted / "solution" / chapter)
    shutil.copytree(root / "notebooks" / chapter, submitted / "stub" / chapter)

    for student in ("solution", "stub"):
        coursedir = CourseDirectory(config=config)
        coursedir.assignment_id, coursedir.student_id = chapter, student
        result = capture_log(Autograde(coursedir=coursedir, config=config))
        assert result["success"], result.get("log", "") + result.get("error", "")

    with Gradebook(config.CourseDirectory.db_url) as gradebook:
        for student, expect_full in (("solution", True), ("stub", False)):
            notebook = gradebook.find_submission_notebook(chapter, chapter, student)
            auto = [g for g in notebook.grades if not g.needs_manual_grade]
            assert auto, f"{chapter} has no autograded cells"
            for grade in auto:
                expected = grade.max_score if expect_full else 0
                assert grade.auto_score == expected, (
                    f"{student} scored {grade.auto_score}/{grade.max_score} on {grade.name}"
                )
            manual = [g for g in notebook.grades if g.needs_manual_grade]
            assert all(g.cell.cell_type == "markdown" for g in manual), (
                "only written answers should wait for a human"
            )
