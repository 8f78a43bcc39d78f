"""Shared fixtures: the project root and the Multi30k files that sit beside the project."""

import importlib.util
import socket
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_MULTI30K = ROOT.parent / "shared" / "data" / "multi30k"


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
