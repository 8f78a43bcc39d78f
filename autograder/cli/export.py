"""``python -m autograder export``: the grades CSV, with flags."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder.cli.options import add_course_options, course_of


def run(args: argparse.Namespace) -> int:
    # Loaded when this subcommand runs: each pays only for its own imports.
    from autograder.steps.report import export_csv

    course = course_of(args)
    if args.output == "-":
        sys.stdout.write(export_csv(course))
        return 0
    output = Path(args.output) if args.output else course.grades_csv
    text = export_csv(course, output)
    print(f"wrote {text.count(chr(10)) - 1} row(s) to {output}")
    return 0


def add(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "export", help="write the grades CSV",
        description="One row per learner and chapter: student, chapter, score, max_score "
                    "(the whole chapter), auto_score, auto_max (autograded), manual_score, "
                    "manual_max, manual_pending (graded by hand; points not graded yet), "
                    "late_penalty (taken by the late policy, already out of score), "
                    "flags, reasons (long ones cut; the flag files keep the whole text).")
    parser.add_argument("--output", "-o", help="CSV path, or - for standard output "
                                               "(default: <course-dir>/grades.csv)")
    add_course_options(parser)
    parser.set_defaults(handler=run)
