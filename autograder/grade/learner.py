"""Autograde collected submissions without trusting the learner's kernel.

For each learner (:func:`grade_submission`):

1. read the submitted notebook (:func:`~autograder.grade.submission.read_submission`:
   what can be repaired is, with a flag; broken or oversized JSON, an empty notebook or another
   chapter's notebook end here, with a flag, and score 0);
2. restore the locked test cells as the release has them
   (:func:`~autograder.grade.restore.restore_test_cells`), then
   put the hidden tests of the source notebook back into them;
3. execute the restored copy in the sandbox
   (:func:`~autograder.sandbox.launcher.execute_notebook`); meanwhile the learner processes
   of step 4 start and run the solution cells, so that their start-up costs no extra time;
4. verify every graded function outside the kernel
   (:class:`~autograder.grade.verify.Verification`); a graded cell
   the kernel passed but the verification does not confirm scores 0 and is flagged; the
   static audit's findings (:mod:`autograder.grade.audit`) become ``audit:<category>`` flags;
5. remove what learners must not see (hidden tests, tracebacks of graded cells) and return the
   notebook with the flags.

:func:`grade_learner` grades one learner in this process; a worker of a class's run
(:mod:`autograder.grade.run`) grades each learner with :func:`grade_safely`, on the files that
:func:`pack` sent it. Neither stores anything: that is :mod:`autograder.grade.store`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from autograder.course import ROOT, Course
from autograder.exercises.checking import DEVELOPMENT_SECRET, grading_secret
from autograder.flags import Flag
from autograder.grade.audit import audit_notebook
from autograder.grade.restore import restore_test_cells
from autograder.grade.submission import Reading, read_submission
from autograder.grade.verify import Verification, kernel_course_folder
from autograder.grade.workers import differences, on_one_thread, versions
from autograder.notebook import (
    exercise_ids,
    grade_id,
    graded_test_cells,
    nbgrader_metadata,
    strip_hidden_tests,
)
from autograder.sandbox.launcher import (
    ExecutionResult,
    Learner,
    Limits,
    execute_notebook,
    grader_fault,
    sandbox_problem,
)


@dataclass(frozen=True)
class Task:
    """One submission to grade on this machine (plain values: paths as strings, limits as a
    dict): what :func:`grade_submission` reads."""

    student: str
    chapter: str
    submission: str  # path of the submitted notebook
    root: str  # course root: solutions/ and notebooks/
    limits: dict[str, float]


@dataclass
class Outcome:
    """What grading one submission produced: the notebook to score and the flags, or the
    grader's own failure (``fault``), which is never stored as the learner's grade."""

    student: str
    chapter: str
    notebook: str | None  # nbformat JSON; None: not graded, the flags say why (scores 0)
    flags: list[Flag] = field(default_factory=list)
    seconds: float = 0.0
    fault: str | None = None  # the grader broke: what happened and the fix, for a human


@dataclass(frozen=True)
class Submission:
    """One learner's submission as it travels to a grading worker, perhaps on another machine.

    It carries the learner's files, not paths into the course folder, so that a worker needs
    no shared folder; the course's own notebooks come from the worker's checkout, which must be
    the same course (``versions``, see :func:`autograder.grade.workers.versions`).
    """

    student: str
    chapter: str
    files: dict[str, bytes]  # the submission folder: relative path -> content
    limits: dict[str, float]
    root: str | None  # the course root; None: the worker's own checkout
    versions: dict[str, str]
    refused: Flag | None = None  # why the files were not sent (then ``files`` is empty)


# ------------------------------------------------------------------ notebook helpers


def _error_output(title: str, message: str) -> NotebookNode:
    return nbformat.v4.new_output("error", ename=title, evalue=message,
                                  traceback=[f"{title}: {message}"])


def fail_cell(cell: NotebookNode, title: str, message: str) -> None:
    """Give a graded cell an error output, so that nbgrader scores it 0 and says why."""
    cell.outputs = [*cell.get("outputs", []), _error_output(title, message)]


def placeholder(release_nb: NotebookNode, reason: str) -> NotebookNode:
    """The release notebook with every graded cell failed with ``reason`` (scores 0)."""
    nb = nbformat.from_dict(json.loads(json.dumps(release_nb)))
    for cell in graded_test_cells(nb):
        cell.outputs = []
        fail_cell(cell, "SubmissionNotGraded", reason)
    return nb


def strip_for_learners(nb: NotebookNode) -> None:
    """Remove hidden tests from sources and tracebacks from graded cells (in place).

    Feedback is rendered from this notebook, so it must not show hidden test code; the error
    name and message (the diagnosis) stay.
    """
    graded = {id(cell) for cell in graded_test_cells(nb)}
    for cell in nb.cells:
        cell.source = strip_hidden_tests(cell.source)
        if id(cell) in graded:
            for output in cell.get("outputs", []):
                if output.output_type == "error":
                    output.traceback = [f"{output.ename}: {output.evalue}"]


def with_hidden_tests(nb: NotebookNode, source_nb: NotebookNode) -> None:
    """Give the graded test cells of ``nb`` the source's text, hidden tests included (in place).

    Learners receive the release, so their locked cells are restored from (and compared with)
    the release; only then do the hidden tests go back in, for the kernel to run.
    """
    sources = {grade_id(c): c.source for c in graded_test_cells(source_nb)}
    for cell in graded_test_cells(nb):
        cell.source = sources.get(grade_id(cell), cell.source)


def drop_unknown_grade_ids(nb: NotebookNode, release_nb: NotebookNode) -> list[Flag]:
    """Remove nbgrader metadata whose grade id the release does not have, or has once only.

    The gradebook holds the release's cells only; any other grade id (a solution cell the
    learner renamed or copied) would make nbgrader fail to store the scores.
    """
    known = {grade_id(c) for c in release_nb.cells if nbgrader_metadata(c)}
    seen: set[str] = set()
    flags = []
    for index, cell in enumerate(nb.cells):
        cell_grade_id = grade_id(cell)
        if cell_grade_id is None:
            continue
        if cell_grade_id not in known or cell_grade_id in seen:
            del cell.metadata["nbgrader"]
            flags.append(Flag("unknown_grade_id", cell_grade_id,
                              f"cell {index} carries the grade id {cell_grade_id!r}, which the "
                              "release does not have (or has once); its nbgrader metadata was "
                              "removed"))
        seen.add(cell_grade_id)
    return flags


def _wrong_chapter(nb: NotebookNode, source_nb: NotebookNode, chapter: str) -> str | None:
    ours = {grade_id(c) for c in source_nb.cells if nbgrader_metadata(c)}
    theirs = {grade_id(c) for c in nb.cells if nbgrader_metadata(c)} - {None}
    if theirs and not theirs & ours:
        prefixes = sorted({str(g).split("_")[0] for g in theirs})
        return (f"the notebook holds the graded cells of {', '.join(prefixes)}, not of "
                f"{chapter}; it was submitted under the wrong chapter")
    return None


def audit_flags(nb: NotebookNode, release_nb: NotebookNode) -> list[Flag]:
    """The static audit's findings as flags ``audit:<category>``, for a human to review;
    they change no score."""
    try:
        findings = audit_notebook(nb, release=release_nb)
    except Exception as exc:  # the audit of one odd notebook must not stop its grading
        return [Flag("audit:unreadable", None,
                     f"the audit could not read this notebook ({type(exc).__name__}: "
                     f"{str(exc)[:200]}); it was graded, for a human to review")]
    return [Flag(f"audit:{f.code}", f"cell {f.cell}",
                 f"cell {f.cell}, line {f.line}: {f.reason} (found by the audit, for a human "
                 "to review; the score does not depend on it)")
            for f in findings]


def kernel_secret(student: str, chapter: str) -> str:
    """The secret given to the learner's kernel: fixed per learner (idempotent re-runs) and
    derived one way from the grader's secret, which the kernel never sees."""
    secret = grading_secret() or DEVELOPMENT_SECRET
    return hashlib.sha256(f"{secret}\0kernel\0{student}\0{chapter}".encode()).hexdigest()


# ------------------------------------------------------------------ one submission


def _execution_flags(result: ExecutionResult, graded: set[str]) -> list[Flag]:
    flags = []
    if not result.ok:
        flags.append(Flag("execution_failed", None, result.reason))
    if result.output_truncated:
        flags.append(Flag("output_truncated", None,
                          "the notebook printed more output than allowed; the rest was cut off"))
    for cell in result.cells:
        where = cell.grade_id or cell.cell_id or f"cell {cell.index}"
        if cell.status == "timeout":
            flags.append(Flag("cell_timeout", where, f"{where} ran past the time limit and was "
                                                     "interrupted"))
        elif cell.status == "kernel_died":
            flags.append(Flag("kernel_died", where, f"the kernel process ended during {where} "
                                                    "(os._exit, a crash, or a resource limit)"))
        elif cell.status == "error" and cell.grade_id not in graded:
            code = "memory_limit" if cell.ename == "MemoryError" else "cell_error"
            flags.append(Flag(code, where, f"{where} raised {cell.ename}: "
                                           f"{(cell.evalue or '')[:200]}"))
    return flags


def grade_submission(task: Task) -> Outcome:
    """Grade one submission (the worker's job); never raises because of the submission."""
    started = time.monotonic()
    course, chapter = Course.of(task.root), task.chapter
    source_nb = nbformat.read(course.source_notebook(chapter), as_version=4)
    release_nb = nbformat.read(course.release_notebook(chapter), as_version=4)

    def done(nb: NotebookNode, flags: list[Flag]) -> Outcome:
        return Outcome(task.student, chapter, nbformat.writes(nb), flags,
                       time.monotonic() - started)

    reading = read_submission(Path(task.submission))
    refusal = _refusal(reading, source_nb, chapter)
    if refusal is not None:
        return done(placeholder(release_nb, refusal.reason), [*reading.flags, refusal])
    nb = reading.notebook
    restored, flags = restore_test_cells(nb, release_nb)
    flags = [*reading.flags, *flags, *audit_flags(nb, release_nb)]
    with_hidden_tests(restored, source_nb)
    executed, checked = _execute_and_verify(task, course, restored, source_nb)
    flags += checked
    flags += drop_unknown_grade_ids(executed, release_nb)
    strip_for_learners(executed)
    return done(executed, _unique(flags))


def _refusal(reading: Reading, source_nb: NotebookNode, chapter: str) -> Flag | None:
    """Why the notebook read cannot be graded (unreadable, empty, another chapter's), or None."""
    nb = reading.notebook
    if nb is None or reading.refusal is not None:
        return reading.refusal
    if not nb.cells:
        return Flag("empty_notebook", None, "the notebook has no cells")
    wrong = _wrong_chapter(nb, source_nb, chapter)
    return Flag("wrong_chapter", None, wrong) if wrong else None


def _execute_and_verify(task: Task, course: Course, restored: NotebookNode,
                        source_nb: NotebookNode) -> tuple[NotebookNode, list[Flag]]:
    """Execute the restored notebook in the sandbox while the learner processes start, then
    verify the cells the kernel passed; the executed notebook (unconfirmed passes failed) and
    the flags of both."""
    # nbconvert is heavy: loaded when a notebook is executed.
    from nbconvert.preprocessors import CoalesceStreamsPreprocessor

    chapter, ids = task.chapter, exercise_ids(source_nb)
    # One budget (deadline, memory, processes) for everything this learner's code runs.
    with Learner(Limits(**task.limits)) as learner, \
            tempfile.TemporaryDirectory(prefix="grade-") as files:
        for item in course.release_dir(chapter).iterdir():  # the chapter's data files
            if item.is_file() and item.suffix != ".ipynb":
                shutil.copy2(item, files)
        # The restored notebook: its cells have the release's nbgrader roles.
        with Verification(chapter, restored, learner, source_nb=source_nb,
                          files=files) as verification:
            # The learner processes run the solution cells while the kernel runs the notebook.
            verification.start()
            result = execute_notebook(restored, files, learner,
                                      secret=kernel_secret(task.student, chapter),
                                      course=kernel_course_folder())
            # How a cell's prints reach the notebook, as one stream output or several, depends
            # on timing: merged, grading the same submission again gives the same notebook.
            executed, _ = CoalesceStreamsPreprocessor().preprocess(result.notebook, {})
            flags = _execution_flags(result, set(ids))
            passed = _kernel_passes(executed, result)
            # Verification confirms the kernel's passes; with none there is nothing to confirm
            # (and a notebook that hangs would only hang again).
            verified = verification.results() if passed else {}
        flags += _budget_flags(learner, result)
    for check in verified.values():
        flags += list(check.flags)
    return executed, flags + _confirm(passed, verified, ids)


def _confirm(passed: list[NotebookNode], verified: dict, ids: dict[str, str]) -> list[Flag]:
    """Fail each cell the kernel passed that the grader's own check (``verified``, by exercise
    id) does not confirm; a ``verification_failed`` flag each."""
    flags = []
    for cell in passed:
        cell_grade_id = grade_id(cell)
        check = verified.get(ids.get(cell_grade_id, ""))
        if check is None or not check.passed:
            why = check.message if check is not None else "no registered exercise for this cell"
            fail_cell(cell, "VerificationFailed",
                      f"the notebook reported a pass, but the grader's own check outside the "
                      f"notebook did not confirm it: {why}")
            flags.append(Flag("verification_failed", cell_grade_id,
                              f"{cell_grade_id} passed in the notebook but not in the grader's own "
                              f"check; scored 0. {why}"))
    return flags


def _kernel_passes(executed: NotebookNode, result: ExecutionResult) -> list[NotebookNode]:
    """The graded cells the kernel passed; a graded cell the kernel never finished gets an
    error output, so that it scores 0."""
    # nbgrader takes a second to import: loaded when this runs, not with the module.
    from nbgrader.utils import determine_grade

    statuses = {c.grade_id: c.status for c in result.cells if c.grade_id}
    passed = []
    for cell in graded_test_cells(executed):
        status = statuses.get(grade_id(cell), "not_run")
        if status in ("timeout", "kernel_died", "not_run") and not any(
                o.output_type == "error" for o in cell.outputs):
            fail_cell(cell, "CellNotCompleted", f"this test cell did not complete ({status}), "
                                                "so it scores 0")
        score, max_score = determine_grade(cell)
        if score == max_score:
            passed.append(cell)
    return passed


def _budget_flags(learner: Learner, result: ExecutionResult) -> list[Flag]:
    """Flags for a learner whose code used up the learner's whole time or memory."""
    limits = learner.limits
    flags = []
    if learner.remaining() <= 0:
        flags.append(Flag("learner_timeout", None,
                          f"grading this learner took the whole {limits.learner_timeout_s:g} s "
                          "allowed for one learner (notebook and verification together); what "
                          "was not checked by then scores 0"))
    if result.memory_exceeded or learner.memory_exceeded():
        flags.append(Flag("memory_limit", None,
                          f"the learner's processes together went over {limits.memory_mb} MiB "
                          "of memory and were stopped"))
    return flags


def _unique(flags: Iterable[Flag]) -> list[Flag]:
    return list(dict.fromkeys(flags))


# ------------------------------------------------------------------ one learner, on a worker

# Largest submission folder sent to a worker (collect accepts notebooks up to 50 MiB).
MAX_SUBMISSION_BYTES = 64 * 2**20


def pack(course: Course, student: str, chapter: str, *, limits: Limits, root: str | None,
         versions: dict[str, str]) -> Submission:
    """The submission of ``student`` for ``chapter`` with the files of its folder (symbolic
    links are left out: they could point anywhere on this machine)."""
    folder = course.step_dir("submitted", student, chapter)

    def packed(files: dict[str, bytes], refused: Flag | None = None) -> Submission:
        return Submission(student, chapter, files, asdict(limits), root, versions, refused)

    try:
        paths = [Path(top, name) for top, _, names in os.walk(folder) for name in names]
        paths = sorted(p for p in paths if p.is_file() and not p.is_symlink())
        size = sum(p.stat().st_size for p in paths)
        if size > MAX_SUBMISSION_BYTES:
            return packed({}, Flag(
                "submission_too_large", None,
                f"the submission folder holds {size / 2**20:.0f} MiB, more than the "
                f"{MAX_SUBMISSION_BYTES // 2**20} MiB a submission may; it was not graded. "
                f"Remove the files the notebook does not need from {folder}, then grade this "
                "learner again"))
        return packed({p.relative_to(folder).as_posix(): p.read_bytes() for p in paths})
    except OSError as exc:
        return packed({}, Flag("grading_error", None,
                               f"the submission folder could not be read: {exc}"))


def grade_safely(submission: Submission) -> Outcome:
    """Grade one submission on this machine (a worker's job); never raises.

    The files are written to a temporary folder, the course comes from ``submission.root`` or
    this checkout; any unexpected error ends as a ``grading_error`` flag of this learner and an
    Outcome without a notebook. What is the grader's fault and not the learner's (a course
    that differs from the grader's, a sandbox that cannot start: :func:`_blame`) ends as an
    Outcome with a ``fault`` instead.
    """
    started = time.monotonic()
    student, chapter = submission.student, submission.chapter

    def not_graded(flag: Flag | None, fault: str | None = None) -> Outcome:
        return Outcome(student, chapter, None, [flag] if flag else [],
                       time.monotonic() - started, fault)

    if submission.refused is not None:
        return not_graded(submission.refused)
    root = submission.root or str(ROOT)
    try:
        on_one_thread()
        differ = differences(submission.versions, root, chapter)
        if differ:
            return not_graded(None, (
                f"the worker's course differs from the grader's ({', '.join(differ)}); install "
                "the same course, and export the same AUTOGRADER_SECRET, on every worker; then "
                "grade again"))
        with tempfile.TemporaryDirectory(prefix=f"submission-{student}-") as folder:
            notebook = Path(folder) / chapter / f"{chapter}.ipynb"
            for name, data in submission.files.items():
                (notebook.parent / name).parent.mkdir(parents=True, exist_ok=True)
                (notebook.parent / name).write_bytes(data)
            outcome = grade_submission(Task(student, chapter, str(notebook), root,
                                            submission.limits))
    except Exception as exc:  # a bug or an odd file must not stop the class
        outcome = not_graded(Flag("grading_error", None,
                                  f"grading failed: {type(exc).__name__}: {exc}"))
    return _blame(outcome, Limits(**submission.limits))


# What a sandbox that cannot start gives every learner alike: no kernel, no learner process.
SANDBOX_FAILURES = frozenset({"execution_failed", "worker_died", "grading_error"})


def _blame(outcome: Outcome, limits: Limits) -> Outcome:
    """``outcome``, or a grader fault in its place.

    A learner whose runs failed (:data:`SANDBOX_FAILURES`) is checked against a sandbox that
    runs no learner code (:func:`~autograder.sandbox.launcher.sandbox_problem`), started now,
    after the learner's processes are gone: when that fails too, the grader broke, not the
    learner, and the failure is the grader's.
    """
    if not any(f.code in SANDBOX_FAILURES for f in outcome.flags):
        return outcome
    problem = sandbox_problem(limits)
    if problem is None:
        return outcome
    return Outcome(outcome.student, outcome.chapter, None, [], outcome.seconds,
                   grader_fault(problem))


def grade_learner(course: Course, student: str, chapter: str, *,
                  limits: Limits | None = None) -> Outcome:
    """Grade ``student``'s submission of ``chapter`` in this process, as a worker of
    :func:`~autograder.grade.run.autograde` grades it (:func:`pack`, then
    :func:`grade_safely`); the outcome is not stored (:mod:`autograder.grade.store`)."""
    return grade_safely(pack(course, student, chapter, limits=limits or Limits(),
                             root=str(course.root), versions=versions(course.root, chapter)))
