"""``python -m autograder``: the instructors' command line.

Each subcommand is a function ``add_<name>(subparsers)`` that adds its parser and sets
``handler`` to a function ``(args) -> int`` (the exit status). New subcommands (collect,
autograde, feedback, export, audit) add one such function and list it in ``SUBCOMMANDS``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from autograder.registry import CHAPTERS, all_exercises


def _exercises(args: argparse.Namespace) -> int:
    rows = [(e.id, e.chapter, str(e.points), e.difficulty, str(e.minutes))
            for e in all_exercises()]
    header = ("id", "chapter", "points", "difficulty", "minutes")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        print("  ".join(cells).rstrip())
    total = sum(e.points for e in all_exercises())
    print(f"{len(rows)} exercises, {total} points")
    return 0


def add_exercises(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "exercises", help="list the graded exercises",
        description="Print every graded exercise: id, chapter, points, difficulty and minutes.")
    parser.set_defaults(handler=_exercises)


def _chapter_id(text: str) -> str:
    """Accept a chapter id (``ch02_attention``) or its prefix (``ch02``)."""
    if text in CHAPTERS:
        return CHAPTERS[text]
    if text in CHAPTERS.values():
        return text
    raise argparse.ArgumentTypeError(
        f"unknown chapter {text!r}; use one of {', '.join(CHAPTERS.values())} (or ch01..ch10)")


def _release(args: argparse.Namespace) -> int:
    # Imported here: nbgrader is slow to import and only this subcommand needs it.
    from autograder.course import release

    try:
        release(args.chapters or None)
    except (ValueError, RuntimeError) as exc:  # the documented failures of release()
        print(f"release failed: {exc}", file=sys.stderr)
        return 1
    return 0


def add_release(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "release", help="generate the learner notebooks from the solutions",
        description="Generate notebooks/<chapter>/ from solutions/<chapter>/ with nbgrader "
                    "(all chapters when none is named).")
    parser.add_argument("chapters", nargs="*", type=_chapter_id, metavar="CHAPTER",
                        help="chapter id such as ch02_attention, or its prefix ch02")
    parser.set_defaults(handler=_release)


SUBCOMMANDS: tuple[Callable[[argparse._SubParsersAction], None], ...] = (
    add_exercises,
    add_release,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m autograder",
        description="Grading tools for the Build the Transformer course.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    args = build_parser().parse_args(argv)
    return args.handler(args)
