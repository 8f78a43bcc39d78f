"""Grading on Dask workers: the same grades on a local cluster, on a real cluster started with
the ``dask scheduler`` and ``dask worker`` commands, and when workers die in the middle of
grading; and the checks that refuse a cluster that cannot grade.

One temporary course (module-scoped) holds part of the sample class; every run grades it into a
course folder of its own and is compared with the undisturbed ``--jobs 2`` run.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import dask
import pytest
from distributed import Client, KilledWorker, LocalCluster, get_worker
from distributed.diagnostics.plugin import SchedulerPlugin

from autograder.cli import main
from autograder.collect.sources import collect
from autograder.course import ROOT, Course
from autograder.grade import cluster, workers
from autograder.grade.cluster import (
    grading_client,
    grading_settings,
    in_order,
    scheduler_problems,
    submit_root,
)
from autograder.grade.gradebook import read_scores
from autograder.grade.run import _finished, autograde
from autograder.grade.workers import check_workers, on_one_thread, versions
from autograder.steps.report import export_csv
from tests.fixtures import demo
from tests.fixtures.demo import prepare_course
from tests.fixtures.sample_class import NUMPY_CHAPTERS, build_class

# Honest work in both chapters, a cheat, honest work beside a cheat, a broken file beside
# honest work, and an empty file: every way a grade is made. The two NumPy chapters of the
# sample class suffice (its PyTorch chapter would only make every run longer).
LEARNERS = ("ada", "gus", "hana", "kim", "mo")
CHAPTERS_HERE = (CH02, CH05) = NUMPY_CHAPTERS
DASK = Path(sys.executable).with_name("dask")
START_TIMEOUT_S = 120

pytestmark = [pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")]


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> dict:
    """The released sample chapters in a course root, and the class to collect."""
    workspace = tmp_path_factory.mktemp("cluster")
    root = prepare_course(workspace, list(CHAPTERS_HERE))
    build_class(workspace / "class", root=root, chapters=CHAPTERS_HERE, learners=LEARNERS)
    return {"root": root, "class": workspace / "class"}


def grade(sample: dict, name: str, **where) -> dict:
    """Collect the class into course folder ``name``, grade it (``where``: ``jobs`` or
    ``scheduler``), export the CSV; return the CSV and the gradebook's scores."""
    course = Course.of(sample["root"], sample["root"] / name)
    collect(course, [sample["class"]], chapters=list(CHAPTERS_HERE))
    summaries = autograde(course, list(CHAPTERS_HERE), **where)
    return {"course": course, "summaries": summaries, "csv": export_csv(course),
            "scores": read_scores(course)}


@pytest.fixture(scope="module")
def undisturbed(sample) -> dict:
    return grade(sample, "course-jobs-2", jobs=2)


# ------------------------------------------------------------------ a real cluster


def start(command: list[str], log: Path, env: dict[str, str] | None = None
          ) -> subprocess.Popen:
    """Start a command in a session of its own (so it can be stopped with its children)."""
    with open(log, "wb") as out:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True, env=env)


def stop(process: subprocess.Popen) -> None:
    """Stop a started command and its children: politely, then for good."""
    for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        if process.poll() is not None:
            return
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue


def scheduler_address(scheduler_file: Path, process: subprocess.Popen, log: Path) -> str:
    """The address the scheduler wrote into its file, once it has (it picks a free port)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"dask scheduler ended ({process.returncode}):\n{log.read_text()}")
        try:
            return json.loads(scheduler_file.read_text())["address"]
        except (FileNotFoundError, json.JSONDecodeError, KeyError):
            time.sleep(0.2)  # not written (completely) yet
    pytest.fail(f"dask scheduler wrote no address within {START_TIMEOUT_S} s:\n{log.read_text()}")


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory) -> Iterator[str]:
    """``dask scheduler`` and two ``dask worker ADDRESS --nthreads 1 --nworkers 1`` on
    127.0.0.1; the scheduler's address. Everything is stopped afterwards, also on failure."""
    folder = tmp_path_factory.mktemp("dask")
    scheduler_file = folder / "scheduler.json"
    processes = []
    try:
        log = folder / "scheduler.log"
        # Dask's retries off, as docs/instructors.md starts it.
        env = {**os.environ, "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}
        processes.append(start([str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0",
                                "--no-dashboard", "--dashboard-address", "127.0.0.1:0",
                                "--scheduler-file", str(scheduler_file)], log, env=env))
        address = scheduler_address(scheduler_file, processes[0], log)
        for index in range(2):
            processes.append(start([str(DASK), "worker", address, "--nthreads", "1",
                                    "--nworkers", "1", "--host", "127.0.0.1", "--no-dashboard",
                                    "--local-directory", str(folder / f"worker-{index}")],
                                   folder / f"worker-{index}.log"))
        with Client(address, timeout=START_TIMEOUT_S) as client:
            client.wait_for_workers(2, timeout=START_TIMEOUT_S)
        yield address
    finally:
        for process in reversed(processes):
            stop(process)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_real_cluster_grades_the_class_as_the_local_one(sample, undisturbed, dask_cluster,
                                                         capsys):
    """`python -m autograder autograde all --scheduler ADDRESS` on workers started with the
    `dask` commands: the same CSV and gradebook as `--jobs 2`, by long-lived workers."""
    with Client(dask_cluster) as client:
        pids = client.run(os.getpid)
        assert len(pids) == 2
        assert client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.allowed_failures) == 0
        course = Course.of(sample["root"], sample["root"] / "course-scheduler")
        collect(course, [sample["class"]], chapters=list(CHAPTERS_HERE))
        where = ["--root", str(course.root), "--course-dir", str(course.folder)]
        assert main(["autograde", "all", "--scheduler", dask_cluster, *where]) == 0
        table = capsys.readouterr().out
        assert f"{len(undisturbed['summaries'])} submission(s) graded" in table
        assert export_csv(course) == undisturbed["csv"]
        assert read_scores(course) == undisturbed["scores"]
        # The same two processes graded every learner, and they keep what they imported.
        assert client.run(os.getpid) == pids
        assert set(client.run(lambda: "nbgrader.preprocessors" in sys.modules).values()) == {True}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_demo_grades_on_a_real_cluster(dask_cluster, tmp_path):
    """`python -m tests.fixtures.demo --scheduler ADDRESS` (here two learners of its class):
    every grade as expected, on the cluster's workers."""
    result = demo.run_demo(tmp_path / "demo", scheduler=dask_cluster, learners=("kim", "mo"))
    assert result.comparison.ok, result.comparison.problems
    graded = {(r.learner, r.chapter) for r in result.rows}
    assert graded == {("kim", CH02), ("kim", CH05), ("mo", CH02)}
    with Client(dask_cluster) as client:  # the cluster's scheduler ran their grading tasks
        keys = client.run_on_scheduler(lambda dask_scheduler: {
            key for key, _, finish, *_ in dask_scheduler.transition_log if finish == "memory"})
    # Keys are grade-<chapter>-<student>-<token>.
    assert graded <= {(key.split("-")[2], key.split("-")[1]) for key in keys
                      if key.startswith("grade-")}


def test_the_documented_scheduler_has_the_grading_settings(tmp_path):
    """`DASK_CONFIG=autograder/grade/dask.yaml dask scheduler`, as docs/instructors.md starts
    a cluster of one's own: the settings of `--jobs`, so the grader has nothing to warn of."""
    scheduler_file, log = tmp_path / "scheduler.json", tmp_path / "scheduler.log"
    process = start([str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0",
                     "--no-dashboard", "--scheduler-file", str(scheduler_file)], log,
                    env={**os.environ, "DASK_CONFIG": str(cluster.DASK_CONFIG)})
    try:
        address = scheduler_address(scheduler_file, process, log)
        with Client(address, timeout=START_TIMEOUT_S) as client:
            assert scheduler_problems(client) == []
            assert client.run_on_scheduler(
                lambda dask_scheduler: dask_scheduler.allowed_failures) == cluster.MAX_DEATHS - 1
    finally:
        stop(process)


@pytest.mark.slow
def test_a_scheduler_without_the_grading_settings_is_named(dask_cluster):
    with Client(dask_cluster) as client:
        (problem,) = scheduler_problems(client)
    assert problem.startswith("runs with worker-saturation 1.1 (not 1.0) and work-stealing True "
                              "(not False): a worker may be handed a second learner")
    assert problem.endswith(f"DASK_CONFIG={cluster.DASK_CONFIG} dask scheduler")


# ------------------------------------------------------------------ workers that die


class KillWhileGrading(SchedulerPlugin):
    """Kills (SIGKILL) the worker process that is grading a chosen submission, ``kill_s``
    seconds after the submission was handed to a worker: once for ``once``, every time for
    ``always``. Records every worker that was given a grading task while it held another."""

    def __init__(self, scheduler, once: tuple[str, str], always: tuple[str, str],
                 kill_s: float = 1.0) -> None:
        self.scheduler, self.kill_s = scheduler, kill_s
        self.prefixes = {f"grade-{chapter}-{student}-": rule
                         for rule, (student, chapter) in (("once", once), ("always", always))}
        self.started: dict[str, int] = {"once": 0, "always": 0}
        self.killed: dict[str, int] = {"once": 0, "always": 0}
        self.crowded: list[tuple[str, list[str]]] = []  # (worker, its grading tasks)

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        if finish != "processing" or not str(key).startswith("grade-"):
            return
        worker = self.scheduler.tasks[key].processing_on
        grading = sorted(str(task.key) for task in worker.processing
                         if str(task.key).startswith("grade-"))
        if len(grading) > 1:
            self.crowded.append((worker.address, grading))
        rule = next((r for p, r in self.prefixes.items() if str(key).startswith(p)), None)
        if rule is None:
            return
        self.started[rule] += 1
        if rule == "always" or self.started[rule] == 1:
            asyncio.get_running_loop().call_later(self.kill_s, self.kill, key, rule)

    def kill(self, key, rule: str) -> None:
        task = self.scheduler.tasks.get(key)
        worker = task.processing_on if task is not None else None
        if worker is not None:
            os.kill(worker.pid, signal.SIGKILL)
            self.killed[rule] += 1


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_killed_worker_costs_nothing_and_a_worker_killer_only_its_learner(
        sample, undisturbed, tmp_path, monkeypatch):
    """ada's ch02 loses its worker once in the middle of grading and is graded again with the
    same result; hana's ch05 loses its worker every time and ends flagged `worker_died`, scored
    0, after exactly MAX_DEATHS deaths; no worker ever holds two learners, so no other learner
    dies with hana's worker, and everything else equals the undisturbed run."""
    # Sandboxes that a killed worker leaves running finish in this test's folder.
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    with grading_client(jobs=2) as client:
        plugin = KillWhileGrading(client.cluster.scheduler, once=("ada", CH02),
                                  always=("hana", CH05))

        async def add_plugin() -> None:
            client.cluster.scheduler.add_plugin(plugin)

        client.sync(add_plugin)
        killed = grade(sample, "course-killed", scheduler=client.scheduler.address)
    assert plugin.started == {"once": 2, "always": cluster.MAX_DEATHS}
    # hana's grading may be handed to the worker just killed before the scheduler has seen it
    # die: it dies there without a kill of ours, and counts as a death all the same (the row
    # below says how many the grader counted).
    assert plugin.killed["once"] == 1
    assert cluster.MAX_DEATHS - 1 <= plugin.killed["always"] <= cluster.MAX_DEATHS
    assert plugin.crowded == []

    lost = f"hana,{CH05},"
    assert [line for line in killed["csv"].splitlines() if not line.startswith(lost)] == [
        line for line in undisturbed["csv"].splitlines() if not line.startswith(lost)]
    (row,) = [line for line in killed["csv"].splitlines() if line.startswith(lost)]
    assert row.startswith(f"{lost}0,") and ",worker_died," in row
    assert f"died {cluster.MAX_DEATHS} times" in row
    assert [s for s in killed["scores"] if (s.student, s.chapter) != ("hana", CH05)] == [
        s for s in undisturbed["scores"] if (s.student, s.chapter) != ("hana", CH05)]


# ------------------------------------------------------------------ clusters that cannot grade


def step(item: tuple[str, str]) -> tuple[str, str]:
    """A task for :func:`in_order`: ``("wait", path)`` waits until ``("touch", path)`` ran;
    ``("die", path)`` ends its worker process while ``path`` exists (removing it the first time
    when it holds ``once``); ``("sleep", seconds)`` sleeps."""
    action, path = item
    if action == "touch":
        Path(path).touch()
    if action == "sleep":
        time.sleep(float(path))
    if action == "die" and Path(path).exists():
        if Path(path).read_text() == "once":
            Path(path).unlink()
        os.kill(os.getpid(), signal.SIGKILL)
    deadline = time.monotonic() + 60
    while action == "wait" and not Path(path).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return item


def watch(client: Client) -> KillWhileGrading:
    """A :class:`KillWhileGrading` that kills nobody, on ``client``'s (in-process) scheduler:
    it records every worker given a ``grade-`` task while it held another."""
    scheduler = client.cluster.scheduler
    plugin = KillWhileGrading(scheduler, once=("nobody", "none"), always=("nobody", "none"))

    async def add_plugin() -> None:
        scheduler.add_plugin(plugin)

    client.sync(add_plugin)
    return plugin


def run_in_order(client: Client, items: list) -> tuple[list, list]:
    """:func:`in_order` over ``items`` with :func:`step`, each a root task: (item, outcome,
    finished tasks) per item as it comes out, and the workers ever given two at once."""
    crowding = watch(client)
    submitted: list = []

    def submit(item):
        future = submit_root(client, f"grade-{len(submitted)}-{uuid.uuid4().hex}", step, item)
        submitted.append(future)
        return future

    seen = []
    for item, future in in_order(client, items, submit):
        outcome = future.exception() or future.result()
        seen.append((item, outcome, sum(f.done() for f in submitted)))
    return seen, crowding.crowded


def local_cluster(n_workers: int, **settings) -> LocalCluster:
    """An in-process cluster of single-threaded workers with the grading settings."""
    with dask.config.set({**grading_settings(), **settings}):
        return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=False,
                            dashboard_address=None)


def test_in_order_keeps_the_order_and_one_item_per_worker(tmp_path):
    signal_file = str(tmp_path / "go")
    # The first item can only finish after the last one ran, on the other worker.
    items = [("wait", signal_file), *[("pass", str(i)) for i in range(3)],
             ("touch", signal_file)]
    with local_cluster(2) as local, Client(local) as client:
        seen, crowded = run_in_order(client, items)
    assert [item for item, _, _ in seen] == items
    assert all(item == outcome for item, outcome, _ in seen)
    assert seen[0][2] == len(items)  # everything had finished before the first came out
    assert crowded == []


def test_dask_queues_only_what_it_takes_for_root_tasks():
    """Why :func:`submit_root` exists: three tasks on two workers, submitted one by one, are
    placed at once by Dask, two on one worker, even with the grading settings; so are tasks
    that need a worker resource each workers has one of. As root tasks they wait for a free
    worker."""
    three = [("sleep", "0.5")] * 3
    with local_cluster(2) as local, Client(local) as client:
        crowding = watch(client)
        client.gather([client.submit(step, item, key=f"grade-{i}-plain", pure=False)
                       for i, item in enumerate(three)])
        assert crowding.crowded
    with local_cluster(2, **{"distributed.worker.resources.learner": 1}) as local, \
            Client(local) as client:
        crowding = watch(client)
        client.gather([client.submit(step, item, key=f"grade-{i}-resource",
                                     resources={"learner": 1}) for i, item in enumerate(three)])
        assert crowding.crowded
    with local_cluster(2) as local, Client(local) as client:
        seen, crowded = run_in_order(client, three)
    assert [outcome for _, outcome, _ in seen] == three and crowded == []


@pytest.mark.timeout(300)
def test_in_order_grades_again_after_a_death_and_gives_up_on_a_killer(tmp_path):
    """An item whose worker dies once is run again; one that kills every worker it is given
    ends with KilledWorker after MAX_DEATHS deaths; the others are not touched."""
    once, always = tmp_path / "once", tmp_path / "always"
    once.write_text("once")
    always.write_text("always")
    items = [("pass", "a"), ("die", str(once)), ("die", str(always)), ("pass", "b"),
             ("pass", "c")]
    with grading_client(jobs=2) as client:
        seen, crowded = run_in_order(client, items)
    assert [item for item, _, _ in seen] == items
    outcomes = dict((item, outcome) for item, outcome, _ in seen)
    assert outcomes[("die", str(once))] == ("die", str(once)) and not once.exists()
    killed = outcomes[("die", str(always))]
    assert isinstance(killed, KilledWorker) and killed.allowed_failures + 1 == cluster.MAX_DEATHS
    assert all(outcomes[item] == item for item in items if item[0] == "pass")
    assert crowded == []


def where_it_ran(seconds: float) -> str:
    """Sleep, then name the worker this ran on."""
    time.sleep(seconds)
    return get_worker().address


def test_a_worker_that_does_not_run_is_given_nothing():
    """A restarted worker joins the scheduler before it runs (as a paused one, it does not):
    learners wait for a running worker instead of going to it."""
    with local_cluster(2) as local, Client(local) as client:
        first, second = sorted(client.nthreads())

        def pause(dask_scheduler) -> None:
            dask_scheduler.handle_worker_status_change("paused", second, stimulus_id="test")

        client.run_on_scheduler(pause)
        futures = [submit_root(client, f"grade-{i}-{uuid.uuid4().hex}", where_it_ran, 0.2)
                   for i in range(3)]
        assert client.gather(futures) == [first] * 3


def test_learners_waiting_without_any_worker_end_the_run():
    with local_cluster(0, **{"distributed.scheduler.no-workers-timeout": "1s"}) as local, \
            Client(local) as client:
        ((pair, future),) = in_order(client, [("ada", "ch02")],
                                     lambda pair: submit_root(client, "grade-1", abs, -1))
        with pytest.raises(ConnectionError, match="lost the Dask cluster while grading ada/ch02"):
            _finished(future, *pair)


def test_clusters_that_cannot_grade_are_refused(monkeypatch, free_port):
    monkeypatch.setattr(workers, "CONNECT_TIMEOUT_S", 2)
    monkeypatch.setattr(workers, "WORKERS_TIMEOUT_S", 2)
    nowhere = f"tcp://127.0.0.1:{free_port()}"
    with pytest.raises(ConnectionError, match="cannot reach the Dask scheduler"), \
            grading_client(scheduler=nowhere):
        pass
    with LocalCluster(n_workers=0, threads_per_worker=2, processes=False,
                      dashboard_address=None) as local:
        with pytest.raises(ConnectionError, match="no worker joined"), \
                grading_client(scheduler=local.scheduler_address):
            pass
        local.scale(1)
        with pytest.raises(ValueError, match=r"one thread each, but .* \(2 threads\)"), \
                grading_client(scheduler=local.scheduler_address):
            pass


def test_workers_with_another_course_are_refused(monkeypatch, tmp_path):
    monkeypatch.setenv("AUTOGRADER_SECRET", "the grader's secret")
    wanted = {CH02: versions(ROOT, CH02)}
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None) as local, Client(local) as client:
        check_workers(client, None, wanted)  # the same course: accepted
        monkeypatch.setenv("AUTOGRADER_SECRET", "a worker's other secret")
        with pytest.raises(ValueError, match=r"course differs from this one \(\S+: grading "
                                             r"secret\)"):
            check_workers(client, None, wanted)
        with pytest.raises(ValueError, match="not on this machine"):
            check_workers(client, str(tmp_path / "elsewhere"), wanted)


def test_a_worker_with_several_threads_refuses_to_grade():
    on_one_thread()  # outside a worker: one learner at a time, fine
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                      dashboard_address=None) as local, Client(local) as client, \
            pytest.raises(RuntimeError, match="runs 2 threads"):
        client.submit(on_one_thread).result()


def test_a_lost_cluster_stops_the_run_instead_of_failing_learners():
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None) as local, Client(local) as client:
        future = client.submit(time.sleep, 1, pure=False)
        future.cancel()
        with pytest.raises(ConnectionError, match="lost the Dask cluster while grading ada/ch02"):
            _finished(future, "ada", "ch02")


def test_cli_grades_on_one_kind_of_cluster(monkeypatch, free_port, tmp_path, capsys):
    monkeypatch.setattr(workers, "CONNECT_TIMEOUT_S", 2)
    where = ["--root", str(tmp_path), "--course-dir", str(tmp_path / "course")]
    # Also with the default's value (argparse's exclusion misses an option given its default).
    for run, args in ((main, ["autograde", "ch02", *where, "--jobs", "1"]),
                      (main, ["autograde", "ch02", *where, "--jobs", "2"]),
                      (demo.main, ["--jobs", "2"])):
        with pytest.raises(SystemExit):
            run([*args, "--scheduler", "tcp://127.0.0.1:1"])
        assert "not allowed with argument" in capsys.readouterr().err
    nowhere = f"tcp://127.0.0.1:{free_port()}"
    assert main(["autograde", "ch02", "--scheduler", nowhere, *where]) == 1
    assert "cannot reach the Dask scheduler" in capsys.readouterr().err
