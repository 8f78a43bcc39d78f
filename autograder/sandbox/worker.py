"""The process side of the sandbox; run as a script (``python -I worker.py MODE SPEC``).

:mod:`autograder.sandbox.launcher` starts it inside bubblewrap, as root of the sandbox, where
the file system holds only what the spec's run may see. It imports the standard library, NumPy
and the two modules next to it (:mod:`wire`, :mod:`serve`), never the ``autograder`` package.
Modes:

``notebook SPEC``
    copy the learner's files into the writable work folder, then execute a notebook with
    nbclient; the kernel starts through ``confine`` and so runs as an unprivileged user under
    resource limits. The result goes to the result folder, which the kernel cannot write to.
``confine SPEC -- ARGV...``
    drop privileges, set the resource limits and the environment, then exec ``ARGV``.
``probe SPEC``
    prepare the work folder, confine, then import the spec's ``imports``: the grader's check
    that a sandbox can start and run the course's Python, before it grades anyone.
``learner SPEC``
    load the building blocks the exercise allows (and nothing else of the course), copy the
    learner's files, drop privileges, run the solution cells, then answer the grader's
    requests on standard input/output (:mod:`serve`, frames of :mod:`wire`).

The spec is a JSON file the grader wrote; learner code can read it, and nothing in it is
secret (the kernel's own secret is derived from the grader's, see
:func:`autograder.grade.learner.kernel_secret`).
"""

from __future__ import annotations

import ctypes
import importlib
import json
import linecache
import os
import resource
import shutil
import signal
import sys
import time
import traceback
from typing import Any, BinaryIO

# The wire format and the request server are shared with the grader. Imported through the
# package they would bring ``autograder`` (and with it the registry of checks) into this
# process; so they are imported from this folder by their own names. Run with ``python -I``,
# this folder is not on the path: it is there for these imports only.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
import serve  # noqa: E402
import wire  # noqa: E402

sys.path.remove(_HERE)

PR_SET_NO_NEW_PRIVS = 38
# Output bytes each cell may still show after the notebook's output limit was reached.
CELL_ALLOWANCE = 2000
# Solution cells are compiled under this file name prefix, which tells their frames apart.
LEARNER_FILE = serve.LEARNER_FILE


# ----------------------------------------------------------------------------- confinement


def prepare_workdir(spec: dict[str, Any]) -> None:
    """Copy the learner's files into the writable work folder and give them to the run's user;
    then make it the current folder."""
    work, source, uid = spec["workdir"], spec.get("submission"), spec.get("uid")
    if source:
        shutil.copytree(source, work, symlinks=True, dirs_exist_ok=True)
    _seed_font_cache(spec["env"].get("MPLCONFIGDIR"), uid)
    if uid is not None and os.geteuid() == 0:
        for folder, dirs, files in os.walk(work):
            for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
                os.lchown(name, uid, uid)
    os.chdir(work)


def _seed_font_cache(folder: str | None, uid: int | None) -> None:
    """Copy the grader's matplotlib font list (beside this file, see the launcher's
    ``matplotlib_font_cache``) into the run's fresh ``folder``, so that matplotlib does not
    rebuild it; a folder that exists already (a run without isolation) is left alone."""
    here = os.path.dirname(os.path.abspath(__file__))
    lists = [n for n in os.listdir(here) if n.startswith("fontlist-") and n.endswith(".json")]
    if not folder or not lists or os.path.exists(folder):
        return
    os.makedirs(folder)
    for name in [folder, *(shutil.copyfile(os.path.join(here, n), os.path.join(folder, n))
                           for n in lists)]:
        if uid is not None and os.geteuid() == 0:
            os.lchown(name, uid, uid)


def confine(spec: dict[str, Any]) -> None:
    """Resource limits, then (as root) a private unprivileged user and no new privileges."""
    limits = spec["limits"]
    memory = limits["memory_mb"] * 1024 * 1024
    files = spec["file_mb"] * 1024 * 1024
    for name, value in ((resource.RLIMIT_AS, memory), (resource.RLIMIT_NPROC,
                        limits["max_processes"]), (resource.RLIMIT_CPU, spec["cpu_s"]),
                        (resource.RLIMIT_FSIZE, files), (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(name, (value, value))
    os.environ.clear()
    os.environ.update(spec["env"])
    if os.geteuid() == 0 and spec["uid"] is not None:
        os.setgroups([])
        os.setgid(spec["uid"])
        os.setuid(spec["uid"])
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def _load_spec(path: str) -> dict[str, Any]:
    with open(path) as f:
        return json.load(f)


# ----------------------------------------------------------------------------- notebook mode


def _exec_confined(spec_path: str, argv: list[str]) -> None:
    spec = _load_spec(spec_path)
    # The kernel reads its connection file after dropping privileges: hand it a copy it owns.
    if "-f" in argv:
        i = argv.index("-f") + 1
        copy = os.path.join(spec["scratch"], "kernel-" + os.path.basename(argv[i]))
        shutil.copyfile(argv[i], copy)
        if spec["uid"] is not None and os.geteuid() == 0:
            os.chown(copy, spec["uid"], spec["uid"])
        argv[i] = copy
    # Writes to fd 1 and 2 reach the notebook through ipykernel's capture, not our log.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    confine(spec)
    os.execv(argv[0], argv)


def _run_notebook(spec_path: str) -> None:
    spec = _load_spec(spec_path)
    result_fd = os.open(spec["result_dir"], os.O_RDONLY)
    with open(spec["notebook"]) as f:
        notebook_text = f.read()
    prepare_workdir(spec)
    result = _execute(spec, spec_path, notebook_text)
    fd = os.open("result.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600, dir_fd=result_fd)
    with os.fdopen(fd, "w") as f:
        json.dump(result, f)


def _kernel_spec_dir(spec_path: str, scratch: str) -> str:
    """A kernelspec whose command starts ipykernel through ``confine``."""
    root = os.path.join(scratch, ".jupyter")
    folder = os.path.join(root, "kernels", "sandboxed")
    os.makedirs(folder)
    argv = [sys.executable, "-I", os.path.abspath(__file__), "confine", spec_path, "--",
            sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    with open(os.path.join(folder, "kernel.json"), "w") as f:
        json.dump({"argv": argv, "display_name": "sandboxed", "language": "python"}, f)
    return root


def _output_size(output: Any) -> int:
    return len(json.dumps(output, default=str))


def _truncate(output: Any, keep: int) -> None:
    note = "\n[output truncated: the notebook's outputs passed the sandbox's size limit]\n"
    if output.get("output_type") == "stream":
        output["text"] = output["text"][:max(keep, 0)] + note
    elif output.get("output_type") == "error":
        output["traceback"] = output["traceback"][:3] + [note]
    else:
        output["data"] = {"text/plain": note}


class OutputCap:
    """Keeps at most ``cap`` bytes of a notebook's outputs; past that, each later cell still
    keeps :data:`CELL_ALLOWANCE` bytes, so that test results stay readable.

    Mixed into nbclient's ``NotebookClient`` (:func:`_client`), whose ``output`` it wraps;
    nbclient is imported only where a notebook runs, not in the other modes of this script.
    """

    def __init__(self, *args: Any, cap: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cap = cap
        self.total = 0  # bytes of the outputs kept so far
        self.cell: int | None = None  # the cell the last output came from
        self.cell_total = 0  # bytes kept of that cell's outputs
        self.truncated = False

    def output(self, outs, msg, display_id, cell_index):  # type: ignore[no-untyped-def]
        if self.cell != cell_index:
            self.cell, self.cell_total = cell_index, 0
        over = self.total > self.cap
        if over and self.cell_total > CELL_ALLOWANCE:
            return None
        out = super().output(outs, msg, display_id, cell_index)  # type: ignore[misc]
        if out is not None:
            size = _output_size(out)
            room = (CELL_ALLOWANCE - self.cell_total) if over else self.cap - self.total
            self.total += size
            self.cell_total += size
            if size > room:
                self.truncated = True
                _truncate(out, room)
        return out


class CellOutcomes:
    """What became of each code cell of a notebook run, and whether the run reached its end
    (``ok``, else the first ``reason`` it did not)."""

    def __init__(self, code_cells: list[tuple[int, Any]]) -> None:
        self.code_cells = code_cells
        self.cells: list[dict[str, Any]] = []
        self.ok, self.reason = True, ""
        self.reply: dict[str, Any] | None = None  # the kernel's reply to the last cell

    def remember_reply(self, cell: Any, cell_index: int, execute_reply: dict[str, Any]) -> None:
        self.reply = execute_reply

    def add(self, index: int, status: str, **more: Any) -> None:
        self.cells.append({"index": index, "status": status, **more})

    def fail(self, reason: str) -> None:
        if self.ok:
            self.ok, self.reason = False, reason

    def as_json(self, nb: Any, truncated: bool) -> dict[str, Any]:
        """The result of the run; the cells it did not run are ``not_run``."""
        done = {c["index"] for c in self.cells}
        cells = self.cells + [{"index": i, "status": "not_run"}
                              for i, _ in self.code_cells if i not in done]
        cells.sort(key=lambda c: c["index"])
        return {"notebook": nb, "cells": cells, "ok": self.ok, "reason": self.reason,
                "truncated": truncated}


def _client(nb: Any, limits: dict[str, Any], ipc: str, outcomes: CellOutcomes) -> Any:
    """An nbclient client of ``nb`` with an :class:`OutputCap`, for the sandboxed kernel."""
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient

    class CappedClient(OutputCap, NotebookClient):
        pass

    timeout_error = {"ename": "CellTimeoutError", "traceback": [],
                     "evalue": f"the cell ran longer than {limits['cell_timeout_s']:g} s "
                               "and was interrupted"}
    km = AsyncKernelManager(kernel_name="sandboxed", transport="ipc", ip=os.path.join(ipc, "k"))
    return CappedClient(
        nb, cap=limits["max_output_bytes"], km=km, kernel_name="sandboxed", allow_errors=True,
        interrupt_on_timeout=True, error_on_timeout=timeout_error,
        startup_timeout=int(limits["cell_timeout_s"]) + 30, record_timing=False,
        shutdown_kernel="immediate", on_cell_executed=outcomes.remember_reply,
        resources={"metadata": {"path": os.getcwd()}})


def _run_code_cells(client: Any, outcomes: CellOutcomes, limits: dict[str, Any],
                    deadline: float) -> None:
    """Run the code cells one after the other until the notebook's ``deadline`` (monotonic
    seconds) or the kernel's death; each cell under its own time limit."""
    import nbformat
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    for index, cell in outcomes.code_cells:
        remaining = deadline - time.monotonic()
        if remaining <= 1:
            outcomes.fail(f"the notebook ran longer than {limits['notebook_timeout_s']:g} s; the "
                          f"cells from cell {index} on were not run")
            return
        client.timeout = max(1, int(min(limits["cell_timeout_s"], remaining)))
        outcomes.reply = None
        try:
            client.execute_cell(cell, index)
        except DeadKernelError:
            outcomes.add(index, "kernel_died")
            cell.outputs.append(nbformat.v4.new_output(
                "error", ename="DeadKernelError", traceback=[],
                evalue="the kernel died while running this cell"))
            outcomes.fail(f"the kernel died while running cell {index} (os._exit, a crash, or "
                          "the memory or CPU limit); later cells were not run")
            return
        except CellTimeoutError:
            outcomes.add(index, "timeout")
            continue
        content = (outcomes.reply or {}).get("content", {})
        if content.get("status") == "error":
            status = "timeout" if content.get("ename") == "CellTimeoutError" else "error"
            outcomes.add(index, status, ename=content.get("ename"), evalue=content.get("evalue"))
        else:
            outcomes.add(index, "ok")


def _execute(spec: dict[str, Any], spec_path: str, notebook_text: str) -> dict[str, Any]:
    """Run the notebook with nbclient; return the notebook and per-cell outcomes as JSON."""
    sys.modules.setdefault("rfc3987_syntax", None)  # a slow import nbformat has no use for
    import nbformat

    limits, scratch = spec["limits"], spec["scratch"]
    os.environ["JUPYTER_PATH"] = _kernel_spec_dir(spec_path, scratch)
    os.environ["JUPYTER_RUNTIME_DIR"] = os.path.join(scratch, ".jupyter-runtime")
    ipc = os.path.join(scratch, ".ipc")
    os.mkdir(ipc)
    os.chmod(ipc, 0o1777)
    nb = nbformat.reads(notebook_text, as_version=4)
    outcomes = CellOutcomes([(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"])
    client = _client(nb, limits, ipc, outcomes)
    deadline = time.monotonic() + limits["notebook_timeout_s"]  # the kernel's start counts
    try:
        with client.setup_kernel():
            _run_code_cells(client, outcomes, limits, deadline)
    except Exception as exc:  # a kernel that never started is a result, not a crash
        outcomes.fail(f"the kernel could not run the notebook: {type(exc).__name__}: {exc}")
    return outcomes.as_json(nb, client.truncated)


# ----------------------------------------------------------------------------- learner mode


def _learner_on_stack() -> bool:
    """Whether a solution cell's code is among the callers of the current frame."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.startswith(LEARNER_FILE):
            return True
        frame = frame.f_back
    return False


class CourseImports:
    """A meta-path finder for the course's own packages: the modules the exercise allows load
    (from the course folder the grader prepared); any other is refused, and refusals that
    learner code caused are recorded for the grader."""

    def __init__(self, roots: list[str], allowed: list[str]) -> None:
        self.roots, self.allowed = set(roots), set(allowed)
        self.attempts: list[str] = []

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.split(".")[0] not in self.roots or name in self.allowed:
            return None
        if _learner_on_stack():
            self.attempts.append(name)
        raise ModuleNotFoundError(f"No module named {name!r} (the course's own code is not "
                                  "available while this exercise is graded)")


class CourseModule:
    """A course module as the setup cell names it (``ref``), holding only the building blocks
    the exercise may use; any other attribute says why it is missing."""

    def __init__(self, name: str, members: dict[str, Any]) -> None:
        self.__dict__.update(members)
        self.__dict__["_name"] = name

    def __getattr__(self, attribute: str) -> Any:
        raise AttributeError(f"{self._name}.{attribute} is not available while this exercise is "
                             "graded: it is not one of the course's building blocks that the "
                             "exercise may use")


def _provide(spec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The namespace the solution cells run in, and the model builders the grader may use.

    The namespace holds what the source notebook's setup gives the exercise: third-party
    imports, the allowed building blocks (``bindings``: ``[name, module, attribute]``, or
    ``[name, {attribute: [module, attribute]}]`` for a module the setup imports under a name,
    of which only the allowed attributes are given) and the course's helper definitions.
    """
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    for statement in spec["imports"]:
        try:
            exec(compile(statement, "<setup>", "exec"), namespace)
        except Exception:  # a missing optional module is the learner's NameError later
            traceback.print_exc()
    for name, *where in spec["bindings"]:
        if isinstance(where[0], dict):
            namespace[name] = CourseModule(name, {
                attribute: getattr(importlib.import_module(module), real)
                for attribute, (module, real) in where[0].items()})
        elif where[1] is None:
            namespace[name] = importlib.import_module(where[0])
        else:
            namespace[name] = getattr(importlib.import_module(where[0]), where[1])
    for source in spec["definitions"]:
        exec(compile(source, "<setup>", "exec"), namespace)
    builders = {}
    for builder in spec["builders"]:
        module, _, attribute = builder.partition(":")
        builders[builder] = getattr(importlib.import_module(module), attribute)
    return namespace, builders


def _run_cells(spec: dict[str, Any], namespace: dict[str, Any],
               finder: CourseImports) -> list[dict[str, Any]]:
    """Execute the solution cells in ``namespace``; per cell its error and refused imports.

    A cell that runs past ``cell_timeout_s`` is interrupted with a TimeoutError, so that an
    endless loop costs that cell only (the grader's own deadline covers a loop that swallows
    the exception).
    """
    timeout = spec["limits"]["cell_timeout_s"]

    def interrupt(signum: int, frame: Any) -> None:
        raise TimeoutError(f"the cell ran past the time limit of {timeout:g} s")

    signal.signal(signal.SIGALRM, interrupt)
    cells = []
    for cell in spec["cells"]:
        start = len(finder.attempts)
        error = None
        try:
            signal.setitimer(signal.ITIMER_REAL, timeout)
            filename = f"{LEARNER_FILE}{cell['name']}>"
            # Error messages quote the learner's failing line: keep the cell's text at hand.
            linecache.cache[filename] = (len(cell["source"]), None,
                                         cell["source"].splitlines(True), filename)
            exec(compile(cell["source"], filename, "exec"), namespace)
        except BaseException as exc:  # noqa: BLE001 - learner code may raise anything
            error = serve.error_reply(exc)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        cells.append({"name": cell["name"], "error": error,
                      "blocked": finder.attempts[start:]})
    return cells


def _protocol_streams() -> tuple[BinaryIO, BinaryIO]:
    """Move the protocol to private descriptors; the learner's prints then go nowhere."""
    inp = os.fdopen(os.dup(0), "rb")
    out = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    return inp, out


def _kind(value: Any) -> str:
    if isinstance(value, type):
        return "class"
    return "function" if callable(value) else "value"


def _run_learner(spec_path: str) -> None:
    """Mode ``learner``: load the allowed blocks, confine, run the solution cells, serve."""
    spec = _load_spec(spec_path)
    inp, out = _protocol_streams()
    sys.path.insert(0, spec["course_dir"])
    finder = CourseImports(spec["course_roots"], spec["allowed_modules"])
    sys.meta_path.insert(0, finder)
    if spec["torch"]:
        import torch

        torch.set_num_threads(1)
    namespace, builders = _provide(spec)
    prepare_workdir(spec)
    confine(spec)
    cells = _run_cells(spec, namespace, finder)
    for name, module, attribute in spec.get("substitutes", []):
        namespace[name] = getattr(importlib.import_module(module), attribute)
    names = {name: _kind(namespace[name]) for name in spec["exercise_names"]
             if name in namespace}
    wire.write_frame(out, {"ready": True, "cells": cells, "names": names}, [])
    serve.Server(namespace, finder.attempts, builders).serve(inp, out)


def _probe(spec_path: str) -> None:
    """What the grader checks before grading anyone: the work folder, then, as the run's
    unprivileged user under its limits, the imports of every sandboxed run."""
    spec = _load_spec(spec_path)
    prepare_workdir(spec)
    confine(spec)
    for name in spec["imports"]:
        importlib.import_module(name)


def main(argv: list[str]) -> int:
    mode, spec_path = argv[0], argv[1]
    if mode == "notebook":
        _run_notebook(spec_path)
    elif mode == "confine":
        _exec_confined(spec_path, argv[3:])
    elif mode == "learner":
        _run_learner(spec_path)
    elif mode == "probe":
        _probe(spec_path)
    else:
        raise ValueError(f"unknown mode {mode!r}; expected notebook, confine, learner or probe")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
