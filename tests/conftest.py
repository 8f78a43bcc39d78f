"""Shared fixtures: the project root, the Multi30k files that sit beside the project, free
ports, a class's checking service, and the browser of the browser tests; and the order in
which the test files run."""

import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from ci_env import in_ci

ROOT = Path(__file__).resolve().parents[1]
SHARED_MULTI30K = ROOT.parent / "shared" / "data" / "multi30k"


# The files that take minutes on one worker: started first, one on each.
LONGEST = ("test_notebooks.py", "test_hub.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the files that hold slow tests first, the longest of them before the others, each
    file's tests in their own order.

    ``make test`` hands whole files to two workers, next file to the first one free. A slow
    file started last (the hub's, the notebooks') kept one worker busy for minutes while the
    other had finished; started first, the many quick files fill both workers' ends evenly.
    """
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: (item.path not in slow, item.path.name not in LONGEST))


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread() -> None:
    """PyTorch on one thread in each test worker. ``make test`` runs two workers on two cores:
    with a thread per core each, the threads of tiny operations (a check's masks, norms and
    attention) wait on each other, up to 10 ms an operation on a busy machine, where one
    thread takes microseconds. The grading sandbox and the checking service do the same."""
    import torch

    torch.set_num_threads(1)


# The tests grade sample learners, not a class: the development secret may grade them (tests
# that need a class's secret set one; tests of the refusal remove this).
os.environ["AUTOGRADER_DEVELOPMENT"] = "1"


@pytest.fixture(scope="session")
def project_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def shared_multi30k() -> Path | None:
    """The Multi30k folder beside the project, or None where it is absent."""
    return SHARED_MULTI30K if (SHARED_MULTI30K / "SHA256SUMS").is_file() else None


@pytest.fixture(scope="session")
def multi30k_dir() -> Path:
    """The raw Multi30k files kept beside the project (never committed into it)."""
    if not (SHARED_MULTI30K / "SHA256SUMS").is_file():
        pytest.skip(f"Multi30k files not found at {SHARED_MULTI30K}")
    return SHARED_MULTI30K


@pytest.fixture(scope="session")
def benchmark_script() -> Callable[[str], ModuleType]:
    """Import ``benchmarks/<name>.py`` by path (benchmarks/ is a folder of scripts, no package)."""

    def load(name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture(scope="session")
def free_port() -> Callable[[], int]:
    """A function that returns a localhost TCP port nothing listens on right now."""

    def find() -> int:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]

    return find


@pytest.fixture(scope="session")
def checking_service(tmp_path_factory) -> Iterator[Path]:
    """A class's checking service (autograder/hub/checking.py) as the class server starts it;
    its socket. It answers once its warm-up is done (connections wait until then)."""
    path = tmp_path_factory.mktemp("checks") / "socket"
    # One process here asks for the checks of many learners (no learner's rate limit), and
    # a loaded machine may slow a mutant's check past a class's time limit: neither is tested
    # here (tests/learner/test_checking_fairness.py is).
    process = subprocess.Popen([sys.executable, "-m", "autograder.hub.checking",
                                "--listen", str(path), "--rate-limit", "1000000",
                                "--check-limit", "600"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120  # it listens before it warms up
    while not path.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"the checking service did not start: {process.stdout.read()}")
        time.sleep(0.2)
    try:
        yield path
    finally:
        process.terminate()
        process.wait(timeout=30)


# ---------------------------------------------------------------------------------------------
# The browser tests (test_browser.py, test_hub.py): Debian's Chromium, driven by Playwright.

CHROMIUM = Path("/usr/bin/chromium")
# The machine may have no outside network: without these flags Chromium keeps trying to reach
# Google's services and fills the log with refused connections.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _missing_browser_reason() -> str | None:
    """Why this machine cannot run the browser tests, or None when it can."""
    if not CHROMIUM.is_file():
        return (f"{CHROMIUM} not found: run `make browser` (or, as root, "
                "`apt-get install chromium`)")
    if importlib.util.find_spec("playwright") is None:
        return "the playwright package is missing from this environment: run `make install`"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator:
    """Debian's Chromium, headless, launched by Playwright; closed whatever happens."""
    reason = _missing_browser_reason()
    if reason is not None:
        if in_ci():
            # CI installs Chromium before the tests (`make test` runs `make browser`), so a
            # missing browser there is a broken set-up, not a machine without one.
            pytest.fail(f"CI must run the browser tests, but {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield chromium
        finally:
            chromium.close()


