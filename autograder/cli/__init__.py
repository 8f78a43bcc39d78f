"""``python -m autograder``: the instructors' command line.

    python -m autograder release [CHAPTER ...] [--exchange DIR]  solutions/ -> notebooks/ (-> DIR)
    python -m autograder close CHAPTER ... [--at WHEN] [--late-policy P]  a class's chapter due
    python -m autograder extend CHAPTER LEARNER --until WHEN   one learner's extension
    python -m autograder view --out DIR [--released CH ...]   the learners' view of the course
    python -m autograder collect SOURCE ... [--exchange DIR] folders, LMS zips, nbgrader exchange
    python -m autograder autograde CHAPTER|all [--jobs N | --scheduler ADDRESS] [--student ID]
    python -m autograder feedback CHAPTER|all [--student ID] [--exchange DIR]
    python -m autograder export [--format csv|canvas|moodle] [--output FILE]
    python -m autograder lti-passback CHAPTER [--lineitem URL]  grades into the LMS (LTI 1.3)
    python -m autograder audit [CHAPTER|all] [--student ID]
<<<<<<< HEAD
    python -m autograder similarity CHAPTER|all [--threshold T]  copies of the course's code
    python -m autograder analysis CHAPTER|all [--names]        what the class got wrong
=======
    python -m autograder similarity CHAPTER|all [--threshold T] [--policy P]  copies
>>>>>>> copies
    python -m autograder selfcheck NOTEBOOK ...               a learner's own notebook
    python -m autograder hub add|password|remove|list [NAME ...]  the class server's roster
    python -m autograder hub secret [--rotate]                   the class's grading secret
    python -m autograder hub lti [--issuer URL --client-id ID ...]  login from the LMS (LTI 1.3)

Each subcommand is a module of this package: its ``add(subparsers)`` adds its parser and sets
``handler`` to its ``run(args) -> int`` (the exit status); :data:`SUBCOMMANDS` lists them, and
:mod:`autograder.cli.options` holds what several share. The work itself is done by the course's
steps and the learner tools. Slow imports (nbgrader, Dask, the sandbox) happen inside
``run``, so that each subcommand pays only for its own.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from autograder.cli import (
    analysis,
    audit,
    autograde,
    close,
    collect,
    exercises,
    export,
    extend,
    feedback,
    hub,
    lti_passback,
    release,
    selfcheck,
    similarity,
    view,
)

# In the order of the help text.
SUBCOMMANDS = (
    exercises,
    release,
    close,
    extend,
    view,
    collect,
    autograde,
    feedback,
    export,
    lti_passback,
    audit,
    similarity,
    analysis,
    selfcheck,
    hub,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m autograder",
        description="Grading tools for the Build the Transformer course.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for subcommand in SUBCOMMANDS:
        subcommand.add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    args = build_parser().parse_args(argv)
    return args.handler(args)
