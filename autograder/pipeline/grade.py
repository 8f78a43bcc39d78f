"""Autograde collected submissions without trusting the learner's kernel.

For each learner (:func:`grade_submission`):

1. read the submitted notebook (broken JSON, an empty notebook or another chapter's notebook
   end here, with a flag, and score 0);
2. restore the locked test cells as the release has them
   (:func:`~autograder.pipeline.restore.restore_test_cells`), then
   put the hidden tests of the source notebook back into them;
3. execute the restored copy in the sandbox
   (:func:`~autograder.sandbox.launcher.execute_notebook`);
4. verify every graded function outside the kernel
   (:func:`~autograder.pipeline.verify.verify_exercises`); a graded cell
   the kernel passed but the verification does not confirm scores 0 and is flagged; the
   static audit's findings (:mod:`autograder.pipeline.audit`) become ``audit:<category>`` flags;
5. remove what learners must not see (hidden tests, tracebacks of graded cells) and return the
   notebook with the flags.

:func:`autograde` grades up to ``jobs`` learners at once, in threads: learner code only ever
runs in sandboxed child processes with their own deadlines, so the grading process itself needs
no start-up per learner. The thread that collects the results alone writes them: the
autograded notebook, the gradebook (nbgrader's rule scores each graded cell from its outputs)
and the flag file. An error while grading one learner costs only that learner.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from autograder.course import ROOT, Course
from autograder.exercises.checking import DEVELOPMENT_SECRET, SECRET_ENV
from autograder.exercises.registry import all_exercises
from autograder.flags import Flag, read_flags, write_flags
from autograder.notebook import (
    exercise_ids,
    grade_id,
    graded_test_cells,
    nbgrader_metadata,
    strip_hidden_tests,
)
from autograder.sandbox.launcher import ExecutionResult, Learner, Limits


@dataclass(frozen=True)
class Task:
    """One submission to grade (plain values: paths as strings, limits as a dict)."""

    student: str
    chapter: str
    submission: str  # path of the submitted notebook
    root: str  # course root: solutions/ and notebooks/
    course_dir: str  # hidden from learner code
    limits: dict[str, float]


@dataclass
class Outcome:
    """What grading one submission produced: the notebook to score and the flags."""

    student: str
    chapter: str
    notebook: str  # nbformat JSON
    flags: list[Flag] = field(default_factory=list)
    seconds: float = 0.0


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


def _read_submission(path: Path) -> tuple[NotebookNode | None, str | None]:
    """The notebook at ``path``, or ``(None, reason)`` when it cannot be read as one."""
    if not path.is_file():
        return None, f"no notebook at {path.name} in the submission"
    raw = path.read_bytes()
    if not raw.strip():
        return None, "the notebook file is empty (0 bytes of JSON)"
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, (f"the notebook is not valid JSON ({exc}); it may be truncated or edited "
                      "outside Jupyter. Ask the learner to save it again from Jupyter")
    try:
        nb = nbformat.reads(json.dumps(data), as_version=4)
        nbformat.validate(nb)
    except Exception as exc:  # nbformat raises many kinds for JSON that is not a notebook
        return None, f"the file is JSON but not a valid notebook ({type(exc).__name__}: {exc})"
    return nb, None


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
    from autograder.pipeline.audit import audit_notebook

    return [Flag(f"audit:{f.code}", f"cell {f.cell}",
                 f"cell {f.cell}, line {f.line}: {f.reason} (found by the audit, for a human "
                 "to review; the score does not depend on it)")
            for f in audit_notebook(nb, release=release_nb)]


def kernel_secret(student: str, chapter: str) -> str:
    """The secret given to the learner's kernel: fixed per learner (idempotent re-runs) and
    derived one way from the grader's secret, which the kernel never sees."""
    secret = os.environ.get(SECRET_ENV) or DEVELOPMENT_SECRET
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
    from autograder.pipeline.restore import restore_test_cells
    from autograder.pipeline.verify import kernel_course_folder, verify_exercises
    from autograder.sandbox.launcher import execute_notebook

    started = time.monotonic()
    course, chapter = Course.of(task.root, task.course_dir), task.chapter
    source_nb = nbformat.read(course.source_notebook(chapter), as_version=4)
    release_dir = course.release_dir(chapter)
    release_nb = nbformat.read(course.release_notebook(chapter), as_version=4)
    limits = Limits(**task.limits)

    def done(nb: NotebookNode, flags: list[Flag]) -> Outcome:
        return Outcome(task.student, chapter, nbformat.writes(nb), flags,
                       time.monotonic() - started)

    nb, problem = _read_submission(Path(task.submission))
    code = "unreadable_notebook"
    if nb is not None and not nb.cells:
        problem, code = "the notebook has no cells", "empty_notebook"
    if nb is not None and problem is None:
        problem = _wrong_chapter(nb, source_nb, chapter)
        code = "wrong_chapter"
    if problem is not None:
        return done(placeholder(release_nb, problem), [Flag(code, None, problem)])

    restored, flags = restore_test_cells(nb, release_nb)
    flags = list(flags) + audit_flags(nb, release_nb)
    with_hidden_tests(restored, source_nb)
    ids = exercise_ids(source_nb)
    # One budget (deadline, memory, processes) for everything this learner's code runs.
    with Learner(limits) as learner, tempfile.TemporaryDirectory(prefix="grade-") as files:
        for item in release_dir.iterdir():  # data files the chapter needs, from the release
            if item.is_file() and item.suffix != ".ipynb":
                shutil.copy2(item, files)
        result = execute_notebook(restored, files, learner,
                                  secret=kernel_secret(task.student, chapter),
                                  course=kernel_course_folder())
        executed = result.notebook
        flags += _execution_flags(result, set(ids))
        passed = _kernel_passes(executed, result)
        # Verification confirms the kernel's passes; with none there is nothing to confirm (and
        # a notebook that hangs would only hang again).
        verified = verify_exercises(chapter, nb, learner, source_nb=source_nb,
                                    files=files) if passed else {}
        flags += _budget_flags(learner, result)
    for check in verified.values():
        flags += list(check.flags)
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
    flags += drop_unknown_grade_ids(executed, release_nb)
    strip_for_learners(executed)
    return done(executed, _unique(flags))


def _kernel_passes(executed: NotebookNode, result: ExecutionResult) -> list[NotebookNode]:
    """The graded cells the kernel passed; a graded cell the kernel never finished gets an
    error output, so that it scores 0."""
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


# ------------------------------------------------------------------ one learner, safely


def grade_safely(task: Task) -> Outcome:
    """:func:`grade_submission`, with any unexpected error ending as this learner's flag.

    Learner code never runs in this process (only in sandboxed children with their own
    deadlines), so learners are graded in threads of the grading process: no start-up cost
    per learner, and one learner's failure still leaves the others alone.
    """
    started = time.monotonic()
    try:
        return grade_submission(task)
    except Exception as exc:  # a bug or an odd file must not stop the class
        message = f"grading failed: {type(exc).__name__}: {exc}"
    release = nbformat.read(Course.of(task.root).release_notebook(task.chapter), as_version=4)
    return Outcome(task.student, task.chapter, nbformat.writes(placeholder(release, message)),
                   [Flag("grading_error", None, message)], time.monotonic() - started)


# ------------------------------------------------------------------ the whole class


@dataclass(frozen=True)
class Summary:
    """One graded submission, for the summary table."""

    student: str
    chapter: str
    score: float
    max_score: float
    flags: tuple[Flag, ...]
    seconds: float


def submissions(course: Course, chapter: str, students: Iterable[str] | None) -> list[str]:
    """Students with a submission folder for ``chapter``, sorted."""
    wanted = set(students) if students is not None else None
    return [s for s in course.students("submitted", chapter) if wanted is None or s in wanted]


def autograde(
    chapters: Iterable[str],
    *,
    root: str | os.PathLike = ROOT,
    course_dir: str | os.PathLike | None = None,
    jobs: int = 1,
    students: Iterable[str] | None = None,
    limits: Limits | None = None,
    progress: Callable[[int], object] | None = None,
) -> list[Summary]:
    """Grade every collected submission of ``chapters`` and store the results.

    Args:
        chapters: chapter ids.
        root: the course root (``solutions/``, ``notebooks/``).
        course_dir: the nbgrader course folder; ``<root>/autograder/course`` by default.
        jobs: learners graded at once (each runs its own sandboxed processes).
        students: only these student ids (default: all with a submission).
        limits: sandbox limits (default: :class:`Limits`).
        progress: called with the number of tasks, returns an object with ``update(n)`` and
            ``close()`` (a tqdm bar); ``None`` for no progress display.

    Returns:
        One :class:`Summary` per graded submission, sorted by student and chapter.

    Raises:
        ValueError: ``jobs`` is not a positive integer.
    """
    from autograder.pipeline.gradebook import ensure_chapter
    from autograder.pipeline.release import generate

    if not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}; pass --jobs 1 or more")
    course = Course.of(root, course_dir).resolved()
    config = course.config()
    limits = limits or Limits()
    all_exercises()  # load the checks once, before the threads share them
    tasks = []
    for chapter in chapters:
        if not ensure_chapter(config, chapter):
            # Records the chapter's cells in the gradebook.
            generate([chapter], course.root, course.folder)
        tasks += [Task(student, chapter, str(course.notebook("submitted", student, chapter)),
                       str(course.root), str(course.folder), asdict(limits))
                  for student in submissions(course, chapter, students)]

    bar = progress(len(tasks)) if progress else None
    results = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(grade_safely, task) for task in tasks]
        for future in as_completed(futures):
            outcome = future.result()
            try:
                results.append(_store(outcome, config, course))
            except Exception as exc:  # one learner's storage problem must not stop the class
                flag = Flag("grading_error", None, f"storing the results failed: "
                                                   f"{type(exc).__name__}: {exc}")
                write_flags(course.folder, outcome.student, outcome.chapter, "grade", [flag])
                results.append(Summary(outcome.student, outcome.chapter, 0.0, 0.0, (flag,),
                                       outcome.seconds))
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    return sorted(results, key=lambda s: (s.student, s.chapter))


def _store(outcome: Outcome, config, course: Course) -> Summary:
    """Write one outcome: autograded notebook, gradebook scores, flags (main process only)."""
    from nbgrader.utils import determine_grade, parse_utc

    from autograder.pipeline.gradebook import save_grades

    student, chapter = outcome.student, outcome.chapter
    nb = nbformat.reads(outcome.notebook, as_version=4)
    submitted = course.step_dir("submitted", student, chapter)
    target = course.step_dir("autograded", student, chapter)
    target.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target / f"{chapter}.ipynb")
    stamp = submitted / "timestamp.txt"
    timestamp = None
    if stamp.is_file():
        timestamp = parse_utc(stamp.read_text(encoding="utf-8").strip())
        shutil.copy2(stamp, target / "timestamp.txt")
    save_grades(config, student, chapter, nb, timestamp, flagged=bool(outcome.flags))
    write_flags(course.folder, student, chapter, "grade", outcome.flags)
    scored = [determine_grade(c) for c in graded_test_cells(nb)]
    flags = tuple(read_flags(course.folder, student, chapter))
    return Summary(student, chapter, float(sum(s for s, _ in scored)),
                   float(sum(m for _, m in scored)), flags, outcome.seconds)

