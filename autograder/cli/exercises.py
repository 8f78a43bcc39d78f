"""``python -m autograder exercises``: the graded exercises, their chapters and points."""

from __future__ import annotations

import argparse

from autograder.exercises.registry import all_exercises


def run(args: argparse.Namespace) -> int:
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


def add(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "exercises", help="list the graded exercises",
        description="Print every graded exercise: id, chapter, points, difficulty and minutes.")
    parser.set_defaults(handler=run)
