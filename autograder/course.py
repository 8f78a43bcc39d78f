"""The nbgrader course: its configuration, and where each of its files lives.

Layout (nbgrader's names on the left; :class:`Course` turns them into paths):

    source      solutions/<chapter>/<chapter>.ipynb       instructor notebooks, committed
    release     notebooks/<chapter>/<chapter>.ipynb       learner notebooks, generated, committed
    submitted   autograder/course/submitted/<student>/<chapter>/     not committed
    autograded  autograder/course/autograded/<student>/<chapter>/    not committed
    feedback    autograder/course/feedback/<student>/<chapter>/      not committed
    flags       autograder/course/flags/<student>/<chapter>.json     not committed
    lms ids     autograder/course/lms_ids.csv                        not committed
    analysis    autograder/course/analysis/<chapter>.html, .csv      not committed
    deadlines   autograder/course/deadlines.json                     not committed
    gradebook   autograder/course/gradebook.db                       not committed

Plain nbgrader commands pick this configuration up when they run from the ``autograder/``
folder (``autograder/nbgrader_config.py`` loads :func:`course_config`)::

    cd autograder
    nbgrader generate_assignment ch02_attention --force
    nbgrader autograde ch02_attention
    nbgrader generate_feedback ch02_attention
    nbgrader export

The release step itself (``python -m autograder release``) is :mod:`autograder.steps.release`.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from traitlets.config import Config

from autograder.exercises.registry import CHAPTERS as CHAPTER_IDS

ROOT = Path(__file__).resolve().parents[1]
# The course folder of a course root, unless another is named (``--course-dir``).
COURSE_FOLDER = Path("autograder") / "course"
# On the class server, the course root and folder a staff member's server serves: their
# terminals' commands act on the class, not on this repository's own course.
COURSE_ROOT_ENV, COURSE_DIR_ENV = "TRANSFORMER_COURSE_ROOT", "TRANSFORMER_COURSE_DIR"
COURSE_ID = "build-the-transformer"
SOURCE_DIRECTORY = "solutions"
RELEASE_DIRECTORY = "notebooks"
# nbgrader's step folders inside the course folder, each ``<step>/<student>/<chapter>/``.
STEPS = ("submitted", "autograded", "feedback")
# Beside each notebook of a step folder: when it was handed in (written by collect, in
# nbgrader's format), and nbgrader's submission secret, after which nbgrader names the
# learner's feedback in the exchange.
TIMESTAMP_FILE = "timestamp.txt"
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f %Z"
SECRET_FILE = "submission_secret.txt"
# In a class's view of the course (autograder/steps/view.py): the chapters whose answers it
# shows, which the learner's Assignment List no longer submits (autograder/learner/submit.py).
VISIBLE_ANSWERS_FILE = Path("autograder") / "learner" / "answers_visible.json"

# The ten chapter ids (nbgrader assignments), in course order.
CHAPTERS: tuple[str, ...] = tuple(CHAPTER_IDS.values())

# Seconds one notebook cell may run while autograding before the kernel is interrupted.
CELL_TIMEOUT = 120
# Seconds a kernel may take to start, and to shut down before it is killed.
KERNEL_STARTUP_TIMEOUT = 60
KERNEL_SHUTDOWN_WAIT = 5

# Files that never travel from solutions/ into a release or a submission.
IGNORED_FILES = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", ".DS_Store", "*~"]


@dataclass(frozen=True)
class Course:
    """Where one course's files live.

    Attributes:
        root: the folder that holds ``solutions/`` and ``notebooks/`` (the repository root).
        folder: nbgrader's course folder: the step folders (:data:`STEPS`), ``flags/``,
            ``gradebook.db`` and ``grades.csv``.
    """

    root: Path
    folder: Path

    @classmethod
    def of(cls, root: str | os.PathLike, course_dir: str | os.PathLike | None = None) -> Course:
        """The course at ``root`` (:data:`ROOT` for this repository's own) whose course folder
        is ``course_dir`` (default: ``<root>/autograder/course``). Paths are taken as given;
        :meth:`resolved` makes them absolute."""
        root = Path(root)
        return cls(root, root / COURSE_FOLDER if course_dir is None else Path(course_dir))

    def resolved(self) -> Course:
        """The same course with absolute paths, symbolic links resolved."""
        return Course(self.root.resolve(), self.folder.resolve())

    def config(self) -> Config:
        """The nbgrader configuration of this course; see :func:`course_config`."""
        return course_config(self.root, self.folder)

    # ---- the instructor's and the learners' notebooks, under the root

    def source_dir(self, chapter: str) -> Path:
        """``<root>/solutions/<chapter>``: the nbgrader source of a chapter."""
        return self.root / SOURCE_DIRECTORY / chapter

    def source_notebook(self, chapter: str) -> Path:
        return self.source_dir(chapter) / f"{chapter}.ipynb"

    def release_dir(self, chapter: str) -> Path:
        """``<root>/notebooks/<chapter>``: what learners receive."""
        return self.root / RELEASE_DIRECTORY / chapter

    def release_notebook(self, chapter: str) -> Path:
        return self.release_dir(chapter) / f"{chapter}.ipynb"

    # ---- one learner's files, under the course folder

    def step_folder(self, step: str) -> Path:
        """``<folder>/<step>``, step one of :data:`STEPS`.

        Raises:
            ValueError: an unknown step.
        """
        if step not in STEPS:
            raise ValueError(f"step must be one of {STEPS}, got {step!r}")
        return self.folder / step

    def step_dir(self, step: str, student: str, chapter: str) -> Path:
        """``<folder>/<step>/<student>/<chapter>``."""
        return self.step_folder(step) / student / chapter

    def notebook(self, step: str, student: str, chapter: str) -> Path:
        """``<folder>/<step>/<student>/<chapter>/<chapter>.ipynb``."""
        return self.step_dir(step, student, chapter) / f"{chapter}.ipynb"

    def students(self, step: str, chapter: str) -> list[str]:
        """Students with a folder for ``chapter`` in ``step``, sorted."""
        return sorted(p.parent.name for p in self.step_folder(step).glob(f"*/{chapter}")
                      if p.is_dir())

    def flags_file(self, student: str, chapter: str) -> Path:
        """``<folder>/flags/<student>/<chapter>.json`` (see :mod:`autograder.flags`)."""
        return self.folder / "flags" / student / f"{chapter}.json"

    @property
    def deadlines_file(self) -> Path:
        """``<folder>/deadlines.json``: extensions and late policies (see
        :mod:`autograder.deadlines`)."""
        return self.folder / "deadlines.json"

    @property
    def gradebook(self) -> Path:
        return self.folder / "gradebook.db"

    @property
    def db_url(self) -> str:
        """The gradebook's SQLAlchemy address, as nbgrader opens it (an absolute path)."""
        return f"sqlite:///{self.resolved().gradebook}"

    @property
    def grades_csv(self) -> Path:
        """Where ``python -m autograder export`` writes by default."""
        return self.folder / "grades.csv"

    @property
    def lms_ids_file(self) -> Path:
        """``<folder>/lms_ids.csv``: each learner's email and id in the learning platform
        (see :mod:`autograder.lms_ids`)."""
        return self.folder / "lms_ids.csv"

    def analysis_page(self, chapter: str) -> Path:
        """``<folder>/analysis/<chapter>.html``: the item analysis of a chapter's class (see
        :mod:`autograder.steps.analysis`); ``analysis_csv`` is its table."""
        return self.folder / "analysis" / f"{chapter}.html"

    def analysis_csv(self, chapter: str) -> Path:
        """``<folder>/analysis/<chapter>.csv``."""
        return self.folder / "analysis" / f"{chapter}.csv"


def course_config(root: str | os.PathLike, course_dir: str | os.PathLike | None = None) -> Config:
    """The nbgrader configuration of the course.

    Args:
        root: the folder that holds ``solutions/`` and ``notebooks/`` (the repository root).
        course_dir: where submissions, autograded copies, feedback and the gradebook go;
            ``<root>/autograder/course`` by default. Tests point both at a temporary folder.

    Returns:
        A traitlets ``Config`` for nbgrader's applications and Python API.
    """
    course = Course.of(root, course_dir).resolved()
    # nbgrader opens the gradebook inside this folder, so it has to exist.
    course.folder.mkdir(parents=True, exist_ok=True)
    c = Config()
    _where_files_live(c, course)
    _how_commands_run(c)
    return c


def _where_files_live(c: Config, course: Course) -> None:
    """The course's folders and gradebook, in nbgrader's terms."""

    def below_root(name: str) -> str:
        # nbgrader joins every step folder onto the root, so store them relative to it.
        return os.path.relpath(course.folder / name, course.root)

    c.CourseDirectory.course_id = COURSE_ID
    c.CourseDirectory.root = str(course.root)
    c.CourseDirectory.source_directory = SOURCE_DIRECTORY
    c.CourseDirectory.release_directory = RELEASE_DIRECTORY
    c.CourseDirectory.submitted_directory = below_root("submitted")
    c.CourseDirectory.autograded_directory = below_root("autograded")
    c.CourseDirectory.feedback_directory = below_root("feedback")
    c.CourseDirectory.solution_directory = below_root("solution")
    c.CourseDirectory.source_with_tests_directory = below_root("source_with_tests")
    c.CourseDirectory.db_url = course.db_url
    c.CourseDirectory.ignore = list(IGNORED_FILES)


def _how_commands_run(c: Config) -> None:
    """How nbgrader's commands and the Formgrader's buttons run for this course."""
    # Autograding runs learner code: bound every cell, and do not hang on a stuck kernel.
    c.Execute.timeout = CELL_TIMEOUT
    c.Execute.interrupt_on_timeout = True
    c.Execute.startup_timeout = KERNEL_STARTUP_TIMEOUT
    c.Execute.execute_retries = 0
    c.KernelManager.shutdown_wait_time = KERNEL_SHUTDOWN_WAIT

    # Feedback pages show learners' HTML: they are sanitised (autograder/steps/feedback.py).
    c.GenerateFeedback.exporter_class = "autograder.steps.feedback.FeedbackExporter"
    # Plain nbgrader commands and the formgrader's buttons take the course's path
    # (autograder/nbgrader_hooks/commands.py): sandboxed and verified grading with flags, only
    # with a class's secret, feedback without hidden tests, the CSV with flags, the course's
    # collect (zip_collect, which would bypass it, stops), the course's release (the gradebook
    # records the chapter), a feedback release that says what it released, and kernels that
    # never see the grader's secret. The classes are named, not imported: traitlets loads them
    # when a command starts, and learners' kernels import this module without the grader's
    # code (tests/pipeline/test_plain_nbgrader.py checks that each name loads its class).
    hooks = "autograder.nbgrader_hooks.commands"
    c.Autograde.exporter_class = f"{hooks}.SandboxedAutograde"
    c.Autograde.sanitize_preprocessors = []
    c.Autograde.autograde_preprocessors = []
    # Graded again later by the course's own command, which rewrites these files.
    c.Autograde.permissions = 644
    c.GenerateFeedback.preprocessors = ["nbgrader.preprocessors.GetGrades",
                                        f"{hooks}.LearnersView",
                                        "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor"]
    c.ExportApp.plugin_class = f"{hooks}.GradesExport"
    c.ExchangeFactory.collect = f"{hooks}.CourseCollect"
    c.ExchangeFactory.release_assignment = f"{hooks}.CourseRelease"
    c.ExchangeFactory.release_feedback = f"{hooks}.CourseReleaseFeedback"
    c.ZipCollectApp.extractor_plugin = f"{hooks}.ZipCollectRefused"
    c.Execute.kernel_manager_class = "autograder.kernels.KernelWithoutSecret"

    # Releases carry no outputs, execution counts or leftover cell metadata.
    c.ClearOutput.remove_metadata_fields = ["collapsed", "scrolled", "execution", "ExecuteTime"]


def ready_alembic() -> None:
    """Make nbgrader's use of alembic, its gradebook's migration tool, work and quick.

    nbgrader runs the ``alembic`` command to read the schema's version each time it creates a
    gradebook (a Python process of its own: seconds), and to upgrade an old gradebook. The
    version is read here instead, once per process, from nbgrader's migration scripts; and the
    command, installed next to this interpreter, is put on PATH for upgrades when the virtual
    environment is not activated.
    """
    if shutil.which("alembic") is None:
        scripts = str(Path(sys.executable).parent)
        os.environ["PATH"] = os.pathsep.join([scripts, os.environ.get("PATH", "")])
    import nbgrader.api  # loaded by whoever is about to open a gradebook

    nbgrader.api.get_alembic_version = alembic_head


@functools.cache
def alembic_head() -> str:
    """The schema version nbgrader stamps on a new gradebook: the head of its migrations."""
    import nbgrader
    from alembic.config import Config as AlembicConfig
    from alembic.script import ScriptDirectory

    config = AlembicConfig()
    config.set_main_option("script_location", str(Path(nbgrader.__file__).parent / "alembic"))
    return ScriptDirectory.from_config(config).get_current_head()
