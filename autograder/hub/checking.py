"""The class's checking service: the visible checks for learners whose view holds none.

A learner's view of the course in a class holds no checks and no answers of open chapters
(:mod:`autograder.steps.view`), so a test cell's ``check(...)`` asks this service
(:mod:`autograder.learner.remote_check`). The service listens on a Unix socket that every
learner's view binds (or on a TCP port, for learners on other machines: Kubernetes, see
autograder/deploy/); for each connection it forks a child that runs the exercise's visible
checks here, with the course's references, against the learner's function in the learner's
own kernel, reached through the grader's proxies (:class:`autograder.sandbox.client.SocketPeer`
and :class:`~autograder.sandbox.client.RemoteCallable`, the same wire as grading: values only,
nothing unpickled). The verdict and message are therefore exactly those of the visible checks;
hidden checks never run here. The service also keeps the class's view up to date: a chapter
whose due date passes is revealed within :data:`REFRESH_S` seconds.

    python -m autograder.hub.checking --listen build/hub/checks/socket \\
        --course-dir build/hub/course --exchange build/hub/exchange

``make hub`` starts it as a JupyterHub service (autograder/hub/jupyterhub_config.py).
"""

from __future__ import annotations

import argparse
import os
import socketserver
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autograder.course import Course
from autograder.exercises.registry import (
    UnknownExerciseError,
    all_exercises,
    get_exercise,
    grade_function,
)
from autograder.sandbox.client import RemoteCallable, SocketPeer
from autograder.sandbox.learner_errors import WorkerFailedError

# One request to the learner's kernel, and a whole check, may take this long.
CALL_TIMEOUT_S = 120.0
CHECK_TIMEOUT_S = 600.0
# Checks running at once; more connections wait for a free slot.
MAX_CHECKS = max(2, os.cpu_count() or 2)
# How often the view is brought up to date with the chapters' due dates.
REFRESH_S = 30.0


def verdict(peer: SocketPeer) -> dict[str, Any]:
    """Run the visible checks the learner's kernel asked for; the verdict to send back."""
    peer.wait_started()
    exercise_id = str(peer.header.get("exercise", ""))
    try:
        exercise = get_exercise(exercise_id)
    except UnknownExerciseError as exc:
        return {"passed": False, "unknown": True, "message": str(exc)}
    if peer.header.get("hidden"):
        return {"passed": False, "message": f"{exercise_id}: the hidden checks run only when "
                                            "your instructor grades, never in your notebook."}
    if peer.names.get("answer") not in ("function", "class"):
        return {"passed": False, "message": f"{exercise_id}: the kernel sent no function"}
    # The messages name the function as the kernel does.
    name = str(peer.header.get("name", ""))
    if not name.isidentifier() or len(name) > 100:
        name = exercise.defines
    earlier = {d: RemoteCallable(peer, {"name": defines}, defines) for d in exercise.depends
               if peer.names.get(defines := get_exercise(d).defines) in ("function", "class")}
    result = grade_function(exercise_id, RemoteCallable(peer, {"name": "answer"}, name),
                            earlier=earlier)
    return {"passed": result.passed, "message": result.message, "notes": list(result.notes)}


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        peer = SocketPeer(self.request, call_timeout_s=CALL_TIMEOUT_S,
                          deadline=time.monotonic() + CHECK_TIMEOUT_S)
        try:
            answer = verdict(peer)
            peer.send({"op": "verdict", **answer})
        except (WorkerFailedError, OSError):
            pass  # the kernel went away or stopped answering: nobody is left to tell
        finally:
            peer.close()


class _Service(socketserver.ForkingMixIn):
    """Answers each connection in a child process of its own (``max_children`` at once), and
    refreshes the class's view between requests when it has a course."""

    max_children = MAX_CHECKS
    course: Course | None = None
    exchange: str | os.PathLike | None = None
    refreshed = 0.0

    def service_actions(self) -> None:
        super().service_actions()
        if self.course is not None and time.monotonic() - self.refreshed >= REFRESH_S:
            from autograder.steps.view import refresh_view

            refresh_view(self.course, self.exchange)
            self.refreshed = time.monotonic()


class _UnixService(_Service, socketserver.UnixStreamServer):
    pass


class _TcpService(_Service, socketserver.TCPServer):
    allow_reuse_address = True


def checking_service(address: str, course: Course | None = None,
                     exchange: str | os.PathLike | None = None) -> socketserver.BaseServer:
    """A service listening on ``address`` (a socket path, or ``tcp://HOST:PORT``), warmed up.

    It listens before it warms up, so a learner's early check waits instead of failing.
    """
    if address.startswith("tcp://"):
        host, _, port = address.removeprefix("tcp://").rpartition(":")
        service: _Service = _TcpService((host, int(port)), _Handler)
    else:
        path = Path(address)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.parent.chmod(0o755)
        path.unlink(missing_ok=True)
        service = _UnixService(str(path), _Handler)
        path.chmod(0o666)  # every learner's kernel connects
    service.course, service.exchange = course, exchange
    warm_up()
    return service


def warm_up() -> None:
    """Run every exercise's visible checks once on its own reference, so that each child
    starts with the checks, torch and everything they load on first use already loaded (a
    child's own imports die with it)."""
    for exercise in all_exercises():
        if exercise.id[:4] >= "ch07":
            import torch

            # One thread before torch computes anything: a child forked later then inherits no
            # thread pool.
            torch.set_num_threads(1)
        grade_function(exercise.id, exercise.load_reference())

    def service_actions(self) -> None:
        super().service_actions()
        if self.course is not None and time.monotonic() - self.refreshed >= REFRESH_S:
            from autograder.steps.view import refresh_view

            refresh_view(self.course, self.exchange)
            self.refreshed = time.monotonic()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.hub.checking",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", required=True, metavar="ADDRESS",
                        help="a Unix socket's path, or tcp://HOST:PORT")
    parser.add_argument("--root", type=Path, help="the course root (default: this repository)")
    parser.add_argument("--course-dir", type=Path, help="the class's course folder, whose "
                        "view/ the service keeps up to date")
    parser.add_argument("--exchange", type=Path, help="the class's nbgrader exchange")
    args = parser.parse_args(argv)
    course = Course.of(args.root, args.course_dir) if args.course_dir else None
    with checking_service(args.listen, course, args.exchange) as service:
        print(f"checking service on {args.listen}", flush=True)
        service.serve_forever(poll_interval=1.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
