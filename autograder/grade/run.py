"""Grading a class: the plan of a run, and its learners graded on a Dask cluster's workers.

:func:`autograde` sends each learner's submission, files and all, to the worker processes of a
Dask cluster (:mod:`autograder.grade.cluster`): ``jobs`` local workers, or an existing
cluster's. A worker (:func:`~autograder.grade.learner.grade_safely`) grades one learner after
the other, with the course of its own checkout. The process that called :func:`autograde` alone
writes the results (:mod:`autograder.grade.store`), in the order of the learners. An error
while grading one learner, or a worker that dies grading it again and again, costs only that
learner.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import CancelledError
from dataclasses import dataclass

from distributed import KilledWorker
from distributed.scheduler import NoWorkerError

from autograder.copies.detect import after_grading
from autograder.course import ROOT, Course
from autograder.flags import Flag
from autograder.grade.cluster import grading_client, in_order, submit_root
from autograder.grade.learner import Outcome, grade_safely, pack
from autograder.grade.secret import require_grading_secret
from autograder.grade.store import Summary, store_safely
from autograder.grade.workers import check_sandboxes, check_workers, versions
from autograder.sandbox.launcher import GraderFaultError, Limits, check_sandbox
from autograder.steps.release import ensure_recorded


def submitted_students(course: Course, chapter: str, students: Iterable[str] | None,
                       ) -> list[str]:
    """The students (of ``students``, default all) with a submission folder for ``chapter``,
    sorted."""
    wanted = set(students) if students is not None else None
    return [s for s in course.students("submitted", chapter) if wanted is None or s in wanted]


def autograde(course: Course, chapters: Iterable[str], *, jobs: int = 1,
              scheduler: str | None = None, students: Iterable[str] | None = None,
              limits: Limits | None = None, progress: Callable[[int], object] | None = None,
              copy_check: bool = True) -> list[Summary]:
    """Grade every collected submission of ``chapters`` and store the results.

    Learners are graded in Dask worker processes (:mod:`autograder.grade.cluster`), each
    with its submission's files; this process alone stores the results, in the order of the
    chapters and students, each as soon as it and those before it are graded (an interrupted
    run keeps every learner stored so far; grading again finishes the rest).

    Args:
        course: the course; workers on other machines use their own checkout when its root is
            this repository, else the same path there.
        chapters: chapter ids.
        jobs: worker processes of the local cluster, one learner each at a time.
        scheduler: the address of an existing Dask scheduler (``tcp://host:8786``) whose
            workers grade instead of a local cluster; ``jobs`` is then not used.
        students: only these student ids (default: all with a submission).
        limits: sandbox limits (default: :class:`Limits`).
        progress: called with the number of tasks, returns an object with ``update(n)`` and
            ``close()`` (a tqdm bar); ``None`` for no progress display.
        copy_check: then compare each chapter's learners with the course's code and with each
            other (:mod:`autograder.copies.detect`: ``similarity`` flags, class report).

    Returns:
        One :class:`Summary` per graded submission, sorted by student and chapter.

    Raises:
        ValueError: ``jobs`` is not a positive integer, or a worker runs several threads or
            holds another version of the course.
        ConnectionError: the scheduler cannot be reached or has no workers.
        autograder.grade.secret.SecretError: no class's secret that learners cannot read.
        GraderFaultError: the sandbox cannot run the course's Python (checked first, and where
            a learner's runs fail: :func:`_blame`); the learners not stored yet keep no record.
    """

    if scheduler is None and (not isinstance(jobs, int) or jobs < 1):
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}; pass --jobs 1 or more")
    require_grading_secret()
    course = course.resolved()
    limits = limits or Limits()
    if scheduler is None:
        # The local workers run this Python on this machine: its sandbox is checked before
        # anything starts or is written.
        check_sandbox(limits)
    # The cluster first: a scheduler that cannot be reached fails the run before any work.
    with grading_client(jobs, scheduler) as client:
        plan = Plan.checked(client, course, chapters, students, limits,
                            elsewhere=scheduler is not None)
        results = _store_in_order(client, plan, progress)
    # Copy detection needs the whole class of a chapter, so it runs once all are graded.
    results = after_grading(course, list(plan.versions), results) if copy_check else results
    return sorted(results, key=lambda s: (s.student, s.chapter))


@dataclass(frozen=True)
class Plan:
    """What one run grades, and how each learner travels to a worker.

    Attributes:
        course: the course, its paths absolute.
        limits: the sandbox's limits.
        root: the course root the workers use; None for each worker's own checkout (the
            course is this repository).
        versions: chapter -> this machine's :func:`~autograder.grade.workers.versions`.
        pairs: ``(student, chapter)`` of every submission, in the order of the chapters and
            the students.
    """

    course: Course
    limits: Limits
    root: str | None
    versions: dict[str, dict[str, str]]
    pairs: list[tuple[str, str]]

    @classmethod
    def checked(cls, client, course: Course, chapters: Iterable[str],
                students: Iterable[str] | None, limits: Limits, *, elsewhere: bool) -> Plan:
        """The plan for grading ``chapters`` on ``client``'s workers, once they are checked:
        a sandbox starts on each (``elsewhere``: workers on other machines, whose sandbox the
        caller has not checked) and each holds this course.

        Raises:
            ValueError: a worker holds another version of the course.
            GraderFaultError: a worker cannot start a sandbox.
        """

        if elsewhere:
            check_sandboxes(client, limits)
        wanted, pairs = {}, []
        for chapter in chapters:
            ensure_recorded(course, chapter)
            wanted[chapter] = versions(course.root, chapter)
            pairs += [(student, chapter)
                      for student in submitted_students(course, chapter, students)]
        root = None if course.root == ROOT else str(course.root)
        check_workers(client, root, wanted)
        return cls(course, limits, root, wanted, pairs)

    def submit(self, client, pair: tuple[str, str]):
        """Start grading ``pair`` on a worker (a Dask future of its :class:`Outcome`)."""
        # Packed only now: only the learners handed to Dask have their files in memory.
        student, chapter = pair
        submission = pack(self.course, student, chapter, limits=self.limits, root=self.root,
                          versions=self.versions[chapter])
        return submit_root(client, f"grade-{chapter}-{student}-{uuid.uuid4().hex}",
                           grade_safely, submission)


def _store_in_order(client, plan: Plan, progress: Callable[[int], object] | None,
                    ) -> list[Summary]:
    """Store each learner's outcome, in the order of the plan, as soon as it and those before
    it are graded; stop at the first grader fault.

    Raises:
        GraderFaultError: a learner's outcome is the grader's fault; it and the learners after
            it are not stored.
    """
    course, pairs = plan.course, plan.pairs
    results: list[Summary] = []
    bar = progress(len(pairs)) if progress else None
    try:
        for (student, chapter), future in in_order(
                client, pairs, functools.partial(plan.submit, client)):
            outcome = _finished(future, student, chapter)
            if outcome.fault is not None:
                raise GraderFaultError(
                    f"grading stopped at {student}/{chapter}: {outcome.fault}. Nothing was "
                    f"recorded for it, nor for the {len(pairs) - len(results) - 1} "
                    f"submission(s) after it; the {len(results)} stored before keep their "
                    "grades, and grading again gives them the same")
            results.append(store_safely(course, outcome))
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return results


def _finished(future, student: str, chapter: str) -> Outcome:
    """The outcome of a finished grading task; a task that failed as a whole (its workers
    died, or it raised) becomes a flag of its learner.

    Raises:
        ConnectionError: the task was cancelled, or waited for a worker in vain: the cluster is
            gone, which says nothing about this learner, so nothing is stored for it.
    """
    try:
        return future.result()
    except (CancelledError, NoWorkerError) as exc:
        raise ConnectionError(f"lost the Dask cluster while grading {student}/{chapter} "
                              f"({exc}); the learners stored so far are kept, grade again to "
                              "finish the others") from exc
    except KilledWorker as exc:
        flag = Flag("worker_died", None,
                    f"the worker process grading this submission died "
                    f"{exc.allowed_failures + 1} times (a crash, a memory limit or a lost "
                    "machine); it was not graded and scores 0. Look at the submission, then "
                    "grade this learner again")
    except Exception as exc:
        flag = Flag("grading_error", None, f"grading failed: {type(exc).__name__}: {exc}")
    return Outcome(student, chapter, None, [flag])
