"""Where learners are graded: the worker processes of a Dask cluster.

    with grading_client(jobs=2) as client:                       # a LocalCluster on this machine
        ...
    with grading_client(scheduler="tcp://10.0.0.5:8786") as client:   # an existing cluster
        for item, future in in_order(client, items, submit):
            ...

Every worker is a process with one thread: grading code (nbgrader, nbformat, the checks, and
the libraries they call, which parse Python with ``ast``) is never run by two threads of one
interpreter. A worker grades one learner after the other, so its imports are paid once.

The process that calls :func:`in_order` hands each learner to a worker that has nothing else
to do, and only then. So a worker that dies (killed, out of memory, a crash) was grading one
learner only: that learner is graded again on another worker, and after :data:`MAX_DEATHS`
deaths it is given up (:class:`WorkersDiedError`), which the caller turns into a flag for that
learner alone. The grader counts the deaths itself, with Dask's own retries off on a local
cluster: Dask would hand a learner it regrades to a worker that is still busy with another,
and a second death there would be charged to both.

Grading on other machines needs the same course on every one of them (:func:`versions` says
what must agree; the grader refuses workers that differ).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import fnmatch
import functools
import hashlib
import logging
import os
import sys
import tempfile
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from autograder.course import COURSE_FOLDER, IGNORED_FILES, ROOT, Course
from autograder.exercises.checking import DEVELOPMENT_SECRET, grading_secret

if TYPE_CHECKING:
    from distributed import Client, Future, as_completed

    from autograder.sandbox.launcher import Limits

# Deaths of the workers grading one learner after which the learner is given up.
MAX_DEATHS = 3
# Seconds to reach a scheduler, and to wait for a worker (the first one, or one to take over
# from workers that died).
CONNECT_TIMEOUT_S = 30
WORKERS_TIMEOUT_S = 120
# Seconds between looks for an idle worker while a learner waits for one, and between looks
# for a finished learner meanwhile (whose worker then takes the next one at once).
POLL_S = 0.5
READY_POLL_S = 0.01
# Dask settings of the local cluster (``--jobs N``); an existing cluster keeps its own.
LOCAL_CONFIG = {
    # A task whose worker dies fails at once (KilledWorker) and in_order decides where it
    # runs again.
    "distributed.scheduler.allowed-failures": 0,
    # The statistical profiler samples the grading thread from a thread of its own every
    # 10 ms: CPU that grading needs, for figures nobody reads here.
    "distributed.worker.profile.enabled": False,
}
# A submission travels inside its task; a large notebook is expected, not a mistake to warn of.
CLIENT_CONFIG = {"distributed.admin.large-graph-warning-threshold": "128MiB"}
PACKAGES = ("autograder", "transformer_ref")
T = TypeVar("T")


@contextlib.contextmanager
def grading_client(jobs: int = 1, scheduler: str | None = None) -> Iterator[Client]:
    """A Dask client whose workers grade: ``jobs`` local worker processes, or the workers of
    the cluster whose scheduler is at ``scheduler``.

    The local cluster listens on 127.0.0.1 only and is shut down on leaving the block.

    Raises:
        ConnectionError: the scheduler cannot be reached, or no worker joins it in time.
        ValueError: a worker of the cluster runs more than one thread.
    """
    import dask
    from distributed import Client, LocalCluster

    with dask.config.set(CLIENT_CONFIG), contextlib.ExitStack() as stack:
        if scheduler is None:
            # The scheduler's and workers' scratch space goes when the cluster does (Dask's
            # default, <tmp>/dask-scratch-space, would outlive every run).
            scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="grading-"))
            with dask.config.set({**LOCAL_CONFIG, "temporary-directory": scratch}):
                # No dashboard; the scheduler's HTTP endpoints (health, metrics) on a free
                # port rather than 8787, which another cluster may hold.
                cluster = stack.enter_context(LocalCluster(
                    n_workers=jobs, threads_per_worker=1, processes=True, host="127.0.0.1",
                    dashboard_address=None, silence_logs=logging.ERROR,
                    scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}))
            yield stack.enter_context(Client(cluster))
            return
        try:
            client = stack.enter_context(Client(scheduler, timeout=CONNECT_TIMEOUT_S))
        except (OSError, TimeoutError) as exc:
            raise ConnectionError(
                f"cannot reach the Dask scheduler at {scheduler} ({exc}). Start one with "
                f"`dask scheduler` and workers with `dask worker {scheduler} --nthreads 1`, or "
                "grade on this machine with --jobs N") from exc
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
        yield client


class WorkersDiedError(RuntimeError):
    """The workers grading one item died ``deaths`` times; it was given up."""

    def __init__(self, deaths: int) -> None:
        super().__init__(f"the workers grading this item died {deaths} times")
        self.deaths = deaths


def in_order(client: Client, items: Sequence[T], submit: Callable[[T, str], Future],
             ) -> Iterator[tuple[T, concurrent.futures.Future]]:
    """Run ``submit(item, worker)`` for every item; yield each item with its finished future, in
    the order of ``items``.

    ``submit`` must run the item on ``worker`` (the address of a worker with nothing else to
    do): ``client.submit(..., workers=[worker], allow_other_workers=True)``. An item is
    submitted as soon as a worker is idle, so an idle worker never waits and a busy one is never
    handed a second item that its death would take with it. An item whose worker dies
    (``KilledWorker``) is submitted again, before the items that have not started, until its
    workers died :data:`MAX_DEATHS` times; it then ends with :class:`WorkersDiedError`. Each
    result is fetched as soon as its task finishes and yielded as a settled
    :class:`concurrent.futures.Future` (its value, or the error that ended the task).

    Raises:
        ConnectionError: no worker was left for :data:`WORKERS_TIMEOUT_S` seconds.
    """
    from distributed import KilledWorker, as_completed

    waiting = deque(range(len(items)))  # indexes of the items without a worker
    running: dict[Future, tuple[int, str]] = {}
    deaths: Counter[int] = Counter()
    finished: dict[int, concurrent.futures.Future] = {}
    completed = as_completed()
    ready = 0
    without_workers_since = None

    def hand_out() -> None:
        busy = {worker for _, worker in running.values()}
        for worker in idle_workers(client, busy):
            if not waiting:
                return
            index = waiting.popleft()
            future = submit(items[index], worker)
            running[future] = (index, worker)
            completed.add(future)

    while waiting or running:
        if waiting:
            hand_out()
        if not running:  # every worker died or left: wait for one to (re)join
            without_workers_since = without_workers_since or time.monotonic()
            if time.monotonic() - without_workers_since > WORKERS_TIMEOUT_S:
                raise ConnectionError(f"no Dask worker was left to grade on for "
                                      f"{WORKERS_TIMEOUT_S} s")
            time.sleep(POLL_S)
            continue
        without_workers_since = None
        if waiting and not completed.has_ready():
            # A restarted worker may join before a running item ends.
            _wait_for_ready(completed, POLL_S)
            continue
        future = next(completed)
        index, _ = running.pop(future)
        outcome = _settled(future)
        error = outcome.exception()
        if isinstance(error, KilledWorker):
            # Dask's own retries (on a cluster that allows them) are deaths too.
            deaths[index] += error.allowed_failures + 1
            if deaths[index] < MAX_DEATHS:
                waiting.appendleft(index)
                continue
            outcome = concurrent.futures.Future()
            outcome.set_exception(WorkersDiedError(deaths[index]))
        finished[index] = outcome
        while ready in finished:
            yield items[ready], finished.pop(ready)
            ready += 1


def _wait_for_ready(completed: as_completed, seconds: float) -> None:
    """Return once ``completed`` (a Dask ``as_completed``) has a finished future, or after
    ``seconds``."""
    deadline = time.monotonic() + seconds
    while not completed.has_ready() and time.monotonic() < deadline:
        time.sleep(READY_POLL_S)


def idle_workers(client: Client, busy: set[str]) -> list[str]:
    """The workers that can take an item now: running, given no task by the scheduler, and not
    in ``busy`` (the workers just handed an item, which the scheduler may not know of yet).

    A worker that has joined but is still starting is not running yet (a restarted worker, for
    a moment). Dask would place a task meant for it on another worker, a busy one included.
    """

    def idle_on_scheduler(dask_scheduler) -> list[str]:  # runs in the scheduler
        return [worker.address for worker in dask_scheduler.running if not worker.processing]

    return sorted(set(client.run_on_scheduler(idle_on_scheduler)) - busy)


def _settled(future: Future) -> concurrent.futures.Future:
    """The outcome of a finished task, fetched now, and the task released: no worker keeps the
    result, so a worker that dies later cannot take a finished learner with it (Dask would
    grade that learner again to rebuild the lost result)."""
    settled: concurrent.futures.Future = concurrent.futures.Future()
    try:
        settled.set_result(future.result())
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # the task's error, KilledWorker, or a cancelled task
        settled.set_exception(exc)
    future.release()
    return settled


def on_one_thread() -> None:
    """Raise unless this code runs in a Dask worker of one thread (or outside Dask).

    Raises:
        RuntimeError: the worker runs several threads, so two learners could be graded at once
            in one interpreter.
    """
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:  # not in a worker: called directly, one learner at a time
        return
    if worker.state.nthreads != 1:
        raise RuntimeError(f"the Dask worker {worker.address} runs {worker.state.nthreads} "
                           "threads; grading needs one thread per worker: restart it with "
                           "`dask worker SCHEDULER --nthreads 1`")


# ------------------------------------------------------------------ the same course everywhere


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
    from autograder.sandbox.launcher import GraderFaultError, grader_fault

    found = client.run(worker_sandbox_problem, asdict(limits))
    bad = [f"on the worker {address}, {grader_fault(problem)}"
           for address, problem in sorted(found.items()) if problem]
    if bad:
        raise GraderFaultError("; ".join(bad))


def worker_sandbox_problem(limits: dict[str, float]) -> str | None:
    """:func:`~autograder.sandbox.launcher.sandbox_problem` on a worker."""
    from autograder.sandbox.launcher import Limits, sandbox_problem

    return sandbox_problem(Limits(**limits))


def worker_differences(root: str | None, wanted: dict[str, dict[str, str]]) -> list[str]:
    """What differs here from ``wanted`` (chapter -> :func:`versions`), over all chapters."""
    here = ROOT if root is None else root
    return sorted({name for chapter, expected in wanted.items()
                   for name in differences(expected, here, chapter)})
