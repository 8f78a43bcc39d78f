"""``python -m autograder close``: a class's chapter closed, its answers revealed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder.cli.options import add_course_options, chapter_id, course_of


def run(args: argparse.Namespace) -> int:
    # Loaded when this subcommand runs: each pays only for its own imports.
    from datetime import datetime

    from autograder.deadlines import close_chapter, parse_policy, set_late_policy
    from autograder.steps.view import (
        ChapterStates,
        chapter_states,
        refresh_view,
        view_folder,
        withheld_answers,
    )

    course = course_of(args)
    try:
        at = datetime.fromisoformat(args.at).astimezone() if args.at else None
    except ValueError:
        print(f"close failed: --at {args.at!r} is not a date and time; write it as "
              "2026-12-01T18:00 (local time) or 2026-12-01T17:00+00:00", file=sys.stderr)
        return 2
    try:
        if args.late_policy is not None:
            parse_policy(args.late_policy)
    except ValueError as exc:  # refused before any chapter is closed
        print(f"close failed: {exc}", file=sys.stderr)
        return 1
    for chapter in args.chapters:
        try:
            when = close_chapter(course, chapter, at)
            if args.late_policy is not None:
                set_late_policy(course, chapter, args.late_policy)
        except ValueError as exc:  # not a class's course folder, or no policy: as it was
            print(f"close failed: {exc}", file=sys.stderr)
            return 1
        print(f"{chapter}: due {when:%Y-%m-%d %H:%M} UTC; from then on its answers are part of "
              "the view of every learner without an extension"
              + (f"; late work: {args.late_policy}" if args.late_policy else ""))
    closed = chapter_states(course, None).closed | set(args.chapters)
    for chapter in args.chapters:
        for module, chapters in withheld_answers(chapter, ChapterStates(closed, closed)).items():
            print(f"  except {module}: it also computes the answers of {', '.join(chapters)}, "
                  "still open; it joins the view once those close too")
    if args.exchange is not None:
        refresh_view(course, args.exchange)
        print(f"the learners' view in {view_folder(course)} is up to date")
    return 0


def add(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "close", help="close chapters of a class: their answers become visible to learners",
        description="Set each chapter's due date in the gradebook to now (or --at). In a class, "
                    "a chapter's references (the answers of its exercises) join the learners' "
                    "view of the course once its due date has passed; until then learners "
                    "never see them. The Formgrader's Manage Assignments page edits the same "
                    "due date.")
    parser.add_argument("chapters", nargs="+", type=chapter_id, metavar="CHAPTER",
                        help="chapter id such as ch02_attention, or its prefix ch02")
    parser.add_argument("--at", metavar="WHEN",
                        help="the due date instead of now, ISO format (2026-12-01T18:00)")
    parser.add_argument("--late-policy", metavar="POLICY",
                        help="what work handed in after a learner's deadline loses: none (the "
                             "default: flagged only), zero, or P%%/hour or P%%/day of the "
                             "chapter's points per hour or day begun (e.g. 10%%/day)")
    parser.add_argument("--exchange", type=Path, metavar="DIR",
                        help="the class's exchange: update the learners' view now (the class "
                             "server's checking service also does within a minute)")
    add_course_options(parser)
    parser.set_defaults(handler=run)
