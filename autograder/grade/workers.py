"""What grading needs of every worker: one thread, the grader's course, a sandbox that starts.

On a cluster of one's own, :func:`connect` waits for a worker and refuses workers of several
threads.

A worker grades with its own checkout of the course, perhaps on another machine, so before
anyone is graded the grader compares :func:`versions` (digests of what grading a chapter
depends on) with each worker's (:func:`check_workers`) and starts a sandbox on each
(:func:`check_sandboxes`); a worker checks again, per learner, that it runs one thread and that
its course is the one the learner's submission was packed for (``grade_safely``).
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import hashlib
import os
import sys
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from autograder.course import COURSE_FOLDER, IGNORED_FILES, ROOT, Course
from autograder.exercises.checking import DEVELOPMENT_SECRET, grading_secret
from autograder.sandbox.launcher import GraderFaultError, Limits, grader_fault, sandbox_problem

if TYPE_CHECKING:
    from distributed import Client

    from autograder.sandbox.launcher import Limits

PACKAGES = ("autograder", "transformer_ref")
# Seconds to reach a scheduler, and to wait for its first worker.
CONNECT_TIMEOUT_S = 30
WORKERS_TIMEOUT_S = 120


def connect(scheduler: str) -> Client:
    """A client of the cluster whose scheduler is at ``scheduler``, once at least one worker
    joined it and if each of its workers runs one thread.

    Raises:
        ConnectionError: the scheduler cannot be reached, or no worker joins it in time.
        ValueError: a worker runs more than one thread.
    """
    # Dask is heavy: loaded when a cluster is used, not with the module.
    from distributed import Client

    try:
        client = Client(scheduler, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise ConnectionError(
            f"cannot reach the Dask scheduler at {scheduler} ({exc}). Start one with "
            f"`dask scheduler` and workers with `dask worker {scheduler} --nthreads 1`, or "
            "grade on this machine with --jobs N") from exc
    with contextlib.ExitStack() as on_error:
        on_error.callback(client.close)
        try:
            client.wait_for_workers(1, timeout=WORKERS_TIMEOUT_S)
        except TimeoutError as exc:
            raise ConnectionError(
                f"no worker joined the Dask scheduler at {scheduler} within "
                f"{WORKERS_TIMEOUT_S} s; start workers with `dask worker {scheduler} "
                "--nthreads 1`") from exc
        threaded = {address: n for address, n in client.nthreads().items() if n != 1}
        if threaded:
            listed = ", ".join(f"{address} ({n} threads)" for address, n in threaded.items())
            raise ValueError(f"grading needs workers with one thread each, but {listed}; "
                             f"restart them with `dask worker {scheduler} --nthreads 1`")
        on_error.pop_all()
    return client


def on_one_thread() -> None:
    """Raise unless this code runs in a Dask worker of one thread (or outside Dask).

    Raises:
        RuntimeError: the worker runs several threads, so two learners could be graded at once
            in one interpreter.
    """
    # Dask is heavy: loaded when a cluster is used, not with the module.
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:  # not in a worker: called directly, one learner at a time
        return
    if worker.state.nthreads != 1:
        raise RuntimeError(f"the Dask worker {worker.address} runs {worker.state.nthreads} "
                           "threads; grading needs one thread per worker: restart it with "
                           "`dask worker SCHEDULER --nthreads 1`")


def versions(root: str | os.PathLike, chapter: str) -> dict[str, str]:
    """Digests of what grading ``chapter`` depends on, on this machine.

    A worker grades with its own checkout, so the grader compares these with its own: the
    course's code (``autograder`` and ``transformer_ref``), Python and the installed packages
    the course pins, the chapter's source notebook and release folder under ``root``, and the
    grading secret (``AUTOGRADER_SECRET``, which sets the hidden tests' inputs; only a one-way
    digest of it is shown).
    """
    course = Course.of(root)
    secret = grading_secret() or DEVELOPMENT_SECRET
    return {
        "course code": _code_digest(),
        "Python and packages": _digest([_packages().encode()]),
        f"{chapter} notebooks": _digest(
            [p.relative_to(course.root).as_posix().encode() + b"\0" + p.read_bytes()
             for p in _chapter_files(course, chapter)]),
        "grading secret": _digest([f"{secret}\0worker check".encode()]),
    }


def differences(expected: dict[str, str], root: str | os.PathLike, chapter: str) -> list[str]:
    """The names of :func:`versions` entries in which this machine differs from ``expected``."""
    if not Path(root).is_dir():
        return [f"the course root {root} (not on this machine)"]
    here = versions(root, chapter)
    return [name for name, digest in expected.items() if here.get(name) != digest]


def _digest(parts: list[bytes]) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(hashlib.sha256(part).digest())
    return hasher.hexdigest()[:16]


def _chapter_files(course: Course, chapter: str) -> list[Path]:
    """The files grading reads for ``chapter``: its source notebook and the files at the top
    of its release folder (the notebook and the data files copied next to the learner's)."""
    release = course.release_dir(chapter)
    files = [course.source_notebook(chapter)]
    if release.is_dir():
        files += sorted(p for p in release.iterdir() if p.is_file() and not any(
            fnmatch.fnmatch(p.name, pattern) for pattern in IGNORED_FILES))
    return [p for p in files if p.is_file()]


@functools.cache
def _code_digest() -> str:
    """Digest of the course's Python files (once per process: its code is loaded by then)."""
    parts = []
    for package in PACKAGES:
        for folder, dirs, files in os.walk(ROOT / package):
            # The default course folder (the learners' files) lives inside the package.
            dirs[:] = sorted(d for d in dirs if d != "__pycache__"
                             and Path(folder, d) != ROOT / COURSE_FOLDER)
            parts += [Path(folder, f).relative_to(ROOT).as_posix().encode() + b"\0"
                      + Path(folder, f).read_bytes() for f in sorted(files) if f.endswith(".py")]
    return _digest(parts)


@functools.cache
def _packages() -> str:
    """Python's version and the installed version of each package the course requires (a
    local build label such as torch's ``+cpu`` or ``+cu128`` is the same release)."""
    names = [r.split(";")[0].split("==")[0].strip()
             for r in metadata.requires("build-the-transformer") or [] if "extra ==" not in r]
    return " ".join([sys.version.split()[0],
                     *(f"{n}=={metadata.version(n).split('+')[0]}" for n in sorted(names))])


def check_workers(client: Client, root: str | None, wanted: dict[str, dict[str, str]]) -> None:
    """Refuse a cluster whose workers would grade with another course than this one.

    Args:
        root: the course root the workers use; None for each worker's own checkout.
        wanted: chapter -> this machine's :func:`versions` of it.

    Raises:
        ValueError: a worker differs; the message names it and what differs.
    """
    found = client.run(worker_differences, root, wanted)
    bad = {address: names for address, names in sorted(found.items()) if names}
    if bad:
        listed = "; ".join(f"{address}: {', '.join(names)}" for address, names in bad.items())
        raise ValueError(f"workers whose course differs from this one ({listed}). Every worker "
                         "needs the same checkout of the course, installed the same way, and "
                         "the same AUTOGRADER_SECRET")


def check_sandboxes(client: Client, limits: Limits) -> None:
    """Refuse a cluster on whose workers a sandbox cannot start or run the course's Python
    (:func:`~autograder.sandbox.launcher.sandbox_problem`), before anyone is graded.

    Raises:
        GraderFaultError: a worker cannot; the message names it, the cause and the fix.
    """
    found = client.run(worker_sandbox_problem, asdict(limits))
    bad = [f"on the worker {address}, {grader_fault(problem)}"
           for address, problem in sorted(found.items()) if problem]
    if bad:
        raise GraderFaultError("; ".join(bad))


def worker_sandbox_problem(limits: dict[str, float]) -> str | None:
    """:func:`~autograder.sandbox.launcher.sandbox_problem` on a worker."""
    return sandbox_problem(Limits(**limits))


def worker_differences(root: str | None, wanted: dict[str, dict[str, str]]) -> list[str]:
    """What differs here from ``wanted`` (chapter -> :func:`versions`), over all chapters."""
    here = ROOT if root is None else root
    return sorted({name for chapter, expected in wanted.items()
                   for name in differences(expected, here, chapter)})
