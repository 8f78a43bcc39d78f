"""What a class's learners see of the course's own code: the learner's view.

In a class (the class server of ``make hub``, or a learner image the course prepares), a
learner's JupyterLab, terminals and kernels see the folder that :func:`refresh_view` keeps,
``<course folder>/view/``, in place of the repository's ``autograder/`` and ``transformer_ref/``.
It holds only what the released chapters need to run:

* the building blocks their notebooks import, and what those import (one selection with the
  grader's allow-lists: :mod:`autograder.exercises.reach`), with the data files installed in
  their packages (:func:`package_data`);
* the learner-facing part of ``autograder``: ``check`` (which asks the class's checking
  service, :mod:`autograder.hub.checking`, for the visible checks), the self-check, the
  pytest plugin and the Jupyter configuration layers.

It never holds the answer of an exercise whose chapter is still open, in any form: its
reference, nor the course modules that compute the same answer another way (the registry's
``answered_by``: the PyTorch attention of chapter 7 answers chapter 2's NumPy attention). Such a
module is replaced by a stub whose import says why it is missing. It holds every reference of a
closed chapter that answers no open exercise. Nor does it hold the checks, the
sample class, the mutants, the tutorial-style code or ``solutions/``. A chapter is *released*
once it is in the exchange's outbound folder, and *closed* once its nbgrader due date has
passed: ``python -m autograder close ch02`` sets it to now, and the Formgrader's "Manage
Assignments" page edits it. From then on its references are part of the view.

A released chapter must not need an open chapter's reference to run; :func:`release_problems`
names each such need, and the class release refuses it (:func:`check_class_release`), naming
the chapters to close first and the command that closes them in this class.
"""

from __future__ import annotations

import filecmp
import json
import os
import shlex
import shutil
import tempfile
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import nbformat

from autograder.course import CHAPTERS, COURSE_ID, ROOT, VISIBLE_ANSWERS_FILE, Course
from autograder.deadlines import due_dates, extensions, sealed_for
from autograder.exercises.reach import (
    answer_modules,
    closure,
    module_file,
    notebook_modules,
    reference_module,
)
from autograder.exercises.registry import all_exercises

VIEW_FOLDER = "view"
# Beside it, the own view of each learner given an extension: view-of/<learner>.
LEARNER_VIEWS = "view-of"
# The learner-facing part of the course's own code: the notebook's check(), the self-check and
# its pytest plugin, the remote check, the Assignment List's submit, the configuration layers'
# imports and the kernel provisioner of a class server (each kernel in a cgroup of its own).
LEARNER_MODULES = (
    "autograder.exercises.registry",
    "autograder.exercises.checks",
    "autograder.learner.remote_check",
    "autograder.learner.selfcheck",
    "autograder.learner.pytest_plugin",
    "autograder.learner.submit",
    "autograder.course",
    "autograder.learner.kernel_limits",
)
# Files of the course that are not modules and that a learner's JupyterLab reads.
LEARNER_DATA = ("autograder/learner/jupyter/learner", "autograder/learner/jupyter/exchange",
                "autograder/learner/jupyter/README.md")


@dataclass(frozen=True)
class ChapterStates:
    """The chapters learners have (``released``), and those whose answers they may see
    (``closed``)."""

    released: frozenset[str]
    closed: frozenset[str]


def chapter_states(course: Course, exchange: str | os.PathLike | None,
                   now: datetime | None = None) -> ChapterStates:
    """The chapters in ``exchange``'s outbound folder, and those whose due date in the
    course's gradebook is at or before ``now`` (default: now)."""
    released = set()
    if exchange is not None:
        outbound = Path(exchange) / COURSE_ID / "outbound"
        released = {ch for ch in CHAPTERS if (outbound / ch).is_dir()}
    return ChapterStates(frozenset(released), frozenset(_closed(course, now)))


def _closed(course: Course, now: datetime | None) -> set[str]:
    now = (now or datetime.now(UTC)).astimezone(UTC)
    return {chapter for chapter, due in due_dates(course).items() if due <= now}


@dataclass(frozen=True)
class View:
    """The course modules of a learner's view (``modules``), the modules it holds as a stub
    because they hold answers of open chapters (``hidden``: module -> exercise ids), and the
    chapters whose answers it shows (``closed``), which its learners no longer submit."""

    modules: frozenset[str]
    hidden: dict[str, tuple[str, ...]]
    closed: frozenset[str] = frozenset()


def open_answers(states: ChapterStates) -> dict[str, tuple[str, ...]]:
    """Module -> the exercises of chapters not yet closed whose answer it computes: their
    reference, or the same answer in another form (``Exercise.answered_by``: chapter 7's
    PyTorch attention answers chapter 2's NumPy attention). A closed chapter's module that also
    answers an open exercise stays hidden, so a release that needs it is refused until that
    exercise's chapter closes too.

    Why refuse rather than show such a building block in another form: any form that works
    (compiled, obfuscated, behind a service) still computes the open answer when called, which
    is all a learner needs; only its absence seals it. And the refusal costs a class that works
    in order nothing: measured on this course, it only adds chapters 2 to 6 to what chapters 8
    to 11 need closed, and such a class closed them before it could release chapter 7 (which
    needs chapters 1, 2 and 4 to 6 closed; chapter 4 needed chapter 3). It refuses only the
    PyTorch chapters while the NumPy chapters they answer are open."""
    found: dict[str, list[str]] = {}
    for exercise in all_exercises():
        if exercise.chapter not in states.closed:
            for module in answer_modules(exercise):
                found.setdefault(module, []).append(exercise.id)
    return {module: tuple(ids) for module, ids in found.items()}


def withheld_answers(chapter: str, states: ChapterStates) -> dict[str, list[str]]:
    """The modules of ``chapter``'s answers that the view still withholds in ``states``
    (where ``chapter`` is closed), because they also compute the answer of an exercise still
    open: module -> the chapters of those exercises."""
    answers = open_answers(states)
    mine = {m for e in all_exercises() if e.chapter == chapter for m in answer_modules(e)}
    return {module: sorted({CHAPTERS_BY_PREFIX[e[:4]] for e in answers[module]})
            for module in sorted(mine & set(answers))}


def _chapter_roots(course: Course, chapter: str) -> set[str]:
    nb = nbformat.read(course.source_notebook(chapter), as_version=4)
    builders = {b.partition(":")[0] for e in all_exercises() if e.chapter == chapter
                for b in e.builders}
    return notebook_modules(nb) | builders


def plan_view(course: Course, states: ChapterStates) -> View:
    """The learner's view for ``states`` of ``course``'s chapters."""
    roots = set(LEARNER_MODULES)
    for chapter in sorted(states.released | states.closed):
        roots |= _chapter_roots(course, chapter)
    # A closed chapter's answers are shown, imported by a notebook or not.
    roots |= {reference_module(e) for e in all_exercises() if e.chapter in states.closed}
    answers = open_answers(states)
    # The packages of the stubs too: importing one must reach its message.
    packages = {p for m in (*roots, *answers) for p in _packages(m)}
    reached = closure(roots | packages)
    reached |= {p for m in reached for p in _packages(m)}
    # Every open answer gets its stub, reached or not: an import of it then says why it fails.
    return View(frozenset(reached - set(answers)), answers, frozenset(states.closed))


def release_problems(course: Course, chapter: str, states: ChapterStates) -> list[str]:
    """Why learners could not run ``chapter`` now: each course module its notebook imports
    (or that those import when loaded) that holds the answer of a chapter still open."""
    return [f"{chapter} imports {module}, the course's answer to {', '.join(ids)}"
            for module, ids in _open_needs(course, chapter, states).items()]


def _open_needs(course: Course, chapter: str, states: ChapterStates
                ) -> dict[str, tuple[str, ...]]:
    """Module -> open exercise ids, for each module ``chapter`` needs that holds them."""
    answers = open_answers(states)
    needed = closure(_chapter_roots(course, chapter), at_import=True)
    return {module: answers[module] for module in sorted(needed & set(answers))}


def chapters_to_close(course: Course, chapters: Iterable[str], states: ChapterStates
                      ) -> list[str]:
    """The open chapters whose answers the released ``chapters`` need, in course order."""
    ids = {e for chapter in chapters for held in _open_needs(course, chapter, states).values()
           for e in held}
    return [chapter for chapter in CHAPTERS if any(CHAPTERS_BY_PREFIX[e[:4]] == chapter
                                                   for e in ids)]


def _packages(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _stub(module: str, exercise_ids: tuple[str, ...]) -> str:
    chapters = sorted({CHAPTERS_BY_PREFIX[e.split(".")[0]] for e in exercise_ids})
    message = (f"{module} holds the course's answer to {', '.join(exercise_ids)}, and "
               f"{', '.join(chapters)} is still open for you: it becomes available once your "
               "deadline for it has passed. Until then, use your own code.")
    return (f'"""Not available yet: {message}"""\n\nraise ImportError({message!r})\n')


CHAPTERS_BY_PREFIX = {chapter[:4]: chapter for chapter in CHAPTERS}


def write_view(view: View, folder: Path, now: datetime | None = None) -> bool:
    """Make ``folder`` hold ``view``, in place (a learner's running server keeps seeing it);
    return whether anything changed. Files are world-readable, folders world-listable. The
    modules and the Jupyter layers come from this installation of the course, which the view
    stands in for. Its list of the chapters whose answers it shows keeps, for each, the time
    it first showed them (``now``, default: now, for a chapter new to it)."""
    with tempfile.TemporaryDirectory(prefix="autograder-view-") as scratch:
        staged = Path(scratch)
        for module in view.modules:
            _stage(staged, module, module_file(module).read_bytes())
        for module, ids in view.hidden.items():
            _stage(staged, module, _stub(module, ids).encode())
        for relative, path in package_data(view.modules).items():
            _write(staged / relative, path.read_bytes())
        for data in LEARNER_DATA:
            source = ROOT / data
            if source.is_dir():
                shutil.copytree(source, staged / data, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("__pycache__"))
            elif source.is_file():
                _write(staged / data, source.read_bytes())
        since = {chapter: shown for chapter, shown in _shown_since(folder).items()
                 if chapter in view.closed}
        for chapter in view.closed:
            since.setdefault(chapter, (now or datetime.now(UTC)).astimezone(UTC).isoformat())
        _write(staged / VISIBLE_ANSWERS_FILE, json.dumps(
            {"chapters": sorted(view.closed), "since": dict(sorted(since.items()))},
            indent=1).encode())
        _write(staged / "view.json", json.dumps(
            {"hidden": {m: list(ids) for m, ids in sorted(view.hidden.items())}},
            indent=1).encode())
        return _synchronise(staged, folder)


def package_data(modules: Iterable[str]) -> dict[str, Path]:
    """The data files this installation of the course keeps in the packages among ``modules``
    (``[tool.setuptools.package-data]`` of its ``pyproject.toml``, such as the language model
    chapter 11 loads): path in the view -> the file."""
    pyproject = ROOT / "pyproject.toml"
    if not pyproject.is_file():
        return {}
    settings = tomllib.loads(pyproject.read_text()).get("tool", {}).get("setuptools", {})
    found: dict[str, Path] = {}
    held = set(modules)
    for package, patterns in settings.get("package-data", {}).items():
        if package not in held:
            continue
        folder = module_file(package).parent
        for pattern in patterns:
            for path in sorted(folder.glob(pattern)):
                if path.is_file():
                    relative = Path(*package.split(".")) / path.relative_to(folder)
                    found[relative.as_posix()] = path
    return found


def _stage(staged: Path, module: str, text: bytes) -> None:
    path = staged.joinpath(*module.split("."))
    if module_file(module).name == "__init__.py":
        path = path / "__init__.py"
    else:
        path = path.with_suffix(".py")
    _write(path, text)


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _synchronise(staged: Path, folder: Path) -> bool:
    """Copy what differs from ``staged`` into ``folder`` file by file (each replaced in one
    step), and remove from ``folder`` what ``staged`` lacks."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    changed = False
    wanted = {p.relative_to(staged) for p in staged.rglob("*")}
    for relative in sorted(wanted):
        source, target = staged / relative, folder / relative
        if source.is_dir():
            target.mkdir(exist_ok=True)
            target.chmod(0o755)
        elif not target.is_file() or not filecmp.cmp(source, target, shallow=False):
            # A name of its own: the class server's service and an instructor's command may
            # bring the view up to date at the same time.
            fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
            os.close(fd)
            shutil.copyfile(source, temporary)
            os.chmod(temporary, 0o644)
            os.replace(temporary, target)
            changed = True
    for path in sorted(folder.rglob("*"), reverse=True):
        # (A file whose name starts with "." is another writer's copy on its way in.)
        if path.relative_to(folder) not in wanted and not path.name.startswith("."):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            changed = True
    return changed


def _shown_since(folder: Path) -> dict[str, str]:
    """Chapter -> when the view in ``folder`` first showed its answers (ISO time); empty for a
    view never written, or written before it kept the times."""
    try:
        return dict(json.loads((folder / VISIBLE_ANSWERS_FILE).read_text()).get("since", {}))
    except (OSError, ValueError, AttributeError):
        return {}


def answers_shown_since(course: Course, chapter: str, learner: str) -> datetime | None:
    """When ``learner``'s view of the class first showed ``chapter``'s answers; None when it
    never did (no class server's view, or the chapter not closed for them yet)."""
    shown = _shown_since(view_folder(course, learner)).get(chapter)
    return datetime.fromisoformat(shown) if shown else None


def view_folder(course: Course, learner: str | None = None) -> Path:
    """``<course folder>/view``: the learners' view of a class; for a ``learner`` who was
    ever given an extension, their own, ``<course folder>/view-of/<learner>``."""
    if learner is not None and any(who == learner for _, who in extensions(course)):
        return course.folder / LEARNER_VIEWS / learner
    return course.folder / VIEW_FOLDER


def refresh_view(course: Course, exchange: str | os.PathLike | None,
                 now: datetime | None = None) -> bool:
    """Bring the class's view, and the own view of each learner ever given an extension, up to
    date with the chapters' states; whether any changed. A chapter closed for the class stays
    open in the view of a learner whose extension is not over."""
    states = chapter_states(course, exchange, now)
    changed = write_view(plan_view(course, states), view_folder(course), now)
    sealed = sealed_for(course, now)
    for learner in sorted({who for _, who in extensions(course)}):
        own = ChapterStates(states.released, states.closed - sealed.get(learner, set()))
        changed |= write_view(plan_view(course, own), view_folder(course, learner), now)
    return changed


def check_class_release(course: Course, exchange: str | os.PathLike,
                        chapters: list[str]) -> None:
    """Refuse to release ``chapters`` to a class whose learners could not run them yet.

    Raises:
        ValueError: a chapter imports the answer of a chapter that is still open; the
            message names, in a few lines, the chapters to close first and the command that
            closes them in this class.
    """
    states = chapter_states(course, exchange)
    states = ChapterStates(states.released | set(chapters), states.closed)
    blocked = [c for c in chapters if _open_needs(course, c, states)]
    if not blocked:
        return
    first = chapters_to_close(course, blocked, states)
    where = ([] if course.root == ROOT else ["--root", str(course.root)]) + [
        "--course-dir", str(course.folder), "--exchange", str(exchange)]
    raise ValueError(
        f"Not released: {', '.join(blocked)} needs course code that holds the answers of "
        f"{', '.join(first)}, still open in this class.\n"
        f"Close {'it' if len(first) == 1 else 'them'} first (or set "
        f"{'its due date' if len(first) == 1 else 'their due dates'} in the Formgrader's Manage "
        f"Assignments), then release again:\n"
        f"    {shlex.join(['python', '-m', 'autograder', 'close', *first, *where])}")
