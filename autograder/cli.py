"""``python -m autograder``: the instructors' command line.

    python -m autograder release [CHAPTER ...]              solutions/ -> notebooks/
    python -m autograder collect SOURCE ... [--exchange DIR] folders, LMS zips, nbgrader exchange
    python -m autograder autograde CHAPTER|all [--jobs N] [--student ID]
    python -m autograder feedback CHAPTER|all [--student ID]
    python -m autograder export [--output grades.csv]
    python -m autograder audit [CHAPTER|all] [--student ID]

Each subcommand is a function ``add_<name>(subparsers)`` that adds its parser and sets
``handler`` to a function ``(args) -> int`` (the exit status); ``SUBCOMMANDS`` lists them.
Slow imports (nbgrader, the sandbox) happen inside the handlers.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from autograder.audit import add_subcommand as add_audit
from autograder.demo import add_subcommand as add_demo
from autograder.registry import CHAPTERS, all_exercises
from autograder.selfcheck import add_subcommand as add_selfcheck


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


def _add_course_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", type=Path, default=None,
                        help="course root holding solutions/ and notebooks/ (default: this "
                             "repository)")
    parser.add_argument("--course-dir", type=Path, default=None,
                        help="nbgrader course folder: submitted/, autograded/, feedback/, "
                             "gradebook.db (default: <root>/autograder/course)")


def _course(args: argparse.Namespace) -> dict[str, Path]:
    from autograder.course import ROOT

    root = (args.root or ROOT).resolve()
    course_dir = args.course_dir or root / "autograder" / "course"
    return {"root": root, "course_dir": course_dir.resolve()}


def _chapters(args: argparse.Namespace, course: dict[str, Path]) -> list[str]:
    """The chapters named on the command line; ``all``: those with collected submissions."""
    from autograder.course import chapters_in

    if args.chapter != "all":
        return [args.chapter]
    submitted = course["course_dir"] / "submitted"
    return [ch for ch in chapters_in(course["root"]) if any(submitted.glob(f"*/{ch}"))]


def _chapter_or_all(text: str) -> str:
    return text if text == "all" else _chapter_id(text)


def _collect(args: argparse.Namespace) -> int:
    from autograder.collect import collect

    if not args.sources and args.exchange is None:
        print("collect: name at least one folder or zip, or --exchange DIR", file=sys.stderr)
        return 2
    try:
        report = collect(args.sources, exchange=args.exchange, chapters=args.chapter or None,
                         **_course(args))
    except (FileNotFoundError, RuntimeError) as exc:
        print(f"collect failed: {exc}", file=sys.stderr)
        return 1
    for line in report.lines():
        print(line)
    return 0


def add_collect(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "collect", help="copy learner submissions into the course",
        description="Copy submissions into <course>/submitted/<student>/<chapter>/ from folders "
                    "(<dir>/<student>/<chapter>/<chapter>.ipynb or <dir>/<student>/<chapter>"
                    ".ipynb), LMS zips (<student>_<chapter>.ipynb) or the nbgrader exchange. "
                    "Originals are never modified; unsafe names are refused; of duplicate "
                    "submissions the newest is kept and flagged.")
    parser.add_argument("sources", nargs="*", type=Path, metavar="SOURCE",
                        help="a folder of learner folders, or a zip file")
    parser.add_argument("--exchange", type=Path, metavar="DIR",
                        help="collect from this nbgrader exchange root (nbgrader collect)")
    parser.add_argument("--chapter", action="append", type=_chapter_id,
                        help="only this chapter (repeatable; default: all)")
    _add_course_options(parser)
    parser.set_defaults(handler=_collect)


def _limits(args: argparse.Namespace):
    from autograder.sandbox import Limits

    return Limits(cell_timeout_s=args.cell_timeout, notebook_timeout_s=args.notebook_timeout,
                  memory_mb=args.memory_mb, max_processes=args.max_processes,
                  max_output_bytes=args.max_output_bytes)


def _autograde(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from autograder.grading import autograde
    from autograder.report import summary_table
    from autograder.sandbox import sandbox_report

    if args.jobs < 1:
        print(f"--jobs must be 1 or more, got {args.jobs}", file=sys.stderr)
        return 2
    course = _course(args)
    chapters = _chapters(args, course)
    if not chapters:
        print(f"nothing to grade: no submissions in {course['course_dir'] / 'submitted'}; "
              "run `python -m autograder collect` first", file=sys.stderr)
        return 1
    limits = _limits(args)
    for line in sandbox_report(limits):
        print(line)
    rows = autograde(chapters, jobs=args.jobs, students=args.student, limits=limits,
                     progress=lambda n: tqdm(total=n, desc="grading", unit="learner"),
                     **course)
    print(summary_table(rows))
    return 0


def add_autograde(subparsers: argparse._SubParsersAction) -> None:
    from autograder.sandbox import Limits

    defaults = Limits()
    parser = subparsers.add_parser(
        "autograde", help="grade collected submissions in the sandbox",
        description="Restore test cells, run each submission in the sandbox, verify every "
                    "graded function outside the notebook, store scores in the gradebook and "
                    "flags with their reasons; print a summary table.")
    parser.add_argument("chapter", type=_chapter_or_all, metavar="CHAPTER|all")
    parser.add_argument("--jobs", "-j", type=int, default=1, help="learners graded at once")
    parser.add_argument("--student", action="append", help="only this learner (repeatable)")
    parser.add_argument("--cell-timeout", type=float, default=defaults.cell_timeout_s,
                        help="seconds per cell (default: %(default)s)")
    parser.add_argument("--notebook-timeout", type=float, default=defaults.notebook_timeout_s,
                        help="seconds per notebook (default: %(default)s)")
    parser.add_argument("--memory-mb", type=int, default=defaults.memory_mb,
                        help="memory of a learner's process in MiB (default: %(default)s)")
    parser.add_argument("--max-processes", type=int, default=defaults.max_processes,
                        help="processes a learner's code may run (default: %(default)s)")
    parser.add_argument("--max-output-bytes", type=int, default=defaults.max_output_bytes,
                        help="output kept per notebook (default: %(default)s)")
    _add_course_options(parser)
    parser.set_defaults(handler=_autograde)


def _feedback(args: argparse.Namespace) -> int:
    from autograder.feedback import generate_feedback

    course = _course(args)
    try:
        written = generate_feedback(_chapters(args, course), students=args.student, **course)
    except RuntimeError as exc:
        print(f"feedback failed: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {len(written)} feedback page(s) under {course['course_dir'] / 'feedback'}")
    return 0


def add_feedback(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "feedback", help="write HTML feedback for graded submissions",
        description="Render <course>/feedback/<student>/<chapter>/<chapter>.html with nbgrader "
                    "from the autograded notebooks (no hidden test code).")
    parser.add_argument("chapter", type=_chapter_or_all, metavar="CHAPTER|all")
    parser.add_argument("--student", action="append", help="only this learner (repeatable)")
    _add_course_options(parser)
    parser.set_defaults(handler=_feedback)


def _export(args: argparse.Namespace) -> int:
    from autograder.report import export_csv

    course = _course(args)
    if args.output == "-":
        sys.stdout.write(export_csv(**course))
        return 0
    output = Path(args.output) if args.output else course["course_dir"] / "grades.csv"
    text = export_csv(output, **course)
    print(f"wrote {text.count(chr(10)) - 1} row(s) to {output}")
    return 0


def add_export(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "export", help="write the grades CSV",
        description="One row per learner and chapter: student, chapter, score, max_score, "
                    "flags, reasons.")
    parser.add_argument("--output", "-o", help="CSV path, or - for standard output "
                                               "(default: <course-dir>/grades.csv)")
    _add_course_options(parser)
    parser.set_defaults(handler=_export)


SUBCOMMANDS: tuple[Callable[[argparse._SubParsersAction], None], ...] = (
    add_exercises,
    add_release,
    add_collect,
    add_autograde,
    add_feedback,
    add_export,
    add_audit,
    add_selfcheck,
    add_demo,
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
