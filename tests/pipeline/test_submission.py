"""Reading a submitted file: every kind of bad input ends as a specific flag (repaired and graded
where it can be, refused with its size where it cannot), never as an exception, and reading
the same bytes twice gives the same notebook."""

from __future__ import annotations

import json
import random
from pathlib import Path

import nbformat
import pytest

from autograder.collect.folders import MAX_NOTEBOOK_BYTES
from autograder.course import ROOT
from autograder.grade.submission import MAX_JSON_DEPTH, json_depth, read_submission
from autograder.notebook import grade_id

CH = "ch02_attention"
RELEASE = ROOT / "notebooks" / CH / f"{CH}.ipynb"


def release_json() -> dict:
    return json.loads(RELEASE.read_text(encoding="utf-8"))


def read(tmp_path: Path, content: bytes | str | dict):
    """Write ``content`` (bytes, text, or JSON data) as a notebook file and read it."""
    path = tmp_path / "n.ipynb"
    if isinstance(content, dict):
        content = json.dumps(content)
    path.write_bytes(content if isinstance(content, bytes)
                     else content.encode("utf-8", "surrogatepass"))
    return read_submission(path)


def codes(reading) -> list[str]:
    return [f.code for f in reading.flags]


def cell_of(data: dict, wanted: str) -> dict:
    return next(c for c in data["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id")
                == wanted)


def test_unreadable_files_are_refused_with_what_is_wrong(tmp_path):
    for data, expected in [(b"", "empty"), (b'{"cells": [', "not valid JSON"),
                           (b"\xff\xfe", "not valid JSON"), (b'{"a": 1}', "no nbformat version"),
                           (b"[1, 2]", "top level is a JSON list"),
                           (b'{"nbformat": 4, "cells": 3}', "no list of cells"),
                           (b'{"nbformat": 5, "cells": []}', "format 5, newer")]:
        reading = read(tmp_path, data)
        assert reading.notebook is None, data
        assert reading.refusal.code == "unreadable_notebook", data
        assert expected in reading.refusal.reason, (data, reading.refusal.reason)
    missing = read_submission(tmp_path / "missing.ipynb")
    assert missing.refusal.code == "unreadable_notebook" and "no notebook" in \
        missing.refusal.reason


def test_the_release_reads_without_flags(tmp_path):
    reading = read(tmp_path, RELEASE.read_bytes())
    assert reading.refusal is None and reading.flags == ()
    assert nbformat.writes(reading.notebook) == nbformat.writes(nbformat.read(RELEASE, 4))


def test_an_oversized_file_is_refused_with_its_size_unread(tmp_path):
    path = tmp_path / "n.ipynb"
    with path.open("wb") as f:  # sparse: the size is there without writing 50 MB
        f.truncate(MAX_NOTEBOOK_BYTES + 1)
    reading = read_submission(path)
    assert reading.refusal.code == "notebook_too_large"
    assert "50.0 MB" in reading.refusal.reason


def test_json_nested_100000_deep_is_refused_with_its_depth(tmp_path):
    data = json.dumps(release_json())
    deep = data[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    reading = read(tmp_path, deep)
    assert reading.refusal.code == "notebook_too_deep"
    assert "100,001 levels" in reading.refusal.reason
    assert f"{len(deep.encode()):,} bytes" in reading.refusal.reason
    # Within the bound, the same field is read, and removed as no part of a notebook.
    within = data[:-1] + ', "x": ' + "[" * 90 + "]" * 90 + "}"
    reading = read(tmp_path, within)
    assert reading.refusal is None and codes(reading) == ["invalid_metadata"]
    assert "x" in reading.flags[0].reason


def _depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def test_json_depth_matches_the_parsed_structure():
    rng = random.Random(0)
    texts = ['a"b', "[{]", 'x\\"]]', "\\", "}", "ü"]

    def value(depth: int):
        kind = rng.random()
        if depth > 6 or kind < 0.3:
            return rng.choice(texts + [1, None, 2.5])
        if kind < 0.65:
            return [value(depth + 1) for _ in range(rng.randrange(3))]
        return {rng.choice(texts) + str(i): value(depth + 1) for i in range(rng.randrange(3))}

    for _ in range(300):
        data = value(0)
        assert json_depth(json.dumps(data)) == _depth(data), data
    assert json_depth("[" * 5000 + "]" * 5000) == 5000 > MAX_JSON_DEPTH


def test_lone_surrogates_and_bytes_that_are_not_utf8_are_replaced_and_flagged(tmp_path):
    data = release_json()
    cell = cell_of(data, "ch02_softmax_solution")
    cell["source"] = "x = 'ok'\ny = '\ud800'\n"
    text = json.dumps(data)  # writes the surrogate as the escape \ud800
    assert "\\ud800" in text
    reading = read(tmp_path, text)
    assert codes(reading) == ["invalid_unicode"] and reading.refusal is None
    assert "cell" in reading.flags[0].reason
    source = cell_of(reading.notebook, "ch02_softmax_solution").source
    assert source == "x = 'ok'\ny = '\ufffd'\n"
    nbformat.writes(reading.notebook).encode("utf-8")  # writable as UTF-8

    latin1 = json.dumps(release_json(), ensure_ascii=False).replace(
        "Scaled dot-product", "Scaled d\u00f6t-product").encode("utf-8")
    latin1 = latin1.replace("d\u00f6t".encode(), b"d\xf6t")  # one Latin-1 byte
    reading = read(tmp_path, latin1)
    assert codes(reading) == ["invalid_unicode"] and reading.refusal is None
    assert "d\ufffdt-product" in nbformat.writes(reading.notebook)


def test_an_nbformat_3_notebook_is_upgraded_with_its_nbgrader_cells(tmp_path):
    v3 = nbformat.writes(nbformat.convert(nbformat.read(RELEASE, 4), 3), version=3)
    first, second = read(tmp_path, v3), read(tmp_path, v3)
    assert codes(first) == ["old_nbformat"] and "nbformat 3" in first.flags[0].reason
    nb = first.notebook
    assert (nb.nbformat, nb.nbformat_minor) == (4, 5)
    release = nbformat.read(RELEASE, 4)
    assert [grade_id(c) for c in nb.cells] == [grade_id(c) for c in release.cells]
    # Cell ids are derived from the content (nbformat's upgrade would draw them at random).
    assert nbformat.writes(first.notebook) == nbformat.writes(second.notebook)
    assert len({c.id for c in nb.cells}) == len(nb.cells)


def test_cell_ids_missing_or_repeated_are_derived_deterministically(tmp_path):
    data = release_json()
    data["cells"][1]["id"] = data["cells"][0]["id"]
    del data["cells"][2]["id"]
    readings = [read(tmp_path, data) for _ in range(2)]
    texts = [nbformat.writes(r.notebook) for r in readings]
    assert texts[0] == texts[1]
    ids = [c.id for c in readings[0].notebook.cells]
    assert len(set(ids)) == len(ids)
    assert ids[0] == data["cells"][0]["id"]  # a valid, unique id is kept


@pytest.mark.parametrize("bad", [None, [], "solution", {"grade_id": ["a"]},
                                 {"grade_id": "a b"}, {"points": "50"}, {"points": -1},
                                 {"points": float("nan")}, {"points": True},
                                 {"grade": "yes"}, {"schema_version": 3.5}])
def test_malformed_nbgrader_metadata_is_removed_and_flagged(tmp_path, bad):
    data = release_json()
    cell = cell_of(data, "ch02_softmax_solution")
    cell["metadata"]["nbgrader"] = bad if not isinstance(bad, dict) else \
        {**cell["metadata"]["nbgrader"], **bad}
    reading = read(tmp_path, data)
    assert codes(reading) == ["invalid_nbgrader_metadata"], reading.flags
    index = data["cells"].index(cell)
    assert reading.flags[0].cell == f"cell {index}"
    assert "nbgrader" not in reading.notebook.cells[index].metadata
    assert reading.notebook.cells[index].source == "".join(cell["source"])


def test_outputs_are_dropped_and_broken_cells_left_out(tmp_path):
    data = release_json()
    first, second = [i for i, c in enumerate(data["cells"])
                     if c["cell_type"] == "code" and "nbgrader" not in c["metadata"]][:2]
    data["cells"][first]["outputs"] = [{"output_type": "stream", "name": "stdout",
                                        "text": "hi"}]
    data["cells"][first]["execution_count"] = 3
    data["cells"][first]["metadata"] = {"collapsed": "yes", "tags": ["kept"]}
    data["cells"][second]["metadata"] = "not an object"
    cells = len(data["cells"])
    data["cells"][1:1] = [42, {"cell_type": "widget", "source": "", "metadata": {}}]
    data["extra"] = 1
    reading = read(tmp_path, data)
    assert reading.refusal is None
    assert sorted(codes(reading)) == ["invalid_cell", "invalid_cell", "invalid_metadata",
                                      "invalid_metadata", "invalid_metadata"], reading.flags
    nb = reading.notebook
    assert len(nb.cells) == cells
    assert all(c.outputs == [] and c.execution_count is None
               for c in nb.cells if c.cell_type == "code")
    assert nb.cells[first].metadata == {"tags": ["kept"]}
    assert nb.cells[second].metadata == {}
    nbformat.validate(nb)
