"""The sandbox contains learner misbehaviour and reports it per notebook."""

from __future__ import annotations

import re
import socket
import threading
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from autograder.course import COURSE_DIR, ROOT
from autograder.sandbox.launcher import Limits, _capabilities, execute_notebook, sandbox_report

needs_namespaces = pytest.mark.skipif(
    not _capabilities()["namespaces"], reason="needs root and unshare (namespaces)")

LIMITS = Limits(cell_timeout_s=4, notebook_timeout_s=90, memory_mb=1024, max_processes=48,
                max_output_bytes=100_000)


def _run(cells: list[str], tmp_path: Path, limits: Limits = LIMITS, **kwargs):
    work = tmp_path / "submission"
    work.mkdir(exist_ok=True)
    (work / "data.txt").write_text("learner data")
    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    before = nbformat.writes(nb)
    result = execute_notebook(nb, work, limits, secret="kernel-secret", **kwargs)
    assert nbformat.writes(nb) == before, "the input notebook must not change"
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


MISBEHAVIOUR = [
    # 0 memory bomb
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
    # 3 reading the solutions and the gradebook, relative and absolute
    "import os\nseen = []\nfor path in ['../../solutions', 'SOLUTIONS', 'COURSE', 'GRADEBOOK']:\n"
    "    try:\n"
    "        seen.append(os.listdir(path) if os.path.isdir(path) else open(path).read(1))\n"
    "    except OSError as exc:\n        seen.append(type(exc).__name__)\n"
    "print('seen', seen, open('data.txt').read())",
    # 4 writing outside the working folder
    "import os\nfor path in ['NOTEBOOKS/planted.txt', '/tmp/planted-by-learner.txt']:\n"
    "    try:\n        open(path, 'w').write('x')\n        print('wrote', path)\n"
    "    except OSError as exc:\n        print('refused', path)",
    # 5 sys.exit
    "import sys\nsys.exit(3)",
    # 6 endless loop, 7 sleep
    "while True:\n    pass",
    "import time\ntime.sleep(600)",
    # 8 huge output
    "import sys\nfor _ in range(4):\n    sys.stdout.write('x' * 500_000)",
    # 9 still alive, and the secret is the per-run one
    "import os\nprint('alive', os.environ.get('AUTOGRADER_SECRET'), sorted(os.environ)[:3])",
    # 10 kernel exit, 11 never runs
    "import os\nos._exit(7)",
    "print('never')",
]


@pytest.fixture(scope="module")
def misbehaved(tmp_path_factory, listener):
    port, _ = listener
    replacements = {"PORT": str(port), "SOLUTIONS": str(ROOT / "solutions"),
                    "COURSE": str(COURSE_DIR), "GRADEBOOK": str(COURSE_DIR / "gradebook.db"),
                    "NOTEBOOKS": str(ROOT / "notebooks")}
    cells = []
    for cell in MISBEHAVIOUR:
        for key, value in replacements.items():
            cell = cell.replace(key, value)
        cells.append(cell)
    return _run(cells, tmp_path_factory.mktemp("misbehaved"))


def test_report_lists_what_is_enforced():
    lines = sandbox_report(LIMITS)
    text = "\n".join(lines)
    for topic in ("time:", "memory:", "processes:", "output:", "network:", "file system:",
                  "user:", "environment:"):
        assert any(line.startswith(topic) for line in lines), topic
    assert "1024 MiB" in text and "48 processes" in text and "100000 bytes" in text
    if _capabilities()["namespaces"]:
        assert "blocked" in text and "NOT enforced" not in text
    else:
        assert "DEGRADED" in text and "NOT enforced" in text


def test_memory_bomb_is_refused(misbehaved):
    assert "memory refused" in _text(misbehaved, 0)
    assert misbehaved.cells[0].status == "ok"


def test_fork_bomb_is_contained(misbehaved):
    text = _text(misbehaved, 1)
    assert "fork refused after" in text
    assert int(text.split("after")[1].split()[0]) < LIMITS.max_processes


@needs_namespaces
def test_network_is_unreachable(misbehaved, listener):
    text = _text(misbehaved, 2)
    assert "connect failed" in text and "dns failed" in text
    assert listener[1] == []


@needs_namespaces
def test_solutions_and_gradebook_cannot_be_read(misbehaved):
    text = _text(misbehaved, 3)
    # ../../solutions and solutions/ show nothing; the course folder is covered where it
    # exists and simply absent in a fresh checkout.
    assert re.search(r"seen \['FileNotFoundError', \[\], (\[\]|'FileNotFoundError'), ", text), text
    assert "learner data" in text
    assert "ch02" not in text


@needs_namespaces
def test_writes_outside_the_working_folder_land_nowhere(misbehaved):
    text = _text(misbehaved, 4)
    assert f"refused {ROOT / 'notebooks'}" in text
    assert not (ROOT / "notebooks" / "planted.txt").exists()
    assert not Path("/tmp/planted-by-learner.txt").exists()


def test_errors_timeouts_and_output_are_reported_per_cell(misbehaved):
    statuses = [c.status for c in misbehaved.cells]
    assert statuses[5] == "error" and misbehaved.cells[5].ename == "SystemExit"
    assert statuses[6:8] == ["timeout", "timeout"]
    assert misbehaved.output_truncated
    assert len(_text(misbehaved, 8)) <= LIMITS.max_output_bytes + 200
    assert "alive kernel-secret" in _text(misbehaved, 9)


def test_kernel_exit_ends_the_run_with_a_reason(misbehaved):
    assert [c.status for c in misbehaved.cells[10:]] == ["kernel_died", "not_run"]
    assert not misbehaved.ok and "kernel died while running cell 10" in misbehaved.reason


def test_segfault_is_a_kernel_death(tmp_path):
    result = _run(["print('before')", "import ctypes\nctypes.string_at(0)"], tmp_path)
    assert [c.status for c in result.cells] == ["ok", "kernel_died"]
    assert not result.ok


def test_notebook_time_limit(tmp_path):
    limits = Limits(cell_timeout_s=60, notebook_timeout_s=6, memory_mb=1024)
    result = _run(["import time\ntime.sleep(30)", "print('late')"], tmp_path, limits)
    assert not result.ok and "6 s" in result.reason
    assert result.cells[1].status == "not_run"


def test_bad_arguments(tmp_path):
    with pytest.raises(TypeError, match="nbformat"):
        execute_notebook({"cells": []}, tmp_path, LIMITS, secret=None)
    with pytest.raises(FileNotFoundError, match="workdir"):
        execute_notebook(new_notebook(), tmp_path / "missing", LIMITS, secret=None)
