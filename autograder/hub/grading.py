"""The class's grading service: root's steps, asked for by instructors and teaching assistants.

On the class server, instructors' and teaching assistants' servers run as their own system
accounts (:mod:`autograder.hub.spawner`), not as root. Grading needs root (bubblewrap's private
user ids, the cgroup) and the class's secret, which only root reads; releasing, collecting and
handing back feedback write into the exchange and the course as root did. So the hub runs this
service as root, as it runs the checking service, and the Formgrader's buttons, nbgrader's
commands and ``python -m autograder autograde`` ask it when they do not run as root
(:func:`autograder.hub.classroom.delegated`). It listens on ``<state>/grading/socket``; the
kernel tells it which account connected (``SO_PEERCRED``, :mod:`autograder.hub.peers`), the
account's name is a name on the roster (``<prefix><name>``) and the roster gives its role. Each
role may ask for:

=====================  ==========  ===================  =======
request                instructor  teaching assistant   learner
=====================  ==========  ===================  =======
``autograde``          yes         yes                  no
``collect``            yes         yes                  no
``release_feedback``   yes         yes                  no
``release``            yes         no                   no
``roster``             yes         no                   no
=====================  ==========  ===================  =======

Root may ask for anything. The service runs each request in a child process of its own, with the
class's course and exchange (the caller names only a chapter and learners, checked against
the roster's rules for names), then gives the staff group read and write on what it wrote
(:meth:`~autograder.hub.classroom.Classroom.share_with_staff`).

The wire: one JSON line each way, ``{"op": ..., ...}`` then ``{"ok": bool, "log": [line, ...],
"error": why}``.

    python -m autograder.hub.grading [--state build/hub]

``make hub`` starts it as a JupyterHub service (autograder/hub/jupyterhub_config.py), with
``AUTOGRADER_SECRET_FILE`` naming the class's secret.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import pwd
import signal
import socket
import socketserver
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autograder.course import CHAPTERS
from autograder.hub.classroom import NAME, ROLES, Classroom, grading_socket
from autograder.hub.peers import peer_credentials, prepare_socket
from autograder.nbgrader_hooks.steps import StepError

# Who may ask for what; root may ask for anything.
ALLOWED = {
    "autograde": ("instructor", "ta"),
    "collect": ("instructor", "ta"),
    "release_feedback": ("instructor", "ta"),
    "release": ("instructor",),
    "roster": ("instructor",),
}
ROLE_NAMES = {"instructor": ("an instructor", "instructors"),
              "ta": ("a teaching assistant", "teaching assistants"),
              "learner": ("a learner", "learners")}
MAX_REQUEST_BYTES = 64 * 1024


def ask(op: str, log: logging.Logger | None = None, classroom: Classroom | None = None,
        **fields: Any) -> list[str]:
    """Ask the class's grading service (:func:`grading_socket`) for ``op``; its log lines
    (each also sent to ``log``).

    Raises:
        StepError: the service refused, or the step failed; the message says why.
    """
    path = grading_socket(classroom) or Classroom.from_env().grading_socket
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.connect(str(path))
            connection.sendall(json.dumps({"op": op, **fields}).encode() + b"\n")
            answer = json.loads(connection.makefile("rb").readline() or b"{}")
    except (OSError, ValueError) as exc:
        raise StepError(f"the class's grading service at {path} did not answer ({exc}): is "
                        "the hub running?") from exc
    lines = [str(line) for line in answer.get("log", [])]
    if log is not None:
        for line in lines:
            (log.warning if line.startswith("WARNING") else log.info)("%s", line)
    if not answer.get("ok"):
        raise StepError(str(answer.get("error") or "the grading service failed"))
    return lines


def caller_role(classroom: Classroom, uid: int) -> tuple[str, str]:
    """The name and role of the account ``uid``: root, or a user on the roster.

    Raises:
        StepError: an account that is not on the class's roster.
    """
    if uid == 0:
        return "root", "root"
    try:
        account = pwd.getpwuid(uid).pw_name
    except KeyError:
        account = str(uid)
    name = account.removeprefix(classroom.prefix)
    role = classroom.role_of(name) if account.startswith(classroom.prefix) else None
    if role is None:
        raise StepError(f"the account {account!r} is nobody on this class's roster")
    return name, role


def authorize(role: str, op: str) -> None:
    """Raises StepError when ``role`` may not ask for ``op``."""
    if op not in ALLOWED:
        raise StepError(f"unknown request {op!r}; the grading service does {', '.join(ALLOWED)}")
    if role != "root" and role not in ALLOWED[op]:
        raise StepError(f"{ROLE_NAMES[role][0]} may not ask for {op}: only "
                        f"{' and '.join(ROLE_NAMES[r][1] for r in ALLOWED[op])} may")


def run_request(classroom: Classroom, uid: int, request: dict[str, Any],
                log: logging.Logger) -> None:
    """Do what ``request`` asks, for the account ``uid``, if its role may.

    Raises:
        StepError: refused, or the step failed.
    """
    name, role = caller_role(classroom, uid)
    op = str(request.get("op", ""))
    print(f"grading service: {name} ({role}) asks for {op}", flush=True)
    authorize(role, op)
    STEPS[op](classroom, request, log, uid)


def _chapter(request: dict[str, Any]) -> str:
    chapter = request.get("chapter")
    if chapter not in CHAPTERS:
        raise StepError(f"unknown chapter {chapter!r}; use one of {', '.join(CHAPTERS)}")
    return chapter


def _names(request: dict[str, Any], key: str) -> list[str] | None:
    """The user names listed under ``key`` (None when absent); each a valid name, so that no
    name leads out of its folder."""
    names = request.get(key)
    if names is None:
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) and NAME.fullmatch(n)
                                              for n in names):
        raise StepError(f"{key}: a list of user names, not {names!r}")
    return names


def _autograde(classroom: Classroom, request: dict[str, Any], log: logging.Logger,
               uid: int) -> None:
    # Loaded in the request's child: grading imports what the service itself never needs.
    from autograder.grade.secret import SecretError
    from autograder.nbgrader_hooks.steps import grade_one, prepare_grading
    from autograder.sandbox.launcher import GraderFaultError

    course, chapter = classroom.course, _chapter(request)
    students = _names(request, "students") or course.students("submitted", chapter)
    if not students:
        raise StepError(f"nothing to grade: no submission of {chapter} was collected")
    try:
        prepare_grading(course, chapter, log)
    except (SecretError, GraderFaultError) as exc:
        raise StepError(str(exc)) from exc
    for student in students:
        grade_one(course, student, chapter, log)
        # nbgrader, in the caller's server, then sets the modes of what was graded, which only
        # the files' owner may do.
        _hand_over(course.step_dir("autograded", student, chapter), uid)


def _hand_over(folder: Path, uid: int) -> None:
    """Make the account ``uid`` the owner of ``folder`` and everything in it."""
    for path in (folder, *folder.rglob("*")):
        os.lchown(path, uid, -1)


def _collect(classroom: Classroom, request: dict[str, Any], log: logging.Logger,
             uid: int) -> None:
    from autograder.nbgrader_hooks.steps import collect_chapter

    collect_chapter(classroom.course, _chapter(request), classroom.exchange, log)


def _release(classroom: Classroom, request: dict[str, Any], log: logging.Logger,
             uid: int) -> None:
    from autograder.nbgrader_hooks.steps import release_chapter

    release_chapter(classroom.course, _chapter(request), classroom.exchange, log)


def _release_feedback(classroom: Classroom, request: dict[str, Any], log: logging.Logger,
                      uid: int) -> None:
    from autograder.nbgrader_hooks.steps import release_chapter_feedback

    release_chapter_feedback(classroom.course, _chapter(request), classroom.exchange,
                             _names(request, "students"), log)


def _roster(classroom: Classroom, request: dict[str, Any], log: logging.Logger,
            uid: int) -> None:
    role = request.get("role", "learner")
    if role not in ROLES:
        raise StepError(f"unknown role {role!r}; use one of {', '.join(ROLES)}")
    names = request.get("names") or []
    # ``hub add`` names may carry the learner's ids in the platform: ``alice=alice@uni.edu``.
    if not isinstance(names, list) or not all(
            isinstance(n, str) and NAME.fullmatch(n.partition("=")[0]) for n in names):
        raise StepError(f"names: a list of user names, not {names!r}")
    try:
        lines = classroom.change_roster(str(request.get("action")), names, role)
    except (ValueError, PermissionError, RuntimeError) as exc:
        raise StepError(str(exc)) from exc
    for line in lines:
        log.info("%s", line)


# Each step: the class, the request, the log sent back, and the account that asked.
STEPS: dict[str, Callable[[Classroom, dict[str, Any], logging.Logger, int], None]] = {
    "autograde": _autograde, "collect": _collect, "release_feedback": _release_feedback,
    "release": _release, "roster": _roster,
}


class _Lines(logging.Handler):
    """Keeps a request's log records as the lines sent back to the caller."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        prefix = "WARNING " if record.levelno >= logging.WARNING else ""
        self.lines.append(prefix + record.getMessage())


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        classroom: Classroom = self.server.classroom
        lines = _Lines()
        log = logging.getLogger("autograder.hub.grading.request")
        log.setLevel(logging.INFO)
        log.addHandler(lines)
        _, uid, _ = peer_credentials(self.request)
        try:
            run_request(classroom, uid, json.loads(self.rfile.readline(MAX_REQUEST_BYTES)), log)
            answer: dict[str, Any] = {"ok": True}
        except StepError as exc:
            answer = {"ok": False, "error": str(exc)}
        except (ValueError, AttributeError) as exc:
            answer = {"ok": False, "error": f"not a request of the grading service: {exc}"}
        except Exception as exc:  # the caller is told, and the hub's log has the traceback
            traceback.print_exc()
            answer = {"ok": False, "error": f"the grading service failed: {exc!r}"}
        finally:
            # What grading copied keeps its source's modes: the staff must still read it.
            classroom.share_with_staff()
        print(f"grading service: uid {uid}: {'done' if answer['ok'] else answer['error']}",
              flush=True)
        self.wfile.write(json.dumps({**answer, "log": lines.lines}).encode() + b"\n")


class _Service(socketserver.ForkingMixIn, socketserver.UnixStreamServer):
    classroom: Classroom


def grading_service(classroom: Classroom) -> socketserver.BaseServer:
    """The service of ``classroom``, listening on its grading socket (every account may
    connect; the service decides what each may ask)."""
    path = classroom.grading_socket
    prepare_socket(path)
    service = _Service(str(path), _Handler)
    path.chmod(0o666)
    service.classroom = classroom
    return service


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", type=Path, default=None,
                        help="the class's state folder (default: $TRANSFORMER_HUB_STATE, else "
                             "build/hub)")
    args = parser.parse_args(argv)
    # The hub stops its services with SIGINT. Started from a background job of a script,
    # it hands them SIGINT ignored, and they would outlive a hub that does not wait.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if os.geteuid() != 0:
        parser.error("the grading service grades in the sandbox as root: run it as root")
    # Files it makes are the staff group's to read and write (the course folder is setgid).
    os.umask(0o002)
    classroom = Classroom.from_env(args.state)
    classroom.prepare()
    classroom.share_with_staff()
    with grading_service(classroom) as service:
        print(f"grading service on {classroom.grading_socket}", flush=True)
        service.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
