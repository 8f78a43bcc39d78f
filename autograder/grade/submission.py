"""Read a learner's notebook file without trusting it.

:func:`read_submission` turns the bytes a learner handed in into a notebook the grader can work
with, or refuses them with a flag that says what is wrong and how large it is. Nothing in the
file can make the grader itself fail, and whatever honest work can be read is graded:

* size and nesting are bounded before the JSON is parsed (Python's JSON parser recurses): a
  file over collect's :data:`~autograder.collect.folders.MAX_NOTEBOOK_BYTES` (a notebook put
  into the course folder by other means) is refused with its size (``notebook_too_large``), JSON
  nested deeper than :data:`MAX_JSON_DEPTH` with its depth (``notebook_too_deep``);
* what can be repaired is repaired, flagged and graded: bytes that are not UTF-8 and lone
  surrogates become U+FFFD (``invalid_unicode``); a notebook of format 1 to 3 is upgraded to
  format 4 (``old_nbformat``); metadata that breaks the notebook format is removed, and a cell
  that is no notebook cell at all is left out (``invalid_metadata``, ``invalid_cell``);
  nbgrader metadata that nbgrader could not read (``"nbgrader": null``, a grade id that is not
  a string, points that are not a number) is removed (``invalid_nbgrader_metadata``), and the
  restoration (:mod:`autograder.grade.restore`) puts the release's back;
* outputs are dropped (grading runs the notebook again), and cell ids that are missing or
  repeated are derived from position and content (:func:`~autograder.notebook.stable_cell_ids`),
  so that grading the same file twice gives the same notebook and flags, byte for byte.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import numpy as np
from nbformat import NotebookNode
from nbformat.validator import isvalid, normalize

from autograder.collect.folders import MAX_NOTEBOOK_BYTES
from autograder.flags import Flag
from autograder.notebook import stable_cell_ids

# Deepest JSON nesting read; Jupyter's notebooks nest about ten levels (widget state a few more).
MAX_JSON_DEPTH = 100
# The format nbformat writes today, which every notebook is read as.
FORMAT = (4, 5)
CELL_TYPES = ("code", "markdown", "raw")
# nbgrader's cell metadata: the type of each field nbgrader reads.
NBGRADER_FIELDS: dict[str, tuple[type, ...]] = {
    "grade": (bool,), "solution": (bool,), "locked": (bool,), "task": (bool,),
    "grade_id": (str,), "points": (int, float), "schema_version": (int,), "checksum": (str,),
    "cell_type": (str,),
}
# nbgrader's rule for a grade id (CheckCellMetadata).
GRADE_ID = re.compile(r"[a-zA-Z0-9_\-]+")
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Reading:
    """What :func:`read_submission` made of a file.

    Attributes:
        notebook: the notebook (nbformat 4.5, no outputs), or None when it was refused.
        flags: what was repaired on the way, one flag each.
        refusal: why the file cannot be graded (``notebook`` is then None), else None.
    """

    notebook: NotebookNode | None
    flags: tuple[Flag, ...] = ()
    refusal: Flag | None = None


def size_text(n: int) -> str:
    """``n`` bytes for a human: ``"3.2 MB"`` or ``"512 bytes"``."""
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n:,} bytes"


def json_depth(text: str) -> int:
    """How deeply the arrays and objects of the JSON ``text`` nest, read without parsing it
    (so without recursion)."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text)).encode("ascii")
    if not brackets:
        return 0
    codes = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1)
    return int(np.cumsum(steps).max())


def read_submission(path: Path) -> Reading:
    """Read the notebook at ``path`` as far as it can be read (see the module's docstring).

    Never raises because of the file's content: a file that cannot be graded gives a
    :class:`Reading` with a ``refusal`` (``unreadable_notebook``, ``notebook_too_large`` or
    ``notebook_too_deep``).
    """
    read = _json_of(path)
    if isinstance(read, Flag):
        return Reading(None, (), read)
    data, flags = read
    repaired = _repaired(data, flags)
    if isinstance(repaired, Flag):
        return Reading(None, tuple(flags), repaired)
    return Reading(nbformat.v4.to_notebook_json(repaired), tuple(flags))


def _json_of(path: Path) -> tuple[Any, list[Flag]] | Flag:
    """The JSON in the file at ``path`` and an ``invalid_unicode`` flag if it needed one, or
    why it cannot be read (a refusal)."""
    if not path.is_file():
        return Flag("unreadable_notebook", None, f"no notebook at {path.name} in the submission")
    size = path.stat().st_size
    if size > MAX_NOTEBOOK_BYTES:
        return Flag("notebook_too_large", None,
                    f"the notebook is {size_text(size)}, more than the "
                    f"{size_text(MAX_NOTEBOOK_BYTES)} a notebook may be; it was not graded. "
                    "Ask the learner to clear the outputs (Edit > Clear Outputs of All Cells) "
                    "and hand it in again")
    raw = path.read_bytes()
    if not raw.strip():
        return Flag("unreadable_notebook", None, "the notebook file is empty (0 bytes of JSON)")
    text, bad_bytes = _decode(raw)
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        return Flag("notebook_too_deep", None,
                    f"the notebook's JSON nests {depth:,} levels deep ({size_text(len(raw))}), "
                    f"more than the {MAX_JSON_DEPTH} a notebook ever needs; it was not "
                    "written by Jupyter and was not graded")
    try:
        data = json.loads(text)
    except ValueError as exc:
        return Flag("unreadable_notebook", None,
                    f"the notebook is not valid JSON ({exc}); it may be truncated or edited "
                    "outside Jupyter. Ask the learner to save it again from Jupyter")
    if not bad_bytes:
        return data, []
    return data, [Flag("invalid_unicode", None,
                       f"the file holds {bad_bytes:,} byte(s) that are not UTF-8 text; they "
                       "were read as U+FFFD (the replacement character) and the rest was "
                       "graded")]


def _repaired(data: Any, flags: list[Flag]) -> dict[str, Any] | Flag:
    """``data`` as a valid notebook of format 4, each repair a flag added to ``flags``; or why
    it is no notebook (a refusal)."""
    problem = _notebook_shape(data)
    if problem is not None:
        return Flag("unreadable_notebook", None,
                    f"the file is JSON but not a valid notebook ({problem})")
    if data["nbformat"] < FORMAT[0]:
        try:
            data = _upgraded(data)
        except Exception as exc:  # nbformat's converters raise many kinds on odd input
            return Flag("unreadable_notebook", None,
                        f"the file is a notebook of format {data['nbformat']}, which could not "
                        f"be upgraded to format 4 ({type(exc).__name__}: {exc})")
        flags.append(Flag("old_nbformat", None,
                          "the notebook was saved in an old format (nbformat "
                          f"{data['metadata'].get('orig_nbformat')}); it was upgraded to format 4 "
                          "and graded. Ask the learner to use the release notebook"))
    flags += _replace_surrogates(data)
    flags += _repair_cells(data)
    stable_cell_ids(data)
    problem = _validation_problem(data)
    if problem is not None:
        flags += _salvage(data)
        problem = _validation_problem(data)
    if problem is not None:
        return Flag("unreadable_notebook", None,
                    f"the file is JSON but not a valid notebook ({problem})")
    return data


# ----------------------------------------------------------------------------- the steps


def _decode(raw: bytes) -> tuple[str, int]:
    """The text of ``raw`` (UTF-8, a leading byte order mark dropped) and how many of its
    bytes were not UTF-8 (each read as U+FFFD)."""
    raw = raw.removeprefix(b"\xef\xbb\xbf")
    try:
        return raw.decode("utf-8"), 0
    except UnicodeDecodeError:
        text = raw.decode("utf-8", errors="replace")
        return text, text.count("\ufffd") - raw.decode("utf-8", "ignore").count("\ufffd")


def _notebook_shape(data: Any) -> str | None:
    """What makes ``data`` no notebook at all, or None."""
    if not isinstance(data, dict):
        return f"its top level is a JSON {type(data).__name__}, not an object"
    version = data.get("nbformat")
    if not isinstance(version, int) or isinstance(version, bool):
        return "it has no nbformat version number"
    if version > FORMAT[0]:
        return (f"it is of format {version}, newer than this grader reads (4); save it "
                "from the course's JupyterLab")
    if version == FORMAT[0] and not isinstance(data.get("cells"), list):
        return "it has no list of cells"
    return None


def _upgraded(data: dict[str, Any]) -> dict[str, Any]:
    """A notebook of format 1 to 3 as format 4.5, with no cell ids (they are derived later:
    nbformat's upgrade draws them at random)."""
    upgraded = json.loads(json.dumps(nbformat.convert(nbformat.from_dict(data), FORMAT[0])))
    for cell in upgraded.get("cells", []):
        if isinstance(cell, dict):
            cell.pop("id", None)
    return upgraded


def _replace_surrogates(data: dict[str, Any]) -> list[Flag]:
    """Replace lone surrogates (``"\\ud800"`` in the JSON: not Unicode, so not writable as
    UTF-8) by U+FFFD, in place; one flag saying where."""
    places = []
    for index, cell in enumerate(data.get("cells") or []):
        if _fix_surrogates(cell):
            places.append(f"cell {index}")
    cells = data.pop("cells", None)
    if _fix_surrogates(data):
        places.append("the notebook's metadata")
    if cells is not None:
        data["cells"] = cells
    if not places:
        return []
    return [Flag("invalid_unicode", None,
                 f"{', '.join(places)} held text that is not valid Unicode (lone surrogates); "
                 "it was replaced by U+FFFD (the replacement character) and the rest was graded")]


def _fix_surrogates(node: Any) -> int:
    """Replace lone surrogates in the strings and keys of a JSON value, in place (without
    recursion); the number of values changed. A top-level string cannot be changed in place."""
    changed = 0
    stack = [node] if isinstance(node, (dict, list)) else []
    while stack:
        current = stack.pop()
        if isinstance(current, dict):
            for key in [k for k in current if _SURROGATE.search(k)]:
                current[_SURROGATE.sub("\ufffd", key)] = current.pop(key)
                changed += 1
        for key, value in (current.items() if isinstance(current, dict)
                           else enumerate(current)):
            if isinstance(value, str) and _SURROGATE.search(value):
                current[key] = _SURROGATE.sub("\ufffd", value)
                changed += 1
            elif isinstance(value, (dict, list)):
                stack.append(value)
    return changed


def _repair_cells(data: dict[str, Any]) -> list[Flag]:
    """Cell by cell, in place: leave out what is no cell, drop outputs, make metadata an
    object and remove nbgrader metadata nbgrader could not read."""
    flags, kept = [], []
    for index, cell in enumerate(data["cells"]):
        problem = _no_cell(cell)
        if problem is not None:
            flags.append(Flag("invalid_cell", f"cell {index}",
                              f"cell {index} is not a notebook cell ({problem}); it was left "
                              "out and the rest was graded"))
            continue
        if cell["cell_type"] == "code":
            # Grading runs the notebook again: what it showed when handed in plays no part.
            cell["outputs"], cell["execution_count"] = [], None
        if not isinstance(cell.get("metadata", {}), dict):
            flags.append(Flag("invalid_metadata", f"cell {index}",
                              f"the metadata of cell {index} is not a JSON object; it was "
                              "removed"))
            cell["metadata"] = {}
        metadata = cell.setdefault("metadata", {})
        if "nbgrader" in metadata and (problem := nbgrader_problem(metadata["nbgrader"])):
            del metadata["nbgrader"]
            flags.append(Flag("invalid_nbgrader_metadata", f"cell {index}",
                              f"the nbgrader metadata of cell {index} {problem}, which nbgrader "
                              "cannot read; it was removed (a cell of the release gets the "
                              "release's back)"))
        kept.append(cell)
    data["cells"] = kept
    return flags


def _no_cell(cell: Any) -> str | None:
    """What makes ``cell`` no notebook cell at all, or None."""
    if not isinstance(cell, dict):
        return f"a JSON {type(cell).__name__}"
    if cell.get("cell_type") not in CELL_TYPES:
        return f"its type is {_short(cell.get('cell_type'))}"
    source = cell.get("source", "")
    if not (isinstance(source, str)
            or isinstance(source, list) and all(isinstance(s, str) for s in source)):
        return "its source is not text"
    return None


def nbgrader_problem(value: Any) -> str | None:
    """What is wrong with a cell's ``nbgrader`` metadata, or None when nbgrader can read it."""
    if not isinstance(value, dict):
        return f"is {_short(value)} instead of a JSON object"
    for key, kinds in NBGRADER_FIELDS.items():
        if key not in value:
            continue
        field = value[key]
        fits = isinstance(field, kinds) and (bool in kinds or not isinstance(field, bool))
        if fits and key == "points":
            fits = math.isfinite(field) and field >= 0
        if fits and key == "grade_id":
            fits = GRADE_ID.fullmatch(field) is not None
        if not fits:
            return f"has {key} = {_short(field)}"
    return None


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _validation_problem(data: dict[str, Any]) -> str | None:
    """nbformat's first complaint about the notebook ``data``, or None when it is valid."""
    try:
        nbformat.validate(data, version=FORMAT[0], version_minor=FORMAT[1])
    except Exception as exc:  # nbformat raises many kinds for JSON that is not a notebook
        return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    return None


def _salvage(data: dict[str, Any]) -> list[Flag]:
    """Make an invalid notebook valid where only its metadata or single cells are wrong, in
    place: fields that break the format are removed, and cells that stay invalid are left
    out."""
    flags = []
    extra = sorted(set(data) - {"nbformat", "nbformat_minor", "metadata", "cells"})
    for key in extra:
        del data[key]
    if not isinstance(data.get("metadata"), dict):
        data["metadata"] = {}
        extra.append("metadata")
    _, stripped = normalize({**data, "cells": []}, version=FORMAT[0], version_minor=FORMAT[1],
                            strip_invalid_metadata=True)
    extra += sorted(f"metadata.{key}" for key in set(data["metadata"]) - set(stripped["metadata"]))
    data["metadata"] = stripped["metadata"]
    if extra:
        flags.append(Flag("invalid_metadata", None,
                          f"the notebook's fields {', '.join(extra)} broke the notebook format "
                          "and were removed"))
    kept = []
    for cell in data["cells"]:
        ref = f"{cell['cell_type']}_cell"
        if not isvalid(cell, ref=ref, version=FORMAT[0], version_minor=FORMAT[1]):
            alone = {"nbformat": FORMAT[0], "nbformat_minor": FORMAT[1], "metadata": {},
                     "cells": [cell]}
            _, alone = normalize(alone, strip_invalid_metadata=True)
            repaired = alone["cells"][0]
            removed = sorted(set(cell["metadata"]) - set(repaired["metadata"]))
            if not removed or not isvalid(repaired, ref=ref, version=FORMAT[0],
                                          version_minor=FORMAT[1]):
                flags.append(Flag("invalid_cell", cell["id"],
                                  f"cell {cell['id']!r} is not a valid {cell['cell_type']} "
                                  "cell; it was left out and the rest was graded"))
                continue
            flags.append(Flag("invalid_metadata", cell["id"],
                              f"the metadata {', '.join(removed)} of cell {cell['id']!r} broke "
                              "the notebook format and was removed"))
            cell = repaired
        kept.append(cell)
    data["cells"] = kept
    return flags
