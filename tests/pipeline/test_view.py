"""A class's learner view of the course: what the released chapters need, and no answer that is
still being graded."""

from __future__ import annotations

import ast
import inspect
import json
import logging
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nbformat
import pytest

from autograder.course import CHAPTERS, ROOT, Course
from autograder.deadlines import close_chapter
from autograder.exercises.reach import reference_module, setup_import_nodes
from autograder.exercises.registry import all_exercises
from autograder.steps.release import register_assignments
from autograder.steps.view import (
    ChapterStates,
    chapter_states,
    check_class_release,
    open_answers,
    plan_view,
    release_problems,
    write_view,
)

# Never in a learner's view: the checks and what they build answers from, the fixtures (the
# sample class and its mutants), the tutorial-style code, the grading pipeline and the sandbox's
# grader side.
NEVER = ("autograder.exercises.checks.", "autograder.exercises.layer_variants",
         "autograder.exercises.beam_variants", "autograder.exercises.torch_checking",
         "autograder.tutorial_style", "tests", "autograder.steps", "autograder.collect",
         "autograder.grade", "autograder.copies", "autograder.nbgrader_hooks",
         "autograder.sandbox.client",
         "autograder.sandbox.launcher", "autograder.hub", "solutions")


# The repository's own course, whose chapters the views below are planned for.
COURSE = Course.of(ROOT)


def _open(k: int) -> ChapterStates:
    """Chapters 1..k released, 1..k-1 closed: chapter k is the one being worked on."""
    return ChapterStates(frozenset(CHAPTERS[:k]), frozenset(CHAPTERS[: k - 1]))


@pytest.mark.parametrize("k", range(1, len(CHAPTERS) + 1), ids=lambda k: CHAPTERS[k - 1])
def test_no_answer_of_an_open_chapter_and_no_grader_code(k: int):
    view = plan_view(COURSE, _open(k))
    for exercise in all_exercises():
        module = reference_module(exercise)
        if exercise.chapter in CHAPTERS[: k - 1]:
            continue
        assert module not in view.modules, (exercise.id, module)
    assert not [m for m in view.modules if m.startswith(NEVER)]
    # Each answer still being graded is a stub whose import says why.
    assert view.hidden == open_answers(_open(k))


@pytest.mark.parametrize("k", range(1, len(CHAPTERS) + 1), ids=lambda k: CHAPTERS[k - 1])
def test_a_class_that_works_in_order_is_never_refused(k: int):
    """Withholding every form of an open answer asks nothing more of a class that closes its
    chapters in order."""
    assert release_problems(COURSE, CHAPTERS[k - 1], _open(k)) == []


def test_closing_a_chapter_reveals_its_answers():
    before, after = plan_view(COURSE, _open(8)), plan_view(COURSE, _open(9))
    assert "transformer_ref.model.decoder_layer" in before.hidden
    assert "transformer_ref.model.decoder_layer" in after.modules


def _site_packages() -> str:
    return sysconfig.get_paths()["purelib"]


def _run_in_view(folder: Path, code: str, env: dict[str, str] | None = None,
                 ) -> subprocess.CompletedProcess:
    """``code`` in a Python that sees the course only through ``folder`` (no editable install:
    site's .pth files are not read), as a learner's kernel on the class server does."""
    prelude = f"import sys; sys.path[:0] = [{str(folder)!r}, {_site_packages()!r}]\n"
    return subprocess.run([sys.executable, "-S", "-c", prelude + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=300, cwd=folder,
                          env={"PATH": "/usr/bin:/bin", **(env or {})})


@pytest.fixture(scope="module")
def ch08_view(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("view")
    write_view(plan_view(COURSE, _open(8)), folder)
    return folder


def test_the_files_hold_no_reference_code(ch08_view: Path):
    """No file of the view holds the source of an open exercise's reference."""
    texts = "\n".join(p.read_text() for p in ch08_view.rglob("*.py"))
    for exercise in all_exercises():
        if exercise.chapter in CHAPTERS[7:]:
            source = inspect.getsource(exercise.load_reference())
            body = max(source.splitlines(), key=len).strip()  # its longest line
            assert body not in texts, exercise.id
    assert not list(ch08_view.rglob("mutants")) and not list(ch08_view.rglob("checks/ch*.py"))


def test_a_hidden_module_says_why_and_when(ch08_view: Path, tmp_path: Path):
    result = _run_in_view(ch08_view, "import transformer_ref.model.decoder_layer")
    assert result.returncode != 0
    assert "ch08.decoder_layer" in result.stderr and "deadline for it has passed" in result.stderr
    # Also in a class whose released chapters import nothing of the course (chapter 2).
    write_view(plan_view(COURSE, _open(2)), tmp_path)
    result = _run_in_view(tmp_path, "from transformer_ref import softmax")
    assert "ch02.softmax" in result.stderr and "still open" in result.stderr


@pytest.mark.parametrize("k", range(1, len(CHAPTERS) + 1), ids=lambda k: CHAPTERS[k - 1])
def test_each_chapters_setup_imports_work_while_it_is_open(k: int, tmp_path: Path):
    """A class can work on each chapter while it is open: its notebook's imports load from a
    view without its own answers, and check() is there."""
    write_view(plan_view(COURSE, _open(k)), tmp_path)
    nb = nbformat.read(Course.of(ROOT).source_notebook(CHAPTERS[k - 1]), as_version=4)
    imports = "\n".join(ast.unparse(node) for node in setup_import_nodes(nb))
    result = _run_in_view(tmp_path, imports + "\nfrom autograder import check\nprint('ok')")
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr


def test_a_stack_builds_from_the_learners_own_layer(ch08_view: Path):
    """Chapter 8's decoder stack, whose default layer is still hidden, takes the learner's."""
    result = _run_in_view(ch08_view, """
        import torch
        from torch import nn
        from transformer_ref.modules import Decoder

        class MyLayer(nn.Module):
            def __init__(self, d_model, h, d_ff, dropout, norm_first, fast_attention):
                super().__init__()
                self.linear = nn.Linear(d_model, d_model)

            def forward(self, x, memory, src_mask, tgt_mask):
                return self.linear(x)

        print(Decoder(2, 8, 2, 16, layer=MyLayer)(torch.ones(1, 3, 8), None, None, None).shape)
        """)
    assert result.returncode == 0 and "torch.Size([1, 3, 8])" in result.stdout, result.stderr


def test_the_view_holds_the_data_files_its_packages_install(tmp_path: Path):
    """Chapter 11 reads its shipped language model from transformer_ref's package data: a class
    working on it finds the file in its view (and loads it into a model of its own)."""
    write_view(plan_view(COURSE, _open(CHAPTERS.index("ch11_language_model") + 1)), tmp_path)
    result = _run_in_view(tmp_path, """
        from transformer_ref.training.checkpoint import load_checkpoint
        from transformer_ref.training.lm_training import SHIPPED_LM
        print(SHIPPED_LM.is_relative_to(sys.path[0]), load_checkpoint(SHIPPED_LM)["step"] > 0)
        """)
    assert result.returncode == 0 and "True True" in result.stdout, result.stderr


def test_write_view_updates_in_place_and_says_when_it_changed(tmp_path: Path):
    assert write_view(plan_view(COURSE, _open(2)), tmp_path)
    marker = (tmp_path / "transformer_ref").stat().st_ino
    assert not write_view(plan_view(COURSE, _open(2)), tmp_path)
    assert write_view(plan_view(COURSE, _open(4)), tmp_path)
    assert (tmp_path / "transformer_ref").stat().st_ino == marker  # the same folder, in place
    assert json.loads((tmp_path / "view.json").read_text())["hidden"]
    # A learner's JupyterLab reads the course's configuration layers from the view.
    layers = tmp_path / "autograder" / "learner" / "jupyter"
    assert (layers / "learner" / "nbgrader_config.py").is_file()
    assert (layers / "exchange" / "nbgrader_config.py").is_file()
    assert not (layers / "instructor").exists()
    stub = tmp_path / "transformer_ref" / "numpy" / "heads.py"
    assert stub.read_text().startswith('"""Not available')


def test_states_come_from_the_exchange_and_the_due_dates(tmp_path: Path):
    course = Course.of(ROOT, tmp_path / "course")
    register_assignments(course)
    exchange = tmp_path / "exchange"
    (exchange / "build-the-transformer" / "outbound" / CHAPTERS[1]).mkdir(parents=True)
    assert chapter_states(course, exchange) == ChapterStates(frozenset([CHAPTERS[1]]),
                                                            frozenset())
    now = datetime.now(UTC)
    close_chapter(course, CHAPTERS[0], now - timedelta(minutes=1))
    close_chapter(course, CHAPTERS[1], now + timedelta(days=1))  # due tomorrow: still open
    assert chapter_states(course, exchange).closed == {CHAPTERS[0]}
    assert chapter_states(course, exchange, now + timedelta(days=2)).closed == set(CHAPTERS[:2])


def test_a_class_release_that_needs_an_open_answer_is_refused_with_the_command_to_run(
        tmp_path: Path, capsys):
    """The refusal names chapters (not exercises or modules) and, in a few lines, the command
    that closes them in this class; run as written, it lets the release through."""
    from autograder.cli import main

    course = Course.of(ROOT, tmp_path / "course")
    register_assignments(course)
    exchange = tmp_path / "exchange"
    with pytest.raises(ValueError) as refused:
        check_class_release(course, exchange, ["ch11_language_model"])
    message = str(refused.value)
    assert len(message.splitlines()) <= 4 and "ch02." not in message, message
    command = message.splitlines()[-1].split()
    assert command[:4] == ["python", "-m", "autograder", "close"]
    assert command[command.index("--course-dir") + 1] == str(course.folder)
    assert command[command.index("--exchange") + 1] == str(exchange)
    closing = command[4:command.index("--course-dir")]
    # Chapter 11 builds on chapters 7 and 8's modules and chapter 1's positions, and those
    # modules compute the answers of chapters 2 to 6 in PyTorch: all of them first.
    assert closing == list(CHAPTERS[:8])
    assert main(command[3:]) == 0
    assert "ch08_decoder_and_model: due" in capsys.readouterr().out
    check_class_release(course, exchange, ["ch11_language_model"])


def test_releasing_chapter_11_with_chapter_2_open_shows_no_attention_or_mask(tmp_path: Path):
    """A class that closes what chapter 11 imports (chapters 1, 7 and 8) while chapter 2 is
    open: the PyTorch attention and masks, which answer chapter 2's exercises, stay out of the
    view, and the release of chapter 11 is refused until chapter 2 (and 3 to 6) closes."""
    course = Course.of(ROOT, tmp_path / "course")
    register_assignments(course)
    exchange = tmp_path / "exchange"
    for chapter in ("ch01_positional_encoding", "ch07_pytorch_modules",
                    "ch08_decoder_and_model"):
        close_chapter(course, chapter, datetime.now(UTC) - timedelta(minutes=1))
    states = chapter_states(course, exchange)
    view = plan_view(course, ChapterStates(states.released | {"ch11_language_model"},
                                           states.closed))
    assert not {"transformer_ref.model.attention", "transformer_ref.model.basic_masks"
                } & view.modules
    assert "ch02.scaled_dot_product_attention" in view.hidden["transformer_ref.model.attention"]
    assert view.hidden["transformer_ref.model.basic_masks"] == ("ch02.causal_mask",)
    with pytest.raises(ValueError) as refused:
        check_class_release(course, exchange, ["ch11_language_model"])
    command = str(refused.value).splitlines()[-1].split()
    assert command[4:command.index("--course-dir")] == list(CHAPTERS[1:6])


def test_close_says_which_answers_wait_for_an_open_chapter(tmp_path: Path, capsys):
    """Closing chapter 7 while chapter 2 is open: its attention stays out of the view, and the
    command says why and until when."""
    from autograder.cli import main

    course_dir = tmp_path / "course"
    register_assignments(Course.of(ROOT, course_dir))
    assert main(["close", "ch01", "ch07", "--course-dir", str(course_dir)]) == 0
    out = capsys.readouterr().out
    assert ("except transformer_ref.model.attention: it also computes the answers of "
            "ch02_attention, ch03_attention_head, ch04_multi_head_attention, still open") in out
    assert "transformer_ref.model.positional" not in out  # chapter 1 closed with it


def test_the_formgrader_shows_the_refusal_without_debug_records_or_a_traceback(tmp_path: Path):
    """The Formgrader's Release button (nbgrader's API, the course's exchange class) answers a
    refused release with the refusal's lines only."""
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    from autograder.course import course_config
    from autograder.nbgrader_hooks.formgrader import readable

    chapter = "ch03_attention_head"
    shutil.copytree(ROOT / "solutions" / chapter, tmp_path / "solutions" / chapter)
    config = course_config(tmp_path, tmp_path / "course")
    config.Exchange.root = str(tmp_path / "exchange")
    result = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config
                         ).release_assignment(chapter)
    assert not result["success"] and "ExchangeError" in result["error"]
    shown = readable(result)
    assert "error" not in shown, shown
    assert "Not released: ch03_attention_head" in shown["log"]
    assert "python -m autograder close ch01_positional_encoding ch02_attention" in shown["log"]
    assert not (tmp_path / "notebooks").exists()
    # A release that goes through, with a server that logs debug records (as the class
    # server's does): they are left out of what is shown.
    shutil.copytree(ROOT / "solutions" / CHAPTERS[0], tmp_path / "solutions" / CHAPTERS[0])
    api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
    level = api.log.level
    api.log.setLevel(logging.DEBUG)
    try:
        result = api.release_assignment(CHAPTERS[0])
    finally:
        api.log.setLevel(level)
    assert result["success"] and "[DEBUG]" in result["log"], result
    shown = readable(result)
    assert "[DEBUG]" not in shown["log"] and "the gradebook holds its points" in shown["log"]
    # How it ended comes first, before the release's other lines.
    assert shown["log"].startswith(f"Outcome: released {CHAPTERS[0]} to the exchange"), shown


def test_a_formgrader_dialog_shows_how_the_step_ended_first():
    """The outcome lines of a step (here a grading through the class's grading service, whose
    warnings carry its own mark) come first, without their records' levels; debug records go."""
    from autograder.nbgrader_hooks.formgrader import readable

    log = ["[DEBUG] Looking for the submission", "[INFO] Grading ch02 of bob in the sandbox",
           "[INFO] Outcome: bob scored 0 of 7 autograded point(s)",
           "[WARNING] WARNING Outcome: bob is flagged cell_error (the reasons are in f.json)",
           "[INFO] Copy detection of ch02: similarity/ch02.html"]
    shown = readable({"success": True, "log": "\n".join(log)})
    assert shown["log"].splitlines() == [
        "Outcome: bob scored 0 of 7 autograded point(s)",
        "Outcome: bob is flagged cell_error (the reasons are in f.json)", "",
        "[INFO] Grading ch02 of bob in the sandbox",
        "[INFO] Copy detection of ch02: similarity/ch02.html"]


def test_close_refuses_a_folder_that_is_no_class_and_writes_nothing(tmp_path: Path, capsys):
    """`close` without the class's --course-dir (here: a folder no chapter was released to)
    says so and creates no gradebook, instead of closing the chapter in a new one."""
    from autograder.cli import main

    elsewhere = tmp_path / "not-the-class"
    assert main(["close", "ch02", "--course-dir", str(elsewhere)]) == 1
    assert "holds no gradebook" in capsys.readouterr().err
    assert not elsewhere.exists()


def test_the_close_and_view_commands(tmp_path: Path, capsys):
    """The commands of docs/class-server.md: `close` now or at a time (the view brought up to
    date when the exchange is named), and `view` for a learners' image."""
    from autograder.cli import main

    course_dir, exchange = tmp_path / "course", tmp_path / "exchange"
    (exchange / "build-the-transformer" / "outbound" / CHAPTERS[1]).mkdir(parents=True)
    where = ["--course-dir", str(course_dir)]
    register_assignments(Course.of(ROOT, course_dir))  # a release's, in a class
    assert main(["close", "ch02", *where, "--exchange", str(exchange)]) == 0
    assert "its answers are part of the view of every learner" in capsys.readouterr().out
    answer = course_dir / "view" / "transformer_ref" / "numpy" / "scaled_attention.py"
    assert "def softmax(" in answer.read_text()
    assert main(["close", "ch03", "--at", "2026-12-08T18:00", *where]) == 0
    assert "ch03_attention_head: due 2026-12-08" in capsys.readouterr().out
    states = chapter_states(Course.of(ROOT, course_dir), exchange,
                            datetime(2026, 12, 9, tzinfo=UTC))
    assert states.closed == {CHAPTERS[1], CHAPTERS[2]}
    assert main(["close", "ch03", "--at", "next tuesday", *where]) == 2
    assert "is not a date and time" in capsys.readouterr().err
    out = tmp_path / "view"
    assert main(["view", "--released", "ch01", "ch02", "--closed", "ch01", "--out", str(out),
                 *where]) == 0
    assert "transformer_ref.numpy.heads" in capsys.readouterr().out  # an answer left out
    assert (out / "transformer_ref" / "numpy" / "positional.py").read_text().count("def ") > 1
