"""``python -m autograder feedback``: learners' feedback pages, and their release."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder.cli.options import add_course_options, chapter_or_all, chapters_of, course_of


def run(args: argparse.Namespace) -> int:
    # Loaded when this subcommand runs: each pays only for its own imports.
    from autograder.steps.exchange import release_feedback
    from autograder.steps.feedback import generate_feedback

    course = course_of(args)
    chapters = chapters_of(args, course)
    report = generate_feedback(course, chapters, students=args.student)
    print(f"wrote {len(report.written)} feedback page(s) under "
          f"{course.step_folder('feedback')}")
    for student, chapter, reason in report.failed:
        print(f"FAILED {student}/{chapter}: {reason}", file=sys.stderr)
    if args.exchange is not None:
        try:
            released = release_feedback(course, chapters, args.exchange, students=args.student)
        except RuntimeError as exc:
            print(f"releasing the feedback failed: {exc}", file=sys.stderr)
            return 1
        print(f"released the feedback of {len(released)} submission(s) to the exchange "
              f"{args.exchange}")
    return 1 if report.failed else 0


def add(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "feedback", help="write HTML feedback for graded submissions",
        description="Render <course>/feedback/<student>/<chapter>/<chapter>.html with nbgrader "
                    "from the autograded notebooks (no hidden test code), sanitised: no "
                    "script, no event handler, nothing loaded from elsewhere. A learner whose "
                    "page fails is listed and flagged feedback_failed; the others get theirs "
                    "(exit status 1 when any failed).")
    parser.add_argument("chapter", type=chapter_or_all, metavar="CHAPTER|all")
    parser.add_argument("--student", action="append", help="only this learner (repeatable)")
    parser.add_argument("--exchange", type=Path, metavar="DIR",
                        help="then release the pages into this nbgrader exchange, where each "
                             "learner fetches their own (submissions collected from it only)")
    add_course_options(parser)
    parser.set_defaults(handler=run)
