"""``python -m autograder``: the exercises table and the release subcommand."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

import autograder.steps.release
from autograder import exercises
from autograder.cli import main
from autograder.course import COURSE_DIR_ENV, COURSE_ROOT_ENV, ROOT, Course
from autograder.exercises.registry import get_exercise


def test_exercises_command_lists_every_id(project_root):
    completed = subprocess.run([sys.executable, "-m", "autograder", "exercises"],
                               cwd=project_root, capture_output=True, text=True, check=True)
    lines = completed.stdout.splitlines()
    assert lines[0].split() == ["id", "chapter", "points", "difficulty", "minutes"]
    rows = {line.split()[0]: line.split() for line in lines[1:-1]}
    assert list(rows) == exercises()
    softmax = get_exercise("ch02.softmax")
    assert rows["ch02.softmax"] == ["ch02.softmax", softmax.chapter, str(softmax.points),
                                    softmax.difficulty, str(softmax.minutes)]
    total = sum(get_exercise(e).points for e in exercises())
    assert lines[-1] == f"{len(exercises())} exercises, {total} points"


def test_release_passes_chapter_ids_and_prints_progress(monkeypatch, capsys):
    calls = []

    def recording(course, chapters, progress, exchange):
        calls.append(chapters)
        assert exchange is None  # no --exchange: notebooks/ and the gradebook only
        assert course == Course.of(ROOT).resolved()
        progress("[1/1] releasing ch02_attention ...")
        return chapters or []

    monkeypatch.setattr(autograder.steps.release, "release", recording)
    assert main(["release", "ch02", "ch03_attention_head"]) == 0
    assert main(["release"]) == 0
    assert calls == [["ch02_attention", "ch03_attention_head"], None]
    assert capsys.readouterr().out.count("[1/1] releasing ch02_attention ...") == 2


def test_generate_reports_each_chapter(tmp_path):
    from autograder.course import ROOT

    shutil.copytree(ROOT / "solutions" / "ch01_positional_encoding",
                    tmp_path / "solutions" / "ch01_positional_encoding")
    lines = []
    autograder.steps.release.generate(Course.of(tmp_path, tmp_path / "course"),
                                      ["ch01_positional_encoding"], progress=lines.append)
    assert lines[0] == "[1/1] releasing ch01_positional_encoding ..."
    assert re.fullmatch(r"\[1/1\] ch01_positional_encoding: notebooks/ch01_positional_encoding/ "
                        r"written \(\d+\.\d s\)", lines[1])
    assert (tmp_path / "notebooks" / "ch01_positional_encoding").is_dir()


def test_release_failure_is_a_message(monkeypatch, capsys):
    def failing(course, chapters, progress, exchange):
        raise ValueError("no source notebook for ch02_attention")

    monkeypatch.setattr(autograder.steps.release, "release", failing)
    assert main(["release", "ch02"]) == 1
    assert "no source notebook" in capsys.readouterr().err


def test_unknown_chapter_and_missing_command_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as info:
        main(["release", "ch99"])
    assert info.value.code == 2
    assert "unknown chapter 'ch99'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2


def test_a_staff_terminal_on_the_class_server_acts_on_the_class(monkeypatch, tmp_path, capsys):
    """The class server names its course in each staff member's server's environment: commands
    typed in its terminals act on the class, not on this repository's own course."""
    monkeypatch.setenv(COURSE_ROOT_ENV, str(tmp_path / "root"))
    monkeypatch.setenv(COURSE_DIR_ENV, str(tmp_path / "class"))
    assert main(["analysis", "ch02"]) == 1
    assert f"no graded submission of ch02_attention in {tmp_path / 'class'};" in (
        capsys.readouterr().err)
