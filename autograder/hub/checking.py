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
import collections
import contextlib
import math
import os
import signal
import socket
import socketserver
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autograder.course import ROOT, Course
from autograder.exercises.registry import (
    UnknownExerciseError,
    all_exercises,
    get_exercise,
    grade_function,
)
from autograder.hub.peers import peer_credentials, prepare_socket
from autograder.sandbox.client import RemoteCallable, SocketPeer
from autograder.sandbox.learner_errors import WorkerFailedError

# A check may run this long (the --check-limit of the service): past it, the check is stopped,
# the learner's kernel interrupted and told why. The slowest visible check takes under a second
# with the course's own code (benchmarks/checking_service.py).
CHECK_LIMIT_S = 20.0
# Checks running at once, for the whole class; each learner has at most one of them, and their
# next waits behind it. Most of a check's time is the learner's kernel computing, so more
# checks than cores may run: a learner whose function hangs then holds one slot, not all.
MAX_CHECKS = 4 * (os.cpu_count() or 2)
# Checks a learner may ask for in RATE_WINDOW_S seconds (running a whole chapter twice is
# about 16); past it, they are told to slow down and when to try again.
RATE_LIMIT = 30
RATE_WINDOW_S = 60.0
# How often the view is brought up to date with the chapters' due dates.
REFRESH_S = 30.0
# Seconds a learner has to stop an interrupted function before the service gives up on it.
STOP_GRACE_S = 10.0


def verdict(peer: CheckPeer, released: frozenset[str] | None = None) -> dict[str, Any]:
    """Run the visible checks the learner's kernel asked for; the verdict to send back.
    ``released``: the class's released chapters (None: every chapter may be checked)."""
    peer.wait_started()
    exercise_id = str(peer.header.get("exercise", ""))
    try:
        exercise = get_exercise(exercise_id)
    except UnknownExerciseError as exc:
        return {"passed": False, "unknown": True, "message": str(exc)}
    if released is not None and exercise.chapter not in released:
        return {"passed": False, "message": f"{exercise_id}: {exercise.chapter} is not released "
                                            "to your class yet, so its checks do not run."}
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
    if peer.timed_out:
        return {"passed": False, "message": stopped_message(exercise_id, peer.limit_s),
                "notes": []}
    return {"passed": result.passed, "message": result.message, "notes": list(result.notes)}


def stopped_message(exercise_id: str, limit_s: float) -> str:
    return (f"{exercise_id}: your function ran for more than {limit_s:g} s on the check's small "
            "inputs, so the check was stopped and your kernel interrupted. An endless loop, or "
            "work that never ends? Look at each loop of your function and at what makes it end "
            "(the check's inputs are a few rows long), then run the cell again.")


class CheckPeer(SocketPeer):
    """The kernel's connection, which outlives a time-out so that the verdict still reaches
    the kernel."""

    def __init__(self, connection: socket.socket, limit_s: float) -> None:
        super().__init__(connection, call_timeout_s=limit_s,
                         deadline=time.monotonic() + limit_s)
        self.limit_s, self.timed_out = limit_s, False

    def _fail(self, what: str) -> None:
        self.timed_out = "did not answer within" in what
        self.failure = f"your kernel {what}"
        raise WorkerFailedError(self.failure)


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        turn: _Turn = self.server.turn
        peer = CheckPeer(self.request, self.server.limit_s)
        try:
            if turn.refusal:
                peer.wait_started()
                answer = {"passed": False, "message": turn.refusal, "notes": []}
            else:
                answer = verdict(peer, self.server.released)
            peer.send({"op": "verdict", **answer})
            if peer.timed_out and turn.pid:
                # The learner's function still runs in their kernel: stop it as the kernel's
                # interrupt button does; the kernel then reads the verdict just sent.
                os.kill(turn.pid, signal.SIGINT)
        except (WorkerFailedError, OSError, ValueError):
            pass  # the kernel went away or stopped answering: nobody is left to tell
        finally:
            peer.close()


@dataclass
class _Turn:
    """A connection waiting for its check to run: whose it is, and why it is refused, if so."""

    request: socket.socket
    address: Any
    learner: tuple[Any, ...]
    pid: int | None
    refusal: str | None = None


class _Service:
    """Runs each check in a child process of its own, fairly: at most one check per learner at a
    time (the next waits behind it), at most ``MAX_CHECKS`` for the class, in the order they
    came; a learner past ``RATE_LIMIT`` checks a minute is answered at once with when to try
    again. Between requests it reaps finished checks, starts waiting ones and refreshes the
    class's view when it has a course."""

    course: Course | None = None
    exchange: str | os.PathLike | None = None
    released: frozenset[str] | None = None
    limit_s = CHECK_LIMIT_S
    rate_limit = RATE_LIMIT
    # Connections waiting to be accepted (socketserver's default is 5): a class's kernels may
    # all ask at once while the service refreshes the view.
    request_queue_size = 256
    refreshed = -REFRESH_S

    def setup_fairness(self) -> None:
        self.waiting: list[_Turn] = []
        self.running: dict[int, tuple[tuple[Any, ...], float]] = {}
        self.asked: dict[tuple[Any, ...], collections.deque[float]] = {}
        self.turn: _Turn | None = None

    def process_request(self, request: socket.socket, client_address: Any) -> None:
        learner, pid = self.learner_of(request, client_address)
        self.waiting.append(_Turn(request, client_address, learner, pid,
                                  self.rate_refusal(learner)))
        self.start_waiting()

    def learner_of(self, request: socket.socket, client_address: Any
                   ) -> tuple[tuple[Any, ...], int | None]:
        """Who asks, and the process to interrupt when their check runs too long: on the Unix
        socket, the kernel's account (each user's own), by process for root (the tests'
        kernels); over TCP, the kernel's host."""
        if request.family == socket.AF_UNIX:
            pid, uid, _ = peer_credentials(request)
            return ("uid", uid, pid if uid == 0 else None), pid
        return ("host", client_address[0]), None

    def rate_refusal(self, learner: tuple[Any, ...]) -> str | None:
        now = time.monotonic()
        asked = self.asked.setdefault(learner, collections.deque())
        while asked and asked[0] <= now - RATE_WINDOW_S:
            asked.popleft()
        if len(asked) >= self.rate_limit:
            wait = asked[0] + RATE_WINDOW_S - now
            return (f"slow down: you asked for {len(asked)} checks in the last "
                    f"{RATE_WINDOW_S:g} s, more than the {self.rate_limit} your class allows. "
                    f"Run this cell again in {math.ceil(wait)} s.")
        asked.append(now)
        return None

    def start_waiting(self) -> None:
        """Start each waiting check whose learner has none running, while slots are free."""
        busy = {learner for learner, _ in self.running.values()}
        for turn in list(self.waiting):
            if len(self.running) >= MAX_CHECKS:
                break
            if turn.refusal is None and turn.learner in busy:
                continue
            self.waiting.remove(turn)
            busy.add(turn.learner)
            self.fork(turn)

    def fork(self, turn: _Turn) -> None:
        self.turn = turn
        pid = os.fork()
        if pid == 0:  # the child: answer this connection, then leave
            status = 1
            try:
                self.finish_request(turn.request, turn.address)
                status = 0
            except Exception:
                self.handle_error(turn.request, turn.address)
            finally:
                with contextlib.suppress(OSError):
                    self.shutdown_request(turn.request)
                os._exit(status)
        self.running[pid] = (turn.learner, time.monotonic())
        self.close_request(turn.request)

    def reap(self) -> None:
        """Forget finished checks; kill one that outlived its limit and the grace (its
        learner's kernel never let go)."""
        for pid, (_, started) in list(self.running.items()):
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    del self.running[pid]
                    continue
            if time.monotonic() - started > self.limit_s + STOP_GRACE_S:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def service_actions(self) -> None:
        self.reap()
        self.start_waiting()
        if self.course is not None and time.monotonic() - self.refreshed >= REFRESH_S:
            # Loaded once a class's course is served: the view needs nbgrader's gradebook.
            from autograder.steps.view import chapter_states, refresh_view

            refresh_view(self.course, self.exchange)
            self.released = chapter_states(self.course, self.exchange).released
            self.refreshed = time.monotonic()


class _UnixService(_Service, socketserver.UnixStreamServer):
    pass


class _TcpService(_Service, socketserver.TCPServer):
    allow_reuse_address = True


def checking_service(address: str, course: Course | None = None,
                     exchange: str | os.PathLike | None = None,
                     limit_s: float = CHECK_LIMIT_S,
                     rate_limit: int = RATE_LIMIT) -> socketserver.BaseServer:
    """A service listening on ``address`` (a socket path, or ``tcp://HOST:PORT``), warmed up,
    whose checks may each run ``limit_s`` seconds, ``rate_limit`` a minute for each learner.

    It listens before it warms up, so a learner's early check waits instead of failing.
    """
    if address.startswith("tcp://"):
        host, _, port = address.removeprefix("tcp://").rpartition(":")
        service: _Service = _TcpService((host, int(port)), _Handler)
    else:
        path = Path(address)
        prepare_socket(path)
        service = _UnixService(str(path), _Handler)
        path.chmod(0o666)  # every learner's kernel connects
    service.course, service.exchange, service.limit_s = course, exchange, limit_s
    service.rate_limit = rate_limit
    service.setup_fairness()
    warm_up()
    service.service_actions()  # the view and the released chapters, before the first check
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.hub.checking",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", required=True, metavar="ADDRESS",
                        help="a Unix socket's path, or tcp://HOST:PORT")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the course root (default: this repository)")
    parser.add_argument("--course-dir", type=Path, help="the class's course folder, whose "
                        "view/ the service keeps up to date")
    parser.add_argument("--exchange", type=Path, help="the class's nbgrader exchange")
    parser.add_argument("--check-limit", type=float, default=CHECK_LIMIT_S, metavar="SECONDS",
                        help="how long one check may run before it is stopped and the "
                             f"learner's kernel interrupted (default {CHECK_LIMIT_S:g})")
    parser.add_argument("--rate-limit", type=int, default=RATE_LIMIT, metavar="N",
                        help=f"checks a learner may ask for in {RATE_WINDOW_S:g} s "
                             f"(default {RATE_LIMIT})")
    args = parser.parse_args(argv)
    # The hub stops its services with SIGINT. Started from a background job of a script,
    # it hands them SIGINT ignored, and they would outlive a hub that does not wait.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    course = Course.of(args.root, args.course_dir) if args.course_dir else None
    with checking_service(args.listen, course, args.exchange, args.check_limit,
                          args.rate_limit) as service:
        print(f"checking service on {args.listen}", flush=True)
        # Often enough that a check waiting behind a finished one starts at once.
        service.serve_forever(poll_interval=0.1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
