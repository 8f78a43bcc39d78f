"""The process side of the sandbox; run as a script (``python -I worker.py MODE SPEC``).

It is started by :mod:`autograder.sandbox.launcher` (inside fresh namespaces when the machine
allows). Apart from ``checks`` mode it imports only the standard library, NumPy and the wire
format next to it (``wire.py``), so that code running here cannot reach the grader's registry
or checks through ``sys.modules``. Modes:

``notebook SPEC``
    isolate the file system, then execute a notebook with nbclient; the kernel starts through
    ``confine`` and so runs as an unprivileged user under resource limits. The result is
    written to the result folder of the spec, which the kernel cannot write to.
``confine SPEC -- ARGV...``
    drop privileges, set the resource limits and the environment, then exec ``ARGV``.
``functions SPEC``
    import the building blocks the spec names, isolate, confine, execute the learner's
    solution cells, then answer call requests on its standard input/output (frames of
    :mod:`autograder.sandbox.wire`).
``checks SPEC``
    for the PyTorch chapters: load the checks and the references first, then isolate,
    confine, execute the solution cells, and run the registered checks of each exercise the
    grader asks for, reporting reference use and tampering (see :func:`_run_checks`).

The spec is a JSON file written by the grader into a folder only root can write.
"""

from __future__ import annotations

import ctypes
import inspect
import json
import os
import resource
import shutil
import signal
import stat
import sys
import threading
import traceback
from typing import Any, BinaryIO

import numpy as np

# The wire format is shared with the grader. Imported through the package, it would bring
# ``autograder`` (and with it the registry of checks) into this process; so it is imported
# from this folder by its own name. Run with ``python -I``, this folder is not on the path:
# it is there for this one import only.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
from wire import decode, encode, read_frame, write_frame  # noqa: E402

sys.path.remove(_HERE)

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_BIND, MS_REC = 1, 2, 4, 4096, 16384
PR_SET_NO_NEW_PRIVS = 38
SANDBOX_TMP = "/tmp"
SANDBOX_WORKDIR = "/tmp/work"
# Output bytes each cell may still show after the notebook's output limit was reached.
CELL_ALLOWANCE = 2000
# Solution cells are compiled under this file name prefix, which tells their frames apart.
LEARNER_FILE = "<cell "


# ----------------------------------------------------------------------------- isolation


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None,
                  ctypes.c_ulong(flags), data.encode() if data else None) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {source} on {target}: {os.strerror(errno)}")


def _cover(path: str) -> None:
    """Hide ``path``: an empty read-only tmpfs over a folder, /dev/null over a file."""
    if os.path.isdir(path) and not os.path.islink(path):
        _mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k,mode=755")
    elif os.path.exists(path):
        _mount("/dev/null", path, None, MS_BIND, None)


def _keep_reachable(path: str) -> None:
    """Let an unprivileged user reach ``path`` (the Python installation) when one of its
    ancestors is private (``/root`` is mode 700): cover that ancestor with a tmpfs that holds
    only the one child on the way to ``path``, bound from the original."""
    parts = os.path.realpath(path).strip("/").split("/")
    for depth in range(len(parts) - 1):
        ancestor = "/" + "/".join(parts[: depth + 1])
        if os.stat(ancestor).st_mode & stat.S_IXOTH:
            continue
        child = parts[depth + 1]
        fd = os.open(os.path.join(ancestor, child), os.O_RDONLY)
        try:
            _mount("tmpfs", ancestor, "tmpfs", MS_NOSUID | MS_NODEV, "size=4k,mode=755")
            target = os.path.join(ancestor, child)
            os.mkdir(target)
            _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC, None)
        finally:
            os.close(fd)
        return


def isolate(spec: dict[str, Any]) -> None:
    """Inside a new mount namespace: hide the spec's paths, give a fresh ``/tmp``,
    ``/var/tmp`` and ``/dev/shm``, and bind the learner's folder to ``/tmp/work``."""
    if not spec["namespaces"]:
        os.chdir(spec["workdir"])
        return
    work_fd = os.open(spec["workdir"], os.O_RDONLY)
    for path in spec["hide"]:
        _cover(path)
    for path in spec["reachable"]:
        _keep_reachable(path)
    fresh = (SANDBOX_TMP, "/var/tmp", "/dev/shm")
    # The project or its Python may live under /tmp (a CI checkout, say): hold on to them so
    # they can be bound back once the fresh /tmp hides the originals.
    kept = {
        real: os.open(real, os.O_RDONLY)
        for real in sorted({os.path.realpath(path) for path in spec["reachable"]})
        if any(real.startswith(folder + "/") for folder in fresh)
    }
    size = f"size={spec['tmp_mb']}m"
    for path in fresh:
        if os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"{size},mode=1777")
    for real, fd in kept.items():
        if not os.path.isdir(real):  # already bound back inside a kept parent
            os.makedirs(real, mode=0o755)
            # MS_REC brings the covering mounts of hidden folders inside it along.
            _mount(f"/proc/self/fd/{fd}", real, None, MS_BIND | MS_REC, None)
        os.close(fd)
    os.mkdir(SANDBOX_WORKDIR)
    _mount(f"/proc/self/fd/{work_fd}", SANDBOX_WORKDIR, None, MS_BIND, None)
    os.close(work_fd)
    os.chdir(SANDBOX_WORKDIR)


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


# ----------------------------------------------------------------------------- notebook mode


def _exec_confined(spec_path: str, argv: list[str]) -> None:
    with open(spec_path) as f:
        spec = json.load(f)
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
    with open(spec_path) as f:
        spec = json.load(f)
    result_fd = os.open(spec["result_dir"], os.O_RDONLY)
    with open(spec_path, "rb") as f:
        spec_bytes = f.read()
    with open(spec["notebook"]) as f:
        notebook_text = f.read()
    isolate(spec)
    # The kernel's wrapper reads the spec after /tmp was replaced: keep a root-only copy.
    private_spec = os.path.join(spec["scratch"], ".sandbox-spec.json")
    fd = os.open(private_spec, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(spec_bytes)
    result = _execute(spec, private_spec, notebook_text)
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


def _execute(spec: dict[str, Any], spec_path: str, notebook_text: str) -> dict[str, Any]:
    """Run the notebook with nbclient; return the notebook and per-cell outcomes as JSON."""
    import time

    sys.modules.setdefault("rfc3987_syntax", None)  # a slow import nbformat has no use for
    import nbformat
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    limits = spec["limits"]
    cap = limits["max_output_bytes"]
    scratch = spec["scratch"]
    os.environ["JUPYTER_PATH"] = _kernel_spec_dir(spec_path, scratch)
    os.environ["JUPYTER_RUNTIME_DIR"] = os.path.join(scratch, ".jupyter-runtime")
    ipc = os.path.join(scratch, ".ipc")
    os.mkdir(ipc)
    os.chmod(ipc, 0o1777)
    nb = nbformat.reads(notebook_text, as_version=4)
    state: dict[str, Any] = {"bytes": 0, "cell": None, "cell_bytes": 0, "truncated": False,
                             "reply": None}

    class CappedClient(NotebookClient):
        """Keeps at most ``cap`` bytes of outputs per notebook; past that, each later cell
        still keeps :data:`CELL_ALLOWANCE` bytes so that test results stay readable."""

        def output(self, outs, msg, display_id, cell_index):  # type: ignore[no-untyped-def]
            if state["cell"] != cell_index:
                state["cell"], state["cell_bytes"] = cell_index, 0
            over = state["bytes"] > cap
            if over and state["cell_bytes"] > CELL_ALLOWANCE:
                return None
            out = super().output(outs, msg, display_id, cell_index)
            if out is not None:
                size = _output_size(out)
                room = (CELL_ALLOWANCE - state["cell_bytes"]) if over else cap - state["bytes"]
                state["bytes"] += size
                state["cell_bytes"] += size
                if size > room:
                    state["truncated"] = True
                    _truncate(out, room)
            return out

    def remember_reply(cell: Any, cell_index: int, execute_reply: dict[str, Any]) -> None:
        state["reply"] = execute_reply

    timeout_error = {"ename": "CellTimeoutError", "traceback": [],
                     "evalue": f"the cell ran longer than {limits['cell_timeout_s']:g} s "
                               "and was interrupted"}
    km = AsyncKernelManager(kernel_name="sandboxed", transport="ipc", ip=os.path.join(ipc, "k"))
    client = CappedClient(
        nb, km=km, kernel_name="sandboxed", allow_errors=True, interrupt_on_timeout=True,
        error_on_timeout=timeout_error, startup_timeout=int(limits["cell_timeout_s"]) + 30,
        record_timing=False, shutdown_kernel="immediate", on_cell_executed=remember_reply,
        resources={"metadata": {"path": os.getcwd()}})
    deadline = time.monotonic() + limits["notebook_timeout_s"]
    cells: list[dict[str, Any]] = []
    ok, reason = True, ""
    code_cells = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    try:
        with client.setup_kernel():
            for index, cell in code_cells:
                remaining = deadline - time.monotonic()
                if remaining <= 1:
                    ok, reason = False, (f"the notebook ran longer than "
                                         f"{limits['notebook_timeout_s']:g} s; the cells from "
                                         f"cell {index} on were not run")
                    break
                client.timeout = max(1, int(min(limits["cell_timeout_s"], remaining)))
                state["reply"] = None
                try:
                    client.execute_cell(cell, index)
                except DeadKernelError:
                    cells.append({"index": index, "status": "kernel_died"})
                    cell.outputs.append(nbformat.v4.new_output(
                        "error", ename="DeadKernelError", traceback=[],
                        evalue="the kernel died while running this cell"))
                    ok, reason = False, (f"the kernel died while running cell {index} (os._exit, "
                                         "a crash, or the memory or CPU limit); later cells "
                                         "were not run")
                    break
                except CellTimeoutError:
                    cells.append({"index": index, "status": "timeout"})
                    continue
                content = (state["reply"] or {}).get("content", {})
                if content.get("status") == "error":
                    status = "timeout" if content.get("ename") == "CellTimeoutError" else "error"
                    cells.append({"index": index, "status": status,
                                  "ename": content.get("ename"), "evalue": content.get("evalue")})
                else:
                    cells.append({"index": index, "status": "ok"})
            done = {c["index"] for c in cells}
            cells += [{"index": i, "status": "not_run"} for i, _ in code_cells if i not in done]
    except Exception as exc:  # a kernel that never started is a result, not a crash
        if ok:
            ok = False
            reason = f"the kernel could not run the notebook: {type(exc).__name__}: {exc}"
        done = {c["index"] for c in cells}
        cells += [{"index": i, "status": "not_run"} for i, _ in code_cells if i not in done]
    cells.sort(key=lambda c: c["index"])
    return {"notebook": nb, "cells": cells, "ok": ok, "reason": reason,
            "truncated": state["truncated"]}


# ----------------------------------------------------------------------------- functions mode


def _learner_on_stack() -> bool:
    """Whether a solution cell's code is among the callers of the current frame."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.startswith(LEARNER_FILE):
            return True
        frame = frame.f_back
    return False


class _Blocker:
    """A meta-path finder that refuses the grader's packages and records who asked.

    With ``learner_only`` it refuses only imports that learner code started, so that the
    grader's own checks (which run in the same process in ``checks`` mode) still import.
    """

    def __init__(self, blocked: list[str], learner_only: bool = False) -> None:
        self.blocked = blocked
        self.learner_only = learner_only
        self.attempts: list[str] = []

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.split(".")[0] in self.blocked and (
                not self.learner_only or _learner_on_stack()):
            self.attempts.append(name)
            raise ModuleNotFoundError(f"No module named {name!r} (not available here)")


def _provide_setup(spec: dict[str, Any]) -> dict[str, Any]:
    """A namespace holding what the spec's setup gives: the imports of earlier building
    blocks, and the helpers the course's own cells define."""
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    for statement in spec["imports"] + spec["definitions"]:
        try:
            exec(compile(statement, "<setup>", "exec"), namespace)
        except Exception:  # a missing optional module is the learner's NameError later
            traceback.print_exc()
    return namespace


def _provide_building_blocks(spec: dict[str, Any]) -> dict[str, Any]:
    namespace = _provide_setup(spec)
    # The reference of the graded functions must not be reachable through a provided block's
    # module globals, so drop those names from every loaded module of the reference package.
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in spec["blocked"]:
            for attribute in spec["exercise_names"]:
                module.__dict__.pop(attribute, None)
            del sys.modules[name]
    return namespace


def _changed_arguments(before: list[Any], after: list[Any]) -> list[int]:
    return [i for i, (old, new) in enumerate(zip(before, after, strict=True))
            if isinstance(new, np.ndarray)
            and not (old.shape == new.shape and np.array_equal(old, new, equal_nan=True))]


def _error_reply(exc: BaseException) -> dict[str, Any]:
    return {"error": type(exc).__name__, "message": str(exc)}


def _run_cells(spec: dict[str, Any], namespace: dict[str, Any],
               blocker: _Blocker) -> list[dict[str, Any]]:
    """Execute the solution cells in ``namespace``; per cell its error and blocked imports.

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
        start = len(blocker.attempts)
        error = None
        try:
            signal.setitimer(signal.ITIMER_REAL, timeout)
            exec(compile(cell["source"], f"{LEARNER_FILE}{cell['name']}>", "exec"), namespace)
        except BaseException as exc:  # noqa: BLE001 - learner code may raise anything
            error = _error_reply(exc)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        cells.append({"name": cell["name"], "error": error,
                      "blocked": blocker.attempts[start:]})
    return cells


def _serve(spec: dict[str, Any], namespace: dict[str, Any], blocker: _Blocker,
           inp: BinaryIO, out: BinaryIO) -> None:
    write_frame(out, {"ready": True, "cells": _run_cells(spec, namespace, blocker)}, [])
    while True:
        frame = read_frame(inp)
        if frame is None:
            return
        header, blobs = frame
        start = len(blocker.attempts)
        fn = namespace.get(header["name"])
        args = decode(header["args"], blobs)
        kwargs = decode(header["kwargs"], blobs)
        if not callable(fn):
            reply: dict[str, Any] = {"missing": True}
            write_frame(out, reply, [])
            continue
        before = [a.copy() if isinstance(a, np.ndarray) else None for a in args]
        reply_blobs: list[bytes] = []
        try:
            value = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - reported to the grader, not raised
            reply = _error_reply(exc)
        else:
            try:
                reply = {"value": encode(value, reply_blobs)}
            except TypeError as exc:
                reply_blobs = []
                reply = {"unsupported": str(exc)}
            changed = _changed_arguments(before, list(args))
            reply["changed"] = {str(i): encode(args[i], reply_blobs) for i in changed}
        reply["blocked"] = blocker.attempts[start:]
        write_frame(out, reply, reply_blobs)


def _protocol_streams() -> tuple[BinaryIO, BinaryIO]:
    """Move the protocol to private descriptors; the learner's prints then go nowhere."""
    inp = os.fdopen(os.dup(0), "rb")
    out = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    return inp, out


def _run_functions(spec_path: str) -> None:
    with open(spec_path) as f:
        spec = json.load(f)
    inp, out = _protocol_streams()
    namespace = _provide_building_blocks(spec)
    blocker = _Blocker(spec["blocked"])
    sys.meta_path.insert(0, blocker)
    sys.path[:] = [p for p in sys.path if not any(p.startswith(h) for h in spec["hide"])]
    isolate(spec)
    confine(spec)
    _serve(spec, namespace, blocker, inp, out)


# ----------------------------------------------------------------------------- checks mode


def _package_dirs(packages: list[str]) -> tuple[str, ...]:
    folders = []
    for name in packages:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            folders.append(os.path.dirname(os.path.abspath(module.__file__)) + os.sep)
    return tuple(folders)


def _codes_of(value: Any) -> set[Any]:
    """Code objects of a reference: a function, or the methods a class defines.

    Decorated functions are unwrapped: a decorator's wrapper (``torch.no_grad``'s, for one)
    shares its code object with every function it decorates, so watching it would count calls
    of allowed building blocks as calls of the reference.
    """
    functions = [value]
    if isinstance(value, type):
        functions = [f for attribute in vars(value).values()
                     for f in (attribute, getattr(attribute, "__func__", None),
                               getattr(attribute, "fget", None))]
    unwrapped = [inspect.unwrap(f) for f in functions if callable(f)]
    return {f.__code__ for f in unwrapped if hasattr(f, "__code__")}


class _ReferenceGuard:
    """Records every call that learner code makes to the reference of an exercise.

    A global trace function (it sees each new Python frame, never lines) looks at calls of
    the ``watched`` code objects (``code -> exercise id``): when the nearest caller that is
    either learner code or the course's code is learner code, the call is recorded under that
    exercise. Calls made by the grader's checks are not, nor calls of what the checks hand to
    the learner's code (a model to decode with). A chapter may let one exercise build on the
    reference of another (an encoder layer on the reference attention): only calls of an
    exercise's own reference cost that exercise its credit.
    """

    def __init__(self, package_dirs: tuple[str, ...], watched: dict[Any, str]) -> None:
        self.package_dirs, self.watched = package_dirs, watched
        self.calls: list[tuple[str, str]] = []

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        code = frame.f_code
        if event != "call" or code not in self.watched:
            return None
        caller = frame.f_back
        while caller is not None:
            filename = caller.f_code.co_filename
            if filename.startswith(LEARNER_FILE):
                where = f"{code.co_qualname} ({os.path.basename(code.co_filename)})"
                self.calls.append((self.watched[code], where))
                break
            if filename.startswith(self.package_dirs):
                break
            caller = caller.f_back
        return None

    def install(self) -> None:
        threading.settrace(self)
        sys.settrace(self)

    def active(self) -> bool:
        return sys.gettrace() is self


def _snapshot(modules: list[Any]) -> dict[str, Any]:
    """Every callable attribute of ``modules`` (modules or classes), by qualified name."""
    table = {}
    for owner in modules:
        prefix = getattr(owner, "__name__", repr(owner))
        for name, value in list(vars(owner).items()):
            if callable(value):
                table[f"{prefix}.{name}"] = value
    return table


def _changed(before: dict[str, Any], modules: list[Any]) -> list[str]:
    """Names in ``before`` now bound to another object or gone (new names are allowed: some
    modules add attributes lazily)."""
    after = _snapshot(modules)
    return sorted(k for k, v in before.items() if after.get(k) is not v)


def _grader_modules(spec: dict[str, Any]) -> list[Any]:
    """What the checks rely on and learner code must leave alone."""
    import builtins
    import math

    import numpy.linalg
    import numpy.testing
    import torch
    import torch.nn.functional

    owners: list[Any] = [builtins, math, np, numpy.linalg, numpy.testing, torch, torch.nn,
                         torch.nn.functional, torch.Tensor, torch.nn.Module, sys]
    owners += [m for name, m in sorted(sys.modules.items())
               if name.split(".")[0] in spec["blocked"] and m is not None]
    return owners


def _load_checks(spec: dict[str, Any]) -> tuple[Any, dict[str, str], list[Any]]:
    """Import the checks, the references and every module they import lazily, before any
    learner code runs (the packages' folders are hidden afterwards)."""
    import importlib
    import pkgutil

    import torch

    torch.set_num_threads(1)
    from autograder.exercises.registry import get_exercise, grade_function

    for package in spec["preload"]:
        module = importlib.import_module(package)
        for info in pkgutil.iter_modules(module.__path__, f"{package}."):
            if info.name.rsplit(".", 1)[1] not in spec["skip_preload"]:
                importlib.import_module(info.name)
    names = dict(zip(spec["exercise_ids"], spec["exercise_names"], strict=True))
    references = [get_exercise(exercise_id).load_reference() for exercise_id in names]
    return grade_function, names, references


def _run_checks(spec_path: str) -> None:
    """Mode ``checks``: run the registered checks here, on the learner's solution cells.

    For PyTorch exercises, whose checks need live modules, this process holds the grader's
    checks and the learner's code at once; what keeps it honest is that the checks and the
    references load first, that learner imports of the course's packages fail and are
    recorded, that learner calls into them are traced, and that any change to the functions
    the checks rely on (NumPy, torch, builtins, the course's modules) is reported.
    """
    with open(spec_path) as f:
        spec = json.load(f)
    inp, out = _protocol_streams()
    grade_function, names, references = _load_checks(spec)
    namespace = _provide_setup(spec)
    package_dirs = _package_dirs(spec["blocked"])
    watched = {code: exercise_id for exercise_id, reference in zip(names, references,
                                                                     strict=True)
               for code in _codes_of(reference)}
    owners = _grader_modules(spec)
    before = _snapshot(owners)
    blocker = _Blocker(spec["blocked"], learner_only=True)
    sys.meta_path.insert(0, blocker)
    guard = _ReferenceGuard(package_dirs, watched)
    isolate(spec)
    confine(spec)
    guard.install()
    cells = _run_cells(spec, namespace, blocker)
    write_frame(out, {"ready": True, "cells": cells}, [])
    while (frame := read_frame(inp)) is not None:
        exercise_id = frame[0]["check"]
        start_blocked = len(blocker.attempts)
        fn = namespace.get(names[exercise_id])
        reply: dict[str, Any] = {"missing": fn is None, "name": names[exercise_id]}
        if fn is not None:
            result = grade_function(exercise_id, fn, hidden=True)
            reply.update(passed=result.passed, message=result.message,
                         own=_is_own(fn, package_dirs))
        reply.update(blocked=blocker.attempts[start_blocked:],
                     reference_calls=sorted({where for owner, where in guard.calls
                                             if owner == exercise_id}),
                     tampered=_changed(before, owners), traced=guard.active())
        write_frame(out, reply, [])


def _is_own(fn: Any, package_dirs: tuple[str, ...]) -> bool:
    """Whether ``fn`` (a function or a class) comes from the solution cells, not from the
    course's packages (a reference class, or a class built on one)."""
    for klass in (fn.__mro__ if isinstance(fn, type) else (fn,)):
        code = getattr(klass, "__code__", None)
        name = getattr(klass, "__module__", None) or "__main__"  # cells run as __main__
        path = "" if name == "__main__" else getattr(sys.modules.get(name), "__file__", "")
        if (code is not None and code.co_filename.startswith(package_dirs)) or (
                path.startswith(package_dirs)):
            return False
    return True


def main(argv: list[str]) -> int:
    mode, spec_path = argv[0], argv[1]
    if mode == "notebook":
        _run_notebook(spec_path)
    elif mode == "confine":
        _exec_confined(spec_path, argv[3:])
    elif mode == "functions":
        _run_functions(spec_path)
    elif mode == "checks":
        _run_checks(spec_path)
    else:
        raise ValueError(f"unknown mode {mode!r}; expected notebook, confine, functions or "
                         "checks")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
