"""A class on the class server under load: do honest learners keep their speed while others
misbehave?

The script starts a real class server (`make hub`'s ``jupyterhub -f
autograder/hub/jupyterhub_config.py`` with the proxy of build/proxy) on 127.0.0.1, with a state
folder of its own, chapter 2 released, and N honest learners plus M misbehaving ones. Everyone
logs in through the hub's REST API (a token for their password), starts their server, puts
chapter 2's notebook in their folder and starts a kernel. Then two phases of ``--phase-s``
seconds each, in one run:

* quiet: the honest learners alone. Each runs a visible check (``check("ch02.softmax",
  softmax)`` through the class's checking service) every ``--check-every-s`` seconds or so,
  and validates their notebook (nbgrader's Validate) once, at a random moment;
* loaded: the same, while each misbehaving learner, in kernels of their own, does
  ``--misbehaviours``: ``loop`` (a check of a function that never ends: the checking service
  must stop it with a message), ``cpu`` (a training loop that holds every core for the whole
  phase) and ``memory`` (allocating until the kernel dies: it must be killed alone at the
  class's memory cap, the server's log saying why, the learner's server and other kernels alive).

It prints the latency of the honest checks and Validates (p50, p95, max) per phase and their
ratio, login and spawn times, failed or lost checks, the machine's peak memory, what happened to
each misbehaving learner, and the three goals (on 2 cores, 30 learners, 2 misbehaving): no
failed or lost check; the honest checks' p95 at most 3x the quiet one; every misbehaving learner
stopped with a message. Needs root (learners' servers run as their own accounts) and the proxy
(`make proxy`); its accounts are removed at the end.

    sudo .venv/bin/python benchmarks/class_load.py                         # 30 + 2 learners
    sudo .venv/bin/python benchmarks/class_load.py --learners 3 --misbehaving 1 --phase-s 15
"""

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.websocket import WebSocketClientConnection, websocket_connect

from autograder.learner.kernel_limits import killed_message

ROOT = Path(__file__).resolve().parents[1]
PROXY = ROOT / "build" / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy"
CHAPTER = "ch02_attention"
NOTEBOOK = f"{CHAPTER}/{CHAPTER}.ipynb"
HUB_START_S, SPAWN_S, CELL_S = 120, 300, 120
MISBEHAVIOURS = ("loop", "cpu", "memory")
# The first words of the line the server logs for a kernel killed at the memory cap.
KILLED_LINE = killed_message("ID", 0).split("ID")[1].split(":")[0]
SETUP = """import numpy as np
from autograder import check

def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)
"""
CHECK = 'check("ch02.softmax", softmax)'
ENDLESS = """from autograder import check

def softmax(x, axis=-1):
    while True:
        pass

check("ch02.softmax", softmax)"""
TRAINING = """import time
import numpy as np
weights, started = np.random.rand(500, 500), time.monotonic()
while time.monotonic() - started < {seconds}:
    weights = np.tanh(weights @ weights.T / 500)"""
HOG = """chunks = []
while True:
    chunks.append(b"x" * (32 * 2**20))"""


# ----------------------------------------------------------------------------- the class server


@dataclass
class ClassHub:
    """A running class server with its learners' passwords."""

    url: str
    state: Path
    log: Path
    passwords: dict[str, str]
    process: subprocess.Popen


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _autograder(*args: str, env: dict[str, str]) -> str:
    result = subprocess.run([sys.executable, "-m", "autograder", *args], env=env, cwd=ROOT,
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"autograder {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def _prepare_class(base: Path, names: list[str], memory_mb: int, env: dict[str, str]
                   ) -> dict[str, str]:
    """A course copy holding chapter 2, released; the learners on the roster; the limits."""
    root = base / "course"
    for folder in ("solutions", "notebooks"):
        (root / folder).mkdir(parents=True)
        subprocess.run(["cp", "-r", str(ROOT / folder / CHAPTER), str(root / folder)],
                       check=True)
    out = _autograder("hub", "add", *names, env=env)
    passwords = dict(re.findall(r"^(\S+)  (\S+)$", out, flags=re.M))
    _autograder("hub", "add", "teacher", "--instructor", env=env)
    _autograder("hub", "limits", "--memory-mb", str(memory_mb), env=env)
    state = Path(env["TRANSFORMER_HUB_STATE"])
    _autograder("release", "ch02", "--root", str(root), "--exchange", str(state / "exchange"),
                "--course-dir", str(state / "course"), env=env)
    return passwords


@contextlib.contextmanager
def class_hub(names: list[str], memory_mb: int) -> Iterator[ClassHub]:
    """A class server for ``names`` on free ports of 127.0.0.1; stopped, and its learners'
    accounts removed, at the end."""
    base = Path(tempfile.mkdtemp(prefix="class-load-"))
    prefix = f"l{secrets.token_hex(2)}-"
    env = {**os.environ, "TRANSFORMER_HUB_STATE": str(base / "state"),
           "TRANSFORMER_HUB_USER_PREFIX": prefix, "TRANSFORMER_COURSE_ROOT": str(base / "course")}
    public, api, proxy_api = _free_port(), _free_port(), _free_port()
    log = base / "hub.log"
    process = None
    try:
        passwords = _prepare_class(base, names, memory_mb, env)
        command = [str(Path(sys.executable).parent / "jupyterhub"),
                   "-f", str(ROOT / "autograder" / "hub" / "jupyterhub_config.py"),
                   f"--JupyterHub.bind_url=http://127.0.0.1:{public}",
                   f"--JupyterHub.hub_bind_url=http://127.0.0.1:{api}",
                   f"--ConfigurableHTTPProxy.api_url=http://127.0.0.1:{proxy_api}"]
        with log.open("w") as out:
            process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        hub = ClassHub(f"http://127.0.0.1:{public}", base / "state", log, passwords, process)
        _wait_for_login_page(hub)
        yield hub
    finally:
        _stop(process)
        for name in names:
            subprocess.run(["userdel", prefix + name], capture_output=True, check=False)
        print(f"hub log: {log}", file=sys.stderr)


def _wait_for_login_page(hub: ClassHub) -> None:
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + HUB_START_S
    while time.monotonic() < deadline:
        if hub.process.poll() is not None:
            raise SystemExit(f"the hub stopped:\n{hub.log.read_text()}")
        with contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError), \
                urllib.request.urlopen(f"{hub.url}/hub/login", timeout=5) as response:
            if response.status == 200:
                return
        time.sleep(0.5)
    raise SystemExit(f"the hub did not answer within {HUB_START_S} s:\n{hub.log.read_text()}")


def _stop(process: subprocess.Popen | None) -> None:
    """Stop the hub as Ctrl-C does (it stops the servers), then whatever is left."""
    if process is None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=60)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


# ----------------------------------------------------------------------------- one learner


class Kernel:
    """One kernel of a learner's server, driven over its websocket (Jupyter's JSON
    messages)."""

    def __init__(self, kernel_id: str, connection: WebSocketClientConnection) -> None:
        self.id, self.connection = kernel_id, connection
        self.session = uuid.uuid4().hex

    async def run(self, code: str, timeout_s: float = CELL_S) -> tuple[str, str]:
        """Run ``code``; ``(status, output)``: status ``ok``, ``error``, ``died`` (the kernel
        died or restarted) or ``lost`` (no reply in time)."""
        msg_id = uuid.uuid4().hex
        await self.connection.write_message(json.dumps({
            "header": {"msg_id": msg_id, "msg_type": "execute_request", "session": self.session,
                       "username": "", "version": "5.3"},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": False,
                        "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}))
        output: list[str] = []
        reply, idle = None, False  # the reply and the last output come on different channels
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                raw = await asyncio.wait_for(self.connection.read_message(), left)
            except TimeoutError:
                break
            if raw is None:
                return "died", "".join(output)
            message = json.loads(raw)
            content, kind = message.get("content", {}), message.get("msg_type")
            if kind == "status" and content.get("execution_state") in ("restarting", "dead"):
                return "died", "".join(output)
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if kind == "stream":
                output.append(content.get("text", ""))
            elif kind == "error":
                output.append(f"{content.get('ename')}: {content.get('evalue')}")
            elif kind == "execute_reply":
                reply = content.get("status", "error")
            elif kind == "status" and content.get("execution_state") == "idle":
                idle = True
            if reply is not None and idle:
                return reply, "".join(output)
        return "lost", "".join(output)


class Learner:
    """One learner, through the hub's and their server's REST APIs."""

    def __init__(self, hub: ClassHub, name: str) -> None:
        self.hub, self.name = hub, name
        self.token = ""
        self.http = AsyncHTTPClient()

    async def fetch(self, path: str, method: str = "GET", body: object = None,
                    raw_body: str | None = None, timeout_s: float = CELL_S) -> tuple[int, dict]:
        """``(status, JSON answer)`` of the hub's URL ``path``, as this learner."""
        data = raw_body if raw_body is not None else (
            None if body is None else json.dumps(body))
        if data is None and method in ("POST", "PUT"):
            data = ""
        headers = {"Authorization": f"token {self.token}"} if self.token else {}
        request = HTTPRequest(f"{self.hub.url}{path}", method=method, body=data,
                              headers=headers, request_timeout=timeout_s)
        response = await self.http.fetch(request, raise_error=False)
        with contextlib.suppress(ValueError, TypeError):
            return response.code, json.loads(response.body or b"{}")
        return response.code, {}

    async def log_in(self) -> float:
        """Get a token for the learner's password; the seconds it took."""
        started = time.perf_counter()
        auth = {"auth": {"username": self.name, "password": self.hub.passwords[self.name]}}
        status, answer = await self.fetch(f"/hub/api/users/{self.name}/tokens", "POST", auth)
        if status != 201:
            raise RuntimeError(f"{self.name} could not log in: {status} {answer}")
        self.token = answer["token"]
        return time.perf_counter() - started

    async def spawn(self) -> float:
        """Start the learner's server and wait until it is ready; the seconds it took."""
        started = time.perf_counter()
        await self.fetch(f"/hub/api/users/{self.name}/server", "POST", {})
        while time.perf_counter() - started < SPAWN_S:
            _, user = await self.fetch(f"/hub/api/users/{self.name}")
            if user.get("servers", {}).get("", {}).get("ready"):
                return time.perf_counter() - started
            await asyncio.sleep(1)
        raise RuntimeError(f"{self.name}'s server did not start within {SPAWN_S} s")

    async def put_notebook(self, notebook: dict) -> None:
        base = f"/user/{self.name}/api/contents"
        await self.fetch(f"{base}/{CHAPTER}", "PUT", {"type": "directory"})
        status, answer = await self.fetch(f"{base}/{NOTEBOOK}", "PUT",
                                          {"type": "notebook", "format": "json",
                                           "content": notebook})
        if status not in (200, 201):
            raise RuntimeError(f"{self.name}: the notebook was not saved: {status} {answer}")

    async def kernel(self) -> Kernel:
        status, answer = await self.fetch(f"/user/{self.name}/api/kernels", "POST",
                                          {"name": "python3"})
        if status not in (200, 201):
            raise RuntimeError(f"{self.name}: no kernel: {status} {answer}")
        url = (f"{self.hub.url.replace('http', 'ws', 1)}/user/{self.name}/api/kernels/"
               f"{answer['id']}/channels")
        connection = await websocket_connect(HTTPRequest(
            url, headers={"Authorization": f"token {self.token}"}, connect_timeout=CELL_S,
            request_timeout=CELL_S), max_message_size=2**26)
        return Kernel(answer["id"], connection)

    async def validate(self) -> tuple[float, str | None]:
        """nbgrader's Validate of the learner's notebook: seconds, and why it gave no verdict
        (None when it did)."""
        started = time.perf_counter()
        status, answer = await self.fetch(f"/user/{self.name}/assignments/validate", "POST",
                                          raw_body=f"path={NOTEBOOK}", timeout_s=SPAWN_S)
        took = time.perf_counter() - started
        if status == 200 and answer.get("success"):
            return took, None
        return took, f"{status} {str(answer.get('value', answer))[-300:]}"


# ----------------------------------------------------------------------------- the phases


@dataclass
class Phase:
    """What one phase measured."""

    checks: list[float] = field(default_factory=list)
    validates: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    validate_failures: list[str] = field(default_factory=list)
    peak_memory_mb: float = 0.0


def used_memory_mb() -> float:
    """The machine's memory in use (total less available), in MiB."""
    info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    return (int(info["MemTotal"].split()[0]) - int(info["MemAvailable"].split()[0])) / 1024


async def honest_work(learner: Learner, kernel: Kernel, phase: Phase, seconds: float,
                      every_s: float) -> None:
    """Checks at a learner's pace for ``seconds``, and one Validate at a random moment."""
    end = time.monotonic() + seconds
    validate_at = time.monotonic() + random.uniform(0, seconds * 0.8)
    while time.monotonic() < end:
        if validate_at is not None and time.monotonic() >= validate_at:
            validate_at = None
            took, problem = await learner.validate()
            phase.validates.append(took)
            if problem is not None:
                phase.validate_failures.append(f"{learner.name}: {problem}")
        started = time.perf_counter()
        status, output = await kernel.run(CHECK)
        took = time.perf_counter() - started
        phase.checks.append(took)
        if status != "ok" or "softmax" not in output:
            phase.failures.append(f"{learner.name}: check {status}: {output.strip()[-300:]}")
        await asyncio.sleep(random.uniform(0.5, 1.5) * every_s)


async def sample_memory(phase: Phase, baseline: float, stop: asyncio.Event) -> None:
    while not stop.is_set():
        phase.peak_memory_mb = max(phase.peak_memory_mb, used_memory_mb() - baseline)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.5)


async def run_phase(honest: list[tuple[Learner, Kernel]], extra: list, seconds: float,
                    every_s: float, baseline: float) -> Phase:
    """One phase: every honest learner's work, alongside the coroutines ``extra``."""
    phase, stop = Phase(), asyncio.Event()
    sampler = asyncio.ensure_future(sample_memory(phase, baseline, stop))
    await asyncio.gather(*(honest_work(learner, kernel, phase, seconds, every_s)
                           for learner, kernel in honest), *extra)
    stop.set()
    await sampler
    return phase


async def misbehave(learner: Learner, kinds: tuple[str, ...], seconds: float, log: Path
                    ) -> dict:
    """One misbehaving learner's phase; what stopped each of their misbehaviours."""
    outcome: dict = {"learner": learner.name}
    jobs = []
    if "cpu" in kinds:
        trainer = await learner.kernel()
        jobs.append(trainer.run(TRAINING.format(seconds=seconds), seconds + CELL_S))
    kernel = await learner.kernel() if {"loop", "memory"} & set(kinds) else None
    started = time.perf_counter()
    if "loop" in kinds:
        status, output = await kernel.run(ENDLESS)
        outcome["loop"] = {"seconds": round(time.perf_counter() - started, 1),
                           "stopped": "ran for more than" in output,
                           "message": output.strip()[-400:]}
    if "memory" in kinds:
        status, _ = await kernel.run(HOG)
        outcome["memory"] = {"kernel_died": status == "died",
                             "logged": await _logged_kill(log, kernel.id),
                             "server_alive": (await learner.fetch(
                                 f"/user/{learner.name}/api/status"))[0] == 200}
    if jobs:
        started = time.perf_counter()
        status, _ = (await asyncio.gather(*jobs))[0]
        outcome["cpu"] = {"status": status, "ended_after_s": round(time.perf_counter() -
                                                                   started, 1)}
    if "memory" in kinds:
        outcome["memory"]["other_kernel_alive"] = not jobs or outcome["cpu"]["status"] == "ok"
    return outcome


async def _logged_kill(log: Path, kernel_id: str, wait_s: float = 15) -> bool:
    """Whether the server's log says why the kernel ``kernel_id`` died (it may take a poll)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if any(kernel_id in line and KILLED_LINE in line
               for line in log.read_text(errors="replace").splitlines()):
            return True
        await asyncio.sleep(1)
    return False


# ----------------------------------------------------------------------------- the run


async def set_up(learners: list[Learner], at_once: int, notebook: dict, honest: int
                 ) -> tuple[dict, list[Kernel]]:
    """Everyone logs in, starts their server and saves the notebook; the first ``honest`` open
    a kernel and run a first check. Login and spawn times, and those kernels."""
    times: dict = {"login": [], "spawn": []}
    gate = asyncio.Semaphore(at_once)

    async def arrive(learner: Learner, opens_kernel: bool) -> Kernel | None:
        times["login"].append(await learner.log_in())
        async with gate:  # a class arrives over a few minutes, not in one instant
            times["spawn"].append(await learner.spawn())
            await learner.put_notebook(notebook)
            if not opens_kernel:
                return None
            kernel = await learner.kernel()
            status, output = await kernel.run(SETUP + CHECK)  # the first imports the course
        if status != "ok":
            raise RuntimeError(f"{learner.name}'s first check failed: {status} {output}")
        return kernel

    kernels = await asyncio.gather(*(arrive(learner, i < honest)
                                     for i, learner in enumerate(learners)))
    return times, [kernel for kernel in kernels if kernel is not None]


async def run_class(hub: ClassHub, args: argparse.Namespace, honest_names: list[str],
                    rogue_names: list[str]) -> dict:
    """Both phases; everything measured, as a dictionary."""
    AsyncHTTPClient.configure(None, max_clients=4 * (len(honest_names) + len(rogue_names)))
    honest = [Learner(hub, name) for name in honest_names]
    rogues = [Learner(hub, name) for name in rogue_names]
    notebook = json.loads((ROOT / "notebooks" / NOTEBOOK).read_text())
    times, kernels = await set_up(honest + rogues, args.spawn_at_once, notebook, len(honest))
    pairs = list(zip(honest, kernels, strict=True))
    baseline = used_memory_mb()
    quiet = await run_phase(pairs, [], args.phase_s, args.check_every_s, baseline)
    kinds = tuple(args.misbehaviours)
    outcomes: list[dict] = []

    async def rogue(learner: Learner) -> None:
        outcomes.append(await misbehave(learner, kinds, args.phase_s, hub.log))

    loaded = await run_phase(pairs, [rogue(learner) for learner in rogues], args.phase_s,
                             args.check_every_s, baseline)
    return {"times": times, "quiet": asdict(quiet), "loaded": asdict(loaded),
            "misbehaving": outcomes}


def percentiles(values: list[float]) -> dict[str, float]:
    """p50, p95 and max of ``values`` in seconds (nearest rank), and how many."""
    ordered = sorted(values)
    if not ordered:
        return {"n": 0, "p50": math.nan, "p95": math.nan, "max": math.nan}

    def rank(q: float) -> float:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]

    return {"n": len(ordered), "p50": rank(0.5), "p95": rank(0.95), "max": ordered[-1]}


def stopped(outcome: dict) -> bool:
    """Whether each misbehaviour of one learner ended with a message (the check's, or the
    kernel's death and the server's log line) and left the rest of their server running."""
    loop = outcome.get("loop", {"stopped": True})
    memory = outcome.get("memory", {"kernel_died": True, "logged": True, "server_alive": True,
                                    "other_kernel_alive": True})
    return bool(loop["stopped"] and all(memory.values()))


def summary(result: dict) -> dict:
    """The figures and the goals of a run."""
    quiet, loaded = result["quiet"], result["loaded"]
    figures = {f"{what} {phase}": percentiles(result[phase][what + "s"])
               for what in ("check", "validate") for phase in ("quiet", "loaded")}
    figures.update({what: percentiles(result["times"][what]) for what in ("login", "spawn")})
    ratio = figures["check loaded"]["p95"] / figures["check quiet"]["p95"]
    failures = quiet["failures"] + loaded["failures"]
    validate_failures = quiet["validate_failures"] + loaded["validate_failures"]
    goals = {"no failed or lost check": not failures,
             "honest checks' p95 at most 3x the quiet one": ratio <= 3,
             "every misbehaving learner stopped with a message":
                 all(stopped(o) for o in result["misbehaving"])}
    return {"figures": figures, "check_p95_ratio": ratio,
            "validate_p95_ratio": figures["validate loaded"]["p95"]
            / figures["validate quiet"]["p95"],
            "failures": failures, "validate_failures": validate_failures, "goals": goals,
            "peak_memory_mb": {"quiet": quiet["peak_memory_mb"],
                               "loaded": loaded["peak_memory_mb"]}}


def print_summary(result: dict, report: dict, args: argparse.Namespace) -> None:
    print(f"class load: {args.learners} honest learners, {args.misbehaving} misbehaving "
          f"({', '.join(args.misbehaviours)}), {args.phase_s:g} s per phase, "
          f"{os.cpu_count()} cores")
    print(f"{'':16} {'n':>4} {'p50 s':>8} {'p95 s':>8} {'max s':>8}")
    for name, row in report["figures"].items():
        print(f"{name:16} {row['n']:>4} {row['p50']:>8.2f} {row['p95']:>8.2f} {row['max']:>8.2f}")
    print(f"honest check p95, loaded / quiet: {report['check_p95_ratio']:.2f}x; Validate: "
          f"{report['validate_p95_ratio']:.2f}x")
    print(f"peak memory in use above the start: {report['peak_memory_mb']['quiet']:.0f} MiB "
          f"quiet, {report['peak_memory_mb']['loaded']:.0f} MiB loaded")
    for failure in report["failures"]:
        print(f"FAILED check: {failure}")
    for failure in report["validate_failures"]:
        print(f"Validate without a verdict: {failure}")
    for outcome in result["misbehaving"]:
        print(f"misbehaving {json.dumps(outcome)}")
    for goal, met in report["goals"].items():
        print(f"goal: {goal}: {'met' if met else 'NOT met'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, default=30, help="honest learners")
    parser.add_argument("--misbehaving", type=int, default=2, help="misbehaving learners")
    parser.add_argument("--misbehaviours", type=lambda s: s.split(","),
                        default=list(MISBEHAVIOURS), help="what each misbehaving learner "
                        f"does, comma-separated, of {','.join(MISBEHAVIOURS)}")
    parser.add_argument("--phase-s", type=float, default=90.0, help="seconds of each phase")
    parser.add_argument("--check-every-s", type=float, default=8.0,
                        help="mean seconds between a learner's checks")
    parser.add_argument("--memory-mb", type=int, default=1024,
                        help="the class's memory cap of each learner's server")
    parser.add_argument("--spawn-at-once", type=int, default=4, help="servers starting at once")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if unknown := set(args.misbehaviours) - set(MISBEHAVIOURS):
        parser.error(f"unknown misbehaviours {sorted(unknown)}")
    if os.geteuid() != 0 or not PROXY.is_file():
        print("class_load needs root (learners' servers run as their own accounts) and the "
              "proxy (make proxy)", file=sys.stderr)
        return 2
    honest = [f"h{i:02d}" for i in range(args.learners)]
    rogues = [f"m{i:02d}" for i in range(args.misbehaving)]
    with class_hub(honest + rogues, args.memory_mb) as hub:
        result = asyncio.run(run_class(hub, args, honest, rogues))
    report = summary(result)
    print_summary(result, report, args)
    if args.json:
        args.json.write_text(json.dumps({"result": result, "summary": report}, indent=1))
    return 0 if all(report["goals"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
