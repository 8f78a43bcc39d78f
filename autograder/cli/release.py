"""``python -m autograder release``: solutions/ -> notebooks/, and into a class's exchange."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder.cli.options import add_course_options, chapter_id, course_of


def run(args: argparse.Namespace) -> int:
    # Imported here: nbgrader is slow to import and only this subcommand needs it.
    from autograder.steps.release import release
    from autograder.steps.view import view_folder

    course = course_of(args)
    try:
        chapters = release(course, args.chapters or None, exchange=args.exchange,
                           progress=lambda line: print(line, flush=True))
        if args.exchange is not None:
            print(f"released {', '.join(chapters)} to the exchange {args.exchange}; the "
                  f"learners' view of the course is in {view_folder(course)}")
    except (ValueError, RuntimeError) as exc:  # the documented failures of both steps
        print(f"release failed: {exc}", file=sys.stderr)
        return 1
    return 0


def add(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "release", help="generate the learner notebooks from the solutions",
        description="Generate notebooks/<chapter>/ from solutions/<chapter>/ with nbgrader "
                    "(all chapters when none is named).")
    parser.add_argument("chapters", nargs="*", type=chapter_id, metavar="CHAPTER",
                        help="chapter id such as ch02_attention, or its prefix ch02")
    parser.add_argument("--exchange", type=Path, metavar="DIR",
                        help="then release the chapters into this nbgrader exchange, where "
                             "learners fetch them (nbgrader release_assignment)")
    add_course_options(parser)
    parser.set_defaults(handler=run)
