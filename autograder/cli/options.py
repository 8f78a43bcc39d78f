"""What several subcommands share: their options, and the course and chapters they name."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from autograder.course import COURSE_DIR_ENV, COURSE_ROOT_ENV, ROOT, Course
from autograder.exercises.registry import CHAPTERS
from autograder.sandbox.launcher import Limits


def chapter_id(text: str) -> str:
    """Accept a chapter id (``ch02_attention``) or its prefix (``ch02``)."""
    if text in CHAPTERS:
        return CHAPTERS[text]
    if text in CHAPTERS.values():
        return text
    raise argparse.ArgumentTypeError(
        f"unknown chapter {text!r}; use one of {', '.join(CHAPTERS.values())} (or ch01..ch12)")


def add_course_options(parser: argparse.ArgumentParser) -> None:
    """``--root`` and ``--course-dir``; on the class server, a staff member's terminal has the
    class's (its environment names them)."""
    root, folder = os.environ.get(COURSE_ROOT_ENV), os.environ.get(COURSE_DIR_ENV)
    parser.add_argument("--root", type=Path, default=Path(root) if root else ROOT,
                        help=f"course root holding solutions/ and notebooks/ (default: "
                             f"${COURSE_ROOT_ENV} where set, as in a staff member's terminal "
                             "on the class server; else this repository)")
    parser.add_argument("--course-dir", type=Path, default=Path(folder) if folder else None,
                        help=f"nbgrader course folder: submitted/, autograded/, feedback/, "
                             f"gradebook.db (default: ${COURSE_DIR_ENV} where set; else "
                             "<root>/autograder/course)")


def course_of(args: argparse.Namespace) -> Course:
    """The course of ``--root`` and ``--course-dir``, with absolute paths."""
    return Course.of(args.root, args.course_dir).resolved()


def chapters_of(args: argparse.Namespace, course: Course) -> list[str]:
    """The chapters named on the command line; ``all``: those with collected submissions."""
    # Loaded when this subcommand runs: each pays only for its own imports.
    from autograder.steps.release import chapters_in

    if args.chapter != "all":
        return [args.chapter]
    return [ch for ch in chapters_in(course) if course.students("submitted", ch)]


def chapter_or_all(text: str) -> str:
    return text if text == "all" else chapter_id(text)


def limits_of(args: argparse.Namespace) -> Limits:
    """The sandbox's limits that the command line sets."""
    return Limits(cell_timeout_s=args.cell_timeout, notebook_timeout_s=args.notebook_timeout,
                  learner_timeout_s=args.learner_timeout, memory_mb=args.memory_mb,
                  max_processes=args.max_processes, max_output_bytes=args.max_output_bytes,
                  disk_mb=args.disk_mb)


def add_workers_options(parser: argparse.ArgumentParser, jobs: int) -> None:
    """``--jobs N`` (a local cluster) or ``--scheduler ADDRESS`` (an existing one)."""
    where = parser.add_mutually_exclusive_group()
    # No default on the option itself: argparse lets an option given with its default value
    # through a mutual exclusion. jobs_of() fills it in.
    where.add_argument("--jobs", "-j", type=int,
                       help="worker processes on this machine, each grading one learner at a "
                            f"time (default: {jobs})")
    where.add_argument("--scheduler", metavar="ADDRESS",
                       help="grade on the workers of an existing Dask cluster instead, e.g. "
                            "tcp://10.0.0.5:8786 (start it with `dask scheduler` and `dask "
                            "worker ADDRESS --nthreads 1`)")
    parser.set_defaults(default_jobs=jobs)


def jobs_of(args: argparse.Namespace) -> int:
    """``--jobs``, or the subcommand's default."""
    return args.default_jobs if args.jobs is None else args.jobs
