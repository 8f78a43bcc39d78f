"""``python -m autograder autograde``: a class's submissions graded on Dask workers."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from autograder.cli.options import (
    add_course_options,
    add_workers_options,
    chapter_or_all,
    chapters_of,
    course_of,
    jobs_of,
    limits_of,
)
from autograder.sandbox.launcher import GraderFaultError, Limits, sandbox_report

if TYPE_CHECKING:
    from autograder.hub.classroom import Classroom


def run(args: argparse.Namespace) -> int:
    # Loaded when this subcommand runs: each pays only for its own imports.
    from tqdm import tqdm

    from autograder.grade.gradebook import quiet_gradebook, read_scores
    from autograder.grade.run import autograde
    from autograder.grade.secret import SecretError, require_grading_secret
    from autograder.hub.classroom import Classroom, delegated
    from autograder.steps.report import summary_table

    if jobs_of(args) < 1:
        print(f"--jobs must be 1 or more, got {args.jobs}", file=sys.stderr)
        return 2
    classroom = Classroom.from_env()
    if delegated(classroom):
        return _through_grading_service(args, classroom)
    try:
        print(require_grading_secret().notice())
    except SecretError as exc:
        print(f"autograde refused: {exc}", file=sys.stderr)
        return 1
    course = course_of(args)
    chapters = chapters_of(args, course)
    if not chapters:
        print(f"nothing to grade: no submissions in {course.step_folder('submitted')}; "
              "run `python -m autograder collect` first", file=sys.stderr)
        return 1
    limits = limits_of(args)
    for line in sandbox_report(limits):
        print(line)
    try:
        with quiet_gradebook():
            rows = autograde(course, chapters, jobs=jobs_of(args), scheduler=args.scheduler,
                             students=args.student, limits=limits,
                             progress=lambda n: tqdm(total=n, desc="grading", unit="learner"))
    except (ConnectionError, ValueError, GraderFaultError) as exc:  # the grader cannot grade
        print(f"autograde failed: {exc}", file=sys.stderr)
        return 1
    print(summary_table(rows, read_scores(course)))
    for chapter in chapters:
        report = course.folder / "similarity" / f"{chapter}.html"
        if report.is_file():
            print(f"copy detection of {chapter}: {report}")
    return 0


def _through_grading_service(args: argparse.Namespace, classroom: Classroom) -> int:
    """Not root on the class server: the class's grading service grades, one learner after the
    other (see :mod:`autograder.hub.grading`); its log is printed."""
    from autograder.hub.grading import ask
    from autograder.nbgrader_hooks.steps import StepError

    chapters = chapters_of(args, classroom.course)
    if not chapters:
        print("nothing to grade: no collected submissions in the class's course folder",
              file=sys.stderr)
        return 1
    for chapter in chapters:
        try:
            lines = ask("autograde", classroom=classroom, chapter=chapter,
                        students=args.student)
        except StepError as exc:
            print(f"autograde failed: {exc}", file=sys.stderr)
            return 1
        print("\n".join(lines))
    return 0


def add(subparsers: argparse._SubParsersAction) -> None:
    defaults = Limits()
    parser = subparsers.add_parser(
        "autograde", help="grade collected submissions in the sandbox",
        description="Restore test cells, run each submission in the sandbox, verify every "
                    "graded function outside the notebook, store scores in the gradebook and "
                    "flags with their reasons; print a summary table. Not as root on the class "
                    "server, the class's grading service grades its course folder instead.")
    parser.add_argument("chapter", type=chapter_or_all, metavar="CHAPTER|all")
    add_workers_options(parser, jobs=1)
    parser.add_argument("--student", action="append", help="only this learner (repeatable)")
    parser.add_argument("--cell-timeout", type=float, default=defaults.cell_timeout_s,
                        help="seconds per cell (default: %(default)s)")
    parser.add_argument("--notebook-timeout", type=float, default=defaults.notebook_timeout_s,
                        help="seconds per notebook (default: %(default)s)")
    parser.add_argument("--learner-timeout", type=float, default=defaults.learner_timeout_s,
                        help="seconds for all of one learner: the notebook and its "
                             "verification (default: %(default)s)")
    parser.add_argument("--memory-mb", type=int, default=defaults.memory_mb,
                        help="memory of one learner's processes together, in MiB "
                             "(default: %(default)s)")
    parser.add_argument("--disk-mb", type=int, default=defaults.disk_mb,
                        help="a learner's writable folder, in MiB (default: %(default)s)")
    parser.add_argument("--max-processes", type=int, default=defaults.max_processes,
                        help="processes a learner's code may run (default: %(default)s)")
    parser.add_argument("--max-output-bytes", type=int, default=defaults.max_output_bytes,
                        help="output kept per notebook (default: %(default)s)")
    add_course_options(parser)
    parser.set_defaults(handler=run)
