"""nbgrader's own commands, and the formgrader's buttons, take the course's path.

nbgrader lets a course replace parts of its commands through configuration. The course's
configuration (:func:`autograder.course.course_config`, which ``autograder/nbgrader_config.py``
and the instructor mode's Jupyter configuration load) names the classes of this module there,
so that there is one way to grade, whichever command or button starts it:

============================================  ===========================================
``nbgrader autograde``, formgrader Autograde  :class:`SandboxedAutograde`: the course's
                                              grading (:func:`~autograder.grade.learner.
                                              grade_submission`: restore, sandbox, checks
                                              outside the kernel, flags, then copy
                                              detection of the chapter's class); nbgrader's own
                                              preprocessors, which run the learner's code
                                              with the grader's environment, never run
``nbgrader generate_feedback``, its button    :class:`LearnersView`: no hidden tests and no
                                              tracebacks of graded cells on any page, whatever
                                              wrote the autograded notebook
``nbgrader export``                           :class:`GradesExport`: the course's grades CSV
                                              with flags (``python -m autograder export``)
``nbgrader collect``, formgrader Collect      :class:`CourseCollect`: the course's collect,
                                              which judges every submission on its own
``nbgrader release_assignment``, formgrader   :class:`CourseRelease`: ``python -m autograder
Release                                       release CHAPTER --exchange DIR``: notebooks/
                                              regenerated, the chapter and its points
                                              recorded in the gradebook, then released
``nbgrader release_feedback``, formgrader     :class:`CourseReleaseFeedback`: the course's
Release Feedback                              release, which names the learners it released
                                              and fails when there was nothing to release
``nbgrader zip_collect``                      :class:`ZipCollectRefused`: stops, and names
                                              ``python -m autograder collect``
============================================  ===========================================

Every kernel nbgrader still starts (``nbgrader validate``, the Validate button) comes from
:class:`autograder.kernels.KernelWithoutSecret`: none sees the grader's ``AUTOGRADER_SECRET``.
Grading refuses to start without a class's secret that learners cannot read
(:func:`autograder.grade.secret.require_grading_secret`), as the course's own command does.
The Formgrader's pages themselves are :mod:`autograder.nbgrader_hooks.formgrader`.

Release, collect, autograde and release feedback write where only root may on the class server
(the exchange's folders, the sandbox's cgroup, the secret): each is one function of
:mod:`autograder.nbgrader_hooks.steps`, run in this process as root, or asked of the class's
grading service (:mod:`autograder.hub.grading`) by an instructor's or a teaching assistant's
server, which runs as their own account.
"""

from __future__ import annotations

import csv
import io
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nbconvert.exporters import NotebookExporter
from nbconvert.preprocessors import Preprocessor
from nbgrader.converters import Autograde
from nbgrader.converters.base import NbGraderException
from nbgrader.exchange.default import (
    ExchangeCollect,
    ExchangeReleaseAssignment,
    ExchangeReleaseFeedback,
)
from nbgrader.plugins import ExportPlugin, ExtractorPlugin
from traitlets import Bool

from autograder.course import Course
from autograder.grade.learner import strip_for_learners
from autograder.grade.secret import SecretError
from autograder.hub.classroom import delegated, grading_socket
from autograder.hub.grading import ask
from autograder.nbgrader_hooks.steps import (
    StepError,
    collect_chapter,
    grade_one,
    prepare_grading,
    release_chapter,
    release_chapter_feedback,
)
from autograder.sandbox.launcher import GraderFaultError
from autograder.steps.feedback import hide_hidden_checks
from autograder.steps.report import export_csv


def course_of(coursedir: Any) -> Course:
    """The course of an nbgrader ``CourseDirectory`` configured by
    :func:`~autograder.course.course_config` (whose step folders share one course folder)."""
    root = Path(coursedir.root)
    return Course(root, (root / coursedir.submitted_directory).parent).resolved()


class SandboxedAutograde(NotebookExporter):
    """``Autograde.exporter_class``: nbgrader's ``autograde`` grades through the course.

    nbgrader converts each submitted notebook twice: once from ``submitted/`` ("sanitizing"),
    then the result again in ``autograded/``. The first pass grades the submission as
    ``python -m autograder autograde`` does (:func:`~autograder.nbgrader_hooks.steps.grade_one`:
    the autograded notebook, the gradebook's scores and the flags, all stored, then the
    chapter's copy detection) and hands nbgrader the autograded notebook; the second pass has
    nothing left to do (the course's configuration gives nbgrader's preprocessor lists no
    entries). Not as root on the class server, the class's grading service grades instead
    (:mod:`autograder.hub.grading`), and its log joins nbgrader's.

    Before any learner, it refuses to grade without a class's secret that learners cannot read
    (the log says why and how to set one), and records the chapter in the gradebook if no
    release did, as ``python -m autograder autograde`` does. A grader that cannot grade stops
    the command with an error (exit status 1) and records nothing: checked before nbgrader
    enters anyone in the gradebook, and again where a learner's runs fail.
    """

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)

        converter = self.parent
        if not isinstance(converter, Autograde):
            return  # not grading: nothing to check
        if delegated():
            self.log.info("grading through the class's grading service at %s", grading_socket())
            return  # the service checks the secret and the sandbox at each request
        # nbgrader builds its exporter before it records anyone in the gradebook: a secret or
        # a sandbox that fails stops the command here, with nothing written.
        try:
            prepare_grading(course_of(converter.coursedir), converter.coursedir.assignment_id,
                            self.log)
        except SecretError as exc:
            self.log.error("%s", exc)
            raise NbGraderException(str(exc)) from exc
        except GraderFaultError as exc:
            self._stop(str(exc))

    def _stop(self, message: str) -> None:
        """End the whole nbgrader command, not only this learner's conversion, with
        ``message``: nbgrader's ``fail`` logs it and exits with status 1 (the formgrader
        shows it as the Autograde button's error)."""
        if hasattr(self.parent, "fail"):
            self.parent.fail("%s", message)
        raise GraderFaultError(message)

    def from_filename(self, filename: str, resources: dict | None = None,
                      **kw: Any) -> tuple[str, dict]:
        converter = self.parent
        if resources is None or not getattr(converter, "_sanitizing", False):
            return super().from_filename(filename, resources, **kw)

        course = course_of(converter.coursedir)
        student = resources["nbgrader"]["student"]
        chapter = resources["nbgrader"]["assignment"]
        try:
            # Graded in this process, as one learner of `autograde --jobs 1` would be on its
            # worker, or by the class's grading service.
            _as_root("autograde", self.log, lambda: grade_one(course, student, chapter, self.log),
                     chapter=chapter, students=[student])
        except StepError as exc:
            self._stop(str(exc))
        return super().from_filename(str(course.notebook("autograded", student, chapter)),
                                     resources, **kw)


def _as_root(op: str, log: logging.Logger, here: Callable[[], None], **fields: Any) -> None:
    """``here()`` in this process, or, not as root on the class server, the grading service's
    ``op`` with ``fields`` (:func:`autograder.hub.grading.ask`).

    Raises:
        StepError: the step failed or was refused.
    """
    if delegated():
        ask(op, log, **fields)
    else:
        here()


class LearnersView(Preprocessor):
    """A ``GenerateFeedback`` preprocessor: the notebook as learners may see it, without
    hidden tests and without the tracebacks of graded cells
    (:func:`~autograder.grade.learner.strip_for_learners`), and without what a hidden check
    tried (:func:`~autograder.steps.feedback.hide_hidden_checks`).

    A plain nbconvert preprocessor, not nbgrader's: nbgrader's base class redeclares
    ``display_data_priority`` without the ``config`` tag, so each feedback run warned that the
    HTML exporter's setting of it was "not recognized by LearnersView"."""

    enabled = Bool(True, help="Whether the feedback is stripped (always).").tag(config=True)

    def preprocess(self, nb: Any, resources: dict) -> tuple[Any, dict]:
        strip_for_learners(nb)
        hide_hidden_checks(nb)
        return nb, resources


class GradesExport(ExportPlugin):
    """``ExportApp.plugin_class``: ``nbgrader export`` writes the course's grades CSV
    (:func:`~autograder.steps.report.export_csv`, flags and reasons included) to
    ``--to``, or to the course folder's ``grades.csv``; ``--student`` and ``--assignment``
    keep only those rows."""

    def export(self, gradebook: Any) -> None:
        course = course_of(self.parent.coursedir)
        rows = list(csv.reader(io.StringIO(export_csv(course))))
        students, chapters = set(map(str, self.student)), set(map(str, self.assignment))
        kept = [rows[0]] + [row for row in rows[1:]
                            if (not students or row[0] in students)
                            and (not chapters or row[1] in chapters)]
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows(kept)
        destination = Path(self.to) if self.to else course.grades_csv
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_text(buffer.getvalue(), encoding="utf-8", newline="")
        self.log.info("Wrote %d row(s) with flags to %s", len(kept) - 1, destination)


class CourseStep:
    """What the course's collect, release and release of feedback share: ``start()`` runs the
    course's step of the chapter (:meth:`step`), in this process as root or through the class's
    grading service, and a step that fails or is refused fails nbgrader's command with its
    reason (the Formgrader shows it as the button's error)."""

    op = ""  # the grading service's name of the step (autograder.hub.grading.STEPS)

    def step(self, course: Course, chapter: str) -> tuple[Callable[[], None], dict[str, Any]]:
        """The step run here, and the fields of the request to the grading service beside
        the chapter."""
        raise NotImplementedError

    def start(self) -> None:
        course, chapter = course_of(self.coursedir), self.coursedir.assignment_id
        here, fields = self.step(course, chapter)
        try:
            _as_root(self.op, self.log, here, chapter=chapter, **fields)
        except StepError as exc:
            self.fail(str(exc))


class CourseCollect(CourseStep, ExchangeCollect):
    """``ExchangeFactory.collect``: ``nbgrader collect`` and the formgrader's Collect button
    run the course's collect (:func:`~autograder.collect.sources.collect`) on the exchange:
    every submission judged on its own, refusals and flags reported. The learners collected
    enter the gradebook under their names, so the formgrader lists them by name at once."""

    op = "collect"

    def step(self, course: Course, chapter: str) -> tuple[Callable[[], None], dict[str, Any]]:
        return lambda: collect_chapter(course, chapter, self.root, self.log), {}


class ZipCollectRefused(ExtractorPlugin):
    """``ZipCollectApp.extractor_plugin``: ``nbgrader zip_collect`` would copy files into the
    course without the course's checks, so it stops at once and names the command to use."""

    def extract(self, archive_path: str, extracted_path: str) -> None:
        self.parent.fail("nbgrader zip_collect is not how this course collects: it would copy "
                         "the files without judging them. Run `python -m autograder collect "
                         f"{archive_path}/<export>.zip` from the repository root instead (a "
                         "folder of learner folders works too)")


class CourseRelease(CourseStep, ExchangeReleaseAssignment):
    """``ExchangeFactory.release_assignment``: ``nbgrader release_assignment`` and the
    formgrader's Release button run ``python -m autograder release CHAPTER --exchange DIR``
    (:func:`~autograder.steps.release.release`): the chapter is generated from solutions/,
    recorded with its points in the gradebook, then copied into the exchange."""

    op = "release"

    def step(self, course: Course, chapter: str) -> tuple[Callable[[], None], dict[str, Any]]:
        return lambda: release_chapter(course, chapter, self.root, self.log), {}


class CourseReleaseFeedback(CourseStep, ExchangeReleaseFeedback):
    """``ExchangeFactory.release_feedback``: ``nbgrader release_feedback`` and the formgrader's
    Release Feedback buttons run the course's release
    (:func:`~autograder.steps.exchange.release_feedback`). The log names every learner whose
    page was released; with none, the run fails and says why, instead of reporting success."""

    op = "release_feedback"

    def step(self, course: Course, chapter: str) -> tuple[Callable[[], None], dict[str, Any]]:
        student = self.coursedir.student_id
        students = None if student in ("", "*") else [student]
        return (lambda: release_chapter_feedback(course, chapter, self.root, students,
                                                 self.log),
                {"students": students})
