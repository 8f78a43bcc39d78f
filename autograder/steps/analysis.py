"""Item analysis: what a chapter's class got right, and which mistakes it made.

For each exercise of a graded chapter, from the gradebook (points), the graded notebooks
(the checks' messages) and the handed-in notebooks (when cells ran):

* the share of learners with full, partial and no points, the mean and the spread;
* the hints that fired, counted per hint: a check's message ends with ``Hint: <sentence>``
  when the learner's output shows a known mistake (softmax over the wrong axis, the mask
  inverted, no scaling). The sentence may name the inputs (an axis, a shape), which differ
  between learners and between the visible and hidden checks, so a hint is identified by
  its sentence with the numbers taken out (:func:`hint_id`), not by its text;
* hidden-only failures: the visible checks passed in the notebook, the hidden ones failed
  (right on the inputs the learner saw, wrong in general);
* the minutes learners spent, where their notebooks record when cells ran (JupyterLab's cell
  timing, ``execution`` metadata, or the ``ExecuteTime`` of the execute-time extension): from
  the first to the last run of the exercise's answer and test cells.

:mod:`autograder.steps.analysis_page` writes it as ``<course>/analysis/<chapter>.html`` and
``.csv``.
"""

from __future__ import annotations

import hashlib
import re
import statistics
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from autograder.course import Course
from autograder.exercises.registry import Exercise, all_exercises
from autograder.grade.gradebook import read_cell_scores, read_scores
from autograder.notebook import exercise_ids, grade_id, graded_test_cells

HINT_MARKER = " Hint: "
VISIBLE_PASS = "(visible checks): all passed"
HIDDEN_FAILED = "(hidden checks) failed"
# Numbers in a hint's sentence (an axis, a size, a tolerance), and the tuples they form.
NUMBER = re.compile(r"(?<![\w.-])[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?!\w|\.\d)")
NUMBERS_TUPLE = re.compile(r"\((?:\s*#\s*,)+\s*#?\s*\)")
# Where notebooks record when a cell ran: JupyterLab, then the execute-time extension.
TIMING_KEYS = (("execution", ("iopub.execute_input", "shell.execute_reply")),
               ("ExecuteTime", ("start_time", "end_time")))


def hint_template(sentence: str) -> str:
    """The hint's sentence with its numbers as ``#`` (a tuple of them as ``(#, ...)``): the
    same for every learner who made that mistake, whatever inputs showed it."""
    text = NUMBER.sub("#", " ".join(sentence.split()))
    return NUMBERS_TUPLE.sub("(#, ...)", text).rstrip(". ")


def hint_id(sentence: str) -> str:
    """A short, stable id of the hint that produced ``sentence``: 10 hex digits of the hash of
    its :func:`hint_template`."""
    return hashlib.sha256(hint_template(sentence).encode()).hexdigest()[:10]


def hint_of(message: str) -> str | None:
    """The hint's sentence of a check's message, or None when it has none."""
    _, marker, hint = message.partition(HINT_MARKER)
    if not marker or not hint.strip():
        return None
    return hint.strip()


@dataclass
class ExerciseAnalysis:
    """One exercise across the class.

    Attributes:
        scores: each learner's points, by learner.
        hints: hint id -> learners whose failure gave that hint.
        hint_texts: hint id -> its template (:func:`hint_template`).
        hidden_only: learners whose visible checks passed and hidden checks failed.
        minutes: learner -> minutes spent, for learners whose notebook shows it.
    """

    exercise: Exercise
    scores: dict[str, float] = field(default_factory=dict)
    hints: dict[str, list[str]] = field(default_factory=dict)
    hint_texts: dict[str, str] = field(default_factory=dict)
    hidden_only: list[str] = field(default_factory=list)
    minutes: dict[str, float] = field(default_factory=dict)

    def shares(self) -> tuple[float, float, float]:
        """The shares of learners with full, partial and no points."""
        values = list(self.scores.values())
        if not values:
            return 0.0, 0.0, 0.0
        full = sum(v >= self.exercise.points for v in values)
        none = sum(v <= 0 for v in values)
        return full / len(values), (len(values) - full - none) / len(values), none / len(values)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.scores.values()) if self.scores else 0.0

    @property
    def spread(self) -> float:
        """The population standard deviation of the points."""
        return statistics.pstdev(self.scores.values()) if self.scores else 0.0

    @property
    def lost(self) -> float:
        """The share of the points the class lost: its difficulty as the class found it."""
        return 1.0 - self.mean / self.exercise.points if self.exercise.points else 0.0

    def hint_counts(self) -> list[tuple[str, int]]:
        """``(hint id, learners)``, the most frequent first."""
        return sorted(((h, len(who)) for h, who in self.hints.items()),
                      key=lambda item: (-item[1], self.hint_texts[item[0]]))


@dataclass
class ChapterAnalysis:
    """A chapter across the class: its exercises, and each learner's total."""

    chapter: str
    exercises: list[ExerciseAnalysis]
    totals: dict[str, float]
    max_score: float

    def ranked(self) -> list[ExerciseAnalysis]:
        """The exercises, the one the class lost most points on first."""
        return sorted(self.exercises, key=lambda e: (-e.lost, e.exercise.id))


def analyse(course: Course, chapter: str) -> ChapterAnalysis:
    """The item analysis of ``chapter``'s graded class.

    Raises:
        ValueError: nothing of ``chapter`` is graded.
    """
    scores = [s for s in read_scores(course) if s.chapter == chapter]
    if not scores:
        raise ValueError(f"no graded submission of {chapter} in {course.folder}; grade it "
                         f"first (python -m autograder autograde {chapter})")
    source = nbformat.read(course.source_notebook(chapter), as_version=4)
    cells = exercise_ids(source)
    by_id = {e.id: e for e in all_exercises() if e.chapter == chapter}
    items = {ex: ExerciseAnalysis(by_id[ex]) for ex in cells.values() if ex in by_id}
    points = read_cell_scores(course, chapter)
    for score in scores:
        student = score.student
        for cell_id, exercise in cells.items():
            if exercise in items:
                items[exercise].scores[student] = points.get(student, {}).get(cell_id,
                                                                              (0.0, 0.0))[0]
        _read_messages(course, student, chapter, cells, items)
        _read_minutes(course, student, chapter, cells, items)
    return ChapterAnalysis(chapter, list(items.values()),
                           {s.student: s.score for s in scores},
                           max(s.max_score for s in scores))


def _read(path: Path) -> NotebookNode | None:
    try:
        return nbformat.read(path, as_version=4)
    except Exception:  # an unreadable submission shows nothing: its points say the rest
        return None


def cell_findings(cell: NotebookNode) -> tuple[str | None, bool]:
    """What a graded test cell's outputs show: the hint's sentence of its failure (or None),
    and whether only the hidden checks failed (the visible ones printed their pass)."""
    outputs = cell.get("outputs", [])
    errors = [o.get("evalue", "") for o in outputs if o.output_type == "error"]
    if not errors:
        return None, False
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    hidden_only = VISIBLE_PASS in printed and any(HIDDEN_FAILED in e for e in errors)
    return next((h for h in map(hint_of, errors) if h), None), hidden_only


def _read_messages(course: Course, student: str, chapter: str, cells: dict[str, str],
                   items: dict[str, ExerciseAnalysis]) -> None:
    """The hints and hidden-only failures in ``student``'s graded notebook."""
    graded = _read(course.notebook("autograded", student, chapter))
    if graded is None:
        return
    for cell in graded_test_cells(graded):
        item = items.get(cells.get(grade_id(cell) or "", ""))
        if item is None:
            continue
        hint, hidden_only = cell_findings(cell)
        if hidden_only:
            item.hidden_only.append(student)
        if hint is not None:
            key = hint_id(hint)
            item.hint_texts.setdefault(key, hint_template(hint))
            item.hints.setdefault(key, []).append(student)


def _times(cell: NotebookNode) -> list[datetime]:
    """When the notebook says ``cell`` ran (start and end), in UTC; empty if it does not."""
    found = []
    for key, names in TIMING_KEYS:
        record = cell.get("metadata", {}).get(key) or {}
        for name in names:
            try:
                when = datetime.fromisoformat(str(record[name]).replace("Z", "+00:00"))
            except (KeyError, ValueError):
                continue
            found.append(when if when.tzinfo else when.replace(tzinfo=UTC))
    return found


def minutes_spent(notebook: NotebookNode, cells: dict[str, str]) -> dict[str, float]:
    """Minutes from the first to the last recorded run of each exercise's answer and test
    cells (``cells``: test cell grade id -> exercise id), for the exercises whose cells record
    two times or more."""
    answer_of = {test_id.removesuffix("_test") + "_solution": exercise
                 for test_id, exercise in cells.items()}
    runs: dict[str, list[datetime]] = {}
    for cell in notebook.cells:
        exercise = cells.get(grade_id(cell) or "") or answer_of.get(grade_id(cell) or "")
        if exercise is not None:
            runs.setdefault(exercise, []).extend(_times(cell))
    return {exercise: (max(times) - min(times)).total_seconds() / 60
            for exercise, times in runs.items() if len(times) >= 2}


def _read_minutes(course: Course, student: str, chapter: str, cells: dict[str, str],
                  items: dict[str, ExerciseAnalysis]) -> None:
    """The minutes ``student`` spent on each exercise, where the handed-in notebook shows it."""
    handed_in = _read(course.notebook("submitted", student, chapter))
    if handed_in is None:
        return
    for exercise, minutes in minutes_spent(handed_in, cells).items():
        if exercise in items:
            items[exercise].minutes[student] = minutes
