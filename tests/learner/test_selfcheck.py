"""Learner self-checks: visible checks only, per exercise, on any copy of a notebook."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.course import ROOT
from autograder.learner.selfcheck import (
    ExerciseOutcome,
    SelfCheckReport,
    read_notebook,
    run_selfcheck,
)
from autograder.notebook import strip_hidden_tests
from tests.fixtures.mutants import all_mutants
from tests.fixtures.sample_class import BUGS, load_chapter, work

CHAPTER = "ch02_attention"
SOURCE = ROOT / "solutions" / CHAPTER / f"{CHAPTER}.ipynb"
RELEASE = ROOT / "notebooks" / CHAPTER / f"{CHAPTER}.ipynb"
BUG = next(m for m in all_mutants() if m.fn.__name__ == BUGS["ch02.causal_mask"])


def copy_with_marker(folder: Path) -> Path:
    """The source notebook (solutions filled in) whose hidden-test regions, if they ever ran,
    would leave a file ``HIDDEN_RAN`` next to the notebook."""
    nb = nbformat.read(SOURCE, as_version=4)
    planted = 0
    for cell in nb.cells:
        if "### END HIDDEN TESTS" in cell.source:
            cell.source = cell.source.replace(
                "### END HIDDEN TESTS", "open('HIDDEN_RAN', 'w').close()\n### END HIDDEN TESTS")
            planted += 1
    assert planted == 4
    path = folder / f"{CHAPTER}.ipynb"
    nbformat.write(nb, path)
    return path


@pytest.mark.slow
def test_a_solution_filled_copy_passes_and_hidden_checks_never_run(tmp_path) -> None:
    path = copy_with_marker(tmp_path)
    before = path.read_bytes()
    report = run_selfcheck(path)
    assert [o.exercise for o in report.outcomes] == [
        "ch02.softmax", "ch02.causal_mask", "ch02.padding_mask",
        "ch02.scaled_dot_product_attention"]
    assert report.passed, report.lines()
    for outcome in report.outcomes:
        assert outcome.message == f"{outcome.exercise} (visible checks): all passed."
    assert not (tmp_path / "HIDDEN_RAN").exists(), "a hidden test region was executed"
    assert path.read_bytes() == before, "the self-check must not change the file"
    assert "4 of 4 exercises pass" in report.lines()[0]


@pytest.mark.slow
def test_a_buggy_copy_shows_the_checks_hint_and_the_rest_pass(tmp_path) -> None:
    chapter = load_chapter(CHAPTER)
    nb = work(chapter, dict.fromkeys(chapter.exercises, "solution") | {BUG.exercise: "bug"})
    path = tmp_path / "elsewhere" / "my_copy.ipynb"  # any name, any folder
    path.parent.mkdir()
    nbformat.write(nb, path)
    report = run_selfcheck(path)
    failed = [o for o in report.outcomes if not o.passed]
    assert [o.exercise for o in failed] == [BUG.exercise]
    assert BUG.hint in failed[0].message and "(visible checks) failed" in failed[0].message
    assert "FAIL  ch02.causal_mask" in "\n".join(report.lines())


@pytest.mark.slow
def test_pytest_on_the_untouched_release_fails_each_exercise_with_the_stub_message(
    tmp_path,
) -> None:
    """``pytest -p autograder.learner.pytest_plugin COPY`` on a release copy saved elsewhere."""
    copy = tmp_path / f"{CHAPTER}.ipynb"
    copy.write_bytes(RELEASE.read_bytes())
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "autograder.learner.pytest_plugin", "-p", "no:xdist",
         "-p", "no:cacheprovider", "-q", str(copy)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "4 failed" in result.stdout
    for exercise in ("ch02.softmax", "ch02.causal_mask", "ch02.padding_mask",
                     "ch02.scaled_dot_product_attention"):
        assert f"FAILED {copy.name}::{exercise}" in result.stdout or exercise in result.stdout
    assert result.stdout.count("raised NotImplementedError: the exercise is not done yet") >= 4
    assert "Traceback" not in result.stdout  # the check's message, not a stack


def collected(args: list[str], cwd: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist",
         "-p", "no:cacheprovider", *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    return result.stdout + result.stderr


def test_course_notebooks_are_collected_only_when_named() -> None:
    out = collected(["notebooks/ch02_attention"], ROOT)  # through notebooks/conftest.py
    assert "ch02_attention.ipynb::ch02.softmax" in out
    assert "4 tests collected" in out


def test_the_test_suite_never_collects_notebooks(tmp_path) -> None:
    """With configured test paths, or a project root as argument, no notebook is collected."""
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "notebooks").mkdir()
    (project / "notebooks" / f"{CHAPTER}.ipynb").write_bytes(RELEASE.read_bytes())
    (project / "tests" / "test_one.py").write_text("def test_one():\n    pass\n")
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    plugin = ["-p", "autograder.learner.pytest_plugin"]
    for args in (plugin, [*plugin, "."]):
        out = collected(args, project)
        assert "1 test collected" in out and ".ipynb" not in out, out


@pytest.mark.slow
def test_command_numbers_cells_as_jupyterlab_and_prints_no_kernel_warning(tmp_path) -> None:
    """A failing cell is named by the number JupyterLab shows (from 1, markdown cells counted),
    and the kernel says nothing on stderr (over plain TCP it warns on every start)."""
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# My notes"),
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell("x / 0"),
    ])
    path = tmp_path / "notes.ipynb"
    nbformat.write(nb, path)
    result = subprocess.run([sys.executable, "-m", "autograder", "selfcheck", str(path)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "cell 3: ZeroDivisionError: division by zero" in result.stdout, result.stdout
    assert result.stderr == "", result.stderr


def test_the_kernel_never_sees_the_graders_secret(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("AUTOGRADER_SECRET", "the-graders-own-secret")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import os\nraise RuntimeError(repr(os.environ.get('AUTOGRADER_SECRET')))")])
    path = tmp_path / "peek.ipynb"
    nbformat.write(nb, path)
    assert run_selfcheck(path).cell_errors == [(1, "RuntimeError: None")]


def test_hidden_regions_are_stripped() -> None:
    source = ('from autograder import check\ncheck("ch02.softmax", softmax)\n'
              '### BEGIN HIDDEN TESTS\ncheck("ch02.softmax", softmax, hidden=True)\n'
              '### END HIDDEN TESTS\nprint("after")')
    assert strip_hidden_tests(source) == ('from autograder import check\n'
                                          'check("ch02.softmax", softmax)\nprint("after")')
    assert strip_hidden_tests("x = 1") == "x = 1"


def test_unreadable_or_missing_notebooks_get_clear_errors(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="pass the path of your .ipynb"):
        read_notebook(tmp_path / "missing.ipynb")
    bad = tmp_path / "bad.ipynb"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match="not a readable notebook"):
        read_notebook(bad)


def test_the_report_shows_the_notes_of_a_passing_exercise(tmp_path) -> None:
    note = ("Note: out of scaled_dot_product_attention came back float64 where the exercise\n"
            "asks for float32; the values are right, so this costs no points.")
    report = SelfCheckReport(tmp_path / "ch02.ipynb", [
        ExerciseOutcome("ch02.softmax", 9, True, "ch02.softmax (visible checks): all passed."),
        ExerciseOutcome("ch02.scaled_dot_product_attention", 30, True,
                        "ch02.scaled_dot_product_attention (visible checks): all passed.\n"
                        + note)])
    lines = report.lines()
    assert report.passed and "2 of 2 exercises pass" in lines[0]
    assert lines[1:] == ["  PASS  ch02.softmax", "  PASS  ch02.scaled_dot_product_attention",
                         *(f"        {line}" for line in note.splitlines())]
