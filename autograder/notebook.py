"""The nbgrader cell rules of the course, in one place.

* A cell's role comes from its nbgrader metadata (:func:`nbgrader_metadata`), read with
  nbgrader's own rules (``nbgrader.utils.is_grade``, ``is_solution``, ``is_locked``): graded
  test cells (:func:`graded_test_cells`), solution cells (:func:`solution_cells`) and locked
  cells (:func:`is_locked`).
* A test cell names its exercise in its ``check("chNN.name", ...)`` call (:data:`EXERCISE_CALL`,
  either quote style): :func:`exercise_cells` reads it from any notebook, :func:`exercise_ids`
  maps the grade ids of a source notebook to it.
* Hidden tests are the lines between a line holding ``BEGIN HIDDEN TESTS`` and one holding
  ``END HIDDEN TESTS``, markers included, as nbgrader's ``ClearHiddenTests`` removes them
  from a release (:func:`strip_hidden_tests`).

Cells may be ``nbformat`` nodes or the plain dicts of a notebook's JSON. nbgrader is imported
inside the functions that use its rules: importing it takes seconds, and the learner's
self-check needs only the text rules.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nbformat import NotebookNode

EXERCISE_CALL = re.compile(r"""\bcheck\(\s*["'](?P<id>ch\d\d\.\w+)["']""")
BEGIN_HIDDEN, END_HIDDEN = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"


def cell_source(cell: Any) -> str:
    """The source of a cell as one string (raw notebook JSON may store a list of lines)."""
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def nbgrader_metadata(cell: Any) -> dict[str, Any]:
    """The nbgrader metadata of a cell; empty when it has none."""
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def grade_id(cell: Any) -> str | None:
    """nbgrader's id of a cell (``"ch02_softmax_test"``), or None."""
    return nbgrader_metadata(cell).get("grade_id")


def cell_index(nb: NotebookNode, wanted: str) -> int:
    """The index of the cell whose grade id is ``wanted``.

    Raises:
        ValueError: no cell has that grade id.
    """
    for index, cell in enumerate(nb.cells):
        if grade_id(cell) == wanted:
            return index
    raise ValueError(f"the notebook has no cell with grade id {wanted!r}")


def is_graded_test(cell: NotebookNode) -> bool:
    """An autograded test cell: a code cell that nbgrader grades and that is no solution."""
    from nbgrader.utils import is_grade, is_solution

    return (cell.cell_type == "code" and bool(nbgrader_metadata(cell)) and bool(is_grade(cell))
            and not is_solution(cell))


def is_locked(cell: NotebookNode) -> bool:
    """A cell whose source nbgrader restores: graded test cells and read-only cells."""
    from nbgrader.utils import is_locked as locked

    return bool(nbgrader_metadata(cell)) and bool(locked(cell))


def graded_test_cells(nb: NotebookNode) -> list[NotebookNode]:
    """The autograded test cells of ``nb``, in order."""
    return [c for c in nb.cells if is_graded_test(c)]


def solution_cells(nb: NotebookNode) -> list[tuple[int, NotebookNode]]:
    """``(index, cell)`` of each code cell that holds a solution (nbgrader ``solution``)."""
    from nbgrader.utils import is_solution

    return [(i, c) for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and nbgrader_metadata(c) and is_solution(c)]


def exercise_ids(source_nb: NotebookNode) -> dict[str, str]:
    """``grade_id -> exercise id`` of the source's graded cells (from their ``check`` call)."""
    ids = {}
    for cell in graded_test_cells(source_nb):
        match = EXERCISE_CALL.search(cell.source)
        if match:
            ids[grade_id(cell)] = match["id"]
    return ids


def exercise_cells(nb: Any) -> list[tuple[int, str]]:
    """``(cell index, exercise id)`` of each code cell that calls ``check("chNN.name", ...)``.

    Any notebook, metadata or not (a learner may have removed it). A cell is attributed to the
    first exercise it checks; an exercise counts once.
    """
    found: list[tuple[int, str]] = []
    seen: set[str] = set()
    for index, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") == "code":
            match = EXERCISE_CALL.search(cell_source(cell))
            if match and match["id"] not in seen:
                seen.add(match["id"])
                found.append((index, match["id"]))
    return found


def strip_hidden_tests(source: str) -> str:
    """``source`` without its hidden-test regions, the marker lines included.

    A region left open runs to the end of the source: hidden code is never kept by mistake.
    """
    kept, hiding = [], False
    for line in source.split("\n"):
        if BEGIN_HIDDEN in line:
            hiding = True
        elif END_HIDDEN in line and hiding:
            hiding = False
        elif not hiding:
            kept.append(line)
    return "\n".join(kept)
