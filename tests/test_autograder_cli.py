"""``python -m autograder``: the exercises table and the release subcommand."""

from __future__ import annotations

import subprocess
import sys

import pytest

import autograder.pipeline.release
from autograder import exercises
from autograder.cli import main
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


def test_release_passes_chapter_ids(monkeypatch):
    calls = []
    monkeypatch.setattr(autograder.pipeline.release, "release", calls.append)
    assert main(["release", "ch02", "ch03_attention_head"]) == 0
    assert main(["release"]) == 0
    assert calls == [["ch02_attention", "ch03_attention_head"], None]


def test_release_failure_is_a_message(monkeypatch, capsys):
    def failing(chapters):
        raise ValueError("no source notebook for ch02_attention")

    monkeypatch.setattr(autograder.pipeline.release, "release", failing)
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
