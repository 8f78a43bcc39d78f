"""Where learners are graded: the worker processes of a Dask cluster.

    with grading_client(jobs=2) as client:                       # a LocalCluster on this machine
        ...
    with grading_client(scheduler="tcp://10.0.0.5:8786") as client:   # an existing cluster
        for item, future in in_order(client, items, submit):
            ...

Every worker is a process with one thread: grading code (nbgrader, nbformat, the checks, and
the libraries they call, which parse Python with ``ast``) is never run by two threads of one
interpreter. A worker grades one learner after the other, so its imports are paid once.

Dask schedules, with the settings of ``dask.yaml`` next to this module (``--jobs`` applies
them; the scheduler of a cluster of your own reads them through ``DASK_CONFIG``):

* one learner per worker at a time: each learner is a *root task* (:func:`submit_root`), and
  the scheduler sends a root task to a worker only while that worker has a free thread
  (``worker-saturation: 1.0``). The other learners wait in the scheduler, in their order, and
  a restarted worker gets one only once it runs. So a worker that dies (killed, out of memory,
  a crash) was grading one learner only, and nothing steals a learner a worker was given
  (``work-stealing: false``);
* that learner is graded again on another worker, and after its third death Dask gives it up
  (``allowed-failures: 2``, then ``KilledWorker``), which the caller turns into a flag for that
  learner alone;
* a run with no running worker for two minutes ends (``no-workers-timeout``: ``NoWorkerError``).

What is written here, and why (each measured in ``tests/pipeline/test_cluster.py``):

* :func:`submit_root` marks the task as a root task. Dask queues only the tasks it takes for
  root tasks, and it guesses that from the size of their group (more than twice the cluster's
  threads): three learners on two workers would all be placed at once, two on one worker.
  Worker resources (``learner=1``) are no substitute: a worker runs one learner at a time, but
  the scheduler still hands it all of its learners at once, and a death is charged to each.
* :func:`in_order` hands Dask at most twice as many learners as the cluster has threads (a
  learner travels with its files, so a class is never all in memory at once), takes each result
  as soon as its task ends and releases the task (a worker that died later would otherwise
  take a finished learner with it, and Dask would grade it again), and yields the results in
  the learners' order.

Grading on other machines needs the same course on every one of them
(:mod:`autograder.pipeline.workers`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from distributed import Client, Future


# Dask's settings for grading: the local cluster's, and what a scheduler of your own needs.
DASK_CONFIG = Path(__file__).with_name("dask.yaml")
# Deaths of the workers grading one learner after which the learner is given up (Dask's
# allowed-failures are the deaths it forgives).
MAX_DEATHS = 3
# Seconds to reach a scheduler, and to wait for its first worker.
CONNECT_TIMEOUT_S = 30
WORKERS_TIMEOUT_S = 120
T = TypeVar("T")


def grading_settings() -> dict[str, Any]:
    """The settings of :data:`DASK_CONFIG`, as ``dask.config.set`` takes them (dotted keys)."""
    import dask

    def dotted(tree: dict[str, Any], prefix: str) -> Iterator[tuple[str, Any]]:
        for key, value in tree.items():
            if isinstance(value, dict):
                yield from dotted(value, f"{prefix}{key}.")
            else:
                yield f"{prefix}{key}", value

    (tree,) = dask.config.collect_yaml([str(DASK_CONFIG)])
    return dict(dotted(tree, ""))


@contextlib.contextmanager
def grading_client(jobs: int = 1, scheduler: str | None = None) -> Iterator[Client]:
    """A Dask client whose workers grade: ``jobs`` local worker processes, or the workers of
    the cluster whose scheduler is at ``scheduler``.

    The local cluster listens on 127.0.0.1 only, runs with :func:`grading_settings` and is shut
    down on leaving the block. A scheduler of your own that runs without them is used, with a
    warning that says what it does not guarantee then.

    Raises:
        ConnectionError: the scheduler cannot be reached, or no worker joins it in time.
        ValueError: a worker of the cluster runs more than one thread.
    """
    import dask
    from distributed import Client, LocalCluster

    with dask.config.set(grading_settings()), contextlib.ExitStack() as stack:
        if scheduler is None:
            # The scheduler's and workers' scratch space goes when the cluster does (Dask's
            # default, <tmp>/dask-scratch-space, would outlive every run).
            scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="grading-"))
            with dask.config.set({"temporary-directory": scratch}):
                # No dashboard; the scheduler's HTTP endpoints (health, metrics) on a free
                # port rather than 8787, which another cluster may hold.
                cluster = stack.enter_context(LocalCluster(
                    n_workers=jobs, threads_per_worker=1, processes=True, host="127.0.0.1",
                    dashboard_address=None, silence_logs=logging.ERROR,
                    scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}))
            yield stack.enter_context(Client(cluster))
            return
        client = stack.enter_context(_connect(scheduler))
        for problem in scheduler_problems(client):
            logging.getLogger(__name__).warning("the Dask scheduler at %s %s", scheduler, problem)
        yield client


def _connect(scheduler: str) -> Client:
    """A client of the scheduler at ``scheduler`` whose workers (at least one) have one thread
    each; see :func:`grading_client`."""
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


def scheduler_problems(client: Client) -> list[str]:
    """What the scheduler of ``client`` does otherwise than :data:`DASK_CONFIG` says, and what
    grading then no longer guarantees."""
    settings = grading_settings()

    def found(dask_scheduler) -> dict[str, Any]:  # runs in the scheduler
        return {"worker-saturation": dask_scheduler.WORKER_SATURATION,
                "work-stealing": "stealing" in dask_scheduler.extensions}

    fix = f"; start it with DASK_CONFIG={DASK_CONFIG} dask scheduler"
    there = client.run_on_scheduler(found)
    problems = []
    if there["worker-saturation"] != settings["distributed.scheduler.worker-saturation"]:
        problems.append(f"runs with worker-saturation {there['worker-saturation']}: a worker may "
                        "be handed a second learner while it grades one, and its death is "
                        "charged to both" + fix)
    if there["work-stealing"] != settings["distributed.scheduler.work-stealing"]:
        problems.append("steals work: a learner handed to a worker may move to another" + fix)
    return problems


def submit_root(client: Client, key: str, function: Callable[..., Any], *args: Any) -> Future:
    """``client.submit(function, *args, key=key)`` as a root task: the scheduler keeps it until
    a worker has a free thread (see the module's docstring)."""
    from dask.task_spec import Task

    # A new priority generation for every task (fifo_timeout 0): they start in this order.
    (future,) = client.get({key: Task(key, function, *args, _data_producer=True)}, [key],
                           sync=False, fifo_timeout=0)
    return future


def in_order(client: Client, items: Sequence[T], submit: Callable[[T], Future],
             ) -> Iterator[tuple[T, concurrent.futures.Future]]:
    """Run ``submit(item)`` for every item; yield each item with its finished future, in the
    order of ``items``.

    At most twice as many items as the cluster has threads are submitted and not finished at a
    time. Each result is fetched as soon as its task ends and yielded as a settled
    :class:`concurrent.futures.Future` (its value, or the error that ended the task).
    """
    from distributed import as_completed

    pending = iter(enumerate(items))
    running: dict[Future, int] = {}
    finished: dict[int, concurrent.futures.Future] = {}
    completed = as_completed()
    ready = 0

    def top_up() -> None:
        ahead = 2 * max(1, sum(client.nthreads().values()))
        while len(running) < ahead and (following := next(pending, None)) is not None:
            index, item = following
            future = submit(item)
            running[future] = index
            completed.add(future)

    top_up()
    for future in completed:
        finished[running.pop(future)] = _settled(future)
        top_up()
        while ready in finished:
            yield items[ready], finished.pop(ready)
            ready += 1


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
