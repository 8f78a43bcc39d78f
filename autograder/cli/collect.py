"""``python -m autograder collect``: folders, LMS zips and the nbgrader exchange collected."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder.cli.options import add_course_options, chapter_id, course_of


def run(args: argparse.Namespace) -> int:
    # Loaded when this subcommand runs: each pays only for its own imports.
    from autograder.collect.sources import collect

    if not args.sources and args.exchange is None:
        print("collect: name at least one folder or zip, or --exchange DIR", file=sys.stderr)
        return 2
    try:
        report = collect(course_of(args), args.sources, exchange=args.exchange,
                         chapters=args.chapter or None)
    except (FileNotFoundError, RuntimeError) as exc:
        print(f"collect failed: {exc}", file=sys.stderr)
        return 1
    for line in report.lines():
        print(line)
    return 0


def add(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "collect", help="copy learner submissions into the course",
        description="Copy submissions into <course>/submitted/<student>/<chapter>/ from folders "
                    "(<dir>/<student>/<chapter>/<chapter>.ipynb or <dir>/<student>/<chapter>"
                    ".ipynb), LMS zips (<student>_<chapter>.ipynb) or the nbgrader exchange, "
                    "and list what was taken per learner and chapter. Originals are never "
                    "modified. Each file, link and zip member is judged on its own and ends "
                    "collected, REFUSED with the reason (links, special files, unsafe names, "
                    "files that are not chapter notebooks, unreadable, corrupt or oversized "
                    "members) or IGNORED with the reason (editor files, chapters not asked "
                    "for, older copies). Names are read in NFC and student ids case-folded; "
                    "of duplicate submissions the newest is kept and flagged.")
    parser.add_argument("sources", nargs="*", type=Path, metavar="SOURCE",
                        help="a folder of learner folders, or a zip file")
    parser.add_argument("--exchange", type=Path, metavar="DIR",
                        help="collect from this nbgrader exchange root (nbgrader's "
                             "Exchange.root): <DIR>/<course id>/inbound/")
    parser.add_argument("--chapter", action="append", type=chapter_id,
                        help="only this chapter (repeatable; default: all)")
    add_course_options(parser)
    parser.set_defaults(handler=run)
