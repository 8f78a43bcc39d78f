"""The sandbox contains learner misbehaviour, shows learner code nothing of the machine but
what it needs, and bounds each learner as a whole."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from ci_env import in_ci
from nbformat.v4 import new_code_cell, new_notebook

from autograder.course import ROOT
from autograder.sandbox import launcher
from autograder.sandbox.launcher import (
    SYSTEM_DIRS,
    GraderFaultError,
    Learner,
    Limits,
    capabilities,
    check_sandbox,
    execute_notebook,
    grader_fault,
    python_paths,
    remove_tree,
    sandbox_problem,
    sandbox_report,
)

CI = in_ci()
needs_isolation = pytest.mark.skipif(
    not capabilities().isolated and not CI,
    reason=f"the sandbox is degraded on this machine: {capabilities().why}")
needs_cgroup = pytest.mark.skipif(
    capabilities().cgroup is None and not CI,
    reason=f"no cgroup for the grader here: {capabilities().cgroup_why}")

LIMITS = Limits(cell_timeout_s=4, notebook_timeout_s=120, memory_mb=1024, max_processes=48,
                max_output_bytes=100_000, disk_mb=64)
# Files the grader's machine holds that learner code must never see.
HOST_SECRETS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")


def _run(cells: list[str], tmp_path: Path, limits: Limits = LIMITS):
    work = tmp_path / "submission"
    work.mkdir(exist_ok=True)
    (work / "data.txt").write_text("learner data")
    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    before = nbformat.writes(nb)
    with Learner(limits) as learner:
        result = execute_notebook(nb, work, learner, secret="kernel-secret")
    assert nbformat.writes(nb) == before, "the input notebook must not change"
    assert (work / "data.txt").read_text() == "learner data", "the learner's files must not change"
    return result


def _text(result, index: int) -> str:
    outputs = result.notebook.cells[index].outputs
    return "".join(o.get("text", "") or o.get("evalue", "") for o in outputs)


@pytest.fixture(scope="module")
def listener():
    """A TCP server of the grader on 127.0.0.1 that sandboxed code must not reach."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepted = []
    thread = threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    server.close()


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """Files and a world-writable UNIX socket that another learner or the host left in the
    shared folders, plus a classmate's submission folder."""
    token = os.urandom(4).hex()
    number = str(int(token, 16))
    paths = {folder: Path(folder) / f"planted-{token}" for folder in HOST_SECRETS
             if Path(folder).is_dir()}
    for path in paths.values():
        path.write_text("secret of the host")
    inbox = tmp_path_factory.mktemp("inbox") / "classmate" / "ch02_attention.ipynb"
    inbox.parent.mkdir()
    inbox.write_text("a classmate's answers")
    sock_path = Path("/tmp") / f"grader-{token}.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock_path))
    sock_path.chmod(0o777)
    server.listen()
    yield {"files": paths, "inbox": inbox, "socket": sock_path, "token": token,
           "number": number}
    server.close()
    for path in [*paths.values(), sock_path]:
        path.unlink(missing_ok=True)


MISBEHAVIOUR = [
    # 0 memory bomb in one process
    "try:\n    block = bytearray(8 * 1024**3)\nexcept MemoryError:\n    print('memory refused')",
    # 1 fork bomb
    "import os, time\npids = []\ntry:\n    for _ in range(10000):\n        pid = os.fork()\n"
    "        if pid == 0:\n            time.sleep(60)\n            os._exit(0)\n"
    "        pids.append(pid)\nexcept OSError as exc:\n"
    "    print('fork refused after', len(pids))\n"
    "for p in pids:\n    os.kill(p, 9)\n    os.waitpid(p, 0)\n",
    # 2 network: the grader's port, then DNS
    "import socket\ntry:\n    socket.create_connection(('127.0.0.1', PORT), timeout=2)\n"
    "    print('connected')\nexcept OSError as exc:\n    print('connect failed')\n"
    "try:\n    socket.getaddrinfo('example.com', 80)\n    print('resolved')\n"
    "except OSError:\n    print('dns failed')",
    # 3 what exists: the top of the file system, the checkout, host files, a classmate
    "import os\n"
    "print('top', sorted(os.listdir('/')))\n"
    "for path in ['ROOT', 'ROOT/solutions', 'ROOT/autograder', 'ROOT/.git', 'INBOX',\n"
    "             'SOCKET', '/etc/shadow', '/root/.bash_history', PLANTED]:\n"
    "    print('exists' if os.path.lexists(path) else 'absent', path)\n"
    "print('own', open('data.txt').read(), os.getcwd())",
    # 4 the private folders: present, empty but for the kernel's own files, writable; writes
    # never reach the host
    "import os\nfor folder in ['/tmp', '/var/tmp', '/dev/shm', '/run/lock', '/run/user']:\n"
    "    print(folder, sorted(n for n in os.listdir(folder)\n"
    "                         if not n.startswith(('.', 'tmp', 'kernel-'))))\n"
    "    open(os.path.join(folder, 'left-by-learner-TOKEN'), 'w').write('x')\n"
    "for path in ['ROOT/notebooks/planted.txt', '/usr/planted.txt']:\n"
    "    try:\n        open(path, 'w').write('x')\n        print('wrote', path)\n"
    "    except OSError as exc:\n        print('refused', path)",
    # 5 a SysV shared-memory segment (must die with the IPC namespace)
    "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
    "print('shm', libc.shmget(0, 1 << 20, 0o1000 | 0o666))",
    # 6 a full disk: writing more than the work folder holds
    "written = 0\ntry:\n    with open('big.bin', 'wb') as f:\n        for _ in range(256):\n"
    "            f.write(b'x' * 1024 * 1024)\n            written += 1\n"
    "except OSError as exc:\n    print('disk refused after', written, type(exc).__name__)",
    # 7 sys.exit
    "import sys\nsys.exit(3)",
    # 8 endless loop, 9 sleep
    "while True:\n    pass",
    "import time\ntime.sleep(600)",
    # 10 huge output
    "import sys\nfor _ in range(4):\n    sys.stdout.write('x' * 500_000)",
    # 11 still alive, and the secret is the per-run one
    "import os\nprint('alive', os.environ.get('AUTOGRADER_SECRET'), sorted(os.environ)[:3])",
    # 12 a daemon that tries to outlive the run (its command line carries this run's token)
    "import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
    "        os.execv('/bin/sleep', ['sleep', '600.NUMBER'])\n    os._exit(0)\n"
    "print('daemon started')",
    # 13 kernel exit, 14 never runs
    "import os\nos._exit(7)",
    "print('never')",
]


def _shm_segments() -> set[str]:
    try:
        lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    except OSError:
        return set()
    return {line.split()[1] for line in lines}


@pytest.fixture(scope="module")
def misbehaved(tmp_path_factory, listener, planted):
    port, _ = listener
    replacements = {"PORT": str(port), "ROOT": str(ROOT), "INBOX": str(planted["inbox"]),
                    "SOCKET": str(planted["socket"]), "TOKEN": planted["token"],
                    "NUMBER": planted["number"],
                    "PLANTED": repr([str(p) for p in planted["files"].values()])[1:-1]}
    cells = []
    for cell in MISBEHAVIOUR:
        for key, value in replacements.items():
            cell = cell.replace(key, value)
        cells.append(cell)
    before = _shm_segments()
    result = _run(cells, tmp_path_factory.mktemp("misbehaved"))
    return result, _shm_segments() - before, planted


def test_report_lists_what_is_enforced():
    lines = sandbox_report(LIMITS)
    text = "\n".join(lines)
    for topic in ("sandbox:", "file system:", "temporary folders:", "writable work folder:",
                  "namespaces:", "time:", "memory:", "processes:", "output:", "user:",
                  "environment:"):
        assert any(line.startswith(topic) for line in lines), topic
    assert "1024 MiB" in text and "48 at once" in text and "100000 bytes" in text
    assert "64 MiB" in text
    if capabilities().isolated:
        assert "allow-list" in text and "DEGRADED" not in text
    else:
        assert "DEGRADED" in text and "NOT enforced" in text


def test_memory_bomb_is_refused(misbehaved):
    result = misbehaved[0]
    assert "memory refused" in _text(result, 0)
    assert result.cells[0].status == "ok"


def test_fork_bomb_is_contained(misbehaved):
    text = _text(misbehaved[0], 1)
    assert "fork refused after" in text
    assert int(text.split("after")[1].split()[0]) < LIMITS.max_processes


@needs_isolation
def test_network_is_unreachable(misbehaved, listener):
    text = _text(misbehaved[0], 2)
    assert "connect failed" in text and "dns failed" in text
    assert listener[1] == []


@needs_isolation
def test_the_file_system_is_an_allow_list(misbehaved):
    text = _text(misbehaved[0], 3)
    top = eval(text.split("top ", 1)[1].split("\n", 1)[0])  # the printed list of names
    # The system folders, the sandbox's own mounts, and the first folder of each path that
    # holds this Python (a checkout may live anywhere, e.g. /check/work/...).
    allowed = {Path(p).parts[1] for p in (*SYSTEM_DIRS, *python_paths())}
    allowed |= {"etc", "proc", "dev", "tmp", "var", "run", "home", "sandbox", "course",
                "submission", "result"}
    assert set(top) <= allowed, set(top) - allowed
    for path in (str(ROOT), f"{ROOT}/solutions", f"{ROOT}/autograder", f"{ROOT}/.git",
                 "/etc/shadow", "/root/.bash_history"):
        if path == str(ROOT) and f"exists {ROOT}\n" in text:
            continue  # the virtual environment may live inside the checkout
        assert f"absent {path}\n" in text, (path, text)
    for path in [misbehaved[2]["inbox"], misbehaved[2]["socket"], *misbehaved[2]["files"].values()]:
        assert f"absent {path}\n" in text, (path, text)
    assert "own learner data /home/learner" in text


@needs_isolation
def test_private_folders_are_empty_and_leave_nothing_behind(misbehaved):
    result, _, planted = misbehaved
    text = _text(result, 4)
    for folder in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/run/user"):
        # Nothing but the course's Python, where it lives there (a checkout in /tmp), and
        # what the cell leaves out (the kernel's own files).
        python = {Path(p).relative_to(folder).parts[0] for p in python_paths()
                  if p.startswith(folder + "/")}
        shown = sorted(n for n in python if not n.startswith((".", "tmp", "kernel-")))
        assert f"{folder} {shown}" in text, text
        assert not list(Path(folder).glob(f"left-by-learner-{planted['token']}")) \
            if Path(folder).is_dir() else True
    assert f"refused {ROOT}/notebooks/planted.txt" in text and "refused /usr/planted.txt" in text
    assert not (ROOT / "notebooks" / "planted.txt").exists()


# Run by a Python whose folder lies in /tmp (argv: the learner's files): what the sandbox says
# of itself, and a notebook that shows where its kernel's Python is and what /tmp holds.
TMP_PYTHON = """
import json, sys
from nbformat.v4 import new_code_cell, new_notebook
from autograder.sandbox.launcher import Learner, Limits, execute_notebook, sandbox_problem

cell = ("import os, sys\\nprint(sys.executable)\\n"  # /tmp, less the kernel's own files
        "print(sorted(n for n in os.listdir('/tmp') if not n.startswith(('.', 'tmp', 'k'))))")
with Learner(Limits(notebook_timeout_s=300)) as learner:
    result = execute_notebook(new_notebook(cells=[new_code_cell(cell)]), sys.argv[1], learner,
                              secret=None)
print(json.dumps({"problem": sandbox_problem(Limits()), "ok": result.ok,
                  "reason": result.reason,
                  "out": "".join(o.get("text", "") for o in result.notebook.cells[0].outputs)}))
"""


@pytest.fixture
def tmp_python() -> Iterator[tuple[Path, Path]]:
    """A folder in /tmp, and in it this Python's environment reached through a link (as
    after `git clone ... /tmp/x && make install`, but without installing again): the folder
    and the Python, named as the grader started from there names it."""
    home = Path(tempfile.mkdtemp(prefix="course-", dir="/tmp"))
    try:
        (home / "venv").symlink_to(os.path.realpath(sys.prefix), target_is_directory=True)
        (home / "planted.txt").write_text("not for learners")
        yield home, home / "venv" / "bin" / Path(sys.executable).name
    finally:
        shutil.rmtree(home)


def in_tmp(home: Path) -> list[str]:
    """What a sandbox's /tmp holds when ``home`` holds the grader's Python: the folders in
    /tmp of this Python's own environment and of ``home`` (less names the cells leave out)."""
    found = {Path(p).parts[2] for p in (str(home), os.path.realpath(sys.prefix),
                                        os.path.realpath(sys.base_prefix))
             if Path(p).parts[1:2] == ("tmp",)}
    return sorted(n for n in found if not n.startswith((".", "tmp", "k")))


def run_python(python: Path, code: str, *args: str) -> dict:
    run = subprocess.run([str(python), "-c", code, *args], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads(run.stdout.splitlines()[-1])


@needs_isolation
def test_a_python_that_lives_in_tmp_runs_in_the_sandbox(tmp_python, tmp_path):
    """A course cloned into /tmp: the sandbox's own empty /tmp would hide its Python, so the
    Python is bound on top of it, and the learner sees nothing else of the machine's /tmp."""
    home, python = tmp_python
    (tmp_path / "submission").mkdir()
    found = run_python(python, TMP_PYTHON, str(tmp_path / "submission"))
    assert found["problem"] is None
    assert found["ok"], found["reason"]
    assert found["out"] == f"{python}\n{in_tmp(home)!r}\n"


# The same Python in a learner's view of the class server (argv: the class's state folder).
TMP_VIEW = """
import json, subprocess, sys
from pathlib import Path
from autograder.hub.classroom import Classroom
from autograder.hub.spawner import learner_view

from autograder.steps.view import refresh_view

classroom = Classroom(Path(sys.argv[1]), "view-test-")
classroom.prepare()  # as the hub does, and the class's view of the course as a spawn writes it
classroom.home("alice").mkdir(parents=True)
refresh_view(classroom.course, classroom.exchange)
cell = ("import numpy, os, sys; print(sys.executable); "
        "print(sorted(n for n in os.listdir('/tmp') if not n.startswith(('.', 'tmp', 'k'))))")
run = subprocess.run([*learner_view(classroom, "alice", 65534, 65534), sys.executable, "-c",
                      cell], capture_output=True, text=True, timeout=300)
print(json.dumps({"status": run.returncode, "out": run.stdout + run.stderr}))
"""


@pytest.mark.skipif(os.geteuid() != 0 and not CI, reason="a learner's view starts as root")
def test_a_python_that_lives_in_tmp_runs_in_a_learners_view(tmp_python):
    home, python = tmp_python
    found = run_python(python, TMP_VIEW, str(home / "state"))
    assert found == {"status": 0, "out": f"{python}\n{in_tmp(home)!r}\n"}


def test_a_sandbox_that_cannot_start_names_the_cause_and_the_fix(monkeypatch):
    check_sandbox(LIMITS)  # this machine's sandbox runs the course's Python
    monkeypatch.setattr(launcher, "python_paths", lambda: [])
    with pytest.raises(GraderFaultError) as caught:
        check_sandbox(LIMITS)
    message = str(caught.value)
    assert f"bwrap: execvp {sys.executable}: No such file or directory" in message
    assert "not of any learner" in message and "Fix: the course's Python" in message


@needs_cgroup
def test_a_memory_limit_too_small_for_python_is_the_graders_fault():
    problem = sandbox_problem(Limits(memory_mb=1))
    assert "went over the memory limit of 1 MiB" in problem
    assert "Fix: Python needs more memory than --memory-mb allows" in grader_fault(problem)


@needs_isolation
def test_shared_memory_dies_with_the_run(misbehaved):
    result, leaked, _ = misbehaved
    assert "shm " in _text(result, 5) and not _text(result, 5).startswith("shm -1")
    assert leaked == set()


@needs_isolation
def test_the_work_folder_is_capped(misbehaved):
    text = _text(misbehaved[0], 6)
    assert "disk refused after" in text
    assert int(text.split("after")[1].split()[0]) <= LIMITS.disk_mb


def test_errors_timeouts_and_output_are_reported_per_cell(misbehaved):
    result = misbehaved[0]
    statuses = [c.status for c in result.cells]
    assert statuses[7] == "error" and result.cells[7].ename == "SystemExit"
    assert statuses[8:10] == ["timeout", "timeout"]
    assert result.output_truncated
    assert len(_text(result, 10)) <= LIMITS.max_output_bytes + 200
    assert "alive kernel-secret" in _text(result, 11)


def test_kernel_exit_ends_the_run_with_a_reason(misbehaved):
    result = misbehaved[0]
    assert [c.status for c in result.cells[13:]] == ["kernel_died", "not_run"]
    assert not result.ok and "kernel died while running cell 13" in result.reason


def test_segfault_is_a_kernel_death(tmp_path):
    result = _run(["print('before')", "import ctypes\nctypes.string_at(0)"], tmp_path)
    assert [c.status for c in result.cells] == ["ok", "kernel_died"]
    assert not result.ok


def test_notebook_time_limit(tmp_path):
    limits = Limits(cell_timeout_s=60, notebook_timeout_s=6, memory_mb=1024)
    result = _run(["import time\ntime.sleep(30)", "print('late')"], tmp_path, limits)
    assert not result.ok and "6 s" in result.reason
    assert result.cells[1].status == "not_run"


def test_the_learner_deadline_covers_every_run(tmp_path):
    limits = Limits(cell_timeout_s=60, notebook_timeout_s=600, learner_timeout_s=8,
                    memory_mb=1024)
    result = _run(["import time\ntime.sleep(5)", "import time\ntime.sleep(5)", "print('late')"],
                  tmp_path, limits)
    assert not result.ok
    assert [c.status for c in result.cells][-1] == "not_run"


@needs_cgroup
@needs_isolation
def test_memory_is_bounded_for_all_of_a_learners_processes(tmp_path):
    """Three processes of 400 MiB each fit the per-process limit but not the learner's."""
    cell = ("import subprocess, sys\n"
            "code = 'import time; block = bytearray(400 * 1024 * 1024); time.sleep(5)'\n"
            "kids = [subprocess.Popen([sys.executable, '-c', code]) for _ in range(3)]\n"
            "print('exit codes', [kid.wait() for kid in kids])")
    result = _run([cell], tmp_path, Limits(cell_timeout_s=60, memory_mb=1024))
    assert result.memory_exceeded
    assert "-9" in _text(result, 0), "the kernel stops one of the processes (SIGKILL)"


@needs_isolation
def test_nothing_outlives_a_learner(misbehaved):
    result, _, planted = misbehaved
    assert "daemon started" in _text(result, 12)
    mark = f"600.{planted['number']}".encode()
    survivors = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and mark in (proc / "cmdline").read_bytes():
                survivors.append(proc.name)
        except OSError:  # the process ended while we looked
            pass
    assert survivors == []


def test_bad_arguments(tmp_path):
    with Learner(LIMITS) as learner:
        with pytest.raises(TypeError, match="nbformat"):
            execute_notebook({"cells": []}, tmp_path, learner, secret=None)
        with pytest.raises(FileNotFoundError, match="folder"):
            execute_notebook(new_notebook(), tmp_path / "missing", learner, secret=None)
        with pytest.raises(TypeError, match="Learner"):
            execute_notebook(new_notebook(), tmp_path, LIMITS, secret=None)
    with pytest.raises(ValueError, match="memory_mb"):
        Limits(memory_mb=0)
    with pytest.raises(TypeError, match="Limits"):
        Learner({"memory_mb": 1})


# Deeper than Python's recursion limit, and a path far longer than Linux's 4,096 characters.
DEPTH, FOLDER = 1200, "folder-"


def _nest(top: Path) -> None:
    """:data:`DEPTH` folders inside each other under ``top`` (made without ever naming a long
    path), a file at the bottom, and the bottom folder closed to everyone."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(DEPTH):
        os.mkdir(FOLDER, dir_fd=fd)
        inner = os.open(FOLDER, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    with open(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "w") as f:
        f.write("x")
    os.fchmod(fd, 0)
    os.close(fd)


def test_remove_tree_removes_deeply_nested_folders_and_follows_no_link(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("kept")
    tree = tmp_path / "tree"
    tree.mkdir()
    _nest(tree)
    (tree / "link").symlink_to(outside)
    (tree / FOLDER / "inner-link").symlink_to(outside / "keep.txt")
    remove_tree(tree)
    assert not tree.exists()
    assert (outside / "keep.txt").read_text() == "kept"
    remove_tree(tree)  # nothing there: no error


# A learner's notebook that leaves deeply nested folders in its working folder, one of them
# closed to everyone.
NESTING_CELL = (f"import os\nfor _ in range({DEPTH}):\n    os.mkdir({FOLDER!r})\n"
                f"    os.chdir({FOLDER!r})\nos.mkdir('closed')\n"
                "open('closed/bottom.txt', 'w').write('x')\nos.chmod('closed', 0)\n"
                f"for _ in range({DEPTH}):\n    os.chdir('..')\nprint('nested', os.listdir())")


def test_deeply_nested_folders_leave_nothing_behind(tmp_path, monkeypatch):
    # The sandbox's folders go into a folder of this test (readable by the run's user).
    folder = Path(tempfile.mkdtemp(prefix="nesting-"))
    folder.chmod(0o755)
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    try:
        result = _run([NESTING_CELL, "print('after')"], tmp_path)
        assert result.ok, result.reason
        assert f"nested ['{FOLDER}'" in _text(result, 0) and "after" in _text(result, 1)
        assert list(folder.iterdir()) == []
    finally:
        monkeypatch.undo()
        shutil.rmtree(folder, ignore_errors=True)


@needs_isolation
def test_matplotlib_finds_its_font_list_in_a_fresh_sandbox(tmp_path: Path):
    """Each run's private /tmp holds the grader's matplotlib font list before the notebook
    starts: no rebuild in every graded notebook, and no Fontconfig error in its output."""
    result = _run(["import os\nprint(sorted(os.listdir(os.environ['MPLCONFIGDIR'])))",
                   "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nprint('drawn')"],
                  tmp_path)
    assert "fontlist-v" in _text(result, 0), _text(result, 0)
    assert _text(result, 1) == "drawn\n", result.notebook.cells[1].outputs
