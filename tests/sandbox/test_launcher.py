"""The sandbox contains learner misbehaviour, shows learner code nothing of the machine but
what it needs, and bounds each learner as a whole."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from autograder.course import ROOT
from autograder.sandbox.launcher import (
    Learner,
    Limits,
    capabilities,
    execute_notebook,
    sandbox_report,
)

CI = os.environ.get("CI") == "true"
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
    allowed = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "proc", "dev",
               "tmp", "var", "run", "home", "sandbox", "course", "submission", "result",
               "root", "work", "opt", "srv", "mnt"}
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
        assert f"{folder} []" in text, text
        assert not list(Path(folder).glob(f"left-by-learner-{planted['token']}")) \
            if Path(folder).is_dir() else True
    assert f"refused {ROOT}/notebooks/planted.txt" in text and "refused /usr/planted.txt" in text
    assert not (ROOT / "notebooks" / "planted.txt").exists()


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
