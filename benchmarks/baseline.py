"""Another revision of the course beside this checkout, for benchmarks that compare graders.

:func:`checkout` unpacks a git revision into a folder (``git archive``: nothing in this
repository changes), and :func:`autograder` runs ``python -m autograder`` from a side's folder
with this environment's Python, so that the folder's code comes first on the import path: the
grader's own, the Dask workers' (which start with the grader's import path) and, through the
course folder the grader prepares, the sandboxed processes'. The packages are this
environment's on both sides. The scripts that import this module run from ``benchmarks/``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Side:
    """A grader to time: its checkout and the Python that imports it."""

    label: str
    checkout: Path
    python: str


TODAY = Side("today", ROOT, sys.executable)


def checkout(rev: str, folder: Path) -> Path:
    """The files of revision ``rev`` of this repository, unpacked into ``folder``."""
    folder.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def baseline_side(label: str, checkout: Path) -> Side:
    """The grader of the revision unpacked at ``checkout``."""
    return Side(label, checkout, sys.executable)


def grading_env(**extra: str) -> dict[str, str]:
    """This process's environment for a grader: this environment's scripts on PATH (nbgrader
    runs its alembic command, whichever Python grades), no PYTHONPATH, the development secret
    (the sample class is no class), and ``extra``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["AUTOGRADER_DEVELOPMENT"] = "1"
    return {**env, **extra}


def autograder(side: Side, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``python -m autograder ARGS`` with the grader of ``side``, from its checkout."""
    return subprocess.run([side.python, "-m", "autograder", *args], cwd=side.checkout, env=env,
                          capture_output=True, text=True, check=False)


def check_sides(sides: list[Side]) -> None:
    """Raise unless each side's Python imports the course from that side's own folder."""
    for side in sides:
        found = subprocess.run([side.python, "-c", "import autograder; print(autograder.__file__)"],
                               cwd=side.checkout, env=grading_env(), capture_output=True,
                               text=True, check=True).stdout.strip()
        if Path(found).resolve().parents[1] != side.checkout.resolve():
            raise RuntimeError(f"{side.label} imports the course from {found}, not from "
                               f"{side.checkout}")


def sides_in(workspace: Path, baseline_rev: str | None) -> list[Side]:
    """The graders to compare: today's, after ``baseline_rev``'s when one is given (unpacked
    into ``workspace/baseline``), each checked with :func:`check_sides`."""
    # Sandboxed code runs as a user of its own, which must reach REV's Python and code here.
    workspace.chmod(0o711)
    sides = [TODAY]
    if baseline_rev:
        sides.insert(0, baseline_side(baseline_rev, checkout(baseline_rev, workspace / "baseline")))
    check_sides(sides)
    return sides
