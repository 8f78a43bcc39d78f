"""Restore the locked cells of a submission as the release has them, and say what changed.

:func:`restore_test_cells` puts every locked cell (the graded test cells among them) back as the
source notebook has them, at its place, and names every change as a flag; cells the learner
added are kept. The grader then puts the hidden tests into the restored test cells
(:func:`autograder.pipeline.grade.with_hidden_tests`).
"""

from __future__ import annotations

import copy

from nbformat import NotebookNode

from autograder.flags import Flag
from autograder.notebook import grade_id, is_locked, nbgrader_metadata


def _key(cell: NotebookNode) -> str:
    return grade_id(cell) or cell.get("id") or ""


def restore_test_cells(
    submitted_nb: NotebookNode, source_nb: NotebookNode
) -> tuple[NotebookNode, list[Flag]]:
    """Restore every locked cell of ``source_nb`` (graded test cells included) in a copy of
    ``submitted_nb``.

    Locked cells that were edited, deleted, moved, or re-pointed (grade id, points or nbgrader
    metadata changed) get the source version back at the source position relative to the
    other source cells; cells the learner added are kept and flagged. Neither argument is
    modified.

    Returns:
        ``(restored_copy, flags)``; ``flags`` is empty for an untouched submission.
    """
    flags: list[Flag] = []
    submitted = [copy.deepcopy(c) for c in submitted_nb.cells]
    source_keys = {_key(c) for c in source_nb.cells}
    by_grade_id = {g: i for i, c in enumerate(submitted) if (g := grade_id(c))}
    by_cell_id = {c.get("id"): i for i, c in enumerate(submitted) if c.get("id")}
    used: set[int] = set()
    placed: list[tuple[NotebookNode, int | None]] = []   # (cell, index in the submission)
    for cell in source_nb.cells:
        key = _key(cell)
        cell_grade_id = grade_id(cell)
        index = by_grade_id.get(cell_grade_id) if cell_grade_id else None
        if index is None or index in used:
            index = by_cell_id.get(cell.get("id"))
            if index is not None and (index in used or grade_id(submitted[index])
                                      in source_keys - {cell_grade_id}):
                index = None
        if index is not None:
            used.add(index)
        if not is_locked(cell):
            placed.append((submitted[index], index) if index is not None else (None, None))
            continue
        restored = copy.deepcopy(cell)
        restored.outputs = [] if cell.cell_type == "code" else restored.get("outputs")
        if cell.cell_type == "code":
            restored.execution_count = None
        if index is None:
            flags.append(Flag("test_cell_deleted" if cell_grade_id else "locked_cell_deleted", key,
                              f"locked cell {key!r} was missing from the submission and was "
                              "put back from the source notebook"))
        else:
            flags += _compare_locked(cell, submitted[index], key)
        placed.append((restored, index))
    flags += _order_flags(placed)
    cells = _merge(placed, submitted, used, flags)
    restored_nb = copy.deepcopy(submitted_nb)
    restored_nb.cells = cells
    return restored_nb, flags


def _compare_locked(source: NotebookNode, got: NotebookNode, key: str) -> list[Flag]:
    flags = []
    meta, got_meta = nbgrader_metadata(source), nbgrader_metadata(got)
    if not got_meta:
        flags.append(Flag("metadata_removed", key, f"the nbgrader metadata of locked cell "
                                                   f"{key!r} was removed; restored"))
    elif got_meta.get("grade_id") != meta.get("grade_id") or (
            got_meta.get("points") != meta.get("points")) or any(
            got_meta.get(k) != meta.get(k) for k in ("grade", "locked", "solution")):
        flags.append(Flag("test_cell_repointed", key,
                          f"the nbgrader metadata of locked cell {key!r} was changed "
                          f"(grade id {got_meta.get('grade_id')!r}, points "
                          f"{got_meta.get('points')!r}); restored"))
    if got.get("source") != source.get("source") or got.cell_type != source.cell_type:
        flags.append(Flag("test_cell_edited" if meta.get("grade") else "locked_cell_edited",
                          key, f"the text of locked cell {key!r} was edited; restored"))
    return flags


def _order_flags(placed: list[tuple[NotebookNode | None, int | None]]) -> list[Flag]:
    """Flag locked cells whose position relative to the other matched cells changed."""
    positions = [(i, cell) for cell, i in placed if i is not None and cell is not None]
    flags, latest = [], -1
    for index, cell in positions:
        if index < latest and is_locked(cell):
            flags.append(Flag("test_cell_moved", _key(cell), f"locked cell {_key(cell)!r} was "
                              "moved; it is back at its place"))
        latest = max(latest, index)
    return flags


def _merge(placed: list[tuple[NotebookNode | None, int | None]], submitted: list[NotebookNode],
           used: set[int], flags: list[Flag]) -> list[NotebookNode]:
    """The source order, with each added cell after the cell that preceded it."""
    cells = [cell for cell, _ in placed if cell is not None]
    anchor_of = {}
    for position, (cell, index) in enumerate(placed):
        if cell is not None and index is not None:
            anchor_of[index] = position
    extras: dict[int, list[NotebookNode]] = {}
    anchor = -1
    for index, cell in enumerate(submitted):
        if index in used:
            anchor = anchor_of.get(index, anchor)
            continue
        extras.setdefault(anchor, []).append(cell)
        flags.append(Flag("cell_added", cell.get("id"), f"cell {cell.get('id')!r} is not in "
                          "the source notebook; it was kept" + (
                              " and stripped of its nbgrader metadata" if nbgrader_metadata(cell)
                              else "")))
        cell.get("metadata", {}).pop("nbgrader", None)
    out = list(extras.get(-1, []))
    position_of = {id(cell): p for p, (cell, _) in enumerate(placed) if cell is not None}
    for cell in cells:
        out.append(cell)
        out += extras.get(position_of[id(cell)], [])
    return out
