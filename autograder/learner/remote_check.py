"""A learner's kernel in a class asks the class's checking service for a visible check.

In a class, a learner's view of the course holds neither the checks nor the answers of the
chapters that are still open (see :mod:`autograder.steps.view`). The test cells still call
``check("ch02.softmax", softmax)``; :func:`autograder.exercises.registry.check` then comes
here when ``TRANSFORMER_CHECKS`` names the service: its socket's path, or ``tcp://HOST:PORT``.
This kernel connects, says which exercise it wants checked, and then answers the service's
requests (call the function, build a model, run a backward pass, ...) exactly as a grading
process answers the grader
(:class:`autograder.sandbox.serve.Server`, over :mod:`autograder.sandbox.wire`), until the
service sends its verdict. The checks and the course's answers stay in the service's process
(:mod:`autograder.hub.checking`): the verdict and the message are those of the visible checks,
run against this kernel's own function.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import random
import socket
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from autograder.exercises.checking import CHECKS_ENV, learner_location, learner_namespace
from autograder.sandbox import serve, wire

CONNECT_TIMEOUT_S = 10.0
# A check of the slowest exercise (beam search on several models) takes a few seconds; a learner's
# endless loop is theirs to interrupt.
REPLY_TIMEOUT_S = 600.0
# After an interrupt, how long to wait for a verdict the service sent with it.
INTERRUPT_WAIT_S = 2.0
# What the service may ask this kernel to build: models of the course's own packages.
BUILDER_PACKAGES = ("transformer_ref.", "autograder.exercises.")


class CheckingServiceError(ConnectionError):
    """The checking service could not be reached or stopped answering."""


def service_address() -> str | None:
    """The checking service's address in a class, or None (self-study: checks run here)."""
    return os.environ.get(CHECKS_ENV) or None


def _connect(address: str) -> socket.socket:
    if address.startswith("tcp://"):
        host, _, port = address.removeprefix("tcp://").rpartition(":")
        return socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S)
    # A Unix socket whose backlog is full refuses at once (EAGAIN) instead of waiting, as TCP
    # does: a class's checks all at once must wait their turn, not fail.
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while True:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.settimeout(CONNECT_TIMEOUT_S)
        try:
            connection.connect(address)
            return connection
        except BlockingIOError:
            connection.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
        except OSError:
            connection.close()
            raise


class _Builders(dict):
    """The model builders the service names (``"module:function"``), imported on first use."""

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.startswith(BUILDER_PACKAGES) and ":" in key

    def __missing__(self, key: str) -> Callable[..., Any]:
        module, _, attribute = key.partition(":")
        self[key] = builder = getattr(importlib.import_module(module), attribute)
        return builder


def _kind(fn: Any) -> str:
    return "class" if isinstance(fn, type) else ("function" if callable(fn) else "value")


def remote_check(exercise_id: str, fn: Any, hidden: bool = False) -> dict[str, Any]:
    """The service's verdict on ``fn`` for ``exercise_id``: ``{"passed", "message"}``, and
    ``"unknown": True`` when the service holds no such exercise.

    Raises:
        CheckingServiceError: the service is not configured, cannot be reached, or stopped
            answering; the message says what to do.
        KeyboardInterrupt: the learner interrupted the kernel during the check.
    """
    address = service_address()
    if address is None:
        raise CheckingServiceError(f"{CHECKS_ENV} is not set")
    try:
        connection = _connect(address)
    except (OSError, ValueError) as exc:
        raise _unreachable(address, exc) from None
    try:
        connection.settimeout(REPLY_TIMEOUT_S)
        with connection.makefile("rb") as inp, connection.makefile("wb") as out:
            namespace = {**notebook_callables(fn), "answer": fn}
            wire.write_frame(out, {"exercise": exercise_id, "hidden": bool(hidden),
                                   "names": {n: _kind(v) for n, v in namespace.items()},
                                   "name": str(getattr(fn, "__name__", ""))}, [])
            return _serve_until_verdict(connection, inp, out, namespace, address)
    finally:
        connection.close()


@contextlib.contextmanager
def _random_state_kept() -> Iterator[None]:
    """The kernel's random generators as they were before the check, which may seed them (a
    check run in the notebook's own process forks them in the same way)."""
    saved_random, saved_numpy = random.getstate(), np.random.get_state()
    torch = sys.modules.get("torch")
    with torch.random.fork_rng(devices=[]) if torch is not None else contextlib.nullcontext():
        try:
            yield
        finally:
            random.setstate(saved_random)
            np.random.set_state(saved_numpy)


def notebook_callables(fn: Any) -> dict[str, Any]:
    """The functions and classes defined beside ``fn`` (the notebook's own), by name: the
    service may call those an exercise builds on, to carry an earlier error forward."""
    module = getattr(fn, "__module__", None)
    namespace = learner_namespace(fn) or {}
    return {name: value for name, value in namespace.items()
            if name.isidentifier() and not name.startswith("_") and callable(value)
            and getattr(value, "__module__", None) == module}


def _serve_until_verdict(connection: socket.socket, inp: Any, out: Any,
                         namespace: dict[str, Any],
                         address: str) -> dict[str, Any]:
    # The failing line is found as a check in the notebook finds it (the learner's own frame).
    server = serve.Server(namespace, [], _Builders(), locate=learner_location)
    try:
        with _random_state_kept():
            while (frame := wire.read_frame(inp)) is not None:
                header, blobs = frame
                if header.get("op") == "verdict":
                    return header
                reply = server.reply(header, blobs, passthrough=(KeyboardInterrupt,))
                try:
                    wire.write_frame(out, *reply)
                except OSError:  # the service stopped the check: its verdict says why
                    verdict = _pending_verdict(connection, inp, REPLY_TIMEOUT_S)
                    if verdict is None:
                        raise
                    return verdict
    except KeyboardInterrupt:
        # The service interrupts a function that ran past the check's time limit, after its
        # verdict; an interrupt of the learner's own has none and goes on as one.
        verdict = _pending_verdict(connection, inp, INTERRUPT_WAIT_S)
        if verdict is None:
            raise
        return verdict
    except (OSError, wire.WireError) as exc:
        raise _unreachable(address, exc) from None
    raise _unreachable(address, "it closed the connection before its verdict")


def _pending_verdict(connection: socket.socket, inp: Any, wait_s: float
                     ) -> dict[str, Any] | None:
    """The verdict the service sent while this kernel was busy (the frames before it are the
    service's requests, which no longer matter), or None when none comes within ``wait_s``."""
    connection.settimeout(wait_s)
    with contextlib.suppress(OSError, wire.WireError):
        while (frame := wire.read_frame(inp)) is not None:
            if frame[0].get("op") == "verdict":
                return frame[0]
    return None


def _unreachable(address: str, cause: object) -> CheckingServiceError:
    return CheckingServiceError(
        f"this check runs on your class's checking service ({address}), which did not answer "
        f"({cause}). Your work is safe: save the notebook, run the cell again in a minute, and "
        "if it keeps failing tell your instructor that the checking service is down "
        "(grading does not depend on it).")
