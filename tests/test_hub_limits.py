"""What each learner's server may use on the class server (`python -m autograder hub limits`),
and the cgroups that bound it: the learner's group with the class's limits, theirs to make a
group per kernel in, where a kernel past the memory cap is killed alone. The whole hub under
load, with a memory hog, is tests/benchmarks/test_class_load.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.cgroups import Cgroup
from autograder.cli import main
from autograder.hub import limits
from autograder.hub.classroom import STATE_ENV
from autograder.hub.limits import ServerLimits, class_cgroups, learner_cgroup
from autograder.learner.kernel_limits import killed_message

ROOT = Path(__file__).resolve().parents[1]
NOBODY = 65534


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(STATE_ENV, str(tmp_path / "state"))
    return tmp_path / "state"


def test_hub_limits_shows_and_sets_the_class_limits(state: Path, capsys) -> None:
    defaults = ServerLimits()
    assert main(["hub", "limits"]) == 0
    out = capsys.readouterr().out
    assert f"memory: {defaults.memory_mb} MiB per learner's server" in out
    assert f"CPU weight: {defaults.cpu_weight}" in out and "not a quota" in out
    assert f"processes: {defaults.max_processes}" in out
    assert main(["hub", "limits", "--memory-mb", "2048", "--cpu-weight", "50"]) == 0
    out = capsys.readouterr().out
    assert "next start" in out and "memory: 2048 MiB" in out and "CPU weight: 50 " in out
    assert json.loads((state / "limits.json").read_text()) == {
        "memory_mb": 2048, "cpu_weight": 50, "max_processes": defaults.max_processes}
    assert main(["hub", "limits", "--cpu-weight", "20000"]) == 1
    assert "cpu_weight must be 1-10000" in capsys.readouterr().err
    (state / "limits.json").write_text('{"memory": 1}')
    assert main(["hub", "limits"]) == 1
    assert "unknown limits ['memory']" in capsys.readouterr().err


def test_without_cgroups_the_hub_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "class_cgroups", lambda: (None, "no cgroup here"))
    report = limits.limits_report(ServerLimits())
    assert report[-1].startswith("NOT enforced on this machine: no cgroup here")
    assert learner_cgroup("alice", ServerLimits(), NOBODY, NOBODY) is None


@pytest.mark.skipif(class_cgroups()[0] is None, reason=f"no cgroups: {class_cgroups()[1]}")
def test_a_kernel_past_the_memory_cap_is_killed_alone() -> None:
    """The learner's group holds the class's limits (root's); the learner's account makes a
    kernel's group in it and starts a kernel there; past the cap, only that kernel dies."""
    group = learner_cgroup("limits-test", ServerLimits(memory_mb=200, cpu_weight=50,
                                                       max_processes=40), NOBODY, NOBODY)
    try:
        assert group.memory_limit_mb() == 200
        assert (group.path("pids") / "pids.max").read_text().strip() == "40"
        weight = "cpu.weight" if group.kind == "v2" else "cpu.shares"
        assert (group.path("cpu") / weight).read_text().strip() == ("50" if group.kind == "v2"
                                                                    else "512")
        server = subprocess.Popen(group.child("server").enter(["sleep", "60"]))
        kernel = f"""
from autograder.cgroups import Cgroup
import subprocess, sys
group = Cgroup.from_text({group.to_text()!r}).child("kernel-1")
hog = 'x=x; while true; do x="$x$x"; done'
status = subprocess.run(group.enter(["/bin/sh", "-c", hog])).returncode
print(status, group.memory_exceeded())
"""
        ran = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                              "--clear-groups", sys.executable, "-c", kernel], cwd=ROOT,
                             capture_output=True, text=True, timeout=60, check=False)
        assert ran.stdout.split() == ["-9", "True"], ran.stdout + ran.stderr
        assert server.poll() is None
    finally:
        group.remove()
    assert server.wait(timeout=10) == -9  # removing the group kills what is left in it
    assert not any(path.exists() for path in group.paths.values())


def test_the_log_line_names_the_kernel_the_learner_and_the_cap() -> None:
    line = killed_message("k-1", 1024, "alice")
    assert line.startswith("Kernel k-1 of alice was killed at the memory cap")
    assert "1024 MiB" in line and "restart the kernel" in line
    assert isinstance(Cgroup.from_text(Cgroup("v1", {"memory": Path("/m")}).to_text()), Cgroup)
