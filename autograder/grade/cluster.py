"""Where learners are graded: the worker processes of a Dask cluster.

    with grading_client(jobs=2) as client:   # or scheduler="tcp://10.0.0.5:8786"
        for item, future in in_order(client, items, submit):
            ...

Every worker is a process with one thread: grading code (nbgrader, nbformat, the checks, and
the libraries they call, which parse Python with ``ast``) is never run by two threads of one
interpreter. A worker grades one learner after the other, so its imports are paid once.

Dask schedules, with the settings of ``dask.yaml`` next to this module (``--jobs`` applies
them; the scheduler of a cluster of your own reads them through ``DASK_CONFIG``):

* one learner per worker at a time: the scheduler sends a root task to a worker only while the
  worker has a free thread (``worker-saturation: 1.0``); the other learners wait in the
  scheduler, in their order, and a restarted worker gets one once it runs. So a worker that
  dies was grading one learner only, and nothing moves a learner (``work-stealing: false``);
* that learner is graded again on another worker; after its third death Dask gives it up
  (``allowed-failures: 2``, then ``KilledWorker``), which the caller flags for it alone;
* a run with no running worker for two minutes ends (``no-workers-timeout``: ``NoWorkerError``).

What is written here, and why (each measured in ``tests/pipeline/test_cluster.py``):

* :func:`submit_root` marks each learner as a root task. Dask queues only the tasks it takes
  for root tasks, and guesses that from the size of their group (more than twice the cluster's
  threads): three learners on two workers were placed at once, two on one worker. Worker
  resources (``learner=1``) are no substitute: a worker runs one learner at a time, but the
  scheduler hands it all of its learners at once, and a death is charged to each of them.
* :func:`in_order` hands Dask at most twice as many learners as the cluster has threads (a
  learner travels with its files: a class is never all in memory), fetches and releases each
  result as soon as its task ends (a worker that died later would take a finished learner with
  it, and Dask would grade it again), and yields the results in the learners' order.

Grading on other machines needs the same course on every one of them
(:mod:`autograder.grade.workers`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from autograder.grade.workers import connect

if TYPE_CHECKING:
    from distributed import Client, Future


# Dask's settings for grading: the local cluster's, and what a scheduler of your own needs.
DASK_CONFIG = Path(__file__).with_name("dask.yaml")
# Deaths of the workers grading one learner after which the learner is given up (Dask's
# allowed-failures are the deaths it forgives).
MAX_DEATHS = 3
T = TypeVar("T")


def grading_settings() -> dict[str, Any]:
    """The settings of :data:`DASK_CONFIG`, as ``dask.config.set`` takes them (dotted keys)."""
    # Dask is heavy: loaded when a cluster is used, not with the module.
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
    # Dask is heavy: loaded when a cluster is used, not with the module.
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
        client = stack.enter_context(connect(scheduler))
        for problem in scheduler_problems(client):
            logging.getLogger(__name__).warning("the Dask scheduler at %s %s", scheduler, problem)
        yield client


def scheduler_problems(client: Client) -> list[str]:
    """How the scheduler of ``client`` differs from :data:`DASK_CONFIG` where it matters, and
    what grading then no longer guarantees."""
    wanted = {k: v for k, v in grading_settings().items()
              if k.endswith(("worker-saturation", "work-stealing"))}
    there = client.run_on_scheduler(lambda dask_scheduler: {
        "distributed.scheduler.worker-saturation": dask_scheduler.WORKER_SATURATION,
        "distributed.scheduler.work-stealing": "stealing" in dask_scheduler.extensions})
    differ = [f"{k.rsplit('.', 1)[1]} {there[k]} (not {v})" for k, v in wanted.items()
              if there[k] != v]
    return [f"runs with {' and '.join(differ)}: a worker may be handed a second learner while "
            "it grades one, and its death is charged to both; start it with "
            f"DASK_CONFIG={DASK_CONFIG} dask scheduler"] if differ else []


def submit_root(client: Client, key: str, function: Callable[..., Any], *args: Any) -> Future:
    """``client.submit(function, *args, key=key)`` as a root task: the scheduler keeps it until
    a worker has a free thread (see the module's docstring)."""
    # Dask is heavy: loaded when a cluster is used, not with the module.
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
    # Dask is heavy: loaded when a cluster is used, not with the module.
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
