"""``python -m autograder selfcheck``: a learner's own notebook checked."""

from __future__ import annotations

import argparse
import sys

from autograder.learner.selfcheck import CELL_TIMEOUT


def run(args: argparse.Namespace) -> int:
    # Loaded when this subcommand runs: each pays only for its own imports.
    from autograder.learner.selfcheck import run_selfcheck

    status = 0
    for path in args.notebooks:
        try:
            report = run_selfcheck(path, timeout=args.timeout)
        except (FileNotFoundError, ValueError) as exc:
            print(exc, file=sys.stderr)
            status = 2
            continue
        print("\n".join(report.lines()))
        if not report.outcomes:
            print("  (no graded test cells found: is this a chapter notebook?)")
        status = max(status, 0 if report.passed else 1)
    return status


def add(subparsers: argparse._SubParsersAction) -> None:
    """Add ``selfcheck NOTEBOOK ...``: run notebooks and report each exercise."""
    parser = subparsers.add_parser(
        "selfcheck", help="run your notebook and report each exercise (visible checks only)",
        description="Execute each notebook top to bottom in a fresh kernel, in its own folder, "
                    "and print PASS or FAIL per exercise with the message of its visible "
                    "checks. Hidden checks never run; the file is not changed. Exits 1 when an "
                    "exercise fails.")
    parser.add_argument("notebooks", nargs="+", metavar="NOTEBOOK",
                        help="a chapter notebook, for example "
                             "notebooks/ch02_attention/ch02_attention.ipynb")
    parser.add_argument("--timeout", type=int, default=CELL_TIMEOUT,
                        help=f"seconds one cell may run (default {CELL_TIMEOUT})")
    parser.set_defaults(handler=run)
