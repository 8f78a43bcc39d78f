"""A fault of the grader never becomes a grade.

A sandbox that cannot start the course's Python stops every way of grading before anyone is
graded (``python -m autograder autograde``, a cluster of one's own, plain ``nbgrader
autograde``, the demo), with the cause and the fix, an exit status that is not 0 and nothing in
the gradebook. A sandbox that breaks during a run stops the run at the first learner it fails,
and records nothing for that learner or those after it.

The failure is the real one: bubblewrap, asked to start the course's Python without the
folders that hold it bound (as when a checkout under /tmp was covered by the sandbox's own
/tmp), answers ``execvp ...: No such file or directory``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import cloudpickle
import pytest
from distributed import Client, LocalCluster

from autograder.cli import main
from autograder.course import ROOT, Course
from autograder.flags import Flag
from autograder.grade import learner as grade
from autograder.grade import run
from autograder.grade.gradebook import read_scores
from autograder.grade.learner import grade_safely
from autograder.grade.workers import check_sandboxes
from autograder.sandbox import launcher
from autograder.sandbox.launcher import GraderFaultError, Limits
from autograder.steps.release import generate
from tests.fixtures import demo

CH = "ch02_attention"
STUDENTS = ("alice", "bob")
# What every message about a sandbox that cannot start the course's Python says.
CAUSE = "No such file or directory"
FIX = "Fix: the course's Python"

pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")


def break_the_sandbox() -> None:
    """Bind none of the Python's folders into sandboxes started from this process."""
    from autograder.sandbox import launcher

    launcher.python_paths = lambda: []


def grade_with_a_sandbox_that_broke(submission):
    """``grade_safely`` on a worker whose sandbox broke after the run's check passed."""
    break_the_sandbox()
    return grade_safely(submission)


# The worker processes get these functions by value: they are not importable there.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture
def broken(monkeypatch):
    monkeypatch.setattr(launcher, "python_paths", lambda: [])


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("released")
    shutil.copytree(ROOT / "solutions" / CH, root / "solutions" / CH)
    generate(Course.of(root, root / "course"), [CH])
    return root


@pytest.fixture
def course(released, tmp_path) -> tuple[Path, Path]:
    """A released ch02 with two submissions (the release itself), nothing graded."""
    root = tmp_path / "root"
    shutil.copytree(released, root)
    for student in STUDENTS:
        folder = root / "course" / "submitted" / student / CH
        folder.mkdir(parents=True)
        shutil.copy(root / "notebooks" / CH / f"{CH}.ipynb", folder)
    return root, root / "course"


def nothing_recorded(root: Path, course_dir: Path) -> None:
    assert read_scores(Course.of(root, course_dir)) == []
    assert not (course_dir / "autograded").exists()
    assert not list((course_dir / "flags").rglob("*.json")) if (course_dir / "flags").exists() \
        else True


def autograde(root: Path, course_dir: Path, capsys) -> tuple[int, str]:
    status = main(["autograde", "ch02", "--jobs", "1", "--root", str(root), "--course-dir",
                   str(course_dir)])
    return status, capsys.readouterr().err


def test_a_sandbox_that_cannot_start_stops_autograde_before_anyone(course, broken, capsys):
    status, err = autograde(*course, capsys)
    assert status == 1
    assert err.startswith("autograde failed: the grader cannot grade: a sandboxed run of the "
                          "course's Python")
    assert CAUSE in err and FIX in err and "not of any learner" in err
    nothing_recorded(*course)


def test_a_sandbox_that_breaks_during_the_run_stops_it(course, monkeypatch, capsys):
    monkeypatch.setattr(run, "grade_safely", grade_with_a_sandbox_that_broke)
    status, err = autograde(*course, capsys)
    assert status == 1
    assert "grading stopped at alice/ch02_attention: the grader cannot grade" in err
    assert CAUSE in err and "Nothing was recorded for it, nor for the 1 submission(s)" in err
    nothing_recorded(*course)


def test_a_learners_own_failure_stays_the_learners_when_the_sandbox_works(monkeypatch):
    died = Flag("execution_failed", None, "the kernel died while running cell 3")
    outcome = grade.Outcome("alice", CH, None, [died])
    assert grade._blame(outcome, Limits()) is outcome
    monkeypatch.setattr(launcher, "python_paths", lambda: [])
    blamed = grade._blame(outcome, Limits())
    assert blamed.fault and CAUSE in blamed.fault and blamed.flags == []


def test_a_cluster_whose_workers_cannot_start_a_sandbox_is_refused(broken):
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None) as local, Client(local) as client, \
            pytest.raises(GraderFaultError, match=rf"on the worker \S+, the grader cannot "
                                                  rf"grade: .*{CAUSE}"):
        check_sandboxes(client, Limits())


def test_the_demo_stops_before_it_starts(broken, tmp_path, capsys):
    assert demo.main(["--out", str(tmp_path / "demo")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("demo failed: the grader cannot grade") and CAUSE in err
    assert not (tmp_path / "demo").exists()


# Plain nbgrader, in a process of its own whose sandbox is broken from the start, or breaks
# when the first learner is graded.
BROKEN_FROM_THE_START = "from test_grader_fault import break_the_sandbox; break_the_sandbox()"
BROKEN_LATER = ("import autograder.grade.learner as grade\n"
                "from test_grader_fault import grade_with_a_sandbox_that_broke\n"
                "grade.grade_safely = grade_with_a_sandbox_that_broke")
NBGRADER = "{setup}\nfrom nbgrader.apps.nbgraderapp import main\nmain()"


@pytest.mark.parametrize(("setup", "expected"), [
    (BROKEN_FROM_THE_START, "the grader cannot grade: a sandboxed run"),
    (BROKEN_LATER, "grading stopped at alice/ch02_attention: the grader cannot grade"),
])
def test_plain_nbgrader_stops_and_records_nothing(course, setup, expected):
    root, course_dir = course
    (root / "nbgrader_config.py").write_text(
        "from autograder.course import course_config\n\nc = get_config()  # noqa: F821\n"
        f"c.merge(course_config({str(root)!r}, {str(course_dir)!r}))\n")
    result = subprocess.run(
        [sys.executable, "-c", NBGRADER.format(setup=setup), "autograde", CH, "--force"],
        cwd=root, capture_output=True, text=True, timeout=600,
        # This module is imported there too, and it imports the fixtures from the repository.
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), str(ROOT),
                                                          os.environ.get("PYTHONPATH", "")])))
    log = result.stdout + result.stderr
    assert result.returncode == 1, log
    assert expected in log and CAUSE in log, log
    assert read_scores(Course.of(root, course_dir)) == []
    assert not list((course_dir / "autograded").rglob("*.ipynb"))
