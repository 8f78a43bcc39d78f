"""Restore the locked cells of a submission as the release has them, and say what changed.

:func:`restore_test_cells` puts every locked cell (the graded test cells among them) back as the
source notebook has them, at its place, and names every change as a flag; cells the learner
added are kept. The grader then puts the hidden tests into the restored test cells
(:func:`autograder.grade.learner.with_hidden_tests`).

Points come from the release only: every other cell keeps the learner's text but gets the
release's nbgrader metadata and cell type back (a solution cell that claims points, or a
written answer turned into a 50-point test, is graded as released), and cells the learner
added lose theirs.
"""

from __future__ import annotations

import copy

from nbformat import NotebookNode

from autograder.flags import Flag
from autograder.notebook import grade_id, is_locked, nbgrader_metadata


def _key(cell: NotebookNode) -> str:
    return grade_id(cell) or cell.get("id") or ""


def _content(cell: NotebookNode) -> tuple[str, str]:
    return cell.cell_type, cell.get("source", "")


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
    by_content: dict[tuple[str, str], list[int]] = {}
    for i, c in enumerate(submitted):
        by_content.setdefault(_content(c), []).append(i)
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
        if index is None:  # a notebook without the release's cell ids (an nbformat 3 one)
            index = next((i for i in by_content.get(_content(cell), []) if i not in used
                          and grade_id(submitted[i]) not in source_keys - {cell_grade_id}),
                         None)
        if index is not None:
            used.add(index)
        if not is_locked(cell):
            if index is not None:
                flags += _as_released(cell, submitted[index], key)
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


def _as_released(source: NotebookNode, got: NotebookNode, key: str) -> list[Flag]:
    """Give an unlocked cell the release's nbgrader metadata and cell type, keeping the
    learner's text (in place); a flag when either differed."""
    meta, got_meta = nbgrader_metadata(source), nbgrader_metadata(got)
    changes = []
    if got.cell_type != source.cell_type:
        changes.append(f"turned from a {source.cell_type} cell into a {got.cell_type} cell")
        set_cell_type(got, source.cell_type)
    if got_meta != meta:
        changes.append(_metadata_change(got_meta, meta))
        if meta:
            got.metadata["nbgrader"] = copy.deepcopy(source.metadata["nbgrader"])
        else:
            got.metadata.pop("nbgrader", None)
    if not changes:
        return []
    worth = (f"worth {meta.get('points', 0)} point(s)" if meta.get("grade") else
             "worth no points")
    return [Flag("cell_repointed", key,
                 f"cell {key!r} was {' and '.join(changes)}; it is graded as the release has it "
                 f"({source.cell_type}, {worth}), with the learner's text kept: points come "
                 "from the release only")]


def _metadata_change(got: dict, released: dict) -> str:
    if not got:
        return "stripped of its nbgrader metadata"
    if not released:
        return f"given nbgrader metadata ({_roles(got)})"
    return f"given other nbgrader metadata ({_roles(got)} instead of {_roles(released)})"


def _roles(meta: dict) -> str:
    """A cell's nbgrader role in words: ``"graded, 50 point(s)"``."""
    roles = [role for role in ("solution", "grade", "locked", "task") if meta.get(role)]
    text = ", ".join(roles) or "no role"
    if meta.get("grade"):
        text += f", {meta.get('points', 0)} point(s)"
    if meta.get("grade_id"):
        text += f", grade id {meta['grade_id']!r}"
    return text


def set_cell_type(cell: NotebookNode, cell_type: str) -> None:
    """Turn ``cell`` into a ``cell_type`` cell with the same text (in place): a code cell has
    outputs and an execution count, the others have neither."""
    if cell_type == "code":
        cell.pop("attachments", None)
        cell["outputs"], cell["execution_count"] = [], None
    else:
        cell.pop("outputs", None)
        cell.pop("execution_count", None)
    cell.cell_type = cell_type


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
