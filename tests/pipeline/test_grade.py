"""The grading pipeline's own parts, without running learner code: reading submissions,
what learners may see, storing results in the gradebook, the CSV and the command line."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import asdict

import nbformat
import pytest
from nbgrader.utils import determine_grade

from autograder.cli import main
from autograder.course import ROOT, Course
from autograder.flags import Flag, read_flags, write_flags
from autograder.grade.gradebook import read_scores
from autograder.grade.learner import (
    MAX_SUBMISSION_BYTES,
    Outcome,
    _wrong_chapter,
    drop_unknown_grade_ids,
    grade_safely,
    kernel_secret,
    pack,
    placeholder,
    strip_for_learners,
    with_hidden_tests,
)
from autograder.grade.store import store_outcome
from autograder.grade.workers import versions
from autograder.notebook import exercise_ids, graded_test_cells
from autograder.sandbox.launcher import Limits
from autograder.steps.release import generate
from autograder.steps.report import export_csv, summary_table

CH = "ch02_attention"
SOURCE = ROOT / "solutions" / CH / f"{CH}.ipynb"
RELEASE = ROOT / "notebooks" / CH / f"{CH}.ipynb"

pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> dict:
    """A released ch02 in a temporary course (no kernel runs in this file)."""
    root = tmp_path_factory.mktemp("course")
    shutil.copytree(ROOT / "solutions" / CH, root / "solutions" / CH)
    generate(Course.of(root, root / "course"), [CH])
    return {"root": root, "course_dir": root / "course"}


def test_wrong_chapter_is_recognised_by_grade_ids():
    source = nbformat.read(SOURCE, as_version=4)
    other = nbformat.read(ROOT / "notebooks" / "ch03_attention_head" /
                          "ch03_attention_head.ipynb", as_version=4)
    assert "ch03" in _wrong_chapter(other, source, CH)
    assert _wrong_chapter(nbformat.read(RELEASE, as_version=4), source, CH) is None
    # A notebook without any nbgrader metadata is left to the cell restoration.
    assert _wrong_chapter(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]),
                          source, CH) is None


def test_exercise_ids_follow_the_graded_cells():
    ids = exercise_ids(nbformat.read(SOURCE, as_version=4))
    assert ids == {"ch02_softmax_test": "ch02.softmax", "ch02_causal_mask_test": "ch02.causal_mask",
                   "ch02_padding_mask_test": "ch02.padding_mask",
                   "ch02_scaled_dot_product_attention_test": "ch02.scaled_dot_product_attention"}


def test_placeholder_scores_zero_and_says_why():
    release = nbformat.read(RELEASE, as_version=4)
    nb = placeholder(release, "the notebook is not valid JSON")
    grades = [determine_grade(c) for c in graded_test_cells(nb)]
    assert grades and all(score == 0 for score, _ in grades)
    assert all("not valid JSON" in c.outputs[-1].evalue for c in graded_test_cells(nb))
    assert nbformat.read(RELEASE, as_version=4) == release  # the release is not modified


def test_strip_for_learners_removes_hidden_tests_and_tracebacks():
    nb = nbformat.read(SOURCE, as_version=4)
    cell = graded_test_cells(nb)[0]
    cell.outputs = [nbformat.v4.new_output(
        "error", ename="AssertionError", evalue="ch02.softmax (hidden checks) failed: rows",
        traceback=['check("ch02.softmax", softmax, hidden=True)', "File autograder/x.py"])]
    strip_for_learners(nb)
    text = nbformat.writes(nb)
    assert "BEGIN HIDDEN TESTS" not in text and "hidden=True" not in text
    assert 'check("ch02.softmax", softmax)' in cell.source  # the visible check stays
    assert cell.outputs[0].traceback == ["AssertionError: ch02.softmax (hidden checks) "
                                         "failed: rows"]


def test_hidden_tests_go_back_into_the_release_cells():
    release = nbformat.read(RELEASE, as_version=4)
    source = nbformat.read(SOURCE, as_version=4)
    with_hidden_tests(release, source)
    for ours, theirs in zip(graded_test_cells(release), graded_test_cells(source), strict=True):
        assert ours.source == theirs.source and "hidden=True" in ours.source
    # Solution cells keep the learner's text.
    assert "raise NotImplementedError()" in nbformat.writes(release)


def test_unknown_and_repeated_grade_ids_lose_their_metadata():
    release = nbformat.read(RELEASE, as_version=4)
    nb = nbformat.read(RELEASE, as_version=4)
    solution = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    copy = nbformat.from_dict(json.loads(json.dumps(solution)))
    renamed = nbformat.from_dict(json.loads(json.dumps(solution)))
    renamed.metadata["nbgrader"]["grade_id"] = "my_own_id"
    nb.cells += [copy, renamed]
    flags = drop_unknown_grade_ids(nb, release)
    assert [f.cell for f in flags] == [solution.metadata["nbgrader"]["grade_id"], "my_own_id"]
    assert {f.code for f in flags} == {"unknown_grade_id"}
    assert "nbgrader" in solution.metadata  # the first one keeps its metadata
    assert "nbgrader" not in copy.metadata and "nbgrader" not in renamed.metadata
    assert drop_unknown_grade_ids(release, release) == []


def test_kernel_secret_is_stable_and_not_the_grader_secret(monkeypatch):
    monkeypatch.setenv("AUTOGRADER_SECRET", "s3cret")
    first = kernel_secret("alice", CH)
    assert first == kernel_secret("alice", CH) != kernel_secret("bob", CH)
    assert "s3cret" not in first
    monkeypatch.setenv("AUTOGRADER_SECRET", "other")
    assert kernel_secret("alice", CH) != first


def test_flags_are_kept_per_stage(tmp_path):
    course = Course.of(tmp_path, tmp_path / "course")
    write_flags(course, "alice", CH, "collect", [Flag("duplicate_submission", None, "two")])
    write_flags(course, "alice", CH, "grade", [Flag("kernel_died", "c1", "died")])
    write_flags(course, "alice", CH, "grade", [Flag("cell_error", "c2", "raised")])
    assert read_flags(course, "alice", CH) == [Flag("duplicate_submission", None, "two"),
                                                 Flag("cell_error", "c2", "raised")]
    assert read_flags(course, "bob", CH) == []
    with pytest.raises(ValueError, match="stage must be one of"):
        write_flags(course, "alice", CH, "later", [])


def test_store_writes_gradebook_and_csv_idempotently(course):
    root, course_dir = course["root"], course["course_dir"]
    release = nbformat.read(root / "notebooks" / CH / f"{CH}.ipynb", as_version=4)
    full = nbformat.read(root / "solutions" / CH / f"{CH}.ipynb", as_version=4)
    outcomes = [Outcome("bob", CH, nbformat.writes(placeholder(release, "broken")),
                        [Flag("unreadable_notebook", None, "broken")]),
                Outcome("alice", CH, nbformat.writes(full), [])]
    for outcome in outcomes:
        (course_dir / "submitted" / outcome.student / CH).mkdir(parents=True, exist_ok=True)
    csvs = []
    for _ in range(2):
        rows = [store_outcome(Course.of(root, course_dir), o) for o in outcomes]
        csvs.append(export_csv(Course.of(root, course_dir)))
    assert csvs[0] == csvs[1]
    lines = csvs[0].splitlines()
    assert lines[0] == ("student,chapter,score,max_score,auto_score,auto_max,manual_score,"
                        "manual_max,manual_pending,late_penalty,flags,reasons")
    # The written answers (4 points) wait for a human; an unanswered one needs nobody.
    assert lines[1] == f"alice,{CH},7,11,7,7,0,4,4,0,,"
    assert lines[2] == f"bob,{CH},0,11,0,7,0,4,0,0,unreadable_notebook,broken"
    scores = {s.student: s for s in read_scores(Course.of(root, course_dir))}
    assert (scores["alice"].auto_score, scores["bob"].auto_score) == (7, 0)
    table = summary_table(rows, list(scores.values()))
    assert "unreadable_notebook" in table and "2 submission(s) graded, 1 flagged" in table
    assert re.search(rf"^alice +{CH} +7/7 +4 pending +7/11 ", table, re.M), table
    assert (course_dir / "autograded" / "bob" / CH / f"{CH}.ipynb").is_file()


def submitted(course: dict, student: str, files: dict[str, bytes]) -> Course:
    """``course`` with ``files`` in the submission folder of ``student``."""
    where = Course.of(course["root"], course["course_dir"])
    folder = where.step_dir("submitted", student, CH)
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return where


def test_a_submission_travels_with_its_files_and_without_links(course, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("not the learner's")
    where = submitted(course, "carol", {f"{CH}.ipynb": RELEASE.read_bytes(),
                                        "timestamp.txt": b"2025-03-01 12:00:00.000000 UTC\n",
                                        "data/words.txt": b"ein zwei"})
    (where.step_dir("submitted", "carol", CH) / "link.txt").symlink_to(secret)
    submission = pack(where, "carol", CH, limits=Limits(), root=None,
                      versions=versions(course["root"], CH))
    assert submission.files == {f"{CH}.ipynb": RELEASE.read_bytes(),
                                "timestamp.txt": b"2025-03-01 12:00:00.000000 UTC\n",
                                "data/words.txt": b"ein zwei"}
    assert (submission.student, submission.chapter, submission.refused) == ("carol", CH, None)
    assert submission.limits == asdict(Limits())


def test_a_submission_too_large_is_not_sent_and_scores_zero(course, monkeypatch):
    import autograder.grade.learner as grade

    where = submitted(course, "dave", {f"{CH}.ipynb": RELEASE.read_bytes(),
                                       "big.bin": bytes(MAX_SUBMISSION_BYTES // 64)})
    monkeypatch.setattr(grade, "MAX_SUBMISSION_BYTES", MAX_SUBMISSION_BYTES // 64)
    submission = pack(where, "dave", CH, limits=Limits(), root=str(course["root"]),
                      versions=versions(course["root"], CH))
    assert submission.files == {} and submission.refused.code == "submission_too_large"
    outcome = grade_safely(submission)
    assert outcome.notebook is None and outcome.flags == [submission.refused]
    summary = store_outcome(where, outcome)
    assert summary.score == 0 and summary.max_score == 7
    assert "more than the 1 MiB" in read_flags(where, "dave", CH)[0].reason


def test_an_error_while_grading_fails_only_its_learner(course, tmp_path):
    # A course root without solutions/: grading this learner cannot even start.
    shutil.copytree(ROOT / "notebooks" / CH, tmp_path / "notebooks" / CH)
    where = submitted(course, "alice", {})
    submission = pack(where, "alice", CH, limits=Limits(), root=str(tmp_path),
                      versions=versions(tmp_path, CH))
    outcome = grade_safely(submission)
    assert outcome.notebook is None
    assert [f.code for f in outcome.flags] == ["grading_error"]
    assert "FileNotFoundError" in outcome.flags[0].reason
    summary = store_outcome(where, outcome)
    assert (summary.score, summary.max_score) == (0, 7)
    nb = nbformat.read(where.notebook("autograded", "alice", CH), as_version=4)
    assert all(determine_grade(c)[0] == 0 for c in graded_test_cells(nb))
    assert all("FileNotFoundError" in c.outputs[-1].evalue for c in graded_test_cells(nb))


def test_a_worker_with_another_course_refuses_to_grade(course, monkeypatch):
    where = submitted(course, "erin", {f"{CH}.ipynb": SOURCE.read_bytes()})
    monkeypatch.setenv("AUTOGRADER_SECRET", "the grader's secret")
    submission = pack(where, "erin", CH, limits=Limits(), root=str(course["root"]),
                      versions=versions(course["root"], CH))
    monkeypatch.setenv("AUTOGRADER_SECRET", "a worker's other secret")
    outcome = grade_safely(submission)
    # The grader's fault, not erin's: no notebook, no flag, nothing that could be stored.
    assert outcome.notebook is None and outcome.flags == []
    assert "differs from the grader's (grading secret)" in outcome.fault
    moved = pack(where, "erin", CH, limits=Limits(), root=str(course["root"] / "elsewhere"),
                 versions=submission.versions)
    assert "not on this machine" in grade_safely(moved).fault


def test_cli_usage_errors(tmp_path, capsys):
    where = ["--root", str(tmp_path), "--course-dir", str(tmp_path / "course")]
    assert main(["autograde", "ch02", "--jobs", "0", *where]) == 2
    assert "--jobs must be 1 or more" in capsys.readouterr().err
    assert main(["autograde", "all", *where]) == 1
    assert "nothing to grade" in capsys.readouterr().err
    assert main(["collect", *where]) == 2
    with pytest.raises(SystemExit):
        main(["autograde", "ch99"])


def test_export_to_stdout_and_file(course, capsys, tmp_path):
    where = ["--root", str(course["root"]), "--course-dir", str(course["course_dir"])]
    assert main(["export", "--output", "-", *where]) == 0
    text = capsys.readouterr().out
    assert text.startswith("student,chapter,score,max_score,auto_score,auto_max,manual_score,"
                           "manual_max,manual_pending,late_penalty,flags,reasons\n")
    assert main(["export", "--output", str(tmp_path / "g.csv"), *where]) == 0
    assert (tmp_path / "g.csv").read_text() == text
