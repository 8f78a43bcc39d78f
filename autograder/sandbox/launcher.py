"""Run learner notebooks in a sandbox: time, memory, process and output limits, no network,
and no view of the solutions, the gradebook or other learners' work.

    from autograder.sandbox.launcher import Limits, execute_notebook, sandbox_report
    for line in sandbox_report():
        print(line)                                   # what is enforced on this machine
    result = execute_notebook(nb, workdir, Limits(), secret=secret)
    result.notebook        # the executed copy (outputs capped at max_output_bytes)
    result.ok, result.reason, result.cells

Learner misbehaviour (os._exit, sys.exit, a segfault, a memory or fork bomb, an endless
loop, a flood of output) never raises here: it ends as an :class:`ExecutionResult` with a
reason. The mechanisms are detected at run time; see :func:`sandbox_report`.
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
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode

from autograder.course import COURSE_DIR, COURSE_FOLDER, ROOT
from autograder.notebook import grade_id

# The script that runs inside the sandbox (next to it: wire.py, which it imports).
WORKER = Path(__file__).resolve().with_name("worker.py")
# Folders of the repository that learner code never needs to read.
PRIVATE_FOLDERS = ("solutions", ".git", "tests", COURSE_FOLDER.as_posix(),
                   "autograder/demo/mutants")
# Environment variables passed on from the grader to sandboxed code.
PASSED_ENV = ("LANG", "LC_ALL", "TRANSFORMER_COURSE_FAST")
TMP_MB = 256          # size of the fresh /tmp
FILE_MB = 256         # largest file learner code may write
# Extra seconds the grader waits past the notebook limit before it kills the sandbox.
GRACE_S = 30


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed run.

    Attributes:
        cell_timeout_s: wall-clock seconds one cell (or one verified function call) may run.
        notebook_timeout_s: wall-clock seconds for the whole notebook, kernel start included.
        memory_mb: address-space limit of the learner's process, in MiB.
        max_processes: processes and threads the learner's code may run at once.
        max_output_bytes: total bytes of cell outputs kept per notebook; more is cut off and
            flagged.
    """

    cell_timeout_s: float = 120.0
    notebook_timeout_s: float = 900.0
    memory_mb: int = 4096
    max_processes: int = 64
    max_output_bytes: int = 2_000_000


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
            the learner's and show in ``cells``); False on a kernel death, a notebook timeout,
            a failed start or a sandbox failure.
        reason: a sentence for a human when ``ok`` is False, else ``""``.
        output_truncated: True when outputs went above ``max_output_bytes`` and were cut.
        report: :func:`sandbox_report` lines of this run.
    """

    notebook: NotebookNode
    cells: list[CellOutcome]
    ok: bool
    reason: str
    output_truncated: bool = False
    report: list[str] = field(default_factory=list)


@functools.cache
def _capabilities() -> dict[str, Any]:
    """What this machine lets the sandbox use; probed once per process."""
    root = os.geteuid() == 0
    unshare = shutil.which("unshare")
    namespaces, why = False, "the grader does not run as root" if not root else ""
    if root and unshare is None:
        why = "the unshare command (util-linux) is not installed"
    elif root:
        probe = subprocess.run([unshare, *_UNSHARE_FLAGS, "true"], capture_output=True,
                               text=True, timeout=30, check=False)
        namespaces = probe.returncode == 0
        why = "" if namespaces else f"unshare failed: {probe.stderr.strip()[:200]}"
    return {"root": root, "unshare": unshare, "namespaces": namespaces, "why": why}


_UNSHARE_FLAGS = ("--net", "--mount", "--pid", "--fork", "--mount-proc", "--kill-child")


def sandbox_report(limits: Limits | None = None) -> list[str]:
    """Lines saying which protections are enforced on this machine and which degraded.

    Every mechanism appears with its state and how it is enforced; a degraded one says what
    is missing and why (not root, no ``unshare``).
    """
    limits = Limits() if limits is None else limits
    caps = _capabilities()
    ns = caps["namespaces"]
    missing = f"NOT enforced ({caps['why']})"
    user = ("a private unprivileged user id per run" if caps["root"]
            else "NOT dropped (the grader is not root; code runs as the grader's user)")
    return [
        f"sandbox: {'full' if ns else 'DEGRADED'} isolation"
        + ("" if ns else f" ({caps['why']}); only limits, a temporary folder and a scrubbed "
                         "environment apply"),
        f"time: {limits.cell_timeout_s:g} s per cell (interrupt), {limits.notebook_timeout_s:g} s"
        " per notebook (then the sandbox is killed), CPU time limit (RLIMIT_CPU)",
        f"memory: {limits.memory_mb} MiB address space per process (RLIMIT_AS)",
        f"processes: {limits.max_processes} processes and threads (RLIMIT_NPROC"
        + (" under a private user id)" if caps["root"] else "; NOT enforced for root)")
        + (", in a new PID namespace" if ns else ""),
        f"output: {limits.max_output_bytes} bytes per notebook, more is cut off and flagged",
        f"files: writes up to {FILE_MB} MiB per file (RLIMIT_FSIZE); "
        + (f"fresh {TMP_MB} MiB /tmp, /var/tmp and /dev/shm" if ns else "shared /tmp"),
        "network: " + ("blocked (new network namespace without interfaces)" if ns else missing),
        "file system: " + ("solutions, gradebook, submissions, tests, mutants and .git hidden by "
                           "empty mounts in a new mount namespace; the working folder is a "
                           "private copy" if ns else f"private working copy only; hidden "
                                                     f"folders {missing}"),
        f"user: {user}, no new privileges (PR_SET_NO_NEW_PRIVS)",
        "environment: rebuilt from scratch (no grader variables or secrets except the "
        "kernel's AUTOGRADER_SECRET)",
    ]


def hidden_paths(extra: Iterable[str | os.PathLike] = ()) -> list[str]:
    """Absolute paths that sandboxed code must not see: ``solutions/``, the course folder
    (gradebook, submissions, autograded copies, feedback), ``.git``, the tests and mutants,
    and ``extra`` (for example a course folder outside the repository)."""
    paths = [ROOT / name for name in PRIVATE_FOLDERS] + [COURSE_DIR]
    paths += [Path(p).resolve() for p in extra]
    return list(dict.fromkeys(str(p) for p in paths))


def _private_uid() -> int:
    # A user id of its own per run, so RLIMIT_NPROC counts only this run's processes.
    return 200_000 + secrets.randbelow(1_000_000)


def kernel_environment(workdir: str, secret: str | None) -> dict[str, str]:
    """The whole environment of sandboxed code: nothing is inherited except
    :data:`PASSED_ENV`."""
    env = {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin",
                                 "/bin"]),
        "HOME": workdir, "TMPDIR": "/tmp", "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": "/tmp/.matplotlib", "IPYTHONDIR": "/tmp/.ipython",
        "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.update({k: os.environ[k] for k in PASSED_ENV if k in os.environ})
    if secret:
        env["AUTOGRADER_SECRET"] = secret
    return env


@dataclass
class Job:
    """A private folder for one sandboxed run: ``work/`` (the learner's copy, owned by the
    run's user), ``result/`` (root only) and the spec file. Remove it with :meth:`close`."""

    path: Path
    spec: dict[str, Any]

    @property
    def spec_path(self) -> Path:
        return self.path / "spec.json"

    def command(self, mode: str) -> list[str]:
        """The command that runs ``worker.py MODE`` in the sandbox."""
        argv = [sys.executable, "-I", str(WORKER), mode, str(self.spec_path)]
        if self.spec["namespaces"]:
            return [_capabilities()["unshare"], *_UNSHARE_FLAGS, "--", *argv]
        return argv

    def write_spec(self) -> None:
        self.spec_path.write_text(json.dumps(self.spec))

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def new_job(limits: Limits, *, workdir: str | os.PathLike | None, secret: str | None,
            hide: Iterable[str | os.PathLike] = ()) -> Job:
    """Create the private folder of a run and its spec (see :mod:`autograder.sandbox.worker`).

    Args:
        workdir: copied (symbolic links stay links, so they cannot reach hidden files) into
            ``work/``; None gives an empty one.
    """
    if not isinstance(limits, Limits):
        raise TypeError(f"limits must be an autograder.sandbox.launcher.Limits, got "
                        f"{type(limits).__name__}; build one with Limits(...)")
    caps = _capabilities()
    path = Path(tempfile.mkdtemp(prefix="autograder-sandbox-"))
    work = path / "work"
    if workdir is None:
        work.mkdir()
    else:
        shutil.copytree(workdir, work, symlinks=True)
    (path / "result").mkdir(mode=0o700)
    uid = _private_uid() if caps["root"] else None
    if uid is not None:
        for folder, dirs, files in os.walk(work):
            for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
                os.lchown(name, uid, uid)
        os.chmod(path, 0o711)
    ns = caps["namespaces"]
    scratch = path / "scratch"
    scratch.mkdir()
    scratch.chmod(0o1777)
    spec = {
        "namespaces": ns,
        "workdir": str(work),
        "result_dir": str(path / "result"),
        # Kernel files: the fresh /tmp, or without namespaces a folder of this run.
        "scratch": "/tmp" if ns else str(scratch),
        "hide": hidden_paths(hide),
        "reachable": [sys.prefix, sys.base_prefix, str(ROOT)],
        "tmp_mb": TMP_MB, "file_mb": FILE_MB,
        "cpu_s": int(limits.notebook_timeout_s) + GRACE_S,
        "uid": uid,
        "limits": asdict(limits),
        "env": kernel_environment("/tmp/work" if ns else str(work), secret),
    }
    return Job(path, spec)


def run_command(command: list[str], timeout_s: float, log: Path, **kwargs: Any) -> int | None:
    """Run a sandbox command with output to ``log``; kill it after ``timeout_s``.

    Returns:
        The exit status, or None when it was killed for running too long.
    """
    with open(log, "wb") as err:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=err, start_new_session=True, env=runner_env(),
                                   **kwargs)
        try:
            return process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill(process)
            return None


def kill(process: subprocess.Popen) -> None:
    """Kill a sandbox and everything in it (the PID namespace dies with its first process)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def runner_env() -> dict[str, str]:
    env = {"PATH": kernel_environment("", None)["PATH"], "HOME": "/tmp", "LANG": "C.UTF-8"}
    env.update({k: os.environ[k] for k in PASSED_ENV if k in os.environ})
    return env


def log_tail(log: Path, size: int = 600) -> str:
    """The last ``size`` characters of a sandbox log, for messages."""
    try:
        text = log.read_bytes()[-size:].decode(errors="replace")
    except OSError:
        return ""
    return text.strip()


def execute_notebook(
    nb: NotebookNode,
    workdir: str | os.PathLike,
    limits: Limits,
    *,
    secret: str | None,
    hide: Iterable[str | os.PathLike] = (),
) -> ExecutionResult:
    """Execute a copy of ``nb`` with nbclient in the sandbox and report per cell.

    Args:
        nb: the notebook (nbformat v4); not modified.
        workdir: a folder holding this learner's files; copied into a fresh private folder
            that becomes the kernel's working directory (the original is never written).
        limits: the :class:`Limits` of the run.
        secret: given to the kernel as ``AUTOGRADER_SECRET`` so hidden test cells can run.
            Code in the notebook can read it: pass a per-run value, not the value that
            :func:`autograder.pipeline.verify.verify_exercises` uses in the grader process.
        hide: more paths to cover besides :func:`hidden_paths` (e.g. the course folder).

    Returns:
        An :class:`ExecutionResult`; learner misbehaviour never raises.

    Raises:
        TypeError: ``nb`` is not a notebook node, or ``limits`` is not a :class:`Limits`.
        FileNotFoundError: ``workdir`` does not exist.
    """
    if not isinstance(nb, NotebookNode):
        raise TypeError(f"nb must be a notebook read with nbformat.read(path, as_version=4), "
                        f"got {type(nb).__name__}")
    if not Path(workdir).is_dir():
        raise FileNotFoundError(f"workdir {workdir} is not a folder; pass the folder that holds "
                                "the learner's submitted files")
    job = new_job(limits, workdir=workdir, secret=secret, hide=hide)
    try:
        job.spec["notebook"] = str(job.path / "notebook.ipynb")
        nbformat.write(nb, job.spec["notebook"])
        job.write_spec()
        log = job.path / "result" / "sandbox.log"
        status = run_command(job.command("notebook"), limits.notebook_timeout_s + GRACE_S, log)
        return _read_result(nb, job, status, log, limits)
    finally:
        job.close()


def _read_result(nb: NotebookNode, job: Job, status: int | None, log: Path,
                 limits: Limits) -> ExecutionResult:
    report = sandbox_report(limits)
    try:
        data = json.loads((job.path / "result" / "result.json").read_text())
    except (OSError, ValueError):
        if status is None:
            reason = (f"the notebook ran longer than {limits.notebook_timeout_s:g} s (plus "
                      f"{GRACE_S} s grace) and the sandbox was killed")
        else:
            reason = f"the sandbox ended with exit status {status}: {log_tail(log)}"
        cells = [CellOutcome(i, c.get("id"), grade_id(c), "not_run")
                 for i, c in enumerate(nb.cells) if c.cell_type == "code"]
        return ExecutionResult(nbformat.from_dict(nb), cells, False, reason, False, report)
    executed = nbformat.from_dict(data["notebook"])
    cells = [CellOutcome(c["index"], executed.cells[c["index"]].get("id"),
                         grade_id(executed.cells[c["index"]]), c["status"], c.get("ename"),
                         c.get("evalue")) for c in data["cells"]]
    return ExecutionResult(executed, cells, data["ok"], data["reason"], data["truncated"],
                           report)

