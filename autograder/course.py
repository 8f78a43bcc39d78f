"""The nbgrader course: where its folders live, its configuration, and the release step.

Layout (nbgrader's names on the left):

    source      solutions/<chapter>/<chapter>.ipynb       instructor notebooks, committed
    release     notebooks/<chapter>/<chapter>.ipynb       learner notebooks, generated, committed
    submitted   autograder/course/submitted/<student>/<chapter>/     not committed
    autograded  autograder/course/autograded/<student>/<chapter>/    not committed
    feedback    autograder/course/feedback/<student>/<chapter>/      not committed
    gradebook   autograder/course/gradebook.db                       not committed

Plain nbgrader commands pick this configuration up when they run from the ``autograder/``
folder (``autograder/nbgrader_config.py`` loads :func:`course_config`)::

    cd autograder
    nbgrader generate_assignment ch02_attention --force
    nbgrader autograde ch02_attention
    nbgrader generate_feedback ch02_attention
    nbgrader export
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path

from traitlets.config import Config

from autograder.registry import CHAPTERS as CHAPTER_IDS

ROOT = Path(__file__).resolve().parents[1]
COURSE_DIR = ROOT / "autograder" / "course"
COURSE_ID = "build-the-transformer"
SOURCE_DIRECTORY = "solutions"
RELEASE_DIRECTORY = "notebooks"

# The ten chapter ids (nbgrader assignments), in course order.
CHAPTERS: tuple[str, ...] = tuple(CHAPTER_IDS.values())

# Seconds one notebook cell may run while autograding before the kernel is interrupted.
CELL_TIMEOUT = 120
# Seconds a kernel may take to start, and to shut down before it is killed.
KERNEL_STARTUP_TIMEOUT = 60
KERNEL_SHUTDOWN_WAIT = 5

# Files that never travel from solutions/ into a release or a submission.
IGNORED_FILES = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", ".DS_Store", "*~"]


def course_config(
    root: str | os.PathLike = ROOT, course_dir: str | os.PathLike | None = None
) -> Config:
    """The nbgrader configuration of the course.

    Args:
        root: the folder that holds ``solutions/`` and ``notebooks/`` (the repository root).
        course_dir: where submissions, autograded copies, feedback and the gradebook go;
            ``<root>/autograder/course`` by default. Tests point both at a temporary folder.

    Returns:
        A traitlets ``Config`` for nbgrader's applications and Python API.
    """
    root = Path(root).resolve()
    course = root / "autograder" / "course" if course_dir is None else Path(course_dir).resolve()

    def below_root(name: str) -> str:
        # nbgrader joins every step folder onto the root, so store them relative to it.
        return os.path.relpath(course / name, root)

    # nbgrader opens the gradebook inside this folder, so it has to exist.
    course.mkdir(parents=True, exist_ok=True)

    c = Config()
    c.CourseDirectory.course_id = COURSE_ID
    c.CourseDirectory.root = str(root)
    c.CourseDirectory.source_directory = SOURCE_DIRECTORY
    c.CourseDirectory.release_directory = RELEASE_DIRECTORY
    c.CourseDirectory.submitted_directory = below_root("submitted")
    c.CourseDirectory.autograded_directory = below_root("autograded")
    c.CourseDirectory.feedback_directory = below_root("feedback")
    c.CourseDirectory.solution_directory = below_root("solution")
    c.CourseDirectory.source_with_tests_directory = below_root("source_with_tests")
    c.CourseDirectory.db_url = f"sqlite:///{course / 'gradebook.db'}"
    c.CourseDirectory.ignore = list(IGNORED_FILES)

    # Autograding runs learner code: bound every cell, and do not hang on a stuck kernel.
    c.Execute.timeout = CELL_TIMEOUT
    c.Execute.interrupt_on_timeout = True
    c.Execute.startup_timeout = KERNEL_STARTUP_TIMEOUT
    c.Execute.execute_retries = 0
    c.KernelManager.shutdown_wait_time = KERNEL_SHUTDOWN_WAIT

    # Releases carry no outputs, execution counts or leftover cell metadata.
    c.ClearOutput.remove_metadata_fields = ["collapsed", "scrolled", "execution", "ExecuteTime"]
    return c


def ensure_alembic_on_path() -> None:
    """Put this Python's scripts folder on PATH when ``alembic`` is not found.

    nbgrader runs the ``alembic`` command each time it opens a gradebook; it is installed next
    to this interpreter, which is not on PATH when the virtual environment is not activated.
    """
    if shutil.which("alembic") is None:
        scripts = str(Path(sys.executable).parent)
        os.environ["PATH"] = os.pathsep.join([scripts, os.environ.get("PATH", "")])


def chapters_in(root: str | os.PathLike = ROOT) -> list[str]:
    """Chapter ids with a source notebook ``<root>/solutions/<chapter>/<chapter>.ipynb``."""
    source = Path(root) / SOURCE_DIRECTORY
    return [ch for ch in CHAPTERS if (source / ch / f"{ch}.ipynb").is_file()]


def _check_chapters(chapters: Iterable[str], available: list[str]) -> list[str]:
    chosen = list(chapters)
    unknown = [ch for ch in chosen if ch not in available]
    if unknown:
        raise ValueError(
            f"cannot release {unknown}: expected chapter ids with a notebook in "
            f"{SOURCE_DIRECTORY}/<chapter>/<chapter>.ipynb, available: {available}. "
            "Pass one of those ids, or no ids to release every chapter."
        )
    return chosen


def generate(
    chapters: Iterable[str],
    root: str | os.PathLike = ROOT,
    course_dir: str | os.PathLike | None = None,
) -> None:
    """Run ``nbgrader generate_assignment <chapter> --force`` for each chapter.

    Writes ``<root>/notebooks/<chapter>/`` from ``<root>/solutions/<chapter>/`` (solutions
    replaced by stubs, hidden tests removed, outputs cleared) and records the chapter in the
    gradebook under ``course_dir``. The result depends only on the source folder, so running
    it again gives byte-identical files.

    Raises:
        RuntimeError: nbgrader could not generate a chapter (its log is in the message).
    """
    # Imported here so that loading the configuration stays light.
    from nbgrader.apps.api import capture_log
    from nbgrader.converters import GenerateAssignment
    from nbgrader.coursedir import CourseDirectory

    ensure_alembic_on_path()
    config = course_config(root, course_dir)
    for chapter in chapters:
        coursedir = CourseDirectory(config=config)
        coursedir.assignment_id = chapter
        app = GenerateAssignment(coursedir=coursedir, config=config)
        app.force = True
        app.create_assignment = True
        result = capture_log(app)
        if not result["success"]:
            raise RuntimeError(
                f"nbgrader generate_assignment {chapter} failed:\n"
                f"{result.get('log', '')}\n{result.get('error', '')}"
            )


def release(chapters: list[str] | None = None) -> None:
    """Regenerate the learner notebooks in ``notebooks/`` from ``solutions/``.

    Args:
        chapters: chapter ids such as ``"ch02_attention"``; ``None`` releases every chapter
            that has a source notebook.

    Raises:
        ValueError: a chapter id has no source notebook.
        RuntimeError: nbgrader failed on a chapter.
    """
    available = chapters_in(ROOT)
    chosen = available if chapters is None else _check_chapters(chapters, available)
    generate(chosen, ROOT)
    register_assignments(ROOT)


def register_assignments(
    root: str | os.PathLike = ROOT, course_dir: str | os.PathLike | None = None
) -> None:
    """Make sure the gradebook lists all ten chapters as assignments (idempotent)."""
    from nbgrader.api import Gradebook

    ensure_alembic_on_path()
    config = course_config(root, course_dir)
    with Gradebook(config.CourseDirectory.db_url, COURSE_ID) as gradebook:
        for chapter in CHAPTERS:
            gradebook.update_or_create_assignment(chapter)
