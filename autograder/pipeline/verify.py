"""Verification that does not trust the learner's kernel.

:func:`verify_exercises` grades each function of a chapter outside the learner's kernel, in a
separate sandboxed worker (:mod:`autograder.sandbox.worker`) that runs only the solution cells
and cannot import the reference; the checks call it through proxies whose arguments and results
travel as frames (:mod:`autograder.sandbox.wire`). For the PyTorch chapters the checks run in
that worker too; see :func:`verify_exercises`.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import os
import re
import select
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import nbformat
import numpy as np
from nbformat import NotebookNode

from autograder.course import ROOT, Course
from autograder.exercises.checking import DEVELOPMENT_SECRET, SECRET_ENV
from autograder.exercises.registry import CHAPTERS, CheckResult, all_exercises, grade_function
from autograder.flags import Flag
from autograder.notebook import grade_id, nbgrader_metadata, solution_cells
from autograder.pipeline.audit import parse
from autograder.sandbox import wire
from autograder.sandbox.launcher import GRACE_S, Job, Limits, kill, new_job, runner_env

# Packages the verifying worker must not import: the reference and the checks.
BLOCKED_PACKAGES = ("transformer_ref", "autograder", "solutions")
# Setup imports that solutions never need and that only slow the worker down.
SKIPPED_IMPORTS = ("matplotlib", "transformer_ref.plots", "IPython")
FIRST_TORCH_CHAPTER = 7
# Modules of the reference that no check uses; the ``checks`` worker does not preload them.
UNUSED_BY_CHECKS = ("train", "translate", "plots", "data", "tokenizer", "metrics")
_MENTIONS_BLOCKED = re.compile(r"\b(" + "|".join(BLOCKED_PACKAGES) + r")\b")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class VerifiedResult(CheckResult):
    """A :class:`CheckResult` from :func:`verify_exercises`, plus what it flagged.

    ``verified`` is False when the exercise could not be checked outside the kernel (then
    ``passed`` is False too and ``message`` says why).
    """

    verified: bool = True
    flags: tuple[Flag, ...] = ()


class WorkerFailedError(RuntimeError):
    """The verifying worker died, timed out or broke the protocol (the message says which)."""


class _Worker:
    """The sandboxed process that runs a submission's solution cells and answers calls."""

    def __init__(self, job: Job, limits: Limits, mode: str = "functions") -> None:
        self.job, self.limits = job, limits
        self.log = job.path / "result" / "worker.log"
        with open(self.log, "wb") as err:
            self.process = subprocess.Popen(
                job.command(mode), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=err, start_new_session=True, env=runner_env())
        self.failure: str | None = None

    def receive(self, timeout_s: float) -> tuple[dict[str, Any], list[bytes]]:
        """The next frame from the worker; WorkerFailedError on a timeout, exit or bad frame."""
        deadline = time.monotonic() + timeout_s
        size_bytes = self._read(4, deadline)
        size = int.from_bytes(size_bytes, "big")
        if size > wire.MAX_FRAME:
            self._fail(f"sent a message of {size} bytes, more than the limit")
        try:
            return wire.parse_frame(self._read(size, deadline))
        except (ValueError, KeyError, IndexError) as exc:
            self._fail(f"sent a malformed message ({exc})")

    def _read(self, n: int, deadline: float) -> bytes:
        stream = self.process.stdout
        assert stream is not None
        chunks, missing = [], n
        while missing:
            left = deadline - time.monotonic()
            ready = select.select([stream], [], [], max(left, 0))[0] if left > 0 else []
            if not ready:
                self._fail(f"did not answer within {self.limits.cell_timeout_s:g} s (endless "
                           "loop or sleep?)")
            chunk = os.read(stream.fileno(), missing)
            if not chunk:
                self.process.wait(timeout=5)
                self._fail(f"ended with exit status {self.process.returncode} (os._exit, "
                           "sys.exit at top level, a crash, or the memory limit)")
            chunks.append(chunk)
            missing -= len(chunk)
        return b"".join(chunks)

    def _fail(self, what: str) -> None:
        self.failure = f"the sandboxed process that runs your solution {what}"
        self.close()
        raise WorkerFailedError(self.failure)

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if self.failure:
            raise WorkerFailedError(self.failure)
        blobs: list[bytes] = []
        try:
            header = {"name": name, "args": wire.encode(args, blobs),
                      "kwargs": wire.encode(kwargs, blobs)}
        except TypeError as exc:
            raise WorkerFailedError(f"the grader cannot send {exc} to the sandboxed process; "
                                "this exercise needs a human") from None
        return self.request(header, blobs)

    def request(self, header: dict[str, Any], blobs: list[bytes]) -> dict[str, Any]:
        """Send one message and return the answer (its blobs under ``"_blobs"``)."""
        if self.failure:
            raise WorkerFailedError(self.failure)
        try:
            assert self.process.stdin is not None
            wire.write_frame(self.process.stdin, header, blobs)
        except OSError:
            self._fail("was gone before the call")
        reply, reply_blobs = self.receive(self.limits.cell_timeout_s)
        reply["_blobs"] = reply_blobs
        return reply

    def close(self) -> None:
        if self.process.poll() is None:
            kill(self.process)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


def _rebuild_exception(name: str, message: str) -> Exception:
    """The learner's exception as the grader sees it: a builtin type when it is one (so
    ``expect_raises(fn, ValueError, ...)`` works), otherwise a fresh class of the same name."""
    kind = getattr(builtins, name, None)
    if isinstance(kind, type) and issubclass(kind, Exception):
        try:
            return kind(message)
        except TypeError:  # builtins such as UnicodeDecodeError need more arguments
            pass
    safe = name if _IDENTIFIER.match(name) else "LearnerError"
    return type(safe, (Exception,), {})(message)


def _make_proxy(worker: _Worker, name: str, blocked: list[str]) -> Callable[..., Any]:
    def proxy(*args: Any, **kwargs: Any) -> Any:
        reply = worker.call(name, args, kwargs)
        blobs = reply.pop("_blobs")
        blocked.extend(reply.get("blocked", []))
        if reply.get("missing"):
            raise NameError(f"name {name!r} is not defined by the solution cells")
        if "error" in reply:
            raise _rebuild_exception(str(reply["error"]), str(reply.get("message", "")))
        if "unsupported" in reply:
            raise TypeError(f"{name} returned {reply['unsupported']}, which is not an array, "
                            "number, string, list, tuple or dict")
        # Mirror in-place edits so that the checks can say "modified argument 1 in place".
        for position, tree in reply.get("changed", {}).items():
            original = args[int(position)]
            new = wire.decode(tree, blobs)
            if isinstance(original, np.ndarray) and isinstance(new, np.ndarray) and (
                    new.shape == original.shape):
                np.copyto(original, new, casting="unsafe")
        return wire.decode(reply["value"], blobs)

    proxy.__name__ = proxy.__qualname__ = name
    return proxy


def _chapter_id(chapter: str) -> str:
    if chapter in CHAPTERS:
        return CHAPTERS[chapter]
    if chapter in CHAPTERS.values():
        return chapter
    raise ValueError(f"unknown chapter {chapter!r}; expected one of "
                     f"{', '.join(CHAPTERS.values())} or a prefix such as 'ch02'")


def _setup_imports(source_nb: NotebookNode, exercise_names: set[str]) -> list[str]:
    """Import statements of the source notebook's ordinary code cells, without the graded
    functions themselves and without plotting."""
    statements = []
    for cell in source_nb.cells:
        if cell.cell_type != "code" or nbgrader_metadata(cell):
            continue
        code = "\n".join(line for line in cell.source.splitlines()
                         if not line.lstrip().startswith(("%", "!")))
        try:
            tree = parse(code)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.Import):
                node.names = [a for a in node.names if not a.name.startswith(SKIPPED_IMPORTS)]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.startswith(SKIPPED_IMPORTS):
                    continue
                node.names = [a for a in node.names
                              if (a.asname or a.name) not in exercise_names
                              and a.name not in exercise_names and a.name != "*"]
            else:
                continue
            if node.names:
                statements.append(ast.unparse(node))
    return statements


def _setup_definitions(source_nb: NotebookNode, exercise_names: set[str]) -> list[str]:
    """Ordinary code cells of the source notebook that only define functions or classes (a
    helper the solutions call); definitions of the graded names themselves are left out."""
    sources = []
    for cell in source_nb.cells:
        if cell.cell_type != "code" or nbgrader_metadata(cell):
            continue
        try:
            tree = parse(cell.source)
        except SyntaxError:
            continue
        kinds = (ast.FunctionDef, ast.ClassDef)
        if tree.body and all(isinstance(n, kinds) and n.name not in exercise_names
                             for n in tree.body):
            sources.append(cell.source)
    return sources


def _check_secret(chapter: str) -> str:
    """The secret the ``checks`` worker draws hidden inputs from: derived one way from the
    grader's, so that learner code running beside the checks never sees the real one."""
    secret = os.environ.get(SECRET_ENV) or DEVELOPMENT_SECRET
    return hashlib.sha256(f"{secret}\0verify\0{chapter}".encode()).hexdigest()


def _solution_cells(nb: NotebookNode) -> list[dict[str, str]]:
    """The solution cells as the worker runs them: named by grade id, without IPython magics
    and shell escapes."""
    cells = []
    for index, cell in solution_cells(nb):
        source = "\n".join(line for line in cell.source.splitlines()
                           if not line.lstrip().startswith(("%", "!")))
        cells.append({"name": grade_id(cell) or f"cell {index}", "source": source})
    return cells


def _owner(cell_name: str, names: list[str], prefix: str) -> str | None:
    """The exercise function whose solution cell this is (by nbgrader's grade id)."""
    for name in names:
        if cell_name == f"{prefix}_{name}_solution":
            return name
    return None


def verify_exercises(
    chapter: str,
    submitted_nb: NotebookNode,
    limits: Limits,
    *,
    source_nb: NotebookNode | None = None,
    hide: Iterable[str | os.PathLike] = (),
) -> dict[str, VerifiedResult]:
    """Grade every exercise of ``chapter`` outside the learner's kernel (hidden checks).

    A sandboxed worker process executes only the submission's solution cells (code cells with
    nbgrader ``solution: true``), with ``transformer_ref`` and ``autograder`` unimportable and
    their folders hidden; earlier building blocks that the source notebook imports are
    provided. The checks run here, in the grader, through :func:`autograder.grade_function`
    with a proxy whose calls go to the worker (arrays as ``.npy`` bytes, never pickles).

    Args:
        chapter: a chapter id (``"ch02_attention"``) or prefix (``"ch02"``).
        submitted_nb: the learner's notebook; not modified.
        limits: ``cell_timeout_s`` bounds each call, ``memory_mb``/``max_processes`` the
            worker.
        source_nb: the instructor notebook (default: ``solutions/<chapter>/<chapter>.ipynb``);
            its setup cells name the building blocks the worker provides.
        hide: more paths to hide from the worker.

    Returns:
        ``{exercise_id: VerifiedResult}`` for every registered exercise of the chapter.

    Raises:
        ValueError: unknown chapter.

    PyTorch chapters (ch07 and later) need live modules, which cannot travel between
    processes as arrays do: there the worker runs the checks itself (``checks`` mode of
    :mod:`autograder.sandbox.worker`), with the checks and the references loaded before the
    learner's code, learner imports and calls of the course's packages refused or recorded,
    and any change to the functions the checks rely on reported as tampering.
    """
    chapter = _chapter_id(chapter)
    exercises = [e for e in all_exercises() if e.chapter == chapter]
    prefix = chapter[:4]
    names = [e.id.split(".", 1)[1] for e in exercises]
    # What the solution defines: the reference's name (``MultiHeadAttention`` for
    # ``ch07.multi_head_attention``).
    objects = [e.reference.partition(":")[2] for e in exercises]
    if source_nb is None:
        path = Course.of().source_notebook(chapter)
        source_nb = nbformat.read(path, as_version=4) if path.is_file() else None
    cells = _solution_cells(submitted_nb)
    torch_chapter = int(prefix[2:]) >= FIRST_TORCH_CHAPTER
    spec_extra = {
        "imports": _setup_imports(source_nb, set(objects)) if source_nb is not None else [],
        "definitions": (_setup_definitions(source_nb, set(objects))
                        if source_nb is not None else []),
        "blocked": list(BLOCKED_PACKAGES), "exercise_names": objects, "cells": cells,
        "exercise_ids": [e.id for e in exercises],
        "preload": ["transformer_ref"], "skip_preload": list(UNUSED_BY_CHECKS),
    }
    hide = [*hide, ROOT / "transformer_ref", ROOT / "autograder"]
    static = {_owner(c["name"], names, prefix): c["name"] for c in cells
              if _MENTIONS_BLOCKED.search(c["source"])}
    session = _Session(spec_extra, limits, hide, mode="checks" if torch_chapter else "functions",
                       secret=_check_secret(chapter) if torch_chapter else None)
    try:
        return {e.id: session.grade(e.id, name, obj, static.get(name))
                for e, name, obj in zip(exercises, names, objects, strict=True)}
    finally:
        session.close()


class _Session:
    """Starts the worker on demand and again after it died."""

    def __init__(self, spec_extra: dict[str, Any], limits: Limits,
                 hide: list[str | os.PathLike], mode: str = "functions",
                 secret: str | None = None) -> None:
        self.spec_extra, self.limits, self.hide = spec_extra, limits, hide
        self.mode, self.secret = mode, secret
        self.worker: _Worker | None = None
        self.cells: list[dict[str, Any]] = []
        # The solution cells themselves never finished: starting again would only repeat that.
        self.start_failure: str | None = None

    def _start(self) -> _Worker:
        job = new_job(self.limits, workdir=None, secret=self.secret, hide=self.hide)
        job.spec.update(self.spec_extra)
        job.write_spec()
        worker = _Worker(job, self.limits, self.mode)
        timeout = self.limits.cell_timeout_s * max(1, len(self.spec_extra["cells"])) + GRACE_S
        header, _ = worker.receive(timeout)
        self.cells = header["cells"]
        return worker

    def grade(self, exercise_id: str, name: str, obj: str,
              mentioned_in: str | None) -> VerifiedResult:
        """Verify one exercise: ``name`` as in its solution cell's grade id, ``obj`` the name
        the solution defines."""
        flags: list[Flag] = []
        blocked: list[str] = []
        try:
            if self.start_failure:
                raise WorkerFailedError(self.start_failure)
            if self.worker is None or self.worker.failure:
                self.close()
                self.worker = self._start()
        except WorkerFailedError as exc:
            self.start_failure = str(exc)
            reason = f"{exercise_id}: not verified: {exc} while running the solution cells"
            return VerifiedResult(False, reason, verified=False,
                                  flags=(Flag("worker_died", exercise_id, reason),))
        for cell in self.cells:
            if cell["blocked"] and _owner(cell["name"], [name], exercise_id[:4]):
                blocked += cell["blocked"]
        if self.mode == "checks":
            passed, message = self._check_here(exercise_id, blocked, flags)
        else:
            result = grade_function(exercise_id, _make_proxy(self.worker, obj, blocked),
                                    hidden=True)
            passed, message = result.passed, result.message
        if self.worker.failure:
            passed = False
            flags.append(Flag("worker_died", exercise_id, self.worker.failure))
        if blocked or mentioned_in:
            where = f"solution cell {mentioned_in!r}" if mentioned_in else "the solution"
            used = ", ".join(sorted(set(blocked))) or "named in the code"
            reason = (f"{where} uses the course's own packages ({used}); the reference "
                      "implementation gives no credit")
            flags.append(Flag("imports_reference", exercise_id, reason))
            passed, message = False, f"{exercise_id}: no credit: {reason}. {message}"
        return VerifiedResult(passed, message, flags=tuple(flags))

    def _check_here(self, exercise_id: str, blocked: list[str],
                    flags: list[Flag]) -> tuple[bool, str]:
        """Run the checks of ``exercise_id`` in the worker (``checks`` mode); extends
        ``blocked`` with the course's code the learner reached and ``flags`` with tampering."""
        assert self.worker is not None
        try:
            reply = self.worker.request({"check": exercise_id}, [])
        except WorkerFailedError as exc:
            return False, f"{exercise_id}: not verified: {exc} during the checks"
        if reply.get("missing"):
            return False, f"{exercise_id}: the solution cells do not define {reply['name']}"
        blocked += reply["blocked"] + reply["reference_calls"]
        if not reply["own"]:
            blocked.append(f"{reply['name']} is the course's own object")
        changed = reply["tampered"] + ([] if reply["traced"] else ["sys.settrace"])
        if changed:
            shown = ", ".join(changed[:5]) + (" ..." if len(changed) > 5 else "")
            reason = (f"the solution replaced functions the grader relies on ({shown}); "
                      "no credit, for a human to review")
            flags.append(Flag("tampering", exercise_id, reason))
            return False, f"{exercise_id}: no credit: {reason}"
        return bool(reply["passed"]), str(reply["message"])

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker.job.close()
            self.worker = None
