"""``python -m autograder``: the instructors' command line.

    python -m autograder release [CHAPTER ...] [--exchange DIR]  solutions/ -> notebooks/ (-> DIR)
    python -m autograder close CHAPTER ... [--at WHEN]        a class's chapter: answers revealed
    python -m autograder view --out DIR [--released CH ...]   the learners' view of the course
    python -m autograder collect SOURCE ... [--exchange DIR] folders, LMS zips, nbgrader exchange
    python -m autograder autograde CHAPTER|all [--jobs N | --scheduler ADDRESS] [--student ID]
    python -m autograder feedback CHAPTER|all [--student ID] [--exchange DIR]
    python -m autograder export [--output grades.csv]
    python -m autograder audit [CHAPTER|all] [--student ID]
    python -m autograder similarity CHAPTER|all [--threshold T]  copies of the course's code
    python -m autograder selfcheck NOTEBOOK ...               a learner's own notebook
    python -m autograder hub add|password|remove|list [NAME ...]  the class server's roster
    python -m autograder hub secret [--rotate]                   the class's grading secret

Every subcommand lives here: a function ``add_<name>(subparsers)`` adds its parser and sets
``handler`` to a function ``(args) -> int`` (the exit status); ``SUBCOMMANDS`` lists them. The
work itself is done by the modules of the pipeline and the learner tools. Slow
imports (nbgrader, the sandbox) happen inside the handlers.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from autograder.course import Course
from autograder.exercises.registry import CHAPTERS, all_exercises


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
        f"unknown chapter {text!r}; use one of {', '.join(CHAPTERS.values())} (or ch01..ch11)")


def _release(args: argparse.Namespace) -> int:
    # Imported here: nbgrader is slow to import and only this subcommand needs it.
    from autograder.pipeline.release import release
    from autograder.pipeline.view import view_folder

    course = Course.of(args.root, args.course_dir)
    try:
        chapters = release(args.chapters or None, exchange=args.exchange,
                           progress=lambda line: print(line, flush=True), **course.as_kwargs())
        if args.exchange is not None:
            print(f"released {', '.join(chapters)} to the exchange {args.exchange}; the "
                  f"learners' view of the course is in {view_folder(course)}")
    except (ValueError, RuntimeError) as exc:  # the documented failures of both steps
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
    parser.add_argument("--exchange", type=Path, metavar="DIR",
                        help="then release the chapters into this nbgrader exchange, where "
                             "learners fetch them (nbgrader release_assignment)")
    _add_course_options(parser)
    parser.set_defaults(handler=_release)


def _close(args: argparse.Namespace) -> int:
    from datetime import datetime

    from autograder.pipeline.view import close_chapter, refresh_view, view_folder

    course = Course.of(args.root, args.course_dir)
    try:
        at = datetime.fromisoformat(args.at).astimezone() if args.at else None
    except ValueError:
        print(f"close failed: --at {args.at!r} is not a date and time; write it as "
              "2026-12-01T18:00 (local time) or 2026-12-01T17:00+00:00", file=sys.stderr)
        return 2
    for chapter in args.chapters:
        when = close_chapter(course, chapter, at)
        print(f"{chapter}: due {when:%Y-%m-%d %H:%M} UTC; from then on its answers are part of "
              "the learners' view")
    if args.exchange is not None:
        refresh_view(course, args.exchange)
        print(f"the learners' view in {view_folder(course)} is up to date")
    return 0


def add_close(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "close", help="close chapters of a class: their answers become visible to learners",
        description="Set each chapter's due date in the gradebook to now (or --at). In a class, "
                    "a chapter's references (the answers of its exercises) join the learners' "
                    "view of the course once its due date has passed; until then learners "
                    "never see them. The Formgrader's Manage Assignments page edits the same "
                    "due date.")
    parser.add_argument("chapters", nargs="+", type=_chapter_id, metavar="CHAPTER",
                        help="chapter id such as ch02_attention, or its prefix ch02")
    parser.add_argument("--at", metavar="WHEN",
                        help="the due date instead of now, ISO format (2026-12-01T18:00)")
    parser.add_argument("--exchange", type=Path, metavar="DIR",
                        help="the class's exchange: update the learners' view now (the class "
                             "server's checking service also does within a minute)")
    _add_course_options(parser)
    parser.set_defaults(handler=_close)


def _view(args: argparse.Namespace) -> int:
    from autograder.pipeline.view import ChapterStates, chapter_states, plan_view, write_view

    course = Course.of(args.root, args.course_dir)
    states = chapter_states(course, args.exchange)
    released = set(args.released or states.released)
    closed = set(args.closed or ()) | states.closed
    view = plan_view(ChapterStates(frozenset(released | closed), frozenset(closed)), course.root)
    write_view(view, args.out)
    print(f"{args.out}: the learners' view for released {sorted(released) or 'none'}, closed "
          f"{sorted(closed) or 'none'}; answers left out: {', '.join(sorted(view.hidden)) or '-'}")
    return 0


def add_view(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "view", help="write the learners' view of the course (for a learners' image)",
        description="Write the course code a class's learners may see: what the released "
                    "chapters import, without the answers of chapters not yet closed, and "
                    "without checks (a class's checking service runs them). The class server "
                    "keeps one up to date by itself; this command is for a learners' image "
                    "(autograder/deploy/).")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR")
    parser.add_argument("--released", nargs="*", type=_chapter_id, metavar="CHAPTER",
                        help="chapters learners have (default: those in --exchange)")
    parser.add_argument("--closed", nargs="*", type=_chapter_id, metavar="CHAPTER",
                        help="chapters closed besides those whose due date has passed")
    parser.add_argument("--exchange", type=Path, metavar="DIR", help="the class's exchange")
    _add_course_options(parser)
    parser.set_defaults(handler=_view)


def _add_course_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", type=Path, default=None,
                        help="course root holding solutions/ and notebooks/ (default: this "
                             "repository)")
    parser.add_argument("--course-dir", type=Path, default=None,
                        help="nbgrader course folder: submitted/, autograded/, feedback/, "
                             "gradebook.db (default: <root>/autograder/course)")


def _course(args: argparse.Namespace) -> Course:
    """The course of ``--root`` and ``--course-dir``, with absolute paths."""
    return Course.of(args.root, args.course_dir).resolved()


def _chapters(args: argparse.Namespace, course: Course) -> list[str]:
    """The chapters named on the command line; ``all``: those with collected submissions."""
    from autograder.pipeline.release import chapters_in

    if args.chapter != "all":
        return [args.chapter]
    return [ch for ch in chapters_in(course.root) if course.students("submitted", ch)]


def _chapter_or_all(text: str) -> str:
    return text if text == "all" else _chapter_id(text)


def _collect(args: argparse.Namespace) -> int:
    from autograder.pipeline.collect import collect

    if not args.sources and args.exchange is None:
        print("collect: name at least one folder or zip, or --exchange DIR", file=sys.stderr)
        return 2
    try:
        report = collect(args.sources, exchange=args.exchange, chapters=args.chapter or None,
                         **_course(args).as_kwargs())
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
                    ".ipynb), LMS zips (<student>_<chapter>.ipynb) or the nbgrader exchange, "
                    "and list what was taken per learner and chapter. Originals are never "
                    "modified. Each file, link and zip member is judged on its own and ends "
                    "collected, REFUSED with the reason (links, special files, unsafe names, "
                    "files that are not chapter notebooks, unreadable, corrupt or oversized "
                    "members) or IGNORED with the reason (editor files, chapters not asked "
                    "for, older copies). Names are read in NFC and student ids case-folded; "
                    "of duplicate submissions the newest is kept and flagged.")
    parser.add_argument("sources", nargs="*", type=Path, metavar="SOURCE",
                        help="a folder of learner folders, or a zip file")
    parser.add_argument("--exchange", type=Path, metavar="DIR",
                        help="collect from this nbgrader exchange root (nbgrader's "
                             "Exchange.root): <DIR>/<course id>/inbound/")
    parser.add_argument("--chapter", action="append", type=_chapter_id,
                        help="only this chapter (repeatable; default: all)")
    _add_course_options(parser)
    parser.set_defaults(handler=_collect)


def _limits(args: argparse.Namespace):
    from autograder.sandbox.launcher import Limits

    return Limits(cell_timeout_s=args.cell_timeout, notebook_timeout_s=args.notebook_timeout,
                  learner_timeout_s=args.learner_timeout, memory_mb=args.memory_mb,
                  max_processes=args.max_processes, max_output_bytes=args.max_output_bytes,
                  disk_mb=args.disk_mb)


def _autograde(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from autograder.pipeline.grade import autograde
    from autograder.pipeline.gradebook import quiet_gradebook, read_scores
    from autograder.pipeline.report import summary_table
    from autograder.pipeline.secret import SecretError, require_grading_secret
    from autograder.sandbox.launcher import GraderFaultError, sandbox_report

    if workers_jobs(args) < 1:
        print(f"--jobs must be 1 or more, got {args.jobs}", file=sys.stderr)
        return 2
    try:
        print(require_grading_secret().notice())
    except SecretError as exc:
        print(f"autograde refused: {exc}", file=sys.stderr)
        return 1
    course = _course(args)
    chapters = _chapters(args, course)
    if not chapters:
        print(f"nothing to grade: no submissions in {course.step_folder('submitted')}; "
              "run `python -m autograder collect` first", file=sys.stderr)
        return 1
    limits = _limits(args)
    for line in sandbox_report(limits):
        print(line)
    try:
        with quiet_gradebook():
            rows = autograde(chapters, jobs=workers_jobs(args), scheduler=args.scheduler,
                             students=args.student, limits=limits,
                             progress=lambda n: tqdm(total=n, desc="grading", unit="learner"),
                             **course.as_kwargs())
    except (ConnectionError, ValueError, GraderFaultError) as exc:  # the grader cannot grade
        print(f"autograde failed: {exc}", file=sys.stderr)
        return 1
    print(summary_table(rows, read_scores(course.config())))
    for chapter in chapters:
        report = course.folder / "similarity" / f"{chapter}.html"
        if report.is_file():
            print(f"copy detection of {chapter}: {report}")
    return 0


def add_workers_options(parser: argparse.ArgumentParser, jobs: int) -> None:
    """``--jobs N`` (a local cluster) or ``--scheduler ADDRESS`` (an existing one)."""
    where = parser.add_mutually_exclusive_group()
    # No default on the option itself: argparse lets an option given with its default value
    # through a mutual exclusion. workers_jobs() fills it in.
    where.add_argument("--jobs", "-j", type=int,
                       help="worker processes on this machine, each grading one learner at a "
                            f"time (default: {jobs})")
    where.add_argument("--scheduler", metavar="ADDRESS",
                       help="grade on the workers of an existing Dask cluster instead, e.g. "
                            "tcp://10.0.0.5:8786 (start it with `dask scheduler` and `dask "
                            "worker ADDRESS --nthreads 1`)")
    parser.set_defaults(default_jobs=jobs)


def workers_jobs(args: argparse.Namespace) -> int:
    """``--jobs``, or the subcommand's default."""
    return args.default_jobs if args.jobs is None else args.jobs


def add_autograde(subparsers: argparse._SubParsersAction) -> None:
    from autograder.sandbox.launcher import Limits

    defaults = Limits()
    parser = subparsers.add_parser(
        "autograde", help="grade collected submissions in the sandbox",
        description="Restore test cells, run each submission in the sandbox, verify every "
                    "graded function outside the notebook, store scores in the gradebook and "
                    "flags with their reasons; print a summary table.")
    parser.add_argument("chapter", type=_chapter_or_all, metavar="CHAPTER|all")
    add_workers_options(parser, jobs=1)
    parser.add_argument("--student", action="append", help="only this learner (repeatable)")
    parser.add_argument("--cell-timeout", type=float, default=defaults.cell_timeout_s,
                        help="seconds per cell (default: %(default)s)")
    parser.add_argument("--notebook-timeout", type=float, default=defaults.notebook_timeout_s,
                        help="seconds per notebook (default: %(default)s)")
    parser.add_argument("--learner-timeout", type=float, default=defaults.learner_timeout_s,
                        help="seconds for all of one learner: the notebook and its "
                             "verification (default: %(default)s)")
    parser.add_argument("--memory-mb", type=int, default=defaults.memory_mb,
                        help="memory of one learner's processes together, in MiB "
                             "(default: %(default)s)")
    parser.add_argument("--disk-mb", type=int, default=defaults.disk_mb,
                        help="a learner's writable folder, in MiB (default: %(default)s)")
    parser.add_argument("--max-processes", type=int, default=defaults.max_processes,
                        help="processes a learner's code may run (default: %(default)s)")
    parser.add_argument("--max-output-bytes", type=int, default=defaults.max_output_bytes,
                        help="output kept per notebook (default: %(default)s)")
    _add_course_options(parser)
    parser.set_defaults(handler=_autograde)


def _feedback(args: argparse.Namespace) -> int:
    from autograder.pipeline.exchange import release_feedback
    from autograder.pipeline.feedback import generate_feedback

    course = _course(args)
    chapters = _chapters(args, course)
    report = generate_feedback(chapters, students=args.student, **course.as_kwargs())
    print(f"wrote {len(report.written)} feedback page(s) under "
          f"{course.step_folder('feedback')}")
    for student, chapter, reason in report.failed:
        print(f"FAILED {student}/{chapter}: {reason}", file=sys.stderr)
    if args.exchange is not None:
        try:
            released = release_feedback(chapters, args.exchange, students=args.student,
                                        **course.as_kwargs())
        except RuntimeError as exc:
            print(f"releasing the feedback failed: {exc}", file=sys.stderr)
            return 1
        print(f"released the feedback of {len(released)} submission(s) to the exchange "
              f"{args.exchange}")
    return 1 if report.failed else 0


def add_feedback(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "feedback", help="write HTML feedback for graded submissions",
        description="Render <course>/feedback/<student>/<chapter>/<chapter>.html with nbgrader "
                    "from the autograded notebooks (no hidden test code), sanitised: no "
                    "script, no event handler, nothing loaded from elsewhere. A learner whose "
                    "page fails is listed and flagged feedback_failed; the others get theirs "
                    "(exit status 1 when any failed).")
    parser.add_argument("chapter", type=_chapter_or_all, metavar="CHAPTER|all")
    parser.add_argument("--student", action="append", help="only this learner (repeatable)")
    parser.add_argument("--exchange", type=Path, metavar="DIR",
                        help="then release the pages into this nbgrader exchange, where each "
                             "learner fetches their own (submissions collected from it only)")
    _add_course_options(parser)
    parser.set_defaults(handler=_feedback)


def _export(args: argparse.Namespace) -> int:
    from autograder.pipeline.report import export_csv

    course = _course(args)
    if args.output == "-":
        sys.stdout.write(export_csv(**course.as_kwargs()))
        return 0
    output = Path(args.output) if args.output else course.grades_csv
    text = export_csv(output, **course.as_kwargs())
    print(f"wrote {text.count(chr(10)) - 1} row(s) to {output}")
    return 0


def add_export(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "export", help="write the grades CSV",
        description="One row per learner and chapter: student, chapter, score, max_score "
                    "(the whole chapter), auto_score, auto_max (autograded), manual_score, "
                    "manual_max, manual_pending (graded by hand; points not graded yet), "
                    "flags, reasons (long ones cut; the flag files keep the whole text).")
    parser.add_argument("--output", "-o", help="CSV path, or - for standard output "
                                               "(default: <course-dir>/grades.csv)")
    _add_course_options(parser)
    parser.set_defaults(handler=_export)


def _chapter_or_none(word: str) -> str | None:
    """The chapter id named by ``word`` (``ch02`` or ``ch02_attention``), ``"all"``, or None."""
    try:
        return _chapter_or_all(word)
    except argparse.ArgumentTypeError:
        return None


def _audit(args: argparse.Namespace) -> int:
    from autograder.course import CHAPTERS as CHAPTER_IDS
    from autograder.pipeline.audit import (
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
    course = _course(args)
    chapters = list(CHAPTER_IDS) if chapter in (None, "all") else [chapter]
    rows: list[tuple[str, str, Finding]] = []
    for word in words:
        path = Path(word)
        if not path.is_file():
            print(f"no notebook at {path}; pass .ipynb files", file=sys.stderr)
            return 2
        found_chapter = chapter_of(path) or (chapter if chapter != "all" else None)
        rows += [(args.student or "-", found_chapter or "-", f)
                 for f in audit_file(path, release=read_release(found_chapter, course))]
    if words:
        count = len(words)
    else:
        count = len(submitted_notebooks(course, chapters, args.student))
        rows = audit_submissions(course, chapters, args.student)
    if rows:
        print("\n".join(format_rows(rows)))
    print(f"{len(rows)} finding(s) in {count} notebook(s)")
    return 1 if rows else 0


def add_audit(subparsers: argparse._SubParsersAction) -> None:
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
    parser.add_argument("--root", type=Path, default=None,
                        help="course root holding notebooks/ (default: this repository)")
    parser.add_argument("--course-dir", type=Path, default=None,
                        help="the course folder holding submitted/ "
                             "(default: <root>/autograder/course)")
    parser.set_defaults(handler=_audit)


def _similarity(args: argparse.Namespace) -> int:
    from autograder.pipeline.similarity import check_chapter, flag_rows

    course = _course(args)
    chapters = _chapters(args, course)
    if not chapters:
        print("nothing to compare: no submissions collected", file=sys.stderr)
        return 1
    flagged = 0
    for chapter in chapters:
        try:
            check = check_chapter(chapter, threshold=args.threshold, **course.as_kwargs())
        except (FileNotFoundError, ValueError) as exc:
            print(f"similarity failed: {exc}", file=sys.stderr)
            return 2
        rows = flag_rows(check)
        flagged += len(rows)
        print("\n".join(rows) if rows else f"{chapter}: no cell flagged")
        print(f"{chapter}: {len(check.students)} learner(s) compared; report: {check.report}")
    return 1 if flagged else 0


def add_similarity(subparsers: argparse._SubParsersAction) -> None:
    """Add ``similarity CHAPTER|all [--threshold T] [--root DIR] [--course-dir DIR]``."""
    from autograder.pipeline.similarity import THRESHOLD

    parser = subparsers.add_parser(
        "similarity", help="flag answers copied from the course's code or from each other",
        description="Compare every graded solution cell of the chapter's autograded notebooks "
                    "with the course's own implementations (transformer_ref, the solution "
                    "notebooks, the tutorial-style code) and with the same cell of every other "
                    "learner, once names, comments, docstrings, layout and the order of "
                    "definitions are set aside (as written, beyond the course's answer, where "
                    "an exercise's text dictates the code). Flags copied_reference and "
                    "similar_submissions "
                    "for the instructor (never shown to learners, never changing a score), "
                    "writes <course-dir>/similarity/<chapter>.html and exits 1 when a cell is "
                    "flagged. autograde runs the same check after grading.")
    parser.add_argument("chapter", type=_chapter_or_all, metavar="CHAPTER|all")
    parser.add_argument("--threshold", type=float, default=THRESHOLD,
                        help="share of the other code found in an answer from which it is "
                             "flagged, in (0, 1] (default: %(default)s)")
    _add_course_options(parser)
    parser.set_defaults(handler=_similarity)


def _selfcheck(args: argparse.Namespace) -> int:
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


def add_selfcheck(subparsers: argparse._SubParsersAction) -> None:
    """Add ``selfcheck NOTEBOOK ...``: run notebooks and report each exercise."""
    from autograder.learner.selfcheck import CELL_TIMEOUT

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
    parser.set_defaults(handler=_selfcheck)


def _hub(args: argparse.Namespace) -> int:
    from autograder.hub.classroom import Classroom

    classroom = Classroom.from_env(args.state)
    if args.action == "secret":
        return _hub_secret(classroom, rotate=args.rotate)
    if args.action == "list":
        for role in ("instructor", "learner"):
            names = classroom.roster(role)
            print(f"{role}s ({len(names)}): {' '.join(names) or '-'}")
        return 0
    if not args.names:
        print(f"hub {args.action}: name at least one user", file=sys.stderr)
        return 2
    if args.action == "remove":
        removed = classroom.remove(args.names)
        print(f"took {len(removed)} name(s) off the roster of {classroom.state}: they can no "
              "longer log in. Their files and system accounts stay (userdel removes one).")
        return 0
    if args.action == "password":
        unknown = [name for name in args.names if classroom.role_of(name) is None]
        if unknown:
            print(f"hub password: not on the roster: {' '.join(unknown)}; add them with "
                  "`python -m autograder hub add NAME`", file=sys.stderr)
            return 1
        for name in args.names:
            print(f"{name}  {classroom.new_password(name)}")
        return 0
    role = "instructor" if args.instructor else "learner"
    try:
        classroom.add(args.names, role)
        for name in args.names:
            if role == "learner":
                classroom.ensure_account(name)
            if not classroom.has_password(name):
                print(f"{name}  {classroom.new_password(name)}")
    except (ValueError, PermissionError, RuntimeError) as exc:
        print(f"hub add failed: {exc}", file=sys.stderr)
        return 1
    print(f"{len(args.names)} {role}(s) on the roster of {classroom.state}; each new one's "
          "password is printed above (hand it to them). They log in at <hub address>/hub/login.")
    return 0


def _hub_secret(classroom, rotate: bool) -> int:
    from autograder.exercises.checking import SECRET_FILE_ENV

    try:
        path = classroom.ensure_secret(rotate=rotate)
    except PermissionError as exc:
        print(f"hub secret: {exc}", file=sys.stderr)
        return 1
    if rotate:
        print(f"wrote a new grading secret to {path}. Chapters graded from now on draw new "
              "hidden inputs (grade a chapter's whole class with one secret).")
    print(f"The class's grading secret is in {path} (root only). Instructors' servers on the "
          "hub use it; from a shell on this machine, grade with\n"
          f"  sudo {SECRET_FILE_ENV}={path} .venv/bin/python -m autograder autograde ...")
    return 0


def add_hub(subparsers: argparse._SubParsersAction) -> None:
    """Add ``hub add|password|remove|list|secret [NAME ...] [--instructor] [--rotate]``."""
    parser = subparsers.add_parser(
        "hub", help="the roster and grading secret of the class server (make hub)",
        description="add: put learners (or --instructor instructors) on the class server's "
                    "roster and print a password for each new one (learners also get their "
                    "system account and home folder; needs root). password: print a new "
                    "password. remove: take names off the roster (their files stay). list: "
                    "print the roster. secret: print where the class's grading secret is "
                    "(created if missing; --rotate writes a new one). The hub sees changes at "
                    "once.")
    parser.add_argument("action", choices=("add", "password", "remove", "list", "secret"))
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help="user names: lower-case letters, digits, '-' and '_'")
    parser.add_argument("--instructor", action="store_true",
                        help="add them as instructors (the hub's admins) instead of learners")
    parser.add_argument("--rotate", action="store_true",
                        help="secret: replace the grading secret with a new random one")
    parser.add_argument("--state", type=Path, default=None,
                        help="the class's state folder (default: $TRANSFORMER_HUB_STATE, else "
                             "build/hub)")
    parser.set_defaults(handler=_hub)


SUBCOMMANDS: tuple[Callable[[argparse._SubParsersAction], None], ...] = (
    add_exercises,
    add_release,
    add_close,
    add_view,
    add_collect,
    add_autograde,
    add_feedback,
    add_export,
    add_audit,
    add_similarity,
    add_selfcheck,
    add_hub,
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
