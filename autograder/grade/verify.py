"""Grade every exercise of a submission outside the learner's kernel, with the checks here.

For each exercise the grader starts a sandboxed learner process (:mod:`autograder.sandbox`)
that holds only what the exercise allows: the third-party imports of the chapter's setup cell,
the course's building blocks on the exercise's allow-list (:attr:`Exercise.allowed`, under the
names the setup cell gives them), the course's helper definitions, and the learner's solution
cells. The checks run here, in the grader's process, and reach the learner's code only through
proxies (:mod:`autograder.sandbox.client`): functions and classes are called there with values
sent from here, modules are mirrored here. So no check, expected value or reference object is
ever in a process that runs learner code, and the exercise's reference is not even on that
process's file system.

Exercises of a chapter share a learner process when the modules they allow, with everything
those import, hold none of their references (:func:`plan`).
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import functools
import importlib
import os
import re
import shutil
import tempfile
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbformat import NotebookNode

from autograder.course import ROOT
from autograder.exercises.reach import (
    COURSE_PACKAGES,
    closure,
    defining_module,
    module_file,
    reference_module,
    setup_import_nodes,
)
from autograder.exercises.registry import (
    CHAPTERS,
    Exercise,
    all_exercises,
    get_exercise,
    grade_function,
)
from autograder.flags import Flag
from autograder.notebook import grade_id, nbgrader_metadata, solution_cells
from autograder.sandbox.client import LearnerProcess
from autograder.sandbox.launcher import GRACE_S, Learner, learner_job
from autograder.sandbox.learner_errors import WorkerFailedError

# Setup imports that solutions never need and that only slow the learner's process down.
SKIPPED_IMPORTS = ("matplotlib", "IPython", "tqdm")
FIRST_TORCH_CHAPTER = 7
_USES_TORCH = re.compile(r"\btorch\b")


@dataclass(frozen=True)
class VerifiedResult:
    """The grader's verdict on one exercise, and what it flagged.

    ``verified`` is False when the exercise could not be checked (then ``passed`` is False
    and ``message`` says why).
    """

    passed: bool
    message: str
    verified: bool = True
    flags: tuple[Flag, ...] = ()


# ----------------------------------------------------------------------------- allow-lists


def allowed_modules(exercises: Iterable[Exercise]) -> set[str]:
    """Every course module the learner's process for ``exercises`` loads."""
    roots = set()
    for exercise in exercises:
        for entry in (*exercise.allowed, *exercise.builders):
            module, _, attribute = entry.partition(":")
            roots |= {module, defining_module(module, attribute) if attribute else module}
    return closure(roots)


def plan(exercises: list[Exercise]) -> list[list[Exercise]]:
    """Exercises grouped into learner processes, in order: an exercise joins the first group
    whose modules, with its own, reach none of the group's references nor its own."""
    groups: list[list[Exercise]] = []
    for exercise in exercises:
        for group in groups:
            members = [*group, exercise]
            modules = allowed_modules(members)
            if not modules & {reference_module(e) for e in members}:
                group.append(exercise)
                break
        else:
            groups.append([exercise])
    return groups


# ----------------------------------------------------------------------------- bindings


def _allowed_objects(exercises: Iterable[Exercise]) -> dict[int, tuple[str, str]]:
    """``id(object) -> (module, attribute)`` of every allowed "module:attribute" entry."""
    found = {}
    for exercise in exercises:
        for entry in exercise.allowed:
            module, _, attribute = entry.partition(":")
            if attribute:
                found[id(getattr(importlib.import_module(module), attribute))] = (module,
                                                                                  attribute)
    return found


def _whole_modules(exercises: Iterable[Exercise]) -> set[str]:
    return {entry for e in exercises for entry in e.allowed if ":" not in entry}


def setup_bindings(source_nb: NotebookNode, exercises: list[Exercise]
                   ) -> tuple[list[str], list[list[Any]]]:
    """What the learner's process gives the solution cells, from the source notebook's setup.

    Returns:
        ``(imports, bindings)``: import statements of third-party modules, and for each name
        the setup binds to something of the course: ``[name, module, attribute]`` when it is an
        allowed building block, or ``[name, {attribute: [module, attribute]}]`` for a module the
        setup imports under a name (only its allowed attributes). Names the exercises may not
        use are left out, so using them fails with a NameError.
    """
    objects = _allowed_objects(exercises)
    whole = _whole_modules(exercises)
    imports, bindings = [], []
    for node in setup_import_nodes(source_nb):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in COURSE_PACKAGES:
                    bound = alias.asname or alias.name.split(".")[0]
                    if alias.asname:
                        _bind_module(bindings, bound, alias.name, objects, whole)
                elif not alias.name.startswith(SKIPPED_IMPORTS):
                    imports.append(ast.unparse(ast.Import(names=[alias])))
            continue
        module = node.module or ""
        if module.split(".")[0] not in COURSE_PACKAGES:
            if not module.startswith(SKIPPED_IMPORTS):
                imports.append(ast.unparse(node))
            continue
        for alias in node.names:
            bound = alias.asname or alias.name
            value = getattr(importlib.import_module(module), alias.name, None)
            if isinstance(value, types.ModuleType):
                _bind_module(bindings, bound, value.__name__, objects, whole)
            elif id(value) in objects:
                bindings.append([bound, *objects[id(value)]])
            elif module in whole:
                bindings.append([bound, module, alias.name])
    return imports, bindings


def _bind_module(bindings: list[list[Any]], bound: str, module: str,
                 objects: dict[int, tuple[str, str]], whole: set[str]) -> None:
    value = importlib.import_module(module)
    if module in whole:
        bindings.append([bound, module, None])
        return
    # dir(), not vars(): a gathering module holds its names only once they are used.
    names = sorted(n for n in {*vars(value), *dir(value)} if not n.startswith("_"))
    members = {name: list(objects[id(v)]) for name in names
               if id(v := getattr(value, name)) in objects}
    bindings.append([bound, members])


def substitutes(exercises: list[Exercise]) -> list[list[str]]:
    """``[name, module, attribute]`` for every other exercise of the chapter whose reference
    ``exercises`` may use: after the solution cells ran, the learner's own definition of that
    name is replaced by it, so that an exercise built on an earlier one (chapter 7's encoder
    layer on the learner's attention) is graded on its own, and a mistake costs points once."""
    objects = _allowed_objects(exercises)
    found = []
    for other in all_exercises():
        if other.chapter == exercises[0].chapter and other not in exercises:
            where = objects.get(id(other.load_reference()))
            if where is not None:
                found.append([other.defines, *where])
    return found


def setup_definitions(source_nb: NotebookNode, defined: set[str]) -> list[str]:
    """Ordinary code cells of the source notebook that only define functions or classes (a
    helper the solutions call); definitions of the graded names themselves are left out."""
    sources = []
    for cell in source_nb.cells:
        if cell.cell_type != "code" or nbgrader_metadata(cell):
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        kinds = (ast.FunctionDef, ast.ClassDef)
        if tree.body and all(isinstance(n, kinds) and n.name not in defined for n in tree.body):
            sources.append(cell.source)
    return sources


# ----------------------------------------------------------------------------- course folder


def course_folder(modules: Iterable[str]) -> Path:
    """A fresh folder holding only ``modules`` of the course (and empty package files), for the
    learner's process to import from. The caller removes it."""
    folder = Path(tempfile.mkdtemp(prefix="autograder-course-"))
    folder.chmod(0o755)  # the sandbox's unprivileged user reads it
    for module in sorted(modules):
        parts = module.split(".")
        for depth in range(1, len(parts)):
            package = folder.joinpath(*parts[:depth])
            package.mkdir(exist_ok=True)
            init = package / "__init__.py"
            if not init.exists():
                init.write_text('"""The parts of the course this exercise may use."""\n')
        target = folder.joinpath(*parts[:-1], parts[-1] + ".py")
        shutil.copyfile(module_file(module), target)
    return folder


# Parts of the course a notebook's own cells never import (the grading steps, collecting,
# grading, copy detection, nbgrader's hooks, the sandbox, the tutorial-style implementations);
# the rest is what the kernel gets.
KERNEL_LEAVES_OUT = ("autograder/steps", "autograder/collect", "autograder/grade",
                     "autograder/copies", "autograder/nbgrader_hooks", "autograder/sandbox",
                     "autograder/tutorial_style", "autograder/course")


@functools.cache
def kernel_course_folder() -> Path:
    """A folder with the course's packages as a learner's notebook imports them (its setup
    cells and its test cells' ``check``), for the kernel's sandbox. Made once per process.

    The kernel may use the whole reference: what it reports is never trusted, only the
    verification (:func:`verify_exercises`), whose processes hold far less.
    """
    _remove_orphaned_kernel_courses()
    folder = Path(tempfile.mkdtemp(prefix=f"{KERNEL_COURSE_PREFIX}{os.getpid()}-"))
    folder.chmod(0o755)  # the sandbox's unprivileged user reads it
    atexit.register(shutil.rmtree, folder, True)
    for package in ("transformer_ref", "autograder"):
        shutil.copytree(ROOT / package, folder / package, ignore=_kernel_ignore(ROOT))
    return folder


KERNEL_COURSE_PREFIX = "autograder-kernel-course-"


def _remove_orphaned_kernel_courses() -> None:
    """Remove the kernel folders of this account's grading processes that have ended.

    A process removes its own folder when it exits, but a grading worker that is killed (a
    Dask worker restarted, a server stopped with SIGKILL) cannot: over a semester each left
    a copy of the course in the temporary folder."""
    for folder in Path(tempfile.gettempdir()).glob(f"{KERNEL_COURSE_PREFIX}*-*"):
        pid = folder.name[len(KERNEL_COURSE_PREFIX):].split("-", 1)[0]
        with contextlib.suppress(OSError):
            if (pid.isdigit() and folder.is_dir() and not folder.is_symlink()
                    and folder.stat().st_uid == os.getuid() and not _running(int(pid))):
                shutil.rmtree(folder, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another account's process
        return True
    return True


def _kernel_ignore(root: Path) -> Callable[[str, list[str]], set[str]]:
    def ignore(directory: str, names: list[str]) -> set[str]:
        relative = Path(directory).relative_to(root).as_posix()
        return {n for n in names if n == "__pycache__" or n.endswith(".pyc")
                or f"{relative}/{n}" in KERNEL_LEAVES_OUT}

    return ignore


# ----------------------------------------------------------------------------- verification


def chapter_id(chapter: str) -> str:
    """``"ch02"`` or ``"ch02_attention"`` -> ``"ch02_attention"``.

    Raises:
        ValueError: unknown chapter.
    """
    if chapter in CHAPTERS:
        return CHAPTERS[chapter]
    if chapter in CHAPTERS.values():
        return chapter
    raise ValueError(f"unknown chapter {chapter!r}; expected one of "
                     f"{', '.join(CHAPTERS.values())} or a prefix such as 'ch02'")


def learner_cells(nb: NotebookNode) -> list[dict[str, str]]:
    """The solution cells as the learner's process runs them: named by grade id, without
    IPython magics and shell escapes."""
    cells = []
    for index, cell in solution_cells(nb):
        source = "\n".join(line for line in cell.source.splitlines()
                           if not line.lstrip().startswith(("%", "!")))
        cells.append({"name": grade_id(cell) or f"cell {index}", "source": source})
    return cells


def verify_exercises(
    chapter: str,
    submitted_nb: NotebookNode,
    learner: Learner,
    *,
    source_nb: NotebookNode,
    files: str | Path | None = None,
) -> dict[str, VerifiedResult]:
    """Grade every exercise of ``chapter`` outside the learner's kernel (hidden checks).

    Args:
        chapter: a chapter id (``"ch02_attention"``) or prefix (``"ch02"``).
        submitted_nb: the learner's notebook; not modified. Only its solution cells run.
        learner: the learner's budget (:class:`autograder.sandbox.launcher.Learner`): every
            call is bounded by ``cell_timeout_s`` and by the learner's deadline.
        source_nb: the chapter's instructor notebook; its setup cell names
            the building blocks and helpers the learner's process gets.
        files: the learner's other files (the process works on a private copy).

    Returns:
        ``{exercise_id: VerifiedResult}`` for every registered exercise of the chapter.

    Raises:
        ValueError: unknown chapter.
    """
    with Verification(chapter, submitted_nb, learner, source_nb=source_nb,
                      files=files) as verification:
        return verification.results()


class Verification:
    """The learner processes that grade one submission (:func:`verify_exercises`, same
    arguments), which :meth:`start` may start ahead of :meth:`results`: they then run the
    solution cells while the grader does other work, such as running the notebook.

    Use it as a context manager: leaving it stops every process and removes their folders.
    """

    def __init__(self, chapter: str, submitted_nb: NotebookNode, learner: Learner, *,
                 source_nb: NotebookNode, files: str | Path | None = None) -> None:
        chapter = chapter_id(chapter)
        exercises = [e for e in all_exercises() if e.chapter == chapter]
        self.ids = [e.id for e in exercises]
        cells = learner_cells(submitted_nb)
        self.groups: list[_Group] = []
        try:
            for group in plan(exercises):
                self.groups.append(_Group(group, cells, source_nb, learner, files))
        except BaseException:
            self.close()
            raise

    def start(self) -> None:
        """Start the first process of every group without waiting for it."""
        for group in self.groups:
            group.start_early()

    def results(self) -> dict[str, VerifiedResult]:
        """``{exercise_id: VerifiedResult}`` for every registered exercise of the chapter, in
        notebook order (the processes' groups need not follow it)."""
        results: dict[str, VerifiedResult] = {}
        for group in self.groups:
            results.update(group.verify())
        return {exercise_id: results[exercise_id] for exercise_id in self.ids}

    def close(self) -> None:
        for group in self.groups:
            group.close()

    def __enter__(self) -> Verification:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def process_spec(exercises: list[Exercise], cells: list[dict[str, str]],
                 source_nb: NotebookNode) -> tuple[dict[str, Any], set[str]]:
    """The spec of the learner process that verifies ``exercises`` (see the ``learner`` mode
    of :mod:`autograder.sandbox.worker`), and the course modules it may load."""
    modules = allowed_modules(exercises)
    imports, bindings = setup_bindings(source_nb, exercises)
    torch = (int(exercises[0].id[2:4]) >= FIRST_TORCH_CHAPTER
             or any(e.builders for e in exercises)
             or any(_USES_TORCH.search(c["source"]) for c in cells))
    if not torch:  # a NumPy chapter's setup may import torch for its demos: not needed here
        imports = [i for i in imports if not _USES_TORCH.search(i)]
    packages = {m.rsplit(".", depth)[0] for m in modules for depth in range(1, m.count(".") + 1)}
    spec = {
        "course_roots": list(COURSE_PACKAGES),
        "allowed_modules": sorted(modules | packages),
        "imports": imports, "bindings": bindings,
        "definitions": setup_definitions(source_nb, {e.defines for e in exercises}),
        "cells": cells,
        "substitutes": substitutes(exercises),
        "builders": sorted({b for e in exercises for b in e.builders}),
        # The earlier exercises' names too: the grader calls them to carry an error forward.
        "exercise_names": sorted({e.defines for e in exercises}
                                 | {get_exercise(d).defines for e in exercises
                                    for d in e.depends}),
        "torch": torch,
    }
    return spec, modules


def _owner(cell_name: str, exercise: Exercise) -> bool:
    """Whether a solution cell (named by grade id) is the exercise's own."""
    return cell_name == f"{exercise.id[:4]}_{exercise.name}_solution"


class _Group:
    """The exercises verified in one learner process (started again if it dies)."""

    def __init__(self, exercises: list[Exercise], cells: list[dict[str, str]],
                 source_nb: NotebookNode, learner: Learner, files: str | Path | None) -> None:
        self.exercises, self.cells, self.learner, self.files = exercises, cells, learner, files
        self.spec, self.modules = process_spec(exercises, cells, source_nb)
        self.folder = course_folder(self.modules)
        # The solution cells themselves never finished: starting again would only repeat that.
        self.start_failure: str | None = None
        self.jobs = contextlib.ExitStack()
        self.early: LearnerProcess | None = None

    def start_early(self) -> None:
        """Start the first learner process now; :meth:`verify` takes it up later."""
        self.early = self._spawn()

    def verify(self) -> dict[str, VerifiedResult]:
        results: dict[str, VerifiedResult] = {}
        pending = list(self.exercises)
        while pending:
            process, self.early = self.early or self._spawn(), None
            try:
                process = self._started(process)
                while pending and (process is None or not process.failure):
                    exercise = pending.pop(0)
                    results[exercise.id] = self._grade(process, exercise)
            finally:
                if process is not None:
                    process.close()
        return results

    def close(self) -> None:
        """Stop a process that was started and never used, and remove the runs' folders."""
        if self.early is not None:
            self.early.close()
            self.early = None
        self.jobs.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _spawn(self) -> LearnerProcess | None:
        if self.start_failure:
            return None
        job = self.jobs.enter_context(learner_job(self.learner, self.files, self.spec,
                                                  course=self.folder))
        timeout = min(self.learner.remaining(), GRACE_S + self.learner.limits.cell_timeout_s
                      * max(1, len(self.cells)))
        return LearnerProcess(job.command("learner", self.learner), job.path / "worker.log",
                              env=job.env, call_timeout_s=self.learner.limits.cell_timeout_s,
                              deadline=self.learner.deadline, start_timeout_s=timeout, wait=False)

    def _started(self, process: LearnerProcess | None) -> LearnerProcess | None:
        if process is None:
            return None
        try:
            process.wait_started()
        except WorkerFailedError as exc:
            self.start_failure = f"{exc} while running the solution cells"
            return None
        return process

    def _grade(self, process: LearnerProcess | None, exercise: Exercise) -> VerifiedResult:
        if process is None:
            reason = f"{exercise.id}: not verified: {self.start_failure}"
            return VerifiedResult(False, reason, verified=False,
                                  flags=(Flag("worker_died", exercise.id, reason),))
        blocked = [name for cell in process.cells for name in cell["blocked"]
                   if _owner(cell["name"], exercise) or not any(
                       _owner(cell["name"], e) for e in all_exercises())]
        start = len(process.blocked)
        proxy = process.proxy(exercise.defines)
        if proxy is None:
            passed, message = False, _missing(exercise, process)
        else:
            earlier = {d: process.proxy(get_exercise(d).defines) for d in exercise.depends}
            result = grade_function(exercise.id, proxy, hidden=True, earlier=earlier)
            passed, message = result.passed, result.message
        blocked += process.blocked[start:]
        flags: list[Flag] = []
        if process.failure:
            passed, message = False, f"{exercise.id}: not verified: {process.failure}"
            flags.append(Flag("worker_died", exercise.id, message))
        if blocked:
            used = ", ".join(sorted(set(blocked)))
            reason = (f"the solution imports the course's own code ({used}), which this exercise "
                      "may not use; the reference implementation gives no credit")
            flags.append(Flag("imports_reference", exercise.id, reason))
            passed, message = False, f"{exercise.id}: no credit: {reason}. {message}"
        return VerifiedResult(passed, message, flags=tuple(flags))


def _missing(exercise: Exercise, process: LearnerProcess) -> str:
    """Why the solution cells do not define the exercise's name."""
    message = f"{exercise.id}: the solution cells do not define {exercise.defines}"
    for cell in process.cells:
        error = cell.get("error")
        if error and _owner(cell["name"], exercise):
            where = error.get("where") or {}
            line = f" (line {where['line']}: {where['text']})" if where.get("line") else ""
            message += (f": its cell {cell['name']!r} raised {error['error']}: "
                        f"{error['message']}{line}")
    return message
