"""Notebooks that are broken, odd or hostile as files, graded end to end beside honest learners.

One ch02 class is collected from a folder and an LMS zip (an honest learner and a bad
notebook in each), graded with ``--jobs 2``, given feedback and exported, then part of it is
collected and graded again. Each bad notebook must
end with its own flag (or a ``REFUSED`` line at collect) while whatever honest work it holds
keeps its points; honest learners keep full marks and no flag; nothing the learners handed in
changes; no sandbox folder is left behind; and grading again gives byte-identical autograded
notebooks, flag files and CSV.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
import tempfile
import zipfile
from pathlib import Path

import nbformat
import pytest
from test_bad_submissions import LIMIT_ARGS, answered, sha256_tree, slim

from autograder.cli import main
from autograder.collect.folders import MAX_NOTEBOOK_BYTES
from autograder.copies.pairs import CODES as COPY_FLAGS
from autograder.course import ROOT, Course
from autograder.flags import read_flags
from autograder.steps.release import generate

CH = "ch02_attention"
FULL, MAX = 7, 11  # the autograded points of ch02, and all its points (written answers too)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning"),
]

# Learner -> the flag codes of which one must be there, and the autograded points it keeps.
# None: refused at collect (a REFUSED line) or graded 0 with the flag.
EXPECTED: dict[str, tuple[set[str], int | None]] = {
    "nbformat3": ({"old_nbformat"}, FULL),
    "deep_json": ({"notebook_too_deep"}, 0),
    "oversized": ({"notebook_too_large"}, None),
    "surrogate": ({"invalid_unicode"}, FULL),
    "long_expression": ({"audit:unreadable", "audit:oversized"}, FULL),
    "nbgrader_null": ({"invalid_nbgrader_metadata"}, FULL),
    "solution_claims_points": ({"cell_repointed"}, FULL),
    "question_made_a_test": ({"cell_repointed"}, FULL),
    "junk_cell": ({"invalid_cell"}, FULL),
    "nested_folders": ({"audit:file-access"}, FULL),
}
# Honest learners, two with files that are odd but harmless (every cell with the same id; no
# cell ids, as before nbformat 4.5, and a comment that names the solutions): full marks, no
# flag.
HONEST = ("honest_full", "duplicate_ids", "no_ids_and_a_comment")
# In the LMS zip; the others are learner folders.
ZIPPED = ("honest_full", "nbformat3")
# Graded a second time, to compare byte for byte (random cell ids would differ).
AGAIN = ("honest_full", "nbformat3", "duplicate_ids", "surrogate", "deep_json")
# 200,000 terms: Python's parser recurses once per term.
LONG_EXPRESSION = "x = " + " + ".join(["1"] * 200_000)
NESTING = ("import os\nfor _ in range(3000):\n    os.mkdir('d')\n    os.chdir('d')\n"
           "for _ in range(3000):\n    os.chdir('..')\n")


def _json(nb: nbformat.NotebookNode) -> dict:
    return json.loads(nbformat.writes(nb))


def build_class(root: Path) -> dict[str, bytes]:
    """Every learner's notebook file."""
    full = answered(root / "notebooks" / CH / f"{CH}.ipynb",
                    root / "solutions" / CH / f"{CH}.ipynb")
    honest = slim(full)
    text = nbformat.writes(honest)

    def edited(edit) -> bytes:
        """The honest notebook's JSON, changed by ``edit(data)``."""
        data = json.loads(text)
        edit(data)
        return json.dumps(data, indent=1).encode()

    def cell(data: dict, grade_id: str) -> dict:
        return next(c for c in data["cells"]
                    if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id)

    def add_to(grade_id: str, code: str):
        def edit(data: dict) -> None:
            found = cell(data, grade_id)
            found["source"] = "".join(found["source"]) + "\n" + code
        return edit

    def null_metadata(data: dict) -> None:
        cell(data, "ch02_causal_mask_solution")["metadata"]["nbgrader"] = None

    def claims_points(data: dict) -> None:
        cell(data, "ch02_softmax_solution")["metadata"]["nbgrader"].update(grade=True,
                                                                          points=50)

    def question_test(data: dict) -> None:
        question = cell(data, "ch02_question_scaling")
        question.update(cell_type="code", source="print('free points')", outputs=[],
                        execution_count=None)
        question["metadata"]["nbgrader"].update(grade=True, solution=False, points=50)

    def junk(data: dict) -> None:
        data["cells"][3:3] = [42, {"cell_type": "widget", "source": "", "metadata": {}}]

    def long_expression(data: dict) -> None:
        data["cells"].append(nbformat.v4.new_code_cell(LONG_EXPRESSION, id="long"))

    def duplicate_ids(data: dict) -> None:
        for c in data["cells"]:
            c["id"] = "same"

    def no_ids_and_a_comment(data: dict) -> None:
        data["nbformat_minor"] = 4
        for c in data["cells"]:
            del c["id"]
        add_to("ch02_softmax_solution",
               "# I checked my solutions against the worked examples")(data)

    surrogate = edited(add_to("ch02_softmax_solution", "note = 'SURROGATE'")).replace(
        b"SURROGATE", b"\\ud800")
    deep = text.rstrip()[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}\n"
    oversized = text.rstrip()[:-1] + ', "x": "' + "a" * MAX_NOTEBOOK_BYTES + '"}\n'
    return {
        "honest_full": nbformat.writes(full).encode(),
        "duplicate_ids": edited(duplicate_ids),
        "no_ids_and_a_comment": edited(no_ids_and_a_comment),
        "nbformat3": nbformat.writes(nbformat.convert(nbformat.reads(text, 4), 3),
                                     version=3).encode(),
        "deep_json": deep.encode(),
        "oversized": oversized.encode(),
        "surrogate": surrogate,
        "long_expression": edited(long_expression),
        "nbgrader_null": edited(null_metadata),
        "solution_claims_points": edited(claims_points),
        "question_made_a_test": edited(question_test),
        "junk_cell": edited(junk),
        "nested_folders": edited(add_to("ch02_causal_mask_solution", NESTING)),
    }


def _run(where: list[str], students=()) -> None:
    args = ["autograde", "ch02", "--jobs", "2", *LIMIT_ARGS, *where]
    for student in students:
        args += ["--student", student]
    assert main(args) == 0


def _outputs(course: Path, students) -> dict[str, bytes]:
    """The autograded notebooks and flag files of ``students``."""
    files = {}
    for student in students:
        files[f"{student}.ipynb"] = (course / "autograded" / student / CH /
                                     f"{CH}.ipynb").read_bytes()
        files[f"{student}.json"] = course.joinpath("flags", student, f"{CH}.json").read_bytes()
    return files


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("bad-notebooks")
    root, course, inbox = base / "root", base / "root" / "course", base / "inbox"
    shutil.copytree(ROOT / "solutions" / CH, root / "solutions" / CH)
    generate(Course.of(root, course), [CH])
    notebooks = build_class(root)
    archive = base / "lms.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for student in ZIPPED:
            zf.writestr(f"{student}_{CH}.ipynb", notebooks.pop(student))
    for student, data in notebooks.items():
        path = inbox / student / CH / f"{CH}.ipynb"
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
    originals = {**sha256_tree(inbox), "lms.zip": hashlib.sha256(archive.read_bytes()).digest()}
    where = ["--root", str(root), "--course-dir", str(course)]
    # Every sandbox folder of the run goes here, to be found if one is left behind.
    scratch = Path(tempfile.mkdtemp(prefix="bad-notebooks-"))
    scratch.chmod(0o755)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(scratch))
        patch.setattr(tempfile, "tempdir", str(scratch))
        assert main(["collect", str(inbox), str(archive), *where]) == 0
        _run(where)
        assert main(["feedback", "all", *where]) == 0
        csv_path = base / "grades.csv"
        assert main(["export", "--output", str(csv_path), *where]) == 0
        first = _outputs(course, AGAIN)
        left = sorted(p.name for p in scratch.iterdir()
                      if p.name.startswith(("autograder-sandbox-", "grade-")))
        # Collected and graded again: the same files, byte for byte.
        assert main(["collect", str(inbox), str(archive), *where]) == 0
        _run(where, AGAIN)
        again = base / "again.csv"
        assert main(["export", "--output", str(again), *where]) == 0
    shutil.rmtree(scratch, ignore_errors=True)
    return {"root": root, "course": course, "inbox": inbox, "archive": archive,
            "originals": originals, "csv": csv_path.read_bytes(), "csv_again":
            again.read_bytes(), "first": first, "second": _outputs(course, AGAIN),
            "left": left}


def rows(graded: dict) -> dict[str, dict[str, str]]:
    return {r["student"]: r for r in csv.DictReader(io.StringIO(graded["csv"].decode()))}


def auto_score(graded: dict, student: str) -> float:
    from nbgrader.utils import determine_grade

    from autograder.notebook import graded_test_cells

    nb = nbformat.read(graded["course"] / "autograded" / student / CH / f"{CH}.ipynb", 4)
    return sum(determine_grade(c)[0] for c in graded_test_cells(nb))


def test_honest_learners_keep_full_marks_and_no_flag(graded):
    for student in HONEST:
        assert auto_score(graded, student) == FULL, student
        # They hand in the course's solutions, which copy detection may report (its own tests
        # are in test_similarity.py); nothing else may be flagged.
        course = Course.of(graded["root"], graded["course"])
        codes = {f.code for f in read_flags(course, student, CH)}
        assert codes - set(COPY_FLAGS) == set(), (student, codes)
        assert float(rows(graded)[student]["max_score"]) == MAX


@pytest.mark.parametrize("student", sorted(EXPECTED))
def test_each_bad_notebook_ends_with_its_own_flag_and_keeps_its_honest_work(graded, student):
    codes, points = EXPECTED[student]
    collected = (graded["course"] / "submitted" / student).is_dir()
    if points is None and not collected:
        return  # refused at collect: see the next test
    flags = read_flags(Course.of(graded["root"], graded["course"]), student, CH)
    assert codes & {f.code for f in flags}, flags
    assert all(f.reason for f in flags)
    assert "grading_error" not in {f.code for f in flags}, flags
    assert auto_score(graded, student) == (points or 0)
    row = rows(graded)[student]
    assert row["flags"] and float(row["max_score"]) == MAX, row


def test_what_collect_refuses_is_reported_and_not_graded(graded, capsys):
    where = ["--root", str(graded["root"]), "--course-dir", str(graded["course"])]
    assert main(["collect", str(graded["inbox"]), str(graded["archive"]), *where]) == 0
    out = capsys.readouterr().out
    for student, (_, points) in EXPECTED.items():
        if points is None and not (graded["course"] / "submitted" / student).is_dir():
            assert any(line.startswith("REFUSED") and student in line
                       for line in out.splitlines()), out


def test_feedback_covers_everyone_without_hidden_tests(graded):
    pages = {p.parts[-3]: p for p in (graded["course"] / "feedback").glob(f"*/{CH}/{CH}.html")}
    assert sorted(pages) == sorted(rows(graded))
    for page in pages.values():
        html = page.read_text(encoding="utf-8")
        assert "BEGIN HIDDEN TESTS" not in html and "hidden=True" not in html


def test_originals_untouched_and_no_sandbox_folder_left(graded):
    after = {**sha256_tree(graded["inbox"]),
             "lms.zip": hashlib.sha256(graded["archive"].read_bytes()).digest()}
    assert after == graded["originals"]
    assert graded["left"] == []


def test_grading_again_gives_the_same_files_byte_for_byte(graded):
    assert graded["csv_again"] == graded["csv"]
    for name, data in graded["first"].items():
        assert graded["second"][name] == data, name
