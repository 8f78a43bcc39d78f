"""``python -m autograder similarity``: copy detection of a chapter's class."""

from __future__ import annotations

import argparse
import sys

from autograder.cli.options import add_course_options, chapter_or_all, chapters_of, course_of
from autograder.copies.pairs import THRESHOLD
from autograder.copies.policy import POLICIES


def run(args: argparse.Namespace) -> int:
    # Loaded when this subcommand runs: each pays only for its own imports.
    from autograder.copies.detect import check_chapter, flag_rows
    from autograder.copies.policy import set_copy_policy

    course = course_of(args)
    if args.policy is not None:
        set_copy_policy(course, args.policy)
        print(f"policy for copies, every chapter from now on: {args.policy}")
    chapters = chapters_of(args, course)
    if not chapters:
        print("nothing to compare: no submissions collected", file=sys.stderr)
        return 1
    flagged = 0
    for chapter in chapters:
        try:
            check = check_chapter(course, chapter, threshold=args.threshold)
        except (FileNotFoundError, ValueError) as exc:
            print(f"similarity failed: {exc}", file=sys.stderr)
            return 2
        rows = flag_rows(check)
        flagged += len(rows)
        print("\n".join(rows) if rows else f"{chapter}: no cell flagged")
        print(f"{chapter}: {len(check.students)} learner(s) compared; report: {check.report}")
    return 1 if flagged else 0


def add(subparsers: argparse._SubParsersAction) -> None:
    """Add ``similarity CHAPTER|all [--threshold T] [--policy P] [--root DIR]
    [--course-dir DIR]``."""
    parser = subparsers.add_parser(
        "similarity", help="flag answers copied from the course's code or from each other",
        description="Compare every graded solution cell of the chapter's autograded notebooks "
                    "with the course's own implementations (transformer_ref, the solution "
                    "notebooks, the tutorial-style code) and with the same cell of every other "
                    "learner, once names, comments, docstrings, layout and the order of "
                    "definitions are set aside (beyond the course's answer, where an "
                    "exercise's text dictates the code). Flags copied_reference and "
                    "similar_submissions "
                    "for the instructor (never shown to learners; by default never changing a "
                    "score, see --policy), "
                    "writes <course-dir>/similarity/<chapter>.html and exits 1 when a cell is "
                    "flagged. autograde runs the same check after grading.")
    parser.add_argument("chapter", type=chapter_or_all, metavar="CHAPTER|all")
    parser.add_argument("--threshold", type=float, default=THRESHOLD,
                        help="share of shared code (of the other code found in an answer, "
                             "or of the answer found in the other code) from which it is "
                             "flagged, in (0, 1] (default: %(default)s)")
    parser.add_argument("--policy", choices=POLICIES,
                        help="what a copied_reference flag does to a score, in every chapter "
                             "of the course from now on (kept in <course-dir>/copies.json): "
                             "flag (the default: nothing), zero-verbatim (0 for the course's "
                             "code handed in whole), zero-copied (0 for every flagged cell)")
    add_course_options(parser)
    parser.set_defaults(handler=run)
