"""``python -m autograder extend``: one learner's extension for a chapter."""

from __future__ import annotations

import argparse
import sys

from autograder.cli.options import add_course_options, chapter_id, course_of


def run(args: argparse.Namespace) -> int:
    # Loaded when this subcommand runs: each pays only for its own imports.
    from datetime import datetime

    from autograder.deadlines import deadline, extend

    course = course_of(args)
    try:
        until = None if args.remove else datetime.fromisoformat(args.until).astimezone()
    except ValueError:
        print(f"extend failed: --until {args.until!r} is not a date and time; write it as "
              "2026-12-05T18:00 (local time) or 2026-12-05T17:00+00:00", file=sys.stderr)
        return 2
    try:
        extend(course, args.chapter, args.learner, until)
    except ValueError as exc:  # not a class's course folder: nothing was changed
        print(f"extend failed: {exc}", file=sys.stderr)
        return 1
    when = deadline(course, args.chapter, args.learner)
    print(f"{args.learner}'s deadline for {args.chapter}: "
          f"{'none yet (no due date)' if when is None else f'{when:%Y-%m-%d %H:%M} UTC'}; "
          "its answers stay out of their view until then (from their next server start)")
    return 0


def add(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "extend", help="give one learner more time for a chapter",
        description="Give LEARNER until WHEN for CHAPTER (or --remove the extension). The "
                    "chapter's answers stay out of that learner's view until their own "
                    "deadline, while the others see them after the due date; work handed in "
                    "later is marked late and flagged submitted_after_answers.")
    parser.add_argument("chapter", type=chapter_id, metavar="CHAPTER",
                        help="chapter id such as ch02_attention, or its prefix ch02")
    parser.add_argument("learner", metavar="LEARNER", help="the learner's id in the class")
    when = parser.add_mutually_exclusive_group(required=True)
    when.add_argument("--until", metavar="WHEN",
                      help="the learner's deadline, ISO format (2026-12-05T18:00, local time)")
    when.add_argument("--remove", action="store_true", help="take the extension back")
    add_course_options(parser)
    parser.set_defaults(handler=run)
