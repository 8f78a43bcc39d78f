"""A class is graded only with a secret that learners cannot read.

Every way of grading (the course's command, plain ``nbgrader autograde``, the Formgrader, which
runs nbgrader's converter) refuses without one, naming the variable and the fix; the
development secret grades only where ``AUTOGRADER_DEVELOPMENT=1`` says so (the demo, the
tests) and says that it is not for a class.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.cli import main
from autograder.course import ROOT
from autograder.exercises.checking import (
    DEVELOPMENT_SECRET,
    SECRET_ENV,
    SECRET_FILE_ENV,
    grading_secret,
    seed_for,
)
from autograder.grade.secret import DEVELOPMENT_ENV, SecretError, require_grading_secret
from autograder.hub.classroom import Classroom

CH = "ch02_attention"
CLASS_SECRET = "0123456789abcdef0123456789abcdef"
CONFIG = """\
from autograder.course import course_config

c = get_config()  # noqa: F821
c.merge(course_config({root!r}, {course!r}))
"""


@pytest.fixture
def no_secret(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """An environment without any secret, as an instructor's shell that forgot it."""
    for name in (SECRET_ENV, SECRET_FILE_ENV, DEVELOPMENT_ENV):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _secret_file(folder: Path, text: str, mode: int) -> Path:
    path = folder / "secret"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_grading_without_a_secret_is_refused_with_the_fix(no_secret):
    with pytest.raises(SecretError) as refused:
        require_grading_secret()
    message = str(refused.value)
    assert f"{SECRET_ENV} is not set" in message
    assert f"export {SECRET_ENV}=" in message and "hub secret" in message  # the fixes
    assert f"{DEVELOPMENT_ENV}=1" in message  # and the way for the sample class


@pytest.mark.parametrize("value, reason", [
    (DEVELOPMENT_SECRET, "holds the development secret"),
    ("short-secret", "fewer than 16"),
])
def test_a_secret_learners_can_read_or_guess_is_refused(no_secret, value, reason):
    no_secret.setenv(SECRET_ENV, value)
    with pytest.raises(SecretError, match=reason):
        require_grading_secret()


def test_the_development_secret_grades_only_when_asked_and_says_so(no_secret):
    no_secret.setenv(DEVELOPMENT_ENV, "1")
    secret = require_grading_secret()
    assert secret.development
    assert "never for a class" in secret.notice() and "make demo" in secret.notice()
    # A class's secret, once set, is what grades, development setting or not.
    no_secret.setenv(SECRET_ENV, CLASS_SECRET)
    secret = require_grading_secret()
    assert not secret.development and SECRET_ENV in secret.notice()
    assert CLASS_SECRET not in secret.notice()


def test_a_secret_file_must_be_readable_by_its_owner_alone(no_secret, tmp_path):
    path = _secret_file(tmp_path, CLASS_SECRET + "\n", 0o644)
    no_secret.setenv(SECRET_FILE_ENV, str(path))
    with pytest.raises(SecretError, match=f"chmod 600 {path}"):
        require_grading_secret()
    path.chmod(0o600)
    assert SECRET_FILE_ENV in require_grading_secret().notice()
    assert grading_secret() == CLASS_SECRET
    # The hidden inputs are those of the same secret given as a value.
    from_file = seed_for("ch02.softmax", hidden=True)
    no_secret.setenv(SECRET_ENV, CLASS_SECRET)
    assert seed_for("ch02.softmax", hidden=True) == from_file
    no_secret.delenv(SECRET_ENV)
    path.unlink()
    with pytest.raises(SecretError, match="cannot be read"):
        require_grading_secret()
    with pytest.raises(OSError):  # never the development secret instead
        seed_for("ch02.softmax", hidden=True)


def test_the_class_server_keeps_a_secret_only_root_can_read(no_secret, tmp_path):
    classroom = Classroom(tmp_path / "state")
    path = classroom.ensure_secret()
    assert path.parent == classroom.hub_dir and path.stat().st_mode & 0o777 == 0o600
    secret = path.read_text().strip()
    assert len(secret) == 64 and classroom.ensure_secret().read_text().strip() == secret
    no_secret.setenv(SECRET_FILE_ENV, str(path))
    assert not require_grading_secret().development
    classroom.ensure_secret(rotate=True)
    assert path.read_text().strip() != secret and path.stat().st_mode & 0o777 == 0o600


def test_the_courses_autograde_command_refuses(no_secret, tmp_path, capsys):
    course = ["--root", str(ROOT), "--course-dir", str(tmp_path / "course")]
    assert main(["autograde", "ch02", *course]) == 1
    err = capsys.readouterr().err
    assert "autograde refused" in err and f"{SECRET_ENV} is not set" in err
    assert not (tmp_path / "course" / "autograded").exists()
    no_secret.setenv(DEVELOPMENT_ENV, "1")
    assert main(["autograde", "all", *course]) == 1  # nothing collected: stops after the notice
    assert "grading with the development secret" in capsys.readouterr().out


@pytest.mark.slow
def test_plain_nbgrader_autograde_refuses(tmp_path):
    """``nbgrader autograde`` (and the Formgrader's Autograde, the same converter) refuses
    before touching any learner."""
    root = tmp_path / "root"
    for folder in ("solutions", "notebooks"):
        shutil.copytree(ROOT / folder / CH, root / folder / CH)
    submitted = tmp_path / "course" / "submitted" / "alice" / CH
    submitted.mkdir(parents=True)
    shutil.copy(root / "notebooks" / CH / f"{CH}.ipynb", submitted)
    (tmp_path / "nbgrader_config.py").write_text(
        CONFIG.format(root=str(root), course=str(tmp_path / "course")))
    env = {k: v for k, v in os.environ.items()
           if k not in (SECRET_ENV, SECRET_FILE_ENV, DEVELOPMENT_ENV)}
    result = subprocess.run([str(Path(sys.executable).with_name("nbgrader")), "autograde", CH],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert f"{SECRET_ENV} is not set" in output and f"export {SECRET_ENV}=" in output
    assert not (tmp_path / "course" / "autograded" / "alice").exists()
