"""Deadlines: due dates, one learner's extension, late work marked and the late policy applied,
and the answers of a closed chapter sealed in the view of a learner whose extension runs."""

from __future__ import annotations

import csv
import io
import json
import shutil
from datetime import UTC, datetime, timedelta

import nbformat
import pytest

from autograder.cli import main
from autograder.course import (
    COURSE_ID,
    ROOT,
    TIMESTAMP_FILE,
    TIMESTAMP_FORMAT,
    VISIBLE_ANSWERS_FILE,
    Course,
)
from autograder.deadlines import (
    close_chapter,
    deadline,
    extend,
    lateness,
    parse_policy,
    sealed_for,
    set_late_policy,
)
from autograder.flags import read_flags
from autograder.grade.gradebook import open_gradebook, read_scores
from autograder.grade.learner import Outcome
from autograder.grade.store import store_outcome
from autograder.learner.submit import visible_chapters
from autograder.steps.release import generate, register_assignments
from autograder.steps.report import export_csv
from autograder.steps.view import answers_shown_since, refresh_view, view_folder

CH = "ch02_attention"
DUE = datetime(2026, 12, 1, 18, 0, tzinfo=UTC)
# Where chapter 2's answers live in a view: the stub while open, the reference once closed.
ANSWER = ("transformer_ref", "numpy", "scaled_attention.py")

pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")


@pytest.fixture
def course(tmp_path) -> Course:
    """A class course with chapter 2 released and due at :data:`DUE`."""
    shutil.copytree(ROOT / "solutions" / CH, tmp_path / "solutions" / CH)
    course = Course.of(tmp_path, tmp_path / "course")
    generate(course, [CH])
    register_assignments(course)
    close_chapter(course, CH, DUE)
    return course


def test_policies_are_parsed_and_a_wrong_one_is_named():
    assert parse_policy("none") == ("none", 0.0)
    assert parse_policy(" 10%/day ") == ("day", 10.0)
    assert parse_policy("2.5%/hour") == ("hour", 2.5)
    with pytest.raises(ValueError, match="none, zero, P%/hour, P%/day"):
        parse_policy("10 percent")


@pytest.mark.parametrize(("policy", "late_by", "penalty"), [
    ("none", timedelta(hours=30), 0.0),
    ("zero", timedelta(minutes=1), 7.0),
    ("10%/day", timedelta(hours=30), 2.2),  # two days begun, of 11 points
    ("5%/hour", timedelta(hours=2, minutes=1), 1.65),  # three hours begun
    ("50%/day", timedelta(days=3), 7.0),  # never more than the points scored
])
def test_late_work_is_marked_by_how_much_and_the_policy_takes_its_share(
        course, policy, late_by, penalty):
    set_late_policy(course, CH, policy)
    late = lateness(course, CH, "ann", DUE + late_by, 7.0, 11.0)
    assert late.seconds == late_by.total_seconds()
    assert late.penalty == pytest.approx(penalty)
    codes = [f.code for f in late.flags]
    assert codes == ["late", "submitted_after_answers"]
    assert "2026-12-01 18:00 UTC" in late.flags[0].reason and policy in late.flags[0].reason
    assert lateness(course, CH, "ann", DUE, 7.0, 11.0).flags == ()  # on time, to the second


def test_an_extension_moves_one_learners_deadline_and_can_be_taken_back(course):
    extend(course, CH, "ann", DUE + timedelta(days=2))
    assert deadline(course, CH, "ann") == DUE + timedelta(days=2)
    assert deadline(course, CH, "bob") == DUE
    assert lateness(course, CH, "ann", DUE + timedelta(days=1), 7.0, 11.0).flags == ()
    assert sealed_for(course, DUE + timedelta(days=1)) == {"ann": {CH}}
    assert sealed_for(course, DUE + timedelta(days=3)) == {}
    extend(course, CH, "ann", None)
    assert deadline(course, CH, "ann") == DUE


def csv_rows_of(text: str) -> dict[str, dict[str, str]]:
    return {row["student"]: row for row in csv.DictReader(io.StringIO(text))}


def _store(course: Course, student: str, handed_in: datetime) -> None:
    folder = course.step_dir("submitted", student, CH)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / TIMESTAMP_FILE).write_text(handed_in.strftime(TIMESTAMP_FORMAT))
    full = nbformat.read(course.source_notebook(CH), as_version=4)
    store_outcome(course, Outcome(student, CH, nbformat.writes(full), []))


def test_grading_marks_late_work_in_the_flags_the_gradebook_and_the_csv(course):
    # Under the default late policy (none), work handed in after the answers keeps its points
    # but is never graded full silently: flagged for a human, with the times.
    _store(course, "after", DUE + timedelta(minutes=2))
    set_late_policy(course, CH, "10%/day")
    extend(course, CH, "extended", DUE + timedelta(days=3))
    _store(course, "on_time", DUE - timedelta(hours=1))
    _store(course, "late", DUE + timedelta(hours=30))
    _store(course, "extended", DUE + timedelta(hours=30))
    rows = csv_rows_of(export_csv(course))
    assert (rows["on_time"]["score"], rows["on_time"]["late_penalty"]) == ("7", "0")
    assert (rows["late"]["score"], rows["late"]["late_penalty"]) == ("4.8", "2.2")
    assert rows["late"]["flags"] == "late;submitted_after_answers"
    assert "1 d 6 h after the deadline" in rows["late"]["reasons"]
    assert rows["extended"]["flags"] == "" and rows["extended"]["score"] == "7"
    assert (rows["after"]["score"], rows["after"]["late_penalty"]) == ("7", "0")
    assert rows["after"]["flags"] == "late;submitted_after_answers"
    assert ("handed in at 2026-12-01 18:02:00 UTC, after ch02_attention's answers became "
            "visible to this learner (2026-12-01 18:00:00 UTC)") in rows["after"]["reasons"]
    with open_gradebook(course) as gradebook:  # nbgrader's flag, which the Formgrader shows
        assert gradebook.find_submission_notebook(CH, CH, "after").flagged
        assert not gradebook.find_submission_notebook(CH, CH, "on_time").flagged
    scores = {s.student: s for s in read_scores(course)}
    assert scores["late"].late_penalty == pytest.approx(2.2)
    assert [f.code for f in read_flags(course, "late", CH)] == ["late", "submitted_after_answers"]
    # The feedback page says it first (nbgrader's own line gives the penalty).
    assert main(["feedback", "ch02", "--root", str(course.root),
                 "--course-dir", str(course.folder)]) == 0
    page = course.step_dir("feedback", "late", CH).joinpath(f"{CH}.html").read_text()
    assert "1 d 6 h after the deadline" in page and "Late submission penalty" in page
    assert "after the deadline" not in course.step_dir("feedback", "on_time", CH).joinpath(
        f"{CH}.html").read_text()


def test_a_learner_with_an_extension_keeps_the_answers_sealed_while_the_others_see_them(
        course):
    exchange = course.root / "exchange"
    (exchange / "build-the-transformer" / "outbound" / CH).mkdir(parents=True)
    extend(course, CH, "ann", DUE + timedelta(days=2))
    during = DUE + timedelta(days=1)
    refresh_view(course, exchange, now=during)
    assert "def softmax(" in view_folder(course).joinpath(*ANSWER).read_text()
    assert view_folder(course, "bob") == view_folder(course)
    own = view_folder(course, "ann").joinpath(*ANSWER).read_text()
    assert own.startswith('"""Not available yet') and "def softmax(" not in own
    # What each learner's Assignment List no longer submits.
    assert visible_chapters(view_folder(course) / VISIBLE_ANSWERS_FILE) == {CH}
    assert visible_chapters(view_folder(course, "ann") / VISIBLE_ANSWERS_FILE) == set()
    refresh_view(course, exchange, now=DUE + timedelta(days=3))  # the extension is over
    assert "def softmax(" in view_folder(course, "ann").joinpath(*ANSWER).read_text()
    assert visible_chapters(view_folder(course, "ann") / VISIBLE_ANSWERS_FILE) == {CH}


def test_work_handed_in_before_the_view_showed_the_answers_is_late_but_not_after_them(
        course):
    """A due date set in the past (the Formgrader's field holds minutes, so closing "now"
    lands up to a minute back) shows the answers only from the view's next refresh: work
    handed in between is late, and was not written with the answers at hand."""
    exchange = course.root / "exchange"
    (exchange / "build-the-transformer" / "outbound" / CH).mkdir(parents=True)
    shown = DUE + timedelta(seconds=50)
    refresh_view(course, exchange, now=shown)
    refresh_view(course, exchange, now=shown + timedelta(hours=1))  # keeps the first time
    since = answers_shown_since(course, CH, "ann")
    assert since == shown
    before = lateness(course, CH, "ann", DUE + timedelta(seconds=30), 7.0, 11.0, shown=since)
    assert [f.code for f in before.flags] == ["late"]
    after = lateness(course, CH, "ann", shown + timedelta(seconds=1), 7.0, 11.0, shown=since)
    assert [f.code for f in after.flags] == ["late", "submitted_after_answers"]
    assert "18:00:50 UTC" in after.flags[1].reason
    # Given an extension, ann's own view shows them only once it is over.
    extend(course, CH, "ann", DUE + timedelta(days=2))
    refresh_view(course, exchange, now=DUE + timedelta(days=1))
    assert answers_shown_since(course, CH, "ann") is None
    assert answers_shown_since(course, CH, "bob") == shown


def test_submit_refuses_a_chapter_whose_answers_the_learner_can_read(tmp_path):
    """The Assignment List's submit in a class (nbgrader's, from the exchange layer's
    configuration): refused with what to do once the chapter's answers are in the view."""
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange import ExchangeError, ExchangeFactory
    from traitlets.config.loader import PyFileConfigLoader

    layer = ROOT / "autograder" / "learner" / "jupyter" / "exchange"
    config = PyFileConfigLoader("nbgrader_config.py", str(layer)).load_config()
    config.Exchange.root = str(tmp_path / "exchange")
    (tmp_path / "exchange" / COURSE_ID / "outbound" / CH).mkdir(parents=True)
    config.CourseDirectory.course_id, config.CourseDirectory.assignment_id = COURSE_ID, CH
    submit = ExchangeFactory(config=config).Submit(
        coursedir=CourseDirectory(config=config), authenticator=Authenticator(config=config),
        config=config)
    submit.listing = tmp_path / "answers_visible.json"
    submit.init_release()  # outside a class's view: nbgrader's submit
    submit.listing.write_text(json.dumps({"chapters": ["ch01_positional_encoding"]}))
    submit.init_release()
    submit.listing.write_text(json.dumps({"chapters": [CH]}))
    with pytest.raises(ExchangeError, match=f"^{CH} is closed for you: your deadline .* ask "
                                            "your instructor for an extension"):
        submit.init_release()


def test_the_extend_command_and_close_with_a_late_policy(course, tmp_path, capsys):
    where = ["--root", str(course.root), "--course-dir", str(course.folder)]
    assert main(["extend", "ch02", "ann", "--until", "2026-12-04T18:00+00:00", *where]) == 0
    assert "ann's deadline for ch02_attention: 2026-12-04 18:00 UTC" in capsys.readouterr().out
    assert main(["close", "ch02", "--at", "2026-12-01T18:00+00:00", "--late-policy", "zero",
                 *where]) == 0
    assert "late work: zero" in capsys.readouterr().out
    assert lateness(course, CH, "bob", DUE + timedelta(seconds=1), 7.0, 11.0).penalty == 7.0
    assert main(["close", "ch02", "--late-policy", "a lot", *where]) == 1
    assert "none, zero, P%/hour, P%/day" in capsys.readouterr().err
    assert deadline(course, CH, "bob") == DUE  # a refused close changes nothing
    assert main(["extend", "ch02", "ann", "--until", "friday", *where]) == 2
    assert "not a date and time" in capsys.readouterr().err
    elsewhere = tmp_path / "not-the-class"
    assert main(["extend", "ch02", "ann", "--until", "2026-12-04T18:00",
                 "--course-dir", str(elsewhere)]) == 1
    assert "holds no gradebook" in capsys.readouterr().err and not elsewhere.exists()
    assert main(["extend", "ch02", "ann", "--remove", *where]) == 0
    assert deadline(course, CH, "ann") == DUE
