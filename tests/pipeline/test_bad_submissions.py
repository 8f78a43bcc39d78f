"""A small class of honest and misbehaving learners, graded end to end with ``--jobs 2``.

One temporary course (module-scoped) is released from ``solutions/ch02_attention``, collected
from a folder and a zip, and graded once; the tests then read what the run left behind. Each
bad submission must end with its own flag (or refusal) while the honest learners get full
marks, the submitted files stay byte-identical and the gradebook stays readable.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.cli import main
from autograder.copies.pairs import CODES as COPY_FLAGS
from autograder.course import ROOT, Course
from autograder.flags import read_flags
from autograder.grade.gradebook import read_scores
from autograder.grade.run import autograde
from autograder.notebook import graded_test_cells
from autograder.sandbox.launcher import Limits
from autograder.steps.release import generate
from autograder.steps.report import export_csv

CH = "ch02_attention"
AUTO_POINTS = 7  # the autograded points of ch02 (2 + 1 + 1 + 3)
LIMITS = Limits(cell_timeout_s=8, notebook_timeout_s=30, memory_mb=2048, max_processes=64,
                max_output_bytes=200_000)
LIMIT_ARGS = ["--cell-timeout", "8", "--notebook-timeout", "30", "--memory-mb", "2048",
              "--max-processes", "64", "--max-output-bytes", "200000"]
HONEST = ("honest_a", "zipped", "numpy_sqrt")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning"),
]


def sha256_tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def answered(release: Path, source: Path) -> nbformat.NotebookNode:
    """The release notebook with the source's solution cells pasted in (an honest learner)."""
    nb = nbformat.read(release, as_version=4)
    solutions = {c.metadata["nbgrader"]["grade_id"]: c.source
                 for c in nbformat.read(source, as_version=4).cells
                 if c.metadata.get("nbgrader", {}).get("solution")}
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in solutions:
            cell.source = solutions[grade_id]
    return nb


def cell_with(nb, grade_id: str):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def slim(nb):
    """A copy of ``nb`` without the demo cells (code cells without nbgrader metadata, except
    the setup cell): the same exercises and grading, in a fraction of the run time."""
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    plain = [c for c in nb.cells if c.cell_type == "code" and "nbgrader" not in c.metadata]
    nb.cells = [c for c in nb.cells if c not in plain[1:]]
    return nb


def append_to_setup(nb, code: str):
    """A copy of ``nb`` whose setup cell (the first code cell) ends by running ``code``."""
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    cell = next(c for c in nb.cells if c.cell_type == "code")
    cell.source += "\n\n" + code
    return nb


def build_class(root: Path, inbox: Path, outside: Path) -> dict[str, bytes]:
    """Write every learner's notebook under ``inbox``; return the zip-only members."""
    full = answered(root / "notebooks" / CH / f"{CH}.ipynb",
                    root / "solutions" / CH / f"{CH}.ipynb")
    honest = slim(full)
    text = nbformat.writes(honest).encode()

    def variant(edit) -> nbformat.NotebookNode:
        nb = nbformat.from_dict(json.loads(json.dumps(honest)))
        edit(nb)
        return nb

    def numpy_sqrt(nb):
        # Right values; float32 inputs give float64 (NumPy 2 promotes by np.sqrt's float64).
        cell = cell_with(nb, "ch02_scaled_dot_product_attention_solution")
        assert "/ np.sqrt(d_k)" not in cell.source
        cell.source = cell.source.replace("/ d_k**0.5", "/ np.sqrt(d_k)")
        assert "/ np.sqrt(d_k)" in cell.source

    def wrong_softmax(nb):
        cell_with(nb, "ch02_softmax_solution").source = (
            "def softmax(x, axis=-1):\n    return x\n")

    def patch_checks(nb):
        wrong_softmax(nb)
        cell_with(nb, "ch02_softmax_solution").source += (
            "\nimport autograder\nfrom autograder.exercises import registry\n"
            "autograder.check = lambda *args, **kwargs: None\n"
            "registry.check = autograder.check\n")

    def delete_test(nb):
        nb.cells.remove(cell_with(nb, "ch02_softmax_test"))

    def edit_test(nb):
        wrong_softmax(nb)
        cell_with(nb, "ch02_softmax_test").source = "print('all good')"

    def add_graded_cell(nb):
        extra = nbformat.v4.new_code_cell("print('free points')")
        extra.metadata["nbgrader"] = {"grade": True, "grade_id": "ch02_bonus_test",
                                      "locked": True, "points": 50, "schema_version": 3,
                                      "solution": False, "task": False}
        nb.cells.append(extra)

    def change_points(nb):
        cell_with(nb, "ch02_softmax_test").metadata["nbgrader"]["points"] = 100

    def import_reference(nb):
        cell_with(nb, "ch02_softmax_solution").source = (
            "from transformer_ref.np_attention import softmax\n")

    solutions_file = root / "solutions" / CH / f"{CH}.ipynb"
    notebooks = {
        "honest_a": nbformat.writes(full).encode(),
        "numpy_sqrt": nbformat.writes(variant(numpy_sqrt)).encode(),
        "broken_json": text[: len(text) // 3] + b"{,]",
        "truncated_json": text[: len(text) - 20],
        "empty_notebook": nbformat.writes(nbformat.v4.new_notebook()).encode(),
        "deleted_cell": nbformat.writes(variant(delete_test)).encode(),
        "edited_cell": nbformat.writes(variant(edit_test)).encode(),
        "added_cell": nbformat.writes(variant(add_graded_cell)).encode(),
        "changed_points": nbformat.writes(variant(change_points)).encode(),
        "monkeypatch": nbformat.writes(variant(patch_checks)).encode(),
        "reference_import": nbformat.writes(variant(import_reference)).encode(),
    }
    misbehaviour = {
        "infinite_loop": "while True:\n    pass",
        "sleeper": "import time\ntime.sleep(3600)",
        "memory_bomb": "blocks = []\nwhile True:\n    blocks.append(bytearray(256 * 2**20))",
        # Bounded, so that a machine without a process limit survives it too.
        "fork_bomb": ("import os, time\nfor _ in range(300):\n    if os.fork() == 0:\n"
                      "        time.sleep(5)\n        os._exit(0)"),
        "os_exit": "import os\nos._exit(1)",
        "sys_exit": "import sys\nsys.exit(3)",
        "segfault": "import ctypes\nctypes.string_at(0)",
        "output_flood": "for _ in range(100):\n    print('x' * 1_000_000)",
        "reads_solutions": (f"print(open({str(solutions_file)!r}).read()[:100])\n"
                            f"print(open({str(ROOT / 'solutions' / CH / (CH + '.ipynb'))!r})"
                            ".read()[:100])"),
        "writes_outside": f"open({str(outside)!r}, 'w').write('escaped')",
        "network": ("import socket\n"
                    "socket.create_connection(('1.1.1.1', 80), timeout=3).close()"),
    }
    for student, code in misbehaviour.items():
        notebooks[student] = nbformat.writes(append_to_setup(honest, code)).encode()
    ch03 = ROOT / "notebooks" / "ch03_attention_head" / "ch03_attention_head.ipynb"
    notebooks["wrong_chapter"] = ch03.read_bytes()

    for student, data in notebooks.items():
        path = inbox / student / CH / f"{CH}.ipynb"
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
    # The same learner twice: an older full copy in the folder layout, a newer one beside it.
    old = inbox / "twice" / CH / f"{CH}.ipynb"
    old.parent.mkdir(parents=True)
    old.write_bytes(nbformat.writes(variant(wrong_softmax)).encode())
    os.utime(old, (1_600_000_000, 1_600_000_000))
    (inbox / "twice" / f"{CH}.ipynb").write_bytes(text)
    os.utime(inbox / "twice" / f"{CH}.ipynb", (1_700_000_000, 1_700_000_000))
    return {f"zipped_{CH}.ipynb": text, f"latin1XX_{CH}.ipynb": text}


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict:
    """The class, collected and graded once with two jobs through the command line."""
    base = tmp_path_factory.mktemp("class")
    root, course, inbox = base / "root", base / "root" / "course", base / "inbox"
    shutil.copytree(ROOT / "solutions" / CH, root / "solutions" / CH)
    generate(Course.of(root, course), [CH])
    outside = base / "outside.txt"
    members = build_class(root, inbox, outside)
    archive = base / "lms.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    # One member name in Latin-1 bytes (not UTF-8), as some LMS exports write them.
    archive.write_bytes(archive.read_bytes().replace(b"latin1XX", b"latin1\xe9\xe9"))

    originals = {**sha256_tree(inbox), "lms.zip": hashlib.sha256(archive.read_bytes()).hexdigest()}
    where = ["--root", str(root), "--course-dir", str(course)]
    assert main(["collect", str(inbox), str(archive), *where]) == 0
    submitted_hashes = sha256_tree(course / "submitted")
    assert main(["autograde", "ch02", "--jobs", "2", *LIMIT_ARGS, *where]) == 0
    csv_path = base / "grades.csv"
    assert main(["export", "--output", str(csv_path), *where]) == 0
    return {"root": root, "course": course, "inbox": inbox, "archive": archive,
            "outside": outside, "originals": originals, "submitted": submitted_hashes,
            "csv": csv_path.read_bytes(), "where": where}


def rows(graded: dict) -> dict[str, dict[str, str]]:
    return {r["student"]: r for r in csv.DictReader(io.StringIO(graded["csv"].decode()))}


def codes(graded: dict, student: str) -> set[str]:
    return {f.code for f in read_flags(Course.of(graded["root"], graded["course"]), student, CH)}


def auto_score(graded: dict, student: str) -> float:
    nb = nbformat.read(graded["course"] / "autograded" / student / CH / f"{CH}.ipynb", 4)
    from nbgrader.utils import determine_grade

    return sum(determine_grade(c)[0] for c in graded_test_cells(nb))


def test_honest_learners_get_full_marks_and_no_flags(graded):
    for student in (*HONEST, "twice"):
        assert auto_score(graded, student) == AUTO_POINTS, student
    for student in HONEST:
        # They hand in the course's solutions (numpy_sqrt with np.sqrt for its scale), which
        # copy detection may report (its own tests are in test_similarity.py); nothing else may
        # be flagged: a float64 result of float32 inputs is a note, not a flag.
        assert codes(graded, student) - set(COPY_FLAGS) == set(), read_flags(
            Course.of(graded["root"], graded["course"]), student, CH)
        assert set(filter(None, rows(graded)[student]["flags"].split(";"))) <= set(COPY_FLAGS)
    scores = {s.student: s for s in read_scores_of(graded)}
    assert scores["honest_a"].auto_score == AUTO_POINTS
    assert scores["honest_a"].max_score == AUTO_POINTS + 4  # two written answers, by hand


def read_scores_of(graded: dict):

    return read_scores(Course.of(graded["root"], graded["course"]))


EXPECTED = {
    "broken_json": "unreadable_notebook",
    "truncated_json": "unreadable_notebook",
    "empty_notebook": "empty_notebook",
    "wrong_chapter": "wrong_chapter",
    "deleted_cell": "test_cell_deleted",
    "edited_cell": "test_cell_edited",
    "added_cell": "cell_added",
    "changed_points": "test_cell_repointed",
    # Interrupted after the cell limit, or stopped with the whole notebook.
    "infinite_loop": {"cell_timeout", "execution_failed"},
    "sleeper": {"cell_timeout", "execution_failed"},
    "memory_bomb": "memory_limit",
    "fork_bomb": "cell_error",
    "os_exit": "kernel_died",
    "sys_exit": "cell_error",
    "segfault": "kernel_died",
    "output_flood": "output_truncated",
    "monkeypatch": "verification_failed",
    "reference_import": "verification_failed",
    "reads_solutions": "cell_error",
    "writes_outside": "cell_error",
    "network": "cell_error",
    "twice": "duplicate_submission",
}


@pytest.mark.parametrize("student", sorted(EXPECTED))
def test_each_bad_submission_is_flagged(graded, student):
    flags = read_flags(Course.of(graded["root"], graded["course"]), student, CH)
    expected = EXPECTED[student]
    expected = {expected} if isinstance(expected, str) else expected
    assert expected & {f.code for f in flags}, flags
    assert all(f.reason for f in flags)
    assert rows(graded)[student]["flags"], "the CSV must carry the flags"


def test_cheats_and_broken_notebooks_score_nothing_on_what_they_broke(graded):
    for student in ("broken_json", "truncated_json", "empty_notebook", "wrong_chapter",
                    "os_exit", "segfault"):
        assert auto_score(graded, student) == 0, student
    # softmax was wrong (or the reference's) and the cheat hid it: softmax and attention, which
    # calls it, score 0; the two masks (1 + 1 points) are earned.
    for student in ("monkeypatch", "edited_cell", "reference_import"):
        assert auto_score(graded, student) == 2, student
    # Restored metadata: no bonus cell, no changed points.
    for student in ("added_cell", "changed_points"):
        assert float(rows(graded)[student]["max_score"]) == AUTO_POINTS + 4


def test_refused_names_are_reported_and_not_collected(graded):
    students = sorted(p.name for p in (graded["course"] / "submitted").iterdir())
    assert "zipped" in students
    assert not any(name.startswith("latin1") for name in students)


def test_originals_and_submissions_untouched_and_nothing_escaped(graded):
    after = {**sha256_tree(graded["inbox"]),
             "lms.zip": hashlib.sha256(graded["archive"].read_bytes()).hexdigest()}
    assert after == graded["originals"]
    assert sha256_tree(graded["course"] / "submitted") == graded["submitted"]
    assert not graded["outside"].exists()


def test_feedback_hides_hidden_tests(graded):
    assert main(["feedback", "ch02", *graded["where"]]) == 0
    pages = sorted((graded["course"] / "feedback").glob(f"*/{CH}/{CH}.html"))
    assert len(pages) == len(rows(graded))
    for page in pages:
        html = page.read_text(encoding="utf-8")
        assert "BEGIN HIDDEN TESTS" not in html
        assert "hidden=True" not in html and "hidden=True" not in html.replace("&#61;", "=")
    assert "Score" in (graded["course"] / "feedback" / "honest_a" / CH / f"{CH}.html"
                       ).read_text(encoding="utf-8")
    # A right answer in float64 for float32 inputs: full points, and the note on the page.
    page = (graded["course"] / "feedback" / "numpy_sqrt" / CH / f"{CH}.html"
            ).read_text(encoding="utf-8")
    assert "Note: weights of scaled_dot_product_attention" in page
    assert "costs no points" in page and "np.sqrt(d_k)" in page
    assert "Note:" not in (graded["course"] / "feedback" / "honest_a" / CH / f"{CH}.html"
                           ).read_text(encoding="utf-8")
    # Its checks patched, the kernel passed everything and the grader confirmed nothing: the
    # page says why in general, with no hidden input and no "all passed" above a 0.
    page = (graded["course"] / "feedback" / "monkeypatch" / CH / f"{CH}.html"
            ).read_text(encoding="utf-8")
    assert "did not confirm it" in page and "checks): all passed" not in page
    assert "hidden checks) failed" not in page and "depend on its arguments only" in page


def test_rerun_is_idempotent_and_serial_equals_parallel(graded, tmp_path):
    where = graded["where"]
    again = tmp_path / "again.csv"
    subset = ["honest_a", "monkeypatch", "broken_json"]
    before = {s.student: s for s in read_scores_of(graded)}
    args = ["autograde", "ch02", "--jobs", "1", *LIMIT_ARGS, *where]
    for student in subset:
        args += ["--student", student]
    assert main(args) == 0  # serial this time, on the already graded gradebook
    assert main(["export", "--output", str(again), *where]) == 0
    assert again.read_bytes() == graded["csv"]
    assert {s.student: s for s in read_scores_of(graded)} == before


def test_library_call_rejects_bad_jobs(graded):
    with pytest.raises(ValueError, match="jobs must be a positive integer"):
        autograde(Course.of(graded["root"], graded["course"]), [CH], jobs=0, limits=LIMITS)
    assert export_csv(Course.of(graded["root"], graded["course"])).encode() == graded["csv"]
