"""``python -m autograder audit``: the static audit of collected submissions."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from autograder.cli.options import chapter_or_all, course_of
from autograder.course import ROOT


def run(args: argparse.Namespace) -> int:
    # Loaded when this subcommand runs: each pays only for its own imports.
    from autograder.course import CHAPTERS as CHAPTER_IDS
    from autograder.grade.audit import (
        Finding,
        audit_file,
        audit_submissions,
        chapter_of,
        format_rows,
        read_release,
        submitted_notebooks,
    )

    words = list(args.targets)
    chapter = _chapter_or_none(words[0]) if words else None
    if chapter is not None:
        words.pop(0)
    elif words and re.fullmatch(r"ch\d\d\w*", words[0]) and not Path(words[0]).exists():
        print(f"unknown chapter {words[0]!r}; use one of {', '.join(CHAPTER_IDS)} or 'all'",
              file=sys.stderr)
        return 2
    course = course_of(args)
    chapters = list(CHAPTER_IDS) if chapter in (None, "all") else [chapter]
    rows: list[tuple[str, str, Finding]] = []
    for word in words:
        path = Path(word)
        if not path.is_file():
            print(f"no notebook at {path}; pass .ipynb files", file=sys.stderr)
            return 2
        found_chapter = chapter_of(path) or (chapter if chapter != "all" else None)
        rows += [(args.student or "-", found_chapter or "-", f)
                 for f in audit_file(path, release=read_release(course, found_chapter))]
    if words:
        count = len(words)
    else:
        count = len(submitted_notebooks(course, chapters, args.student))
        rows = audit_submissions(course, chapters, args.student)
    if rows:
        print("\n".join(format_rows(rows)))
    print(f"{len(rows)} finding(s) in {count} notebook(s)")
    return 1 if rows else 0


def add(subparsers: argparse._SubParsersAction) -> None:
    """Add ``audit [CHAPTER|all] [--student ID] [--root DIR] [--course-dir DIR] [PATH ...]``."""
    parser = subparsers.add_parser(
        "audit", help="flag suspicious code in submissions for a human to review",
        description="Statically check collected submissions (or the given notebook files) for "
                    "monkeypatching, file, process and network access, reference imports and "
                    "reads of the solutions. Prints student, chapter, cell, line, code and "
                    "reason per finding; exits 1 when something was found.")
    parser.add_argument("targets", nargs="*", metavar="CHAPTER|all|PATH",
                        help="a chapter id (ch02_attention or ch02) or 'all' (the default), "
                             "then optional notebook files to audit instead of the submissions")
    parser.add_argument("--student", help="only this learner (or the name to print for PATHs)")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="course root holding notebooks/ (default: this repository)")
    parser.add_argument("--course-dir", type=Path, default=None,
                        help="the course folder holding submitted/ "
                             "(default: <root>/autograder/course)")
    parser.set_defaults(handler=run)


def _chapter_or_none(word: str) -> str | None:
    """The chapter id named by ``word`` (``ch02`` or ``ch02_attention``), ``"all"``, or None."""
    try:
        return chapter_or_all(word)
    except argparse.ArgumentTypeError:
        return None
