"""On the class server, each kernel of a learner's server starts in a cgroup of its own.

The hub gives the learner's server a cgroup with the class's memory cap, CPU weight and process
limit (:mod:`autograder.hub.limits`) and names it in ``TRANSFORMER_COURSE_CGROUP``. This kernel
provisioner (Jupyter's, registered as ``course-limited``; the learner layer's
``jupyter_server_config.py`` turns it on when that variable is set) makes ``kernel-<id>``
inside it for each kernel it starts. A kernel that passes the cap is then killed alone: the
kernel's own group is the one killed (``memory.oom.group`` on cgroup v2; on v1 the kernel,
the largest process of the learner's group), the server and the other kernels go on, and the
server's log gets the line :func:`killed_message` (JupyterLab says that the kernel died).
"""

from __future__ import annotations

import os
from typing import Any

from jupyter_client.provisioning import LocalProvisioner

from autograder.cgroups import Cgroup

CGROUP_ENV = "TRANSFORMER_COURSE_CGROUP"
PROVISIONER = "course-limited"


def killed_message(kernel_id: str, cap_mb: int | None, user: str = "") -> str:
    """The server's log line for a kernel killed at the memory cap."""
    cap = f"{cap_mb} MiB" if cap_mb else "the memory"
    whose = f" of {user}" if user else ""
    return (f"Kernel {kernel_id}{whose} was killed at the memory cap: with the server it used more "
            f"than {cap}, the class's limit for each learner's server. The server and the "
            "other kernels go on; the kernel's variables are lost. Use less memory (smaller "
            "batches or models, fewer copies of big arrays), then restart the kernel.")


class LimitedProvisioner(LocalProvisioner):
    """Jupyter's local provisioner, with each kernel in a cgroup inside the learner's."""

    learner: Cgroup | None = None
    group: Cgroup | None = None
    reported: bool = False

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        kwargs = await super().pre_launch(**kwargs)
        text = os.environ.get(CGROUP_ENV)
        if not text:
            return kwargs
        self.learner = Cgroup.from_text(text)
        try:
            self.group = self.learner.child(f"kernel-{self.kernel_id}")
            if self.group.kind == "v2":
                self.group.write("memory", "memory.oom.group", 1)
        except OSError as exc:
            self.log.warning("Kernel %s starts in its server's cgroup, not one of its own "
                             "(%s): past the memory cap, the server may be killed with it",
                             self.kernel_id, exc)
            return kwargs
        kwargs["cmd"] = self.group.enter(list(kwargs["cmd"]))
        self.reported = False
        return kwargs

    def report(self) -> None:
        """Log once why the kernel died, when the cgroup's memory cap killed it."""
        if self.group is not None and not self.reported and self.group.memory_exceeded():
            self.reported = True
            self.log.warning(killed_message(self.kernel_id, self.learner.memory_limit_mb(),
                                            os.environ.get("JUPYTERHUB_USER", "")))

    async def poll(self) -> int | None:
        status = await super().poll()
        if status is not None:
            self.report()
        return status

    async def cleanup(self, restart: bool = False) -> None:
        self.report()
        if self.group is not None:
            self.group.remove()
            self.group = None
        await super().cleanup(restart=restart)
