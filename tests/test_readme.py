"""Every command the documentation shows is run by a test (``make demo`` included: a test runs it).

The documentation is ``README.md`` and the pages of ``docs/`` (``documents``).
``markdown_commands`` lists a page's commands: the lines of ```bash blocks, the indented code
lines of the prose, and inline code that starts with a command (``make demo``,
``python -m ...``). ``COVERAGE`` maps each command to the tests that run it, or the same code
path through its Python entry point with the same arguments. The tests below the table run the
commands that no other test file runs, and check that every link between the pages leads
somewhere.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import nbformat
import pytest

from autograder.cli import main as autograder_main
from autograder.course import COURSE_ID, Course, course_config
from autograder.exercises.registry import CHAPTERS, all_exercises
from autograder.grade.gradebook import open_gradebook
from transformer_ref import train, translate
from transformer_ref.data import tokenizer
from transformer_ref.training.presets import Preset

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
CH02 = "ch02_attention"
RELEASE_CH02 = ROOT / "notebooks" / CH02 / f"{CH02}.ipynb"
SHIPPED_TRANSLATOR = ROOT / "solutions" / "ch10_translation" / "multi30k_small.pt"
GERMAN = "Ein Hund rennt über die Wiese."

# ---------------------------------------------------------------------------------------------
# The commands of the documentation

FENCE = re.compile(r"^\s*```(\S*)")
LIST_ITEM = re.compile(r"^ {0,3}(?:[-*+]|\d+[.)])\s")
SHELL_LANGUAGES = {"bash", "sh", "shell", "console"}
TRAILING_COMMENT = re.compile(r"(?:^|\s+)#.*$")
# Inline code is a command when it starts with a program and its arguments, possibly after
# environment variables (`NAME=value program ...`). A bare name such as `make` or `python` names
# a tool; bare `pytest` and `torchrun` are what the prose tells the reader to run.
INLINE_COMMAND = re.compile(
    r"^(?:[A-Z][A-Z0-9_]*=\S*\s+)*"
    r"(?:(?:make|python|conda|pip|jupyter|nbgrader|\.venv/bin/\S+)\s+\S"
    r"|(?:pytest|torchrun)\b|export AUTOGRADER_SECRET=)"
)


def markdown_commands(text: str) -> list[str]:
    """The commands shown in a Markdown text, in order, each once, without ``# comments``.

    Shell commands are the lines of ```bash (or sh, shell, console) blocks and of indented
    code blocks (four spaces after a blank line, outside lists); inline code counts when it
    matches ``INLINE_COMMAND``.
    """
    commands: list[str] = []
    prose: list[str] = []
    fence: str | None = None
    in_code = in_list = False
    previous_blank = True

    def add(line: str) -> None:
        command = TRAILING_COMMENT.sub("", line).strip()
        if command:  # comment-only lines, such as a comment continued below a command, vanish
            commands.append(command)

    for line in text.splitlines():
        blank = not line.strip()
        if fence is not None:
            if FENCE.match(line):
                fence = None
            elif fence in SHELL_LANGUAGES:
                add(line)
        elif match := FENCE.match(line):
            fence, in_code = match.group(1).lower(), False
        elif line.startswith("    ") and (in_code or (previous_blank and not in_list)):
            in_code = True
            add(line)
        elif blank:
            prose.append("")
        else:
            in_code = False
            if LIST_ITEM.match(line):
                in_list = True
            elif not line.startswith(" "):
                in_list = False
            prose.append(line)
        previous_blank = blank
    for span in re.findall(r"`([^`]+)`", "\n".join(prose)):
        span = " ".join(span.split())  # inline code may wrap across lines
        if INLINE_COMMAND.match(span):
            commands.append(span)
    return list(dict.fromkeys(commands))


def documents() -> list[Path]:
    """The pages whose commands are tested: the README and every page of docs/."""
    return [README, *sorted(DOCS.glob("*.md"))]


def documented_commands() -> dict[str, Path]:
    """Every command of ``documents()``, in order, each once, with the first page showing it."""
    found: dict[str, Path] = {}
    for page in documents():
        for command in markdown_commands(page.read_text(encoding="utf-8")):
            found.setdefault(command, page)
    return found


# ---------------------------------------------------------------------------------------------
# Which tests run them

HERE = "tests/test_readme.py::"
MAKE_DRY_RUN = HERE + "test_make_targets_run_the_documented_commands"
# `make demo` runs `python -m tests.fixtures.demo`, i.e. its run_demo; this test runs
# run_demo (release, collect, autograde with 2 workers, feedback, grades CSV, comparison).
DEMO = "tests/demo/test_sample_class.py::test_the_pipeline_grades_the_class_as_expected"
# Its module fixture runs `collect INBOX LMS.zip`, `autograde ch02 --jobs 2` and `export`.
GRADED_CLASS = ("tests/pipeline/test_bad_submissions.py::"
                "test_honest_learners_get_full_marks_and_no_flags")
# CI runs `.ci/run`, which is `make test`: a fresh checkout's install and the whole suite.
CI_IS_MAKE_TEST = "tests/test_packaging.py::test_ci_runs_exactly_make_test"
RELEASE = HERE + "test_release_regenerates_a_chapter_and_the_gradebook"
BROWSER = "tests/test_browser.py::"
LEARNER_MODE = BROWSER + "test_learner_mode_shows_the_chapters_and_the_learner_tools_only"
INSTRUCTOR_MODE = BROWSER + "test_instructor_mode_adds_the_instructor_tools"
EXCHANGE_MODE = BROWSER + "test_assignment_list_fetches_a_released_chapter"
PINS = "tests/test_packaging.py::test_environment_yml_matches_pyproject"
PLAIN = "tests/pipeline/test_plain_nbgrader.py::"
FORMGRADER = PLAIN + "test_formgrader_buttons_take_the_course_path"
# The class server end to end in a browser: roster, make hub's command, and the instructor's
# release, collect, autograde (with the class's secret) and feedback in the Formgrader.
VIEW = "tests/pipeline/test_view.py::"
HUB = "tests/test_hub.py::test_an_instructor_runs_a_class_through_the_formgrader"
SECRET = "tests/pipeline/test_secret.py::"
REAL_CLUSTER = ("tests/pipeline/test_cluster.py::"
                "test_a_real_cluster_grades_the_class_as_the_local_one")

COVERAGE: dict[str, tuple[str, ...]] = {
    # Quick start and set-up. The recipes are checked by a dry run here and the commands they
    # run are tested where they are listed (a server or a pip install cannot run in a test).
    r"^make lab$": (MAKE_DRY_RUN, HERE + "test_notebook_dir_is_the_lab_root", LEARNER_MODE,
                    BROWSER + "test_release_notebook_stops_at_the_first_stub"),
    r"^MULTI30K_DIR=\S+ make lab$|^make lab MULTI30K_DIR=\S+$": (
        HERE + "test_make_lab_hands_multi30k_dir_to_the_kernels",),
    r"^make lab EXCHANGE=\S+$": (HERE + "test_make_lab_with_an_exchange_adds_its_layer",
                                 EXCHANGE_MODE),
    # `make instructor EXCHANGE=...` puts the same exchange layer in (the same test).
    r"^make instructor EXCHANGE=\S+$": (HERE + "test_make_lab_with_an_exchange_adds_its_layer",),
    r"^make instructor$": (MAKE_DRY_RUN, INSTRUCTOR_MODE,
                           BROWSER + "test_solution_notebook_runs_clean_with_figures"),
    r"^make test$": (MAKE_DRY_RUN, CI_IS_MAKE_TEST),
    r"^(sudo )?make hub$": (MAKE_DRY_RUN, HUB),
    r"^make hub HUB_(URL|STATE)=\S+$": (HERE + "test_make_hub_takes_its_address_and_state",),
    r"^sudo \.venv/bin/python -m autograder hub add [a-z ]+( --instructor| --ta)?$": (
        HUB, "tests/test_hub_roster.py::test_add_creates_accounts_and_prints_passwords_once",
        "tests/test_hub_roster.py::test_the_grading_service_does_what_each_role_may"),
    # The staff's commands without root, through the class's grading service.
    r"^python -m autograder hub add \.\.\.$": (
        HUB, "tests/test_hub_roster.py::test_the_grading_service_does_what_each_role_may"),
    r"^python -m autograder autograde ch02$": (HUB,),
    # What each learner's server may use (tests/benchmarks/test_class_load.py runs the hub
    # with limits set this way).
    r"^sudo \.venv/bin/python -m autograder hub limits( --[a-z-]+ \d+)*$": (
        "tests/test_hub_limits.py::test_hub_limits_shows_and_sets_the_class_limits",),
    # Logging in from the LMS (LTI 1.3), and grades back into it.
    r"^sudo \.venv/bin/python -m autograder hub lti( --[a-z-]+ \S+)*$": (
        "tests/test_hub_lti.py::test_the_class_configuration_chooses_the_login",
        "tests/test_hub_lti.py::test_signed_launches_log_in_a_learner_and_an_instructor_with_"
        "their_roles"),
    r"^sudo \.venv/bin/python -m autograder lti-passback ch02$": (
        "tests/test_hub_lti.py::test_lti_passback_posts_the_chapters_scores_to_its_line_item",),
    # The same steps from a root shell: the commands as tested below, on a course folder (and
    # the hub's secret file, which the Formgrader's grading in HUB uses too).
    r"^sudo \.venv/bin/python -m autograder release ch02 --exchange \S+ --course-dir \S+$": (
        HERE + "test_release_into_an_exchange_records_the_chapter_with_its_points", HUB),
    # Closing a chapter, and the learners' view for an image (the hub's browser test closes
    # chapter 2 by its due date in the Formgrader).
    r"^sudo \.venv/bin/python -m autograder close ch0[23]( --at \S+)? --course-dir \S+"
    r"( --exchange \S+)?$": (VIEW + "test_the_close_and_view_commands", HUB),
    r"^python -m autograder view( --released .*)?$": (VIEW + "test_the_close_and_view_commands",),
    # Deadlines: a due date with a late policy, and one learner's extension.
    r"^python -m autograder (close ch02 --at \S+ --late-policy \S+|extend ch02 ann --until \S+)"
    r"( --course-dir \S+)?$": (
        "tests/pipeline/test_deadlines.py::test_the_extend_command_and_close_with_a_late_policy",
        "tests/pipeline/test_deadlines.py::test_grading_marks_late_work_in_the_flags_the_"
        "gradebook_and_the_csv"),
    # The checking service's limits (the hub starts it with the defaults).
    r"^python -m autograder\.hub\.checking$": (
        "tests/learner/test_checking_fairness.py::test_an_endless_function_is_stopped_with_a_"
        "message_and_others_keep_their_speed", HUB),
    r"^sudo \.venv/bin/python -m autograder collect --exchange \S+ --course-dir \S+$": (
        "tests/pipeline/test_collect.py::test_nbgrader_exchange", HUB),
    r"^sudo AUTOGRADER_SECRET_FILE=\S+ \.venv/bin/python -m autograder autograde ch02 --jobs 2 "
    r"--course-dir \S+$": (GRADED_CLASS, SECRET + "test_a_secret_file_must_be_readable_by_its_"
                           "owner_alone", "tests/test_hub_roster.py::test_hub_secret", HUB),
    r"^sudo \.venv/bin/python -m autograder feedback ch02 --exchange \S+ --course-dir \S+$": (
        "tests/pipeline/test_feedback.py::test_feedback_is_released_to_the_exchange", HUB),
    r"^make install$": (MAKE_DRY_RUN, CI_IS_MAKE_TEST),
    r"^make release$": (MAKE_DRY_RUN, RELEASE),
    r"^make demo$": (MAKE_DRY_RUN, DEMO),
    # Learners.
    r"^\.venv/bin/pytest notebooks/ch02_attention$": (
        # Collected through notebooks/conftest.py, which hands the file to the plugin ...
        "tests/learner/test_selfcheck.py::test_course_notebooks_are_collected_only_when_named",
        # ... whose items run the notebook as here.
        "tests/learner/test_selfcheck.py::"
        "test_pytest_on_the_untouched_release_fails_each_exercise_with_the_stub_message",
    ),
    r"^\.venv/bin/pytest -p autograder\.learner\.pytest_plugin \S+\.ipynb$": (
        "tests/learner/test_selfcheck.py::"
        "test_pytest_on_the_untouched_release_fails_each_exercise_with_the_stub_message",
    ),
    r"^\.venv/bin/python -m autograder selfcheck \S+\.ipynb$": (
        HERE + "test_selfcheck_command_reports_each_exercise",
        "tests/learner/test_selfcheck.py::"
        "test_a_solution_filled_copy_passes_and_hidden_checks_never_run",
    ),
    # Instructors.
    r"^cd autograder && \.\./\.venv/bin/nbgrader generate_assignment ch02_attention --force$": (
        HERE + "test_plain_nbgrader_runs_from_the_autograder_folder",
    ),
    r"^nbgrader \.\.\.$": (HERE + "test_plain_nbgrader_runs_from_the_autograder_folder",),
    # Plain nbgrader takes the course's path: the commands, and the formgrader's buttons (its
    # HTTP API, which runs the same converters and exchange classes).
    r"^nbgrader autograde$": (PLAIN + "test_plain_nbgrader_autograde_is_the_course_grading",
                              PLAIN + "test_no_kernel_saw_the_graders_secret", FORMGRADER),
    r"^nbgrader generate_feedback$": (
        PLAIN + "test_plain_generate_feedback_never_shows_hidden_tests", FORMGRADER),
    r"^nbgrader export$": (PLAIN + "test_plain_export_writes_the_course_csv_with_flags",),
    r"^nbgrader collect$": (FORMGRADER,),
    # Release and Release Feedback run the course's functions: the same results both ways.
    r"^nbgrader release_assignment$": (
        HERE + "test_release_into_an_exchange_records_the_chapter_with_its_points",
        HERE + "test_the_exchange_round_trip", HUB),
    r"^python -m autograder release (CHAPTER|ch02) --exchange (DIR|\.\.\.)$": (
        HERE + "test_release_into_an_exchange_records_the_chapter_with_its_points", HUB),
    r"^nbgrader release_feedback$": (
        "tests/pipeline/test_feedback.py::test_feedback_is_released_to_the_exchange", HUB),
    r"^nbgrader zip_collect$": (
        PLAIN + "test_plain_zip_collect_stops_and_names_the_courses_collect",),
    r"^export AUTOGRADER_SECRET=": (
        "tests/exercises/test_checks.py::test_hidden_inputs_follow_the_secret",
        "tests/pipeline/test_grade.py::test_kernel_secret_is_stable_and_not_the_grader_secret",
        SECRET + "test_grading_without_a_secret_is_refused_with_the_fix",
        SECRET + "test_the_development_secret_grades_only_when_asked_and_says_so",
    ),
    r"^python -m autograder exercises$": (
        "tests/test_autograder_cli.py::test_exercises_command_lists_every_id",
    ),
    r"^python -m autograder release \[ch02 \.\.\.\]$": (
        RELEASE,
        "tests/test_autograder_cli.py::test_release_passes_chapter_ids_and_prints_progress",
        "tests/test_notebooks.py::test_release_matches_a_fresh_generate_assignment",
    ),
    r"^python -m autograder collect inbox/$": (
        "tests/pipeline/test_collect.py::test_folder_layouts_are_collected_and_originals_untouched",
        "tests/pipeline/test_collect.py::test_cli_collect_prints_refusals",
        GRADED_CLASS,
    ),
    r"^python -m autograder collect lms-export\.zip$": (
        "tests/pipeline/test_collect.py::test_lms_zip",
        "tests/pipeline/test_bad_submissions.py::test_refused_names_are_reported_and_not_collected",
    ),
    r"^python -m autograder collect --exchange \S+ --chapter ch02$": (
        "tests/pipeline/test_collect.py::test_nbgrader_exchange",
        HERE + "test_the_exchange_round_trip",
    ),
    r"^cd autograder && \.\./\.venv/bin/nbgrader release_assignment ch02_attention$": (
        HERE + "test_the_exchange_round_trip",
    ),
    r"^nbgrader (fetch_assignment|submit) ch02_attention$": (
        HERE + "test_the_exchange_round_trip",
    ),
    r"^python -m autograder autograde( ch02 --jobs 2)?$": (
        GRADED_CLASS,
        "tests/pipeline/test_bad_submissions.py::test_each_bad_submission_is_flagged",
        # `all` and `--student` (repeated), as docs/instructors.md's comment says.
        "tests/pipeline/test_grade.py::test_cli_usage_errors",
        "tests/pipeline/test_bad_submissions.py::"
        "test_rerun_is_idempotent_and_serial_equals_parallel",
    ),
    # A real cluster started with these commands (free ports on 127.0.0.1) grades the sample
    # class with --scheduler.
    r"^DASK_CONFIG=autograder/grade/dask\.yaml dask scheduler$": (
        "tests/pipeline/test_cluster.py::test_the_documented_scheduler_has_the_grading_settings",
        REAL_CLUSTER),
    r"^dask worker tcp://\S+ --nthreads 1 --nworkers \d+$": (REAL_CLUSTER,),
    r"^python -m autograder autograde ch02 --scheduler tcp://\S+$": (
        REAL_CLUSTER, "tests/pipeline/test_cluster.py::test_cli_grades_on_one_kind_of_cluster"),
    r"^python -m autograder feedback ch02$": (
        "tests/pipeline/test_bad_submissions.py::test_feedback_hides_hidden_tests",
    ),
    r"^python -m autograder export \[-o grades\.csv\]$": (
        HERE + "test_export_writes_the_default_file_and_honours_o",
        "tests/pipeline/test_grade.py::test_export_to_stdout_and_file",
        "tests/pipeline/test_bad_submissions.py::"
        "test_rerun_is_idempotent_and_serial_equals_parallel",
    ),
    # Grades for Canvas and Moodle, and the ids that match learners there.
    r"^python -m autograder export --format (canvas|canvas\\\|moodle)$": (
        "tests/pipeline/test_report.py::"
        "test_the_command_writes_each_format_and_names_learners_left_out",),
    r"^sudo \.venv/bin/python -m autograder hub add( [a-z]+=\S+)+$": (
        "tests/test_hub_roster.py::test_hub_add_records_each_learners_email_or_lms_id",),
    r"^python -m autograder analysis ch02(\\\|all)?( \[--names\])?$": (
        "tests/demo/test_sample_class.py::test_item_analysis_counts_each_mutants_hint",
        "tests/pipeline/test_analysis.py::test_hidden_only_failures_are_told_from_visible_ones"),
    r"^python -m autograder similarity ch02 \[--threshold 0\.95\]( \[--policy flag\])?$": (
        "tests/pipeline/test_similarity.py::"
        "test_the_command_prints_the_flagged_pairs_and_rejects_a_bad_threshold",
        "tests/pipeline/test_similarity.py::"
        "test_copies_of_the_courses_code_are_flagged_however_disguised",
    ),
    r"^python -m autograder similarity all --policy zero-verbatim$": (
        "tests/pipeline/test_similarity.py::"
        "test_the_policy_is_a_setting_of_the_course_and_a_zero_is_a_manual_score",),
    r"^python benchmarks/similarity_calibration\.py --write-common$": (
        "tests/pipeline/test_similarity.py::"
        "test_the_corpus_of_honest_answers_that_ships_is_the_calibrations",),
    r"^python -m autograder audit ch02 \[--student alice\]$": (
        "tests/pipeline/test_audit.py::test_command_line_on_collected_submissions",
        "tests/pipeline/test_audit.py::test_command_line_on_files",
    ),
    # Training from a shell.
    r"^\.venv/bin/python -m transformer_ref\.train --task reverse --preset cpu --device auto "
    r"--out runs/reverse$": (
        "tests/reference/test_train_cli.py::test_reverse_cpu_reaches_full_exact_match",
        "tests/reference/test_training.py::test_device_helpers",  # what --device auto picks
    ),
    r"^\.venv/bin/python -m transformer_ref\.data download multi30k$": (
        HERE + "test_download_command_with_the_files_in_place",
        "tests/reference/test_data.py::test_download_command_offline_fails_cleanly",
        "tests/reference/test_data.py::test_multi30k_dir_follows_the_environment",
    ),
    r"^\.venv/bin/python -m transformer_ref\.train --task multi30k --preset gpu --device auto "
    r"--out runs/multi30k$": (HERE + "test_multi30k_training_then_translation",),
    r"^\.venv/bin/python -m transformer_ref\.translate --checkpoint \S+\.pt \"[^\"]+\"$": (
        HERE + "test_multi30k_training_then_translation",
        HERE + "test_translate_command_with_the_shipped_checkpoint",
        "tests/reference/test_translate_cli.py::test_module_runs_end_to_end",
    ),
    # The figures of the README and docs/training.md: the same entry points, drawn into a
    # temporary folder with tiny settings (the real run writes benchmarks/figures/).
    # The copy detection's calibration: the test recomputes what it finds (the dictated
    # exercises) and compares it with the course's list.
    r"^python benchmarks/similarity_calibration\.py$": (
        "tests/pipeline/test_similarity.py::"
        "test_the_dictated_exercises_are_those_where_honest_work_reaches_the_threshold",),
    r"^python benchmarks/attention_scaling\.py$": (
        "tests/benchmarks/test_benchmark_scripts.py::test_attention_scaling_measures_both_paths",),
    r"^python benchmarks/readme_figures\.py$": (
        "tests/benchmarks/test_benchmark_scripts.py::"
        "test_readme_figures_draws_encoding_and_translator_attention",),
    # Training under torchrun is DDP: the launcher runs the training command (few steps), and
    # DDP on two processes gives the single-process gradients.
    r"^torchrun$": ("tests/reference/test_ddp.py::test_ddp_gradients_match_single_process",),
    r"^\.venv/bin/torchrun --standalone --nproc_per_node=2 -m transformer_ref\.train --task "
    r"reverse --out runs/reverse-ddp$": (
        "tests/reference/test_ddp.py::test_training_command_under_torchrun_uses_both_processes",
        "tests/reference/test_ddp.py::test_ddp_gradients_match_single_process",
    ),
    # Conda (not available to the tests): environment.yml holds the pins of pyproject.toml, so
    # `pip install -e . --no-deps` adds only the course itself.
    r"^conda env create -f environment\.yml$": (PINS,),
    r"^conda activate build-the-transformer$": (HERE + "test_conda_environment_name",),
    r"^pip install -e \. --no-deps$": (PINS, CI_IS_MAKE_TEST),
    # The browser test starts learner mode with the same JUPYTER_CONFIG_PATH (and a
    # JUPYTER_CONFIG_DIR of its own, as `make lab` does).
    r"^JUPYTER_CONFIG_PATH=\$PWD/autograder/learner/jupyter/learner jupyter lab "
    r"--notebook-dir=notebooks$": (HERE + "test_notebook_dir_is_the_lab_root", LEARNER_MODE),
    # `pytest` from the root runs the configured test paths and never collects a notebook.
    r"^pytest$": ("tests/learner/test_selfcheck.py::test_the_test_suite_never_collects_notebooks",),
}


def test_commands_are_found_in_every_form() -> None:
    text = "\n".join([
        "Intro with `make demo`, `python` and `make` (tool names), `pyproject.toml` and",
        "`python -m autograder export",
        "[-o grades.csv]` wrapped over two lines.",
        "",
        "```bash",
        "make lab     # first run",
        "# a comment line",
        "```",
        "",
        "```python",
        "import os",
        "```",
        "",
        "A paragraph:",
        "",
        "    python -m autograder collect inbox/    # a layout",
        "                                           # its continuation",
        "    python -m autograder collect lms.zip",
        "",
        "1. **A list.** Its text",
        "     goes on, indented more than four spaces after a line",
        "",
        "    continued inside the item, after a blank line",
        "Started by `torchrun`. Run `DIR=/tmp/x jupyter lab` but not `MULTI30K_DIR`.",
    ])
    assert markdown_commands(text) == [
        "make lab",
        "python -m autograder collect inbox/",
        "python -m autograder collect lms.zip",
        "make demo",
        "python -m autograder export [-o grades.csv]",
        "torchrun",
        "DIR=/tmp/x jupyter lab",
    ]


def test_the_documentation_is_the_readme_and_the_docs_pages() -> None:
    pages = [page.relative_to(ROOT).as_posix() for page in documents()]
    assert pages[0] == "README.md"
    assert {"docs/instructors.md", "docs/class-server.md", "docs/security.md",
            "docs/troubleshooting.md"} <= set(pages)
    # A newcomer's page: the details belong in docs/.
    assert len((ROOT / "README.md").read_bytes()) < 15_000


def test_every_documented_command_is_covered() -> None:
    uncovered = [
        f"{page.relative_to(ROOT)}: {command}" for command, page in documented_commands().items()
        if not any(re.search(pattern, command) for pattern in COVERAGE)
    ]
    assert not uncovered, (
        "Documented commands that no test runs:\n  " + "\n  ".join(uncovered)
        + "\nAdd a test that runs each one and an entry for it in COVERAGE (tests/test_readme.py)."
    )


def test_coverage_names_existing_tests() -> None:
    missing = []
    for test_id in sorted({t for tests in COVERAGE.values() for t in tests}):
        path, name = test_id.split("::")
        name = name.split("[")[0]  # a parametrised test is named without its ids
        file = ROOT / path
        if not file.is_file() or not re.search(
            rf"^def {re.escape(name)}\(", file.read_text(encoding="utf-8"), flags=re.M
        ):
            missing.append(test_id)
    assert not missing, f"COVERAGE names tests that do not exist: {missing}"


def test_coverage_has_no_stale_entries() -> None:
    commands = list(documented_commands())
    stale = [p for p in COVERAGE if not any(re.search(p, c) for c in commands)]
    assert not stale, f"COVERAGE entries that match no documented command (remove them): {stale}"


# ---------------------------------------------------------------------------------------------
# Links between the pages

# The pages that link to each other: the documentation, the benchmarks' results and log, and
# the Kubernetes guide.
LINKED_PAGES = ("README.md", "docs/*.md", "benchmarks/*.md", "autograder/deploy/README.md")
LINK = re.compile(r"\]\(([^)\s]+)\)|<img src=\"([^\"]+)\"")


def heading_anchors(text: str) -> set[str]:
    """The anchors GitHub gives a Markdown page's headings: lower case, spaces as hyphens,
    punctuation other than hyphens and underscores dropped."""
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            for heading in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def test_every_link_between_the_pages_leads_somewhere() -> None:
    """A relative link names a file or folder that exists and, after ``#``, one of its headings
    (a section moved to another page must take its links with it)."""
    broken = []
    for page in sorted({p for pattern in LINKED_PAGES for p in ROOT.glob(pattern)}):
        for match in LINK.finditer(page.read_text(encoding="utf-8")):
            target = match.group(1) or match.group(2)
            if re.match(r"[a-z]+:", target):
                continue  # another site
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and anchor not in heading_anchors(linked.read_text(encoding="utf-8")):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "links that lead nowhere:\n  " + "\n  ".join(broken)


# ---------------------------------------------------------------------------------------------
# Set-up: make targets, JupyterLab, conda

# JupyterLab's settings and workspaces, and the course's configuration layers (first wins).
JUPYTER_STATE = ROOT / "build" / "jupyter"
LAYERS = ROOT / "autograder" / "learner" / "jupyter"


def jupyter_lab(layers: list[str], notebook_dir: str, exchange: str = "") -> str:
    """The command line that starts JupyterLab with these configuration layers."""
    path = ":".join(str(LAYERS / layer) for layer in layers)
    return (f'JUPYTER_CONFIG_DIR="{JUPYTER_STATE}" TRANSFORMER_COURSE_EXCHANGE="{exchange}" '
            f'JUPYTER_CONFIG_PATH="{path}" .venv/bin/jupyter lab --notebook-dir={notebook_dir}')


# What each documented target runs after the install (paths relative to the repository root).
MAKE_RECIPES = {
    "install": [],
    "lab": [jupyter_lab(["learner"], "notebooks")],
    "instructor": [jupyter_lab(["instructor", "learner"], ".")],
    "test": [".venv/bin/ruff check .",
             ".venv/bin/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder"],
    "release": [".venv/bin/python -m autograder release"],
    "hub": ['TRANSFORMER_HUB_STATE="build/hub" .venv/bin/jupyterhub -f '
            "autograder/hub/jupyterhub_config.py --JupyterHub.bind_url=http://127.0.0.1:8000"],
    "demo": [".venv/bin/python -m tests.fixtures.demo --jobs 2 --out build/demo"],
}
INSTALL = [
    "test -x .venv/bin/python || python3 -m venv .venv",
    ".venv/bin/python -m pip install --quiet --editable '.[dev]'",
]


def make_env() -> dict[str, str]:
    """The environment for a dry run of make. Under `make test` the tests run inside make:
    drop the parent's flags, which would add "Entering directory" lines and its job server to
    the dry run; and a MULTI30K_DIR of the shell would add itself to the lab's command."""
    dropped = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MULTI30K_DIR")
    return {k: v for k, v in os.environ.items() if k not in dropped}


def documented_make_targets() -> list[str]:
    return [c.split()[1] for c in documented_commands() if re.fullmatch(r"make \w+", c)]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make, as the README says")
@pytest.mark.parametrize("target", documented_make_targets())
def test_make_targets_run_the_documented_commands(target: str) -> None:
    """A dry run (``make -n``) of each target, every step forced (``-B``) as on a first run:
    each creates .venv and installs the course, then runs its command."""
    assert target in MAKE_RECIPES, f"say in MAKE_RECIPES what `make {target}` runs"
    env = make_env()
    result = subprocess.run(["make", "--no-print-directory", "-n", "-B", target], cwd=ROOT,
                            capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == INSTALL
    for command in MAKE_RECIPES[target]:
        assert command in lines, f"`make {target}` no longer runs {command!r}:\n{result.stdout}"


def test_make_lab_with_an_exchange_adds_its_layer() -> None:
    """`make lab EXCHANGE=/srv/nbgrader/exchange` (and `make instructor EXCHANGE=...`) put the
    exchange layer before the learner layer and hand the folder to its nbgrader_config.py."""
    env = make_env()
    exchange = "/srv/nbgrader/exchange"
    for target, layers, notebook_dir in (("lab", ["exchange", "learner"], "notebooks"),
                                         ("instructor", ["instructor", "exchange", "learner"],
                                          ".")):
        result = subprocess.run(
            ["make", "--no-print-directory", "-n", "-B", target, f"EXCHANGE={exchange}"],
            cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
        assert result.returncode == 0, result.stderr
        assert jupyter_lab(layers, notebook_dir, exchange) in result.stdout.splitlines()


def test_make_lab_hands_multi30k_dir_to_the_kernels() -> None:
    """`MULTI30K_DIR=/path/to/multi30k make lab` (or `make lab MULTI30K_DIR=...`) starts
    JupyterLab, and so every kernel, with the folder; a relative one is made absolute from the
    course folder, since the kernels run in the chapters' folders."""
    lab = jupyter_lab(["learner"], "notebooks")
    for given, expected in (("/srv/multi30k", "/srv/multi30k"),
                            ("../shared/data/multi30k", f"{ROOT}/../shared/data/multi30k")):
        wanted = lab.replace('TRANSFORMER_COURSE_EXCHANGE=""',
                             f'TRANSFORMER_COURSE_EXCHANGE="" MULTI30K_DIR="{expected}"')
        for args, extra in (([], {"MULTI30K_DIR": given}), ([f"MULTI30K_DIR={given}"], {})):
            result = subprocess.run(
                ["make", "--no-print-directory", "-n", "-B", "lab", *args],
                cwd=ROOT, capture_output=True, text=True, timeout=60, env={**make_env(), **extra})
            assert result.returncode == 0, result.stderr
            assert wanted in result.stdout.splitlines(), result.stdout


def test_make_hub_takes_its_address_and_state() -> None:
    """`make hub HUB_URL=http://0.0.0.0:8000` and `make hub HUB_STATE=/srv/transformer-class`
    reach JupyterHub's bind address and the class's state folder."""
    env = make_env()
    result = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", "hub", "HUB_URL=http://0.0.0.0:8000",
         "HUB_STATE=/srv/transformer-class"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    assert ('TRANSFORMER_HUB_STATE="/srv/transformer-class" .venv/bin/jupyterhub -f '
            "autograder/hub/jupyterhub_config.py --JupyterHub.bind_url=http://0.0.0.0:8000"
            ) in result.stdout.splitlines()


def test_notebook_dir_is_the_lab_root() -> None:
    """`jupyter lab --notebook-dir=notebooks` serves notebooks/ (the browser tests start
    JupyterLab with the same setting, spelled ``--ServerApp.root_dir``)."""
    from jupyter_server.serverapp import aliases

    assert aliases["notebook-dir"] == "ServerApp.root_dir"


def test_conda_environment_name() -> None:
    import yaml

    text = "\n".join(page.read_text(encoding="utf-8") for page in documents())
    (name,) = re.findall(r"`conda activate (\S+)`", text)
    assert yaml.safe_load((ROOT / "environment.yml").read_text())["name"] == name


# ---------------------------------------------------------------------------------------------
# Learners and instructors


@pytest.mark.slow
def test_selfcheck_command_reports_each_exercise(tmp_path, capsys) -> None:
    """`python -m autograder selfcheck ~/my-work/ch02_attention.ipynb` on an untouched copy."""
    copy = tmp_path / "my-work" / f"{CH02}.ipynb"
    copy.parent.mkdir()
    shutil.copy(RELEASE_CH02, copy)
    assert autograder_main(["selfcheck", str(copy)]) == 1
    out = capsys.readouterr().out
    exercises = [e.id for e in all_exercises() if e.chapter == CH02]
    assert f"0 of {len(exercises)} exercises pass" in out
    for exercise in exercises:
        assert f"FAIL  {exercise}" in out
    assert out.count("the exercise is not done yet") >= len(exercises)
    assert copy.read_bytes() == RELEASE_CH02.read_bytes(), "the self-check must not change it"


def test_plain_nbgrader_runs_from_the_autograder_folder(tmp_path) -> None:
    """`cd autograder && ../.venv/bin/nbgrader generate_assignment ch02_attention --force`,
    in a shell without the environment activated, writes the committed release.

    It runs in a copy of the course: the copied ``autograder`` package comes first on the
    import path, so its ``nbgrader_config.py`` points nbgrader at the copy and this
    repository's notebooks and gradebook stay untouched.
    """
    course = tmp_path / "course"
    shutil.copytree(ROOT / "autograder", course / "autograder",
                    ignore=shutil.ignore_patterns("course", "__pycache__"))
    shutil.copytree(ROOT / "solutions" / CH02, course / "solutions" / CH02)
    scripts = Path(sys.executable).parent
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep)
            if p and Path(p).resolve() != scripts.resolve()]
    env = {**os.environ, "PATH": os.pathsep.join(path),
           "PYTHONPATH": os.pathsep.join([str(course), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([str(scripts / "nbgrader"), "generate_assignment", CH02, "--force"],
                            cwd=course / "autograder", env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    released = course / "notebooks" / CH02 / f"{CH02}.ipynb"
    assert released.read_bytes() == RELEASE_CH02.read_bytes()
    assert (course / "autograder" / "course" / "gradebook.db").is_file()


def test_the_exchange_round_trip(tmp_path) -> None:
    """The instructor releases ch02 into an exchange with plain nbgrader from `autograder/`,
    a learner whose configuration names the course and the exchange fetches and submits it,
    and `python -m autograder collect --exchange DIR --chapter ch02` takes the submission,
    timed by the exchange folder's name."""
    course = tmp_path / "course"
    shutil.copytree(ROOT / "autograder", course / "autograder",
                    ignore=shutil.ignore_patterns("course", "__pycache__"))
    shutil.copytree(ROOT / "solutions" / CH02, course / "solutions" / CH02)
    exchange, learner = tmp_path / "exchange", tmp_path / "learner"
    exchange.mkdir()
    learner.mkdir()
    # The learner's own nbgrader configuration, as docs/instructors.md shows it.
    (learner / "nbgrader_config.py").write_text(
        f'c = get_config()\nc.CourseDirectory.course_id = "{COURSE_ID}"\n'
        f'c.Exchange.root = "{exchange}"\n', encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(course),
                                                        os.environ.get("PYTHONPATH", "")])}
    nbgrader = str(Path(sys.executable).parent / "nbgrader")
    root_flag = f"--Exchange.root={exchange}"  # the default, /srv/nbgrader/exchange, elsewhere
    steps = [(course / "autograder", ["generate_assignment", CH02, "--force"]),
             (course / "autograder", ["release_assignment", CH02, root_flag]),
             (learner, ["fetch_assignment", CH02]),
             (learner, ["submit", CH02, "--student=ada"])]
    for cwd, args in steps:
        result = subprocess.run([nbgrader, *args], cwd=cwd, env=env, capture_output=True,
                                text=True, timeout=300)
        assert result.returncode == 0, (args, result.stdout + result.stderr)
    fetched = learner / CH02 / f"{CH02}.ipynb"
    assert fetched.read_bytes() == RELEASE_CH02.read_bytes()
    (inbound,) = (exchange / COURSE_ID / "inbound").iterdir()
    assert inbound.name.startswith(f"ada+{CH02}+")
    assert autograder_main(["collect", "--exchange", str(exchange), "--chapter", "ch02",
                            "--root", str(course), "--course-dir",
                            str(tmp_path / "graded")]) == 0
    collected = tmp_path / "graded" / "submitted" / "ada" / CH02
    assert (collected / f"{CH02}.ipynb").read_bytes() == fetched.read_bytes()
    stamp = (collected / "timestamp.txt").read_text(encoding="utf-8").strip()
    assert inbound.name.split("+")[2].startswith(stamp[:19])


def test_release_regenerates_a_chapter_and_the_gradebook(tmp_path) -> None:
    """`python -m autograder release ch02` (what `make release` runs, for one chapter)."""
    shutil.copytree(ROOT / "solutions" / CH02, tmp_path / "solutions" / CH02)
    # The command works on this repository; here on a copy, so notebooks/ stays as committed.
    assert autograder_main(["release", "ch02", "--root", str(tmp_path)]) == 0
    released = tmp_path / "notebooks" / CH02 / f"{CH02}.ipynb"
    assert released.read_bytes() == RELEASE_CH02.read_bytes()
    with open_gradebook(Course.of(tmp_path)) as gradebook:
        assert sorted(a.name for a in gradebook.assignments) == sorted(CHAPTERS.values())


def test_release_into_an_exchange_records_the_chapter_with_its_points(tmp_path) -> None:
    """`python -m autograder release ch02 --exchange DIR` and the Formgrader's Release (nbgrader's
    release_assignment, which the course routes to the same function) each regenerate the
    chapter, record it in the gradebook with its points and put it in the exchange."""
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    shutil.copytree(ROOT / "solutions" / CH02, tmp_path / "solutions" / CH02)
    # Every graded cell's points: the checks' and the written answers'.
    points = sum(cell.metadata["nbgrader"]["points"] for cell in nbformat.read(
        RELEASE_CH02, as_version=4).cells if cell.metadata.get("nbgrader", {}).get("points"))
    for way in ("command", "formgrader"):
        course, exchange = tmp_path / f"course-{way}", tmp_path / f"exchange-{way}"
        if way == "command":
            assert autograder_main(["release", "ch02", "--exchange", str(exchange), "--root",
                                    str(tmp_path), "--course-dir", str(course)]) == 0
        else:
            config = course_config(tmp_path, course)
            config.Exchange.root = str(exchange)
            api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
            result = api.release_assignment(CH02)
            assert result["success"], result
            assert "the gradebook holds its points" in result["log"]
        outbound = exchange / COURSE_ID / "outbound" / CH02 / f"{CH02}.ipynb"
        assert outbound.read_bytes() == RELEASE_CH02.read_bytes(), way
        with open_gradebook(Course.of(tmp_path, course)) as gradebook:
            assert gradebook.find_assignment(CH02).max_score == points, way


def test_export_writes_the_default_file_and_honours_o(tmp_path, capsys) -> None:
    """`python -m autograder export` and `export -o grades.csv` write the same file."""
    where = ["--root", str(tmp_path), "--course-dir", str(tmp_path / "course")]
    assert autograder_main(["export", *where]) == 0
    default = tmp_path / "course" / "grades.csv"
    assert default.read_text() == ("student,chapter,score,max_score,auto_score,auto_max,"
                                   "manual_score,manual_max,manual_pending,late_penalty,flags,reasons\n")
    assert autograder_main(["export", "-o", str(tmp_path / "grades.csv"), *where]) == 0
    assert (tmp_path / "grades.csv").read_bytes() == default.read_bytes()
    assert f"wrote 0 row(s) to {default}" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# Training from a shell


def test_download_command_with_the_files_in_place(multi30k_dir, tmp_path) -> None:
    """`python -m transformer_ref.data download multi30k` in a course folder whose
    data/multi30k already holds the eight files: it fetches nothing and checks them. Run from
    a chapter's folder it finds the same files (a course copy in tmp_path: pyproject.toml beside
    the package)."""
    course = tmp_path / "course"
    shutil.copytree(ROOT / "transformer_ref", course / "transformer_ref",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", course)
    target = course / "data" / "multi30k"
    target.mkdir(parents=True)
    for file in multi30k_dir.glob("*.gz"):
        shutil.copy(file, target)
    chapter = course / "notebooks" / "ch10_translation"
    chapter.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k != "MULTI30K_DIR"}
    env["PYTHONPATH"] = str(course)
    for folder in (course, chapter):
        result = subprocess.run(
            [sys.executable, "-m", "transformer_ref.data", "download", "multi30k"],
            cwd=folder, env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        assert f"downloaded 0 file(s) into {target}" in result.stdout
        assert "complete and match their SHA-256 sums" in result.stdout


@pytest.mark.slow
def test_multi30k_training_then_translation(multi30k_dir, tmp_path, monkeypatch, capsys) -> None:
    """The Multi30k training command of docs/training.md, then its translate command on the result.

    The command line, the gpu preset's choices (pre-LN, shared and tied embeddings, beam size)
    and the data path are the real ones; the model, the BPE vocabulary and the splits are cut
    down and two steps run, so that this takes seconds. It checks what the run writes, not how
    well it translates (see test_translate_command_with_the_shipped_checkpoint for that).
    """
    real_preset, real_load = train.get_preset, train.load_multi30k
    asked = []

    def small_preset(task: str, name: str, **overrides: object) -> Preset:
        asked.append((task, name))
        preset = real_preset(task, name, **overrides)
        model = {**preset.model, "N": 1, "d_model": 32, "d_ff": 64, "h": 2}
        # The preset's linear decay needs more steps than its warm-up: two steps, one warm-up.
        return replace(preset, model=model, bpe_vocab_size=300, eval_sentences=4,
                       train=replace(preset.train, warmup=1))

    monkeypatch.setattr(train, "get_preset", small_preset)
    monkeypatch.setattr(train, "load_multi30k", lambda split, folder: real_load(split, folder)[:10])
    monkeypatch.setattr(tokenizer, "DEFAULT_CACHE_DIR", tmp_path / "cache")
    monkeypatch.setenv("MULTI30K_DIR", str(multi30k_dir))
    out = tmp_path / "runs" / "multi30k"

    assert train.main(["--task", "multi30k", "--preset", "gpu", "--device", "auto",
                       "--out", str(out), "--max-steps", "2", "--no-progress"]) == 0
    assert asked == [("multi30k", "gpu")]
    report = json.loads((out / "metrics.json").read_text())
    assert report["task"] == "multi30k" and report["preset"] == "gpu" and report["steps"] == 2
    metrics = report["metrics"]
    assert metrics["beam_size"] == real_preset("multi30k", "gpu").beam_size
    assert 0 <= metrics["test_2016_flickr_bleu"] <= 100
    assert metrics["bleu_signature"].startswith("nrefs:1|")
    capsys.readouterr()

    assert translate.main(["--checkpoint", str(out / "checkpoint.pt"), GERMAN]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1


def test_translate_command_with_the_shipped_checkpoint(capsys) -> None:
    """`python -m transformer_ref.translate --checkpoint ... "Ein Hund rennt über die Wiese."`
    with the trained translator chapter 10 ships: an English sentence about a dog."""
    assert translate.main(["--checkpoint", str(SHIPPED_TRANSLATOR), GERMAN]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert "dog" in line.lower(), line
