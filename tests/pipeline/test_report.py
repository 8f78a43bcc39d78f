"""The summary table and the grades CSV: one definition of a score, auto-graded and
hand-graded parts apart, long reasons cut for the CSV, names in the gradebook; the grade files
of Canvas and Moodle."""

from __future__ import annotations

import csv
import io
import re
import shutil
import warnings

import nbformat
import pytest

from autograder.cli import main
from autograder.course import ROOT, Course
from autograder.flags import Flag, read_flags
from autograder.grade.gradebook import open_gradebook, read_scores
from autograder.grade.learner import Outcome, placeholder
from autograder.grade.store import Summary, store_outcome
from autograder.lms_ids import LmsId, parse_ids, read_lms_ids, record_lms_ids, split_name
from autograder.steps.lms_export import canvas_csv, moodle_csv
from autograder.steps.release import generate
from autograder.steps.report import MAX_REASON_CHARS, export_csv, summary_table

CH = "ch02_attention"
HUGE = 628_896  # the length of a reason once seen in the wild


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> dict:
    """Two learners stored in a fresh gradebook: alice (full marks, a huge flag reason) and
    bob (unreadable); no kernel runs here."""
    root = tmp_path_factory.mktemp("report")
    shutil.copytree(ROOT / "solutions" / CH, root / "solutions" / CH)
    course_dir = root / "course"
    generate(Course.of(root, course_dir), [CH])
    course = Course.of(root, course_dir)
    release = nbformat.read(root / "notebooks" / CH / f"{CH}.ipynb", as_version=4)
    full = nbformat.read(root / "solutions" / CH / f"{CH}.ipynb", as_version=4)
    long_reason = "the kernel printed " + "x" * HUGE
    outcomes = [Outcome("alice", CH, nbformat.writes(full),
                        [Flag("cell_error", "c1", long_reason), Flag("cell_added", "c2", "kept")]),
                Outcome("bob", CH, nbformat.writes(placeholder(release, "broken")),
                        [Flag("unreadable_notebook", None, "broken")])]
    for outcome in outcomes:
        (course_dir / "submitted" / outcome.student / CH).mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = [store_outcome(course, o) for o in outcomes]
    return {"root": root, "course_dir": course_dir, "course": course, "rows": rows,
            "long_reason": long_reason, "warnings": caught}


def csv_rows(text: str) -> dict[str, dict[str, str]]:
    return {r["student"]: r for r in csv.DictReader(io.StringIO(text))}


def test_storing_grades_prints_no_sqlalchemy_warnings(stored):
    assert not [w for w in stored["warnings"] if "SAWarning" in type(w.message).__name__]


def test_long_reasons_are_cut_in_the_csv_and_whole_in_the_flag_file(stored):
    text = export_csv(Course.of(stored["root"], stored["course_dir"]))
    assert csv.field_size_limit() == 131_072  # Python's default, which the file must respect
    alice = csv_rows(text)["alice"]  # the default reader reads it
    assert len(alice["reasons"]) < 1_000
    first, second = alice["reasons"].split(" | ")
    assert first.startswith("the kernel printed xxx") and len(first) > MAX_REASON_CHARS
    assert "the whole text is in flags/alice/ch02_attention.json" in first
    assert second == "kept" and alice["flags"] == "cell_error;cell_added"
    kept = read_flags(Course.of(stored["root"], stored["course_dir"]), "alice", CH)
    assert kept[0].reason == stored["long_reason"]


def test_table_and_csv_agree_and_show_hand_grading_apart(stored):
    course, root, course_dir = stored["course"], stored["root"], stored["course_dir"]
    text = export_csv(Course.of(root, course_dir))
    row = csv_rows(text)["alice"]
    assert (row["score"], row["max_score"], row["auto_score"], row["auto_max"],
            row["manual_score"], row["manual_max"], row["manual_pending"]) == (
        "7", "11", "7", "7", "0", "4", "4")
    table = summary_table(stored["rows"], read_scores(course))
    assert re.search(rf"^alice +{CH} +7/7 +4 pending +7/11 ", table, re.M), table

    # A human grades one written answer (2 of 4 points): both outputs follow, alike.
    with open_gradebook(course) as gradebook:
        submission = gradebook.find_submission_notebook(CH, CH, "alice")
        written = next(g for g in submission.grades if g.cell.cell_type == "markdown")
        written.manual_score = 1.5
        written.needs_manual_grade = False
        gradebook.db.commit()
    row = csv_rows(export_csv(Course.of(root, course_dir)))["alice"]
    assert (row["score"], row["manual_score"], row["manual_pending"]) == ("8.5", "1.5", "2")
    table = summary_table(stored["rows"], read_scores(course))
    assert re.search(rf"^alice +{CH} +7/7 +2 pending +8.5/11 ", table, re.M), table


def test_a_submission_missing_from_the_gradebook_shows_dashes(stored):
    ghost = Summary("zed", CH, 0.0, 0.0, (Flag("grading_error", None, "storing failed"),), 1.0)
    table = summary_table([ghost], read_scores(stored["course"]))
    assert table.splitlines()[1].split() == ["zed", CH, "-", "-", "-", "1s", "grading_error"]


def test_learners_are_listed_by_id_in_the_gradebook(stored):
    with open_gradebook(stored["course"]) as gradebook:
        names = {s.id: (s.last_name, s.first_name) for s in gradebook.students}
        # A name imported from a roster is never overwritten.
        gradebook.update_or_create_student("bob", last_name="Builder", first_name="Bob")
    assert names == {"alice": ("alice", ""), "bob": ("bob", "")}
    course = stored["course"]
    release = nbformat.read(stored["root"] / "notebooks" / CH / f"{CH}.ipynb", as_version=4)
    store_outcome(course, Outcome("bob", CH, nbformat.writes(placeholder(release, "broken")),
                                  []))
    with open_gradebook(course) as gradebook:
        bob = gradebook.find_student("bob")
        assert (bob.last_name, bob.first_name) == ("Builder", "Bob")


# ---- grades for Canvas and Moodle (export --format canvas|moodle): each file read back through
# Python's CSV parser by the rules of the platform's importer (Canvas's GradebookImporter,
# Moodle's gradeimport_csv), which refuse what the platform refuses.

# Canvas's gradebook import: the columns of its own export, before the assignments.
CANVAS_ID_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
CANVAS_ASSIGNMENT = re.compile(r"^(?P<title>.*) \((?P<id>\d+)\)$")


def canvas_import(text: str) -> tuple[list[tuple[str, str | None, float]], dict]:
    """Canvas's reading: the assignments ``(title, Canvas id or None for a new one, points
    possible)`` and each learner's grades by ``(SIS User ID, SIS Login ID)``.

    Raises:
        AssertionError: a file Canvas refuses (its header), or a learner it cannot match.
    """
    header, *rows = list(csv.reader(io.StringIO(text)))
    # The header: Student, ID, SIS User ID, SIS Login ID, and the last learner column Section.
    assert re.search("Student", header[0]) and re.search("ID", header[1])
    assert re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID",
                                                                    header[3])
    assert re.search("Section", header[4])
    titles = [(m["title"], m["id"]) if (m := CANVAS_ASSIGNMENT.match(name)) else (name, None)
              for name in header[5:]]
    possible = next(row for row in rows if re.search("Points Possible", row[0]))
    grades = {}
    for row in rows:
        if row is possible:
            continue
        assert row[1] or row[2] or row[3], f"Canvas cannot match {row[0]!r} but by name"
        grades[row[2], row[3]] = [float(cell) if cell else None for cell in row[5:]]
    return [(*title, float(points)) for title, points in zip(titles, possible[5:],
                                                              strict=True)], grades


def moodle_import(text: str, map_from: str) -> tuple[list[str], dict[str, list]]:
    """Moodle's reading, the column ``map_from`` mapped to the user field: the grade items'
    columns, and each user's grades (``None``: no grade).

    Raises:
        AssertionError: a row Moodle aborts the whole import on (no user id, a grade that is
            not a number).
    """
    header, *rows = list(csv.reader(io.StringIO(text)))
    key = header.index(map_from)
    grades = {}
    for row in rows:
        assert row[key].strip(), "Moodle aborts the import: a row without its user"
        grades[row[key]] = [None if cell.strip() in ("", "-") else float(cell)
                            for i, cell in enumerate(row) if i != key]
    return [name for i, name in enumerate(header) if i != key], grades


def _given_ids(course: Course, **ids: str) -> dict[str, float]:
    """Give the learners these ids (``hub add``'s ``NAME=IDS``) and no others; their scores."""
    course.lms_ids_file.unlink(missing_ok=True)
    record_lms_ids(course, {name: parse_ids(text) for name, text in ids.items()})
    return {s.student: s.score for s in read_scores(course) if s.chapter == CH}


def test_ids_are_read_from_hub_add_arguments_and_kept_per_learner(stored) -> None:
    assert split_name("dave") == ("dave", None)
    assert split_name("dave=d@uni.edu,u77") == ("dave", LmsId("d@uni.edu", "u77"))
    for bad in ("", "a@b,c@d", "x,y", "has space", "a;b", "=cmd()", "+1", "-x", "@SUM(1)"):
        with pytest.raises(ValueError):
            parse_ids(bad)
    course = stored["course"]
    _given_ids(course, alice="alice@uni.edu")
    record_lms_ids(course, {"alice": parse_ids("s0001")})  # a second id adds, not replaces
    assert read_lms_ids(course) == {"alice": LmsId("alice@uni.edu", "s0001")}


def test_canvas_file_reads_back_as_canvas_imports_it(stored) -> None:
    course = stored["course"]
    scores = _given_ids(course, alice="alice@uni.edu,s0001")
    export = canvas_csv(course, {CH: "4711"})
    assert next(csv.reader(io.StringIO(export.text))) == [*CANVAS_ID_COLUMNS, f"{CH} (4711)"]
    # 11 points: 7 autograded and 4 written; bob has no id, and is left out, not matched by name.
    assert canvas_import(export.text) == ([(CH, "4711", 11.0)],
                                          {("s0001", "alice@uni.edu"): [scores["alice"]]})
    assert export.left_out == ["bob"] and export.learners == ["alice"]
    # An LMS id alone finds a learner too; without Canvas's id, the chapter's column makes a
    # new assignment named for it.
    scores = _given_ids(course, alice="alice@uni.edu,s0001", bob="s0002")
    assert canvas_import(canvas_csv(course).text) == (
        [(CH, None, 11.0)], {("s0001", "alice@uni.edu"): [scores["alice"]], ("s0002", ""): [0.0]})


def test_moodle_file_reads_back_as_moodle_imports_it(stored) -> None:
    course = stored["course"]
    scores = _given_ids(course, alice="alice@uni.edu,s0001", bob="s0002")
    by_email = moodle_csv(course)
    assert moodle_import(by_email.text, "Email address") == (
        [CH], {"alice@uni.edu": [scores["alice"]]})
    assert by_email.left_out == ["bob"]
    assert moodle_import(moodle_csv(course, "lms_id").text, "ID number") == (
        [CH], {"s0001": [scores["alice"]], "s0002": [0.0]})
    with pytest.raises(ValueError, match="id_field"):
        moodle_csv(course, "username")


def test_the_command_writes_each_format_and_names_learners_left_out(stored, capsys) -> None:
    course = stored["course"]
    _given_ids(course, alice="alice@uni.edu")
    where = ["--root", str(stored["root"]), "--course-dir", str(stored["course_dir"])]
    assert main(["export", "--format", "canvas", "--assignment-id", "ch02=12", *where]) == 0
    out, err = capsys.readouterr()
    assert "wrote 1 row(s)" in out and "bob" in err and "hub add bob=" in err
    written = (course.folder / "grades-canvas.csv").read_text(encoding="utf-8")
    assert written.splitlines()[0].endswith(f"{CH} (12)")
    assert main(["export", "--format", "moodle", "-o", "-", *where]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == f"Email address,{CH}" and "without an email" in err
    assert main(["export", "--format", "canvas", "--assignment-id", "ch02=x", *where]) == 2
    assert "CHAPTER=NUMBER" in capsys.readouterr().err
    assert main(["export", *where]) == 0  # the course's own CSV, as before
    assert (course.folder / "grades.csv").read_text().startswith("student,chapter,score")
