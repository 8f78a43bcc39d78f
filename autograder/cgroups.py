"""Linux control groups: the memory, CPU and process limits of a group of processes.

The grading sandbox gives each learner's grading one (:mod:`autograder.sandbox.launcher`), and
the class server each learner's JupyterLab, terminals and kernels (:mod:`autograder.hub.limits`)::

    kind, why = cgroup_kind(root=os.geteuid() == 0)    # "v2", "v1" or None (and why not)
    group = Cgroup.create(kind, "learner-1234", memory_mb=4096, max_processes=64)
    subprocess.run(group.enter(["python", "work.py"]))  # starts inside the group
    group.memory_exceeded()                            # the kernel killed one of it for memory
    group.remove()                                     # kills what is left, removes the group

cgroup v2 (one unified hierarchy) is used where the machine mounts it with the memory
controller, else the v1 ``memory`` and ``pids`` hierarchies (and ``cpu`` for a CPU weight).
Groups are made below this process's own cgroup, in a folder named after their use.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import time
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
GRADING_GROUP = "build-the-transformer-grading"
# The v1 hierarchies of a group, in this order; "cpu" only when the group has a CPU weight.
V1_CONTROLLERS = ("memory", "pids", "cpu")
# cgroup v2's default cpu.weight, and v1's cpu.shares for the same share.
CPU_WEIGHT_DEFAULT, CPU_SHARES_DEFAULT = 100, 1024


def own_cgroups() -> dict[str, str]:
    """``controller -> path`` of this process's cgroups (``""`` for the unified v2 one)."""
    found = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            found[controller] = path
    return found


def cgroup_parents(kind: str, folder: str, cpu: bool = False) -> dict[str, Path]:
    """``controller -> folder`` below this process's own cgroups (``""`` for v2's one)."""
    own = own_cgroups()
    if kind == "v2":
        return {"": CGROUP_ROOT / own.get("", "/").lstrip("/") / folder}
    return {c: CGROUP_ROOT / c / own.get(c, "/").lstrip("/") / folder
            for c in V1_CONTROLLERS if cpu or c != "cpu"}


def cgroup_kind(root: bool, folder: str = GRADING_GROUP, cpu: bool = False
                ) -> tuple[str | None, str]:
    """The cgroup version this process can make groups with (in ``folder``), else None and
    why not. ``cpu``: the groups need the CPU controller too."""
    if not root:
        return None, "it does not run as root"
    for kind in ("v2", "v1"):
        if kind == "v2" and not (CGROUP_ROOT / "cgroup.controllers").is_file():
            continue
        if kind == "v1" and not all((CGROUP_ROOT / c / "cgroup.procs").is_file()
                                    for c in V1_CONTROLLERS if cpu or c != "cpu"):
            continue
        try:
            group = Cgroup.create(kind, f"probe-{os.getpid()}", 64, 8, folder=folder,
                                  cpu_weight=CPU_WEIGHT_DEFAULT if cpu else None)
        except OSError as exc:
            return None, f"cgroup {kind} cannot be created here ({exc.strerror or exc})"
        group.remove()
        return kind, ""
    needed = "memory, pids and cpu" if cpu else "memory and pids"
    return None, f"neither cgroup v2 nor the v1 {needed} controllers are mounted"


class Cgroup:
    """One group of processes, bounded together: ``paths`` maps each v1 controller to the
    group's folder in its hierarchy (v2: ``{"": folder}``)."""

    def __init__(self, kind: str, paths: dict[str, Path]) -> None:
        self.kind, self.paths = kind, paths

    @classmethod
    def create(cls, kind: str, name: str, memory_mb: int, max_processes: int, *,
               folder: str = GRADING_GROUP, cpu_weight: int | None = None) -> Cgroup:
        """Create the cgroup ``name`` in ``folder`` below this process's own ones, with a memory
        cap (no swap on v2), a process limit and, when given, a CPU weight (v2's 1-10000,
        100 being everyone's default share; on v1 the cpu.shares of the same share).

        Raises:
            OSError: the kernel refused (no permission, controller missing).
        """
        paths = {}
        for controller, parent in cgroup_parents(kind, folder, cpu_weight is not None).items():
            parent.mkdir(exist_ok=True)
            path = parent / name
            path.mkdir()
            paths[controller] = path
        group = cls(kind, paths)
        try:
            if kind == "v2":
                controllers = "+memory +pids" + (" +cpu" if cpu_weight is not None else "")
                (paths[""].parent / "cgroup.subtree_control").write_text(controllers)
            group.write("memory", "memory.max" if kind == "v2" else "memory.limit_in_bytes",
                        memory_mb * 1024 * 1024)
            if kind == "v2":
                group.write("memory", "memory.swap.max", 0)
            group.write("pids", "pids.max", max_processes)
            if cpu_weight is not None:
                group.write("cpu", "cpu.weight" if kind == "v2" else "cpu.shares",
                            cpu_weight if kind == "v2" else
                            max(2, cpu_weight * CPU_SHARES_DEFAULT // CPU_WEIGHT_DEFAULT))
        except OSError:
            group.remove()
            raise
        return group

    def path(self, controller: str) -> Path:
        """The group's folder of ``controller`` (v2: its one folder)."""
        return self.paths["" if self.kind == "v2" else controller]

    def write(self, controller: str, file: str, value: object) -> None:
        (self.path(controller) / file).write_text(str(value))

    def child(self, name: str, controllers: str = "+memory +pids") -> Cgroup:
        """A group inside this one (bounded by it too), made by whoever owns this one; on v2
        this group's ``controllers`` are handed down to it.

        Raises:
            OSError: the kernel refused.
        """
        if self.kind == "v2":
            with contextlib.suppress(OSError):  # already handed down, by an earlier child
                (self.paths[""] / "cgroup.subtree_control").write_text(controllers)
        paths = {}
        for controller, path in self.paths.items():
            (path / name).mkdir(exist_ok=True)
            paths[controller] = path / name
        return Cgroup(self.kind, paths)

    def delegate(self, uid: int, gid: int) -> None:
        """Let the account ``uid`` make groups inside this one and move its processes between
        them (the limits of this group stay root's)."""
        names = ("", "cgroup.procs") + (("cgroup.subtree_control", "cgroup.threads")
                                        if self.kind == "v2" else ("tasks",))
        for path in self.paths.values():
            for name in names:
                with contextlib.suppress(FileNotFoundError):
                    os.chown(path / name, uid, gid)

    def to_text(self) -> str:
        """The group as one line of text (for an environment variable): see
        :meth:`from_text`."""
        return json.dumps({"kind": self.kind, "paths": {c: str(p) for c, p in
                                                        self.paths.items()}})

    @classmethod
    def from_text(cls, text: str) -> Cgroup:
        spec = json.loads(text)
        return cls(spec["kind"], {c: Path(p) for c, p in spec["paths"].items()})

    def enter(self, argv: list[str]) -> list[str]:
        """``argv`` wrapped so that it starts inside this cgroup (with all its children)."""
        moves = " && ".join(f"echo 0 > {shlex.quote(str(p / 'cgroup.procs'))}"
                            for p in self.paths.values())
        return ["/bin/sh", "-c", f'{moves} && exec "$0" "$@"', *argv]

    def memory_limit_mb(self) -> int | None:
        """The group's own memory cap in MiB (None when it has none)."""
        name = "memory.max" if self.kind == "v2" else "memory.limit_in_bytes"
        with contextlib.suppress(OSError, ValueError):
            value = int((self.path("memory") / name).read_text())
            return value // (1024 * 1024) if value < 2**60 else None
        return None

    def memory_exceeded(self) -> bool:
        """Whether the kernel killed a process of this cgroup for memory."""
        events = self.path("memory") / ("memory.events" if self.kind == "v2"
                                        else "memory.oom_control")
        with contextlib.suppress(OSError, ValueError):
            for line in events.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and int(value) > 0:
                    return True
        return False

    def pids(self) -> set[int]:
        """The processes in this group and the groups inside it."""
        found = set()
        for path in self.paths.values():
            for procs in path.glob("**/cgroup.procs"):
                with contextlib.suppress(OSError, ValueError):
                    found |= {int(p) for p in procs.read_text().split()}
        return found

    def kill(self) -> None:
        """Kill every process still in the cgroup (a daemon a learner left behind)."""
        for _ in range(50):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)

    def remove(self) -> None:
        """Kill what is left in the group, then remove it and the groups inside it."""
        self.kill()
        for path in self.paths.values():
            inner = sorted(path.glob("**/"), key=lambda p: len(p.parts), reverse=True)
            for folder in inner:
                for _ in range(50):
                    try:
                        folder.rmdir()
                        break
                    except FileNotFoundError:
                        break
                    except OSError:  # the last processes are still leaving
                        time.sleep(0.02)
