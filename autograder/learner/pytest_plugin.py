"""A pytest plugin that self-checks chapter notebooks: one test item per graded exercise.

``notebooks/conftest.py`` enables it for the learner notebooks, so from the course folder::

    pytest notebooks/ch02_attention
    pytest notebooks/ch02_attention/ch02_attention.ipynb

and for a copy saved anywhere else::

    pytest -p autograder.learner.pytest_plugin ~/my-copy/ch02_attention.ipynb

Notebooks are collected only when the command line names them (or a folder holding them other
than a project root), so ``pytest`` with its configured test paths never runs them. Each
notebook is executed once by :func:`autograder.learner.selfcheck.run_selfcheck` (visible checks
only) and every exercise item reports the check's message.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.learner.selfcheck import SelfCheckReport, read_notebook, run_selfcheck
from autograder.notebook import exercise_cells


class ExerciseFailed(Exception):  # noqa: N818 - the outcome of a learner's exercise
    """An exercise's visible checks failed; the text is the check's message."""


def _named_on_command_line(path: Path, config: pytest.Config) -> bool:
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        return False
    path = path.resolve()
    base = Path(config.invocation_params.dir)
    for arg in config.args:
        target = (base / arg.split("::")[0]).resolve()
        if target == path:
            return True
        # A folder counts unless it is a project root (`pytest .` runs the test suite only).
        if (target.is_dir() and not (target / "pyproject.toml").exists()
                and target in path.parents):
            return True
    return False


def collect_notebook(file_path: Path, parent: pytest.Collector) -> NotebookFile | None:
    """The collector of ``file_path`` when it is a notebook named on the command line."""
    if (file_path.suffix == ".ipynb" and ".ipynb_checkpoints" not in file_path.parts
            and _named_on_command_line(file_path, parent.config)):
        return NotebookFile.from_parent(parent, path=file_path)
    return None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> NotebookFile | None:
    return collect_notebook(file_path, parent)


class NotebookFile(pytest.File):
    """A chapter notebook; its items are the exercises of its graded test cells."""

    _report: SelfCheckReport | None = None

    def collect(self):
        try:
            nb = read_notebook(self.path)
        except ValueError as exc:
            raise self.CollectError(str(exc)) from None
        for _, exercise in exercise_cells(nb):
            yield ExerciseItem.from_parent(self, name=exercise, exercise=exercise)

    def report(self) -> SelfCheckReport:
        """The self-check of this notebook, run once for all of its items."""
        if self._report is None:
            self._report = run_selfcheck(self.path)
        return self._report


class ExerciseItem(pytest.Item):
    """One exercise: passes when its test cell ran without an error."""

    def __init__(self, *, exercise: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.exercise = exercise

    def runtest(self) -> None:
        assert isinstance(self.parent, NotebookFile)
        outcome = self.parent.report().outcome(self.exercise)
        if not outcome.passed:
            raise ExerciseFailed(outcome.message)

    def repr_failure(self, excinfo, style=None) -> str:
        if isinstance(excinfo.value, ExerciseFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.path.name}::{self.exercise}"
