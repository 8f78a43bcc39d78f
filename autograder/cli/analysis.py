"""``python -m autograder analysis``: the item analysis of a chapter's class."""

from __future__ import annotations

import argparse
import sys

from autograder.cli.options import add_course_options, chapter_or_all, chapters_of, course_of


def run(args: argparse.Namespace) -> int:
    # Loaded when this subcommand runs: each pays only for its own imports.
    from autograder.steps.analysis import analyse
    from autograder.steps.analysis_page import write_analysis

    course = course_of(args)
    status = 0
    for chapter in chapters_of(args, course):
        try:
            analysis = analyse(course, chapter)
        except (ValueError, FileNotFoundError) as exc:
            print(f"analysis of {chapter} failed: {exc}", file=sys.stderr)
            status = 1
            continue
        page, sheet = write_analysis(course, analysis, names=args.names)
        hints = sum(len(who) for item in analysis.exercises for who in item.hints.values())
        print(f"{chapter}: {len(analysis.totals)} learner(s), {len(analysis.exercises)} "
              f"exercise(s), {hints} recognised mistake(s); wrote {page} and {sheet}")
    return status


def add(subparsers: argparse._SubParsersAction) -> None:
    """Add ``analysis CHAPTER|all [--names] [--root DIR] [--course-dir DIR]``."""
    parser = subparsers.add_parser(
        "analysis", help="item analysis of a graded chapter: what the class got wrong",
        description="For each exercise of a graded chapter: the shares of learners with "
                    "full, partial and no points, the mean and spread, the hints the checks "
                    "gave (each typical mistake, counted), hidden-only failures (visible "
                    "checks passed, hidden failed) and the minutes spent where notebooks "
                    "record when cells ran; for the chapter, a histogram of the scores and "
                    "the exercises ranked by the points the class lost, beside the declared "
                    "difficulty. Writes <course-dir>/analysis/<chapter>.html and .csv. No "
                    "learner is named unless --names.")
    parser.add_argument("chapter", type=chapter_or_all,
                        help="chapter id (ch02_attention or ch02), or all: every chapter with "
                             "collected submissions")
    parser.add_argument("--names", action="store_true",
                        help="name the learners behind each mistake and hidden-only failure")
    add_course_options(parser)
    parser.set_defaults(handler=run)
