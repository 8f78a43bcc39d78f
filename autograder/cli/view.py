"""``python -m autograder view``: the learners' view of the course, written to a folder."""

from __future__ import annotations

import argparse
from pathlib import Path

from autograder.cli.options import add_course_options, chapter_id, course_of


def run(args: argparse.Namespace) -> int:
    # Loaded when this subcommand runs: each pays only for its own imports.
    from autograder.steps.view import ChapterStates, chapter_states, plan_view, write_view

    course = course_of(args)
    states = chapter_states(course, args.exchange)
    released = set(args.released or states.released)
    closed = set(args.closed or ()) | states.closed
    view = plan_view(course, ChapterStates(frozenset(released | closed), frozenset(closed)))
    write_view(view, args.out)
    print(f"{args.out}: the learners' view for released {sorted(released) or 'none'}, closed "
          f"{sorted(closed) or 'none'}; answers left out: {', '.join(sorted(view.hidden)) or '-'}")
    return 0


def add(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "view", help="write the learners' view of the course (for a learners' image)",
        description="Write the course code a class's learners may see: what the released "
                    "chapters import, without the answers of chapters not yet closed, and "
                    "without checks (a class's checking service runs them). The class server "
                    "keeps one up to date by itself; this command is for a learners' image "
                    "(autograder/deploy/).")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR")
    parser.add_argument("--released", nargs="*", type=chapter_id, metavar="CHAPTER",
                        help="chapters learners have (default: those in --exchange)")
    parser.add_argument("--closed", nargs="*", type=chapter_id, metavar="CHAPTER",
                        help="chapters closed besides those whose due date has passed")
    parser.add_argument("--exchange", type=Path, metavar="DIR", help="the class's exchange")
    add_course_options(parser)
    parser.set_defaults(handler=run)
