"""What each learner's server on the class server may use: memory, a share of the CPU, processes.

Each learner's JupyterLab, terminals and kernels run in a cgroup of their own
(:mod:`autograder.cgroups`), ``learner-<account>`` (their system account, ``<prefix><name>``) in
the folder ``build-the-transformer-class``:

* ``memory_mb``: a memory cap for all of them together;
* ``cpu_weight``: their share of the CPU when it is busy (a *weight*, not a quota: alone on the
  machine a learner uses every core; 100 is everyone's default, 200 twice as much);
* ``max_processes``: processes and threads at once.

Inside it, the server and its terminals run in ``server/`` and each kernel in a group of its
own (``kernel-<id>``, made by the server's kernel provisioner, :mod:`autograder.learner.
kernel_limits`): a kernel that passes the cap is killed alone (on v2 with
``memory.oom.group``, so with its children), the server survives, JupyterLab says the kernel
died and the server's log says why. The class's limits are in ``<state>/limits.json``; the
hub reads them at each server's start::

    python -m autograder hub limits                                 # show them, and what holds
    python -m autograder hub limits --memory-mb 2048 --cpu-weight 100 --max-processes 512

Where the machine offers no cgroups (no root, or neither v2 nor the v1 controllers), the
servers run without these limits; the hub says so when it starts, and ``hub limits`` too.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from autograder.cgroups import Cgroup, cgroup_kind, cgroup_parents
from autograder.hub.settings import read_settings

CLASS_GROUP = "build-the-transformer-class"
LIMITS_FILE = "limits.json"
SERVER_GROUP = "server"


@dataclass(frozen=True)
class ServerLimits:
    """The limits of one learner's server (all of its processes together).

    Attributes:
        memory_mb: memory cap in MiB; a kernel that passes it is killed.
        cpu_weight: share of the CPU under contention, 1-10000 (100: an equal share).
        max_processes: processes and threads at once (a kernel with PyTorch runs dozens).
    """

    memory_mb: int = 4096
    cpu_weight: int = 100
    max_processes: int = 512

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive whole number, got {value!r}")
        if self.cpu_weight > 10000:
            raise ValueError(f"cpu_weight must be 1-10000, got {self.cpu_weight}")


def limits_file(state: Path) -> Path:
    return state / LIMITS_FILE


def read_limits(state: Path) -> ServerLimits:
    """The class's limits (the defaults for what ``<state>/limits.json`` does not set).

    Raises:
        ValueError: the file names an unknown limit or a bad value.
    """
    return read_settings(limits_file(state), ServerLimits, "limits") or ServerLimits()


def write_limits(state: Path, **changes: int) -> ServerLimits:
    """Set some of the class's limits; the new limits. Servers get them at their next start.

    Raises:
        ValueError: a bad value.
    """
    limits = replace(read_limits(state), **changes)
    state.mkdir(parents=True, exist_ok=True)
    limits_file(state).write_text(json.dumps(asdict(limits), indent=1) + "\n")
    return limits


@functools.cache
def class_cgroups() -> tuple[str | None, str]:
    """The cgroup version learners' servers get on this machine, else None and why not."""
    return cgroup_kind(os.geteuid() == 0, CLASS_GROUP, cpu=True)


def limits_report(limits: ServerLimits) -> list[str]:
    """Lines saying the class's limits and whether this machine enforces them."""
    kind, why = class_cgroups()
    lines = [f"memory: {limits.memory_mb} MiB per learner's server (a kernel past it is killed "
             "alone)",
             f"CPU weight: {limits.cpu_weight} (a share under contention, not a quota; "
             "100 = equal)",
             f"processes: {limits.max_processes} per learner's server"]
    if kind is None:
        return [*lines, f"NOT enforced on this machine: {why}. Each learner's server can use "
                        "all the memory and CPU of the machine."]
    return [*lines, f"enforced with cgroup {kind}, one group per learner ({CLASS_GROUP}/"
                    "learner-<account>), one per kernel inside it"]


def learner_cgroup(account: str, limits: ServerLimits, uid: int, gid: int) -> Cgroup | None:
    """A fresh group for the server of the learner whose system account is ``account`` (the
    group of an earlier start, and what is left in it, removed), theirs to make kernels'
    groups in; None without cgroups.

    Raises:
        OSError: the kernel refused to make it.
    """
    kind, _ = class_cgroups()
    if kind is None:
        return None
    group_name = f"learner-{account}"
    stale = Cgroup(kind, {c: parent / group_name for c, parent in
                          cgroup_parents(kind, CLASS_GROUP, cpu=True).items()})
    if any(path.is_dir() for path in stale.paths.values()):
        stale.remove()
    group = Cgroup.create(kind, group_name, limits.memory_mb, limits.max_processes,
                          folder=CLASS_GROUP, cpu_weight=limits.cpu_weight)
    group.delegate(uid, gid)
    return group
