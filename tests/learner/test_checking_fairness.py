"""The class's checking service stays fair: a learner's endless loop is stopped with a message
while the others' checks keep their speed, a learner's checks run one at a time, a flood of
checks is slowed down, and only released chapters are checked.

Each learner is a process of its own, as each learner's kernel is (the service tells learners
apart by their account, and root's processes, such as these, by process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autograder.course import ROOT, Course
from autograder.exercises.checking import CHECKS_ENV
from autograder.learner.remote_check import remote_check
from autograder.steps.release import register_assignments
from transformer_ref.numpy.scaled_attention import softmax

LIMIT_S = 3.0
# A learner's kernel: the interrupt button's signal raises KeyboardInterrupt, as in Jupyter.
LEARNER = """\
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from autograder.learner.remote_check import remote_check
from transformer_ref.numpy.scaled_attention import softmax as reference
{body}
"""
HANGS = """\
def softmax(x, axis=-1):
    time.sleep(3600)
started = time.monotonic()
verdict = remote_check("ch02.softmax", softmax)
print(round(time.monotonic() - started, 1), verdict["passed"], verdict["message"])
"""
FLOODS = """\
for _ in range(40):
    verdict = remote_check("ch02.softmax", reference)
    if not verdict["passed"]:
        break
print(verdict["message"])
"""


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> Path:
    """A class's service whose checks may run :data:`LIMIT_S`, with chapter 2 released."""
    base = tmp_path_factory.mktemp("fair")
    course = Course.of(ROOT, base / "course")
    register_assignments(course)
    (base / "exchange" / "build-the-transformer" / "outbound" / "ch02_attention").mkdir(
        parents=True)
    path = base / "socket"
    process = subprocess.Popen(
        [sys.executable, "-m", "autograder.hub.checking", "--listen", str(path),
         "--course-dir", str(course.folder), "--exchange", str(base / "exchange"),
         "--check-limit", str(LIMIT_S)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ready = process.stdout.readline()  # printed once it listens, has warmed up and refreshed
    assert "checking service on" in ready, ready + process.stdout.read()
    yield path
    process.terminate()
    process.wait(timeout=30)


def _learner(service: Path, body: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", LEARNER.format(body=body)], cwd=ROOT,
                            env={**os.environ, CHECKS_ENV: str(service)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_an_endless_function_is_stopped_with_a_message_and_others_keep_their_speed(
        service, monkeypatch):
    monkeypatch.setenv(CHECKS_ENV, str(service))
    hanging = [_learner(service, HANGS) for _ in range(2)]
    time.sleep(1.0)  # both hold a check now
    started = time.monotonic()
    assert remote_check("ch02.softmax", softmax)["passed"]
    assert time.monotonic() - started < LIMIT_S / 2
    for process in hanging:
        out = process.communicate(timeout=60)[0]
        seconds, passed, message = out.split(" ", 2)
        assert passed == "False" and "ran for more than 3 s" in message, out
        assert "kernel interrupted" in message and float(seconds) < LIMIT_S + 3, out


def test_a_learners_second_check_waits_behind_their_first(service, monkeypatch):
    monkeypatch.setenv(CHECKS_ENV, str(service))
    calls = []

    def slow_once(x, axis=-1):
        if not calls:
            calls.append(time.monotonic())
            time.sleep(1.5)
        return softmax(x, axis)

    first = threading.Thread(target=remote_check, args=("ch02.softmax", slow_once))
    first.start()
    time.sleep(0.3)
    started = time.monotonic()
    assert remote_check("ch02.softmax", softmax)["passed"]  # the same learner (this process)
    waited = time.monotonic() - started
    first.join(timeout=30)
    assert waited >= 1.0, waited


def test_a_flood_of_checks_is_slowed_down_with_when_to_try_again(service):
    out = _learner(service, FLOODS).communicate(timeout=120)[0]
    assert "slow down: you asked for 30 checks in the last 60 s" in out, out
    assert "Run this cell again in" in out


def test_only_released_chapters_are_checked(service, monkeypatch):
    monkeypatch.setenv(CHECKS_ENV, str(service))
    from transformer_ref.numpy.attention_head import attention_head

    verdict = remote_check("ch03.attention_head", attention_head)
    assert not verdict["passed"]
    assert "ch03_attention_head is not released to your class yet" in verdict["message"]


def test_the_service_stops_on_the_hubs_sigint_even_when_started_with_it_ignored(tmp_path):
    """A hub started from a background job of a script hands its services SIGINT ignored;
    the service still stops on the SIGINT with which the hub stops it."""
    path = tmp_path / "socket"
    process = subprocess.Popen(
        [sys.executable, "-m", "autograder.hub.checking", "--listen", str(path)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        deadline = time.monotonic() + 120
        while not path.exists():
            assert process.poll() is None and time.monotonic() < deadline, process.stdout.read()
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)  # raises TimeoutExpired when the SIGINT is still ignored
    finally:
        process.kill()
        process.wait()
