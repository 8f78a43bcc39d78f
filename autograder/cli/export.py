"""``python -m autograder export``: the grades CSV with flags, or the grade file of Canvas or
Moodle."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder.cli.options import add_course_options, chapter_id, course_of
from autograder.course import Course


def run(args: argparse.Namespace) -> int:
    # Loaded when this subcommand runs: each pays only for its own imports.
    from autograder.steps.lms_export import canvas_csv, left_out_message, moodle_csv
    from autograder.steps.report import export_csv

    course = course_of(args)
    if args.format == "csv":
        text, left_out = export_csv(course), ""
    else:
        try:
            assignment_ids = dict(_pair(text) for text in args.assignment_id)
        except ValueError as exc:
            print(f"export: {exc}", file=sys.stderr)
            return 2
        export = (canvas_csv(course, assignment_ids) if args.format == "canvas"
                  else moodle_csv(course, args.moodle_id))
        text = export.text
        left_out = left_out_message(export, args.format.capitalize(),
                                    args.moodle_id if args.format == "moodle" else "any")
    if left_out:
        print(left_out, file=sys.stderr)
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    output = Path(args.output) if args.output else _default_output(course, args.format)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8", newline="")
    rows = text.count("\n") - (2 if args.format == "canvas" else 1)
    print(f"wrote {rows} row(s) to {output}")
    return 0


def _pair(text: str) -> tuple[str, str]:
    """``"ch02_attention=1234"`` -> ``("ch02_attention", "1234")`` (``ch02`` names it too)."""
    chapter, equals, number = text.partition("=")
    if not equals or not number.isdigit():
        raise ValueError(f"--assignment-id takes CHAPTER=NUMBER, got {text!r}")
    try:
        return chapter_id(chapter), number
    except argparse.ArgumentTypeError as exc:
        raise ValueError(str(exc)) from None


def _default_output(course: Course, fmt: str) -> Path:
    return course.grades_csv if fmt == "csv" else course.folder / f"grades-{fmt}.csv"


def add(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "export", help="write the grades CSV, or the grade file of Canvas or Moodle",
        description="--format csv (default): one row per learner and chapter: student, "
                    "chapter, score, max_score (the whole chapter), auto_score, auto_max "
                    "(autograded), manual_score, manual_max, manual_pending (graded by hand; "
                    "points not graded yet), late_penalty (taken by the late policy, already "
                    "out of score), flags, reasons (long ones cut; the flag files keep the whole "
                    "text). --format canvas: Canvas's gradebook import (Grades > Import): "
                    "Student, ID, SIS User ID, SIS Login ID, Section, one column per chapter "
                    "and a Points Possible row. --format moodle: Moodle's CSV grade import "
                    "(Grades > Import > CSV file): the learner's email (or --moodle-id lms_id: "
                    "ID number), one column per chapter. Canvas and Moodle find learners by "
                    "the email or LMS id given to `hub add NAME=ID`; learners without one are "
                    "left out, and named on standard error.")
    parser.add_argument("--format", choices=("csv", "canvas", "moodle"), default="csv",
                        help="the file's format (default: csv)")
    parser.add_argument("--output", "-o", help="CSV path, or - for standard output (default: "
                                               "<course-dir>/grades.csv, grades-canvas.csv or "
                                               "grades-moodle.csv)")
    parser.add_argument("--moodle-id", choices=("email", "lms_id"), default="email",
                        help="moodle: the id that identifies learners (default: email)")
    parser.add_argument("--assignment-id", action="append", default=[], metavar="CHAPTER=ID",
                        help="canvas: the Canvas assignment id of a chapter (the number in its "
                             "address); chapters without one become new assignments")
    add_course_options(parser)
    parser.set_defaults(handler=run)
