"""``python -m autograder demo``: a sample class released, graded and compared."""

from __future__ import annotations

import argparse
import sys

from autograder.cli.options import add_workers_options, jobs_of


def run(args: argparse.Namespace) -> int:
    # Loaded when this subcommand runs: each pays only for its own imports.
    from autograder.demo.demo import run_demo, table
    from autograder.grade.secret import SecretError, development_grading, require_grading_secret
    from autograder.sandbox.launcher import GraderFaultError

    if jobs_of(args) < 1:
        print(f"--jobs must be 1 or more, got {args.jobs}", file=sys.stderr)
        return 2
    try:
        with development_grading():  # as the demo grades its sample class
            print(require_grading_secret().notice())
    except SecretError as exc:  # a class's secret is set, and it is not one to grade with
        print(f"demo refused: {exc}", file=sys.stderr)
        return 1
    try:
        result = run_demo(args.out, jobs=jobs_of(args), scheduler=args.scheduler)
    except (ConnectionError, ValueError, GraderFaultError) as exc:  # the grader cannot grade
        print(f"demo failed: {exc}", file=sys.stderr)
        return 1
    print(table(result.rows))
    if args.out:
        print(f"course, feedback pages and grades.csv are in {result.course_dir}")
    if result.comparison.ok:
        print(f"all {len(result.rows)} submissions graded as expected: honest work keeps its "
              "marks, cheats score 0 on what they cheated or are flagged")
        return 0
    print("results that differ from the expectation:", file=sys.stderr)
    for problem in result.comparison.problems:
        print(f"  {problem}", file=sys.stderr)
    return 1


def add(subparsers: argparse._SubParsersAction) -> None:
    """Add ``demo [--jobs N | --scheduler ADDRESS] [--out DIR]``."""
    parser = subparsers.add_parser(
        "demo", help="grade a sample class end to end and print the grades",
        description="Release ch02 and ch05 in a course of its own, write a sample class "
                    "(honest, partial, buggy, untouched, cheating and broken submissions), "
                    "collect, autograde, write feedback and grades.csv, audit, and print each "
                    "learner's score and flags next to the expected score.")
    add_workers_options(parser, jobs=2)
    parser.add_argument("--out", help="keep the course here (default: a temporary folder); "
                                      "workers on other machines need it at the same path")
    parser.set_defaults(handler=run)
