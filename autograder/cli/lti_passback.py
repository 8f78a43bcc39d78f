"""``python -m autograder lti-passback``: a chapter's grades into the LMS (LTI 1.3 AGS)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder.cli.options import chapter_id


def run(args: argparse.Namespace) -> int:
    # Loaded when this subcommand runs: each pays only for its own imports.
    from autograder.grade.gradebook import read_scores
    from autograder.hub.classroom import Classroom
    from autograder.hub.lti import read_lti
    from autograder.hub.lti_grades import pass_back

    classroom = Classroom.from_env(args.state)
    try:
        settings = read_lti(classroom.state)
        if settings is None:
            print(f"lti-passback: the class in {classroom.state} does not log in from an LMS: "
                  "set it up with `python -m autograder hub lti`", file=sys.stderr)
            return 1
        scores = [s for s in read_scores(classroom.course) if s.chapter == args.chapter]
        lines = pass_back(classroom, settings, scores, lineitem=args.lineitem)
    except (ValueError, RuntimeError, PermissionError) as exc:
        print(f"lti-passback failed: {exc}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


def add(subparsers: argparse._SubParsersAction) -> None:
    """Add ``lti-passback CHAPTER [--lineitem URL] [--state DIR]``."""
    parser = subparsers.add_parser(
        "lti-passback", help="send a chapter's grades to the LMS (LTI 1.3 grade passback)",
        description="For a class that logs in from its LMS (hub lti): post each learner's "
                    "score of the chapter, as the gradebook holds it (the export's score and "
                    "max_score), to the chapter's column in the LMS's gradebook, through LTI "
                    "Assignment and Grade Services. The column is the line item whose resource "
                    "id is the chapter in the course's line items (made when missing), or the "
                    "one --lineitem names. Learners who never launched from the LMS are listed, "
                    "not sent. Needs root (the tool's key is in the hub's folder).")
    parser.add_argument("chapter", type=chapter_id, metavar="CHAPTER")
    parser.add_argument("--lineitem", metavar="URL", default=None,
                        help="the LMS's line item (gradebook column) to post to, from the LMS")
    parser.add_argument("--state", type=Path, default=None,
                        help="the class's state folder (default: $TRANSFORMER_HUB_STATE, else "
                             "build/hub)")
    parser.set_defaults(handler=run)
