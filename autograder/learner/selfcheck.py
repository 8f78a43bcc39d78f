"""Learner self-checks: run your own notebook and see, per exercise, whether it passes.

From a terminal, in the course folder::

    pytest notebooks/ch02_attention                         # one item per exercise
    python -m autograder selfcheck notebooks/ch02_attention/ch02_attention.ipynb
    python -m autograder selfcheck ~/my-copy/ch02_attention.ipynb     # a copy saved elsewhere

The notebook is executed top to bottom in a fresh kernel, in its own folder, exactly as the
learner would with "Run All". The messages are those of the visible checks in the notebook's
test cells. Hidden checks never run: every ``### BEGIN HIDDEN TESTS`` ... ``### END HIDDEN
TESTS`` region is removed before execution, and only a copy in memory is executed (the file on
disk is not changed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import nbformat
import zmq
from traitlets.config import Config

from autograder.notebook import cell_source, exercise_cells, strip_hidden_tests

# Seconds one cell may run before the self-check interrupts it.
CELL_TIMEOUT = 120


@dataclass(frozen=True)
class ExerciseOutcome:
    """The result of one graded test cell.

    Attributes:
        exercise: the exercise id, e.g. ``"ch02.softmax"``.
        cell: number of the test cell in the notebook (from 1, as JupyterLab counts).
        passed: True when the test cell ran without an error.
        message: the check's message (success line and its notes, or what failed and why).
    """

    exercise: str
    cell: int
    passed: bool
    message: str


@dataclass
class SelfCheckReport:
    """What a self-check found in one notebook.

    Cells are numbered from 1, as JupyterLab counts them (markdown cells included).

    Attributes:
        notebook: the notebook file.
        outcomes: one :class:`ExerciseOutcome` per graded test cell, in notebook order.
        cell_errors: ``(cell number, "Type: message")`` of the other cells that raised.
        cell_seconds: ``{cell number: seconds}``, how long each executed code cell ran.
    """

    notebook: Path
    outcomes: list[ExerciseOutcome] = field(default_factory=list)
    cell_errors: list[tuple[int, str]] = field(default_factory=list)
    cell_seconds: dict[int, float] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """True when every exercise passes."""
        return all(o.passed for o in self.outcomes)

    def outcome(self, exercise: str) -> ExerciseOutcome:
        """The outcome of ``exercise``; KeyError when the notebook has no test cell for it."""
        for item in self.outcomes:
            if item.exercise == exercise:
                return item
        raise KeyError(f"{self.notebook.name} has no test cell for {exercise!r}")

    def lines(self) -> list[str]:
        """A human-readable report."""
        done = sum(o.passed for o in self.outcomes)
        out = [f"{self.notebook}: {done} of {len(self.outcomes)} exercises pass"]
        for item in self.outcomes:
            out.append(f"  {'PASS' if item.passed else 'FAIL'}  {item.exercise}")
            if not item.passed:
                out.append(f"        {item.message}")
            elif "\nNote: " in item.message:  # advice that costs no points
                note = item.message[item.message.index("\nNote: ") + 1:]
                out += [f"        {line}" for line in note.splitlines()]
        if self.cell_errors:
            out.append("  other cells that raised an error:")
            out += [f"    cell {number}: {text}" for number, text in self.cell_errors]
        return out


def read_notebook(path: str | Path) -> Any:
    """Read the notebook at ``path``.

    Raises:
        FileNotFoundError: no file there.
        ValueError: the file is not a readable Jupyter notebook (the message says why).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no notebook at {path}; pass the path of your .ipynb file, "
                                "for example notebooks/ch02_attention/ch02_attention.ipynb")
    try:
        return nbformat.read(str(path), as_version=4)
    except Exception as exc:  # nbformat raises several kinds for damaged files
        raise ValueError(f"{path} is not a readable notebook ({type(exc).__name__}: {exc}). "
                         "Open it in JupyterLab, or restore it from notebooks/ and copy your "
                         "answers over") from exc


def _error_text(outputs: list[Any]) -> tuple[str, str] | None:
    for output in outputs:
        if output.get("output_type") == "error":
            return output.get("ename", "Error"), output.get("evalue", "")
    return None


def _stdout(outputs: list[Any]) -> str:
    text = "".join(o.get("text", "") for o in outputs
                   if o.get("output_type") == "stream" and o.get("name") == "stdout")
    return text.strip()


def _seconds(cell: Any) -> float | None:
    """How long a code cell ran, from the timestamps nbclient records in its metadata."""
    times = cell.get("metadata", {}).get("execution", {})
    if "iopub.execute_input" not in times or "shell.execute_reply" not in times:
        return None
    started, replied = (datetime.fromisoformat(times[key])
                        for key in ("iopub.execute_input", "shell.execute_reply"))
    return (replied - started).total_seconds()


def _kernel_config() -> Config:
    """Encrypted kernel transport (CurveZMQ) where pyzmq supports it, as in the course's
    JupyterLab: over plain TCP, IPython's kernel prints a warning on every start."""
    config = Config()
    config.KernelManager.transport_encryption = "auto" if zmq.has("curve") else "disabled"
    return config


def run_selfcheck(path: str | Path, *, timeout: int = CELL_TIMEOUT,
                  kernel_name: str | None = None) -> SelfCheckReport:
    """Execute the notebook at ``path`` (visible checks only) and report every exercise.

    Args:
        path: the learner's notebook, anywhere on disk; it runs in its own folder.
        timeout: seconds one cell may run before it is interrupted (and reported).
        kernel_name: the Jupyter kernel; default: the notebook's own, else ``python3``.

    Returns:
        A :class:`SelfCheckReport`.

    Raises:
        FileNotFoundError, ValueError: see :func:`read_notebook`.
    """
    # Loaded when a notebook is run: reading one (the notebook's check()) needs none of it.
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    from autograder.kernels import KernelWithoutSecret

    path = Path(path).resolve()
    nb = read_notebook(path)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = strip_hidden_tests(cell_source(cell))
    kernel = kernel_name or nb.metadata.get("kernelspec", {}).get("name") or "python3"
    client = NotebookClient(nb, timeout=timeout, interrupt_on_timeout=True, allow_errors=True,
                            kernel_name=kernel, resources={"metadata": {"path": str(path.parent)}},
                            kernel_manager_class=KernelWithoutSecret, config=_kernel_config())
    stopped: str | None = None
    try:
        client.execute()
    except DeadKernelError as exc:
        stopped = f"the kernel died ({exc}); a cell before this one crashed Python or ran " \
                  "out of memory"
    return _report(path, nb, stopped)


def _report(path: Path, nb: Any, stopped: str | None) -> SelfCheckReport:
    report = SelfCheckReport(path)
    graded = dict(exercise_cells(nb))
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if (seconds := _seconds(cell)) is not None:
            report.cell_seconds[index + 1] = seconds
        error = _error_text(cell.get("outputs", []))
        if index in graded:
            report.outcomes.append(_outcome(graded[index], index + 1, cell, error, stopped,
                                            report))
        elif error is not None:
            report.cell_errors.append((index + 1, f"{error[0]}: {error[1]}"))
    return report


def _outcome(exercise: str, number: int, cell: Any, error: tuple[str, str] | None,
             stopped: str | None, report: SelfCheckReport) -> ExerciseOutcome:
    if cell.get("execution_count") is None and not cell.get("outputs"):
        reason = stopped or "the cell did not run"
        return ExerciseOutcome(exercise, number, False, f"{exercise}: not checked: {reason}.")
    if error is None:
        return ExerciseOutcome(exercise, number, True, _stdout(cell.outputs) or
                               f"{exercise}: passed.")
    name, text = error
    if name in ("CheckFailed", "AssertionError"):
        return ExerciseOutcome(exercise, number, False, text)
    message = f"{exercise}: the test cell raised {name}: {text}"
    earlier = [f"cell {n}: {e}" for n, e in report.cell_errors if n < number]
    if earlier:
        message += f" (an earlier cell failed first, {earlier[-1]})"
    return ExerciseOutcome(exercise, number, False, message)
