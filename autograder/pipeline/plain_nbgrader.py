"""nbgrader's own commands, and the formgrader's buttons, take the course's path.

nbgrader lets a course replace parts of its commands through configuration. The course's
configuration (:func:`autograder.course.course_config`, which ``autograder/nbgrader_config.py``
and the instructor mode's Jupyter configuration load) names the classes of this module there,
so that there is one way to grade, whichever command or button starts it:

============================================  ===========================================
``nbgrader autograde``, formgrader Autograde  :class:`SandboxedAutograde`: the course's
                                              grading (:func:`~autograder.pipeline.grade.
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
``nbgrader zip_collect``                      :class:`ZipCollectRefused`: stops, and names
                                              ``python -m autograder collect``
============================================  ===========================================

Every kernel nbgrader still starts (``nbgrader validate``, the Validate button) comes from
:class:`autograder.kernels.KernelWithoutSecret`: none sees the grader's ``AUTOGRADER_SECRET``.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from nbconvert.exporters import NotebookExporter
from nbgrader.exchange.default import ExchangeCollect
from nbgrader.plugins import ExportPlugin, ExtractorPlugin
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.course import Course


def course_of(coursedir: Any) -> Course:
    """The course of an nbgrader ``CourseDirectory`` configured by
    :func:`~autograder.course.course_config` (whose step folders share one course folder)."""
    root = Path(coursedir.root)
    return Course(root, (root / coursedir.submitted_directory).parent).resolved()


class SandboxedAutograde(NotebookExporter):
    """``Autograde.exporter_class``: nbgrader's ``autograde`` grades through the course.

    nbgrader converts each submitted notebook twice: once from ``submitted/`` ("sanitizing"),
    then the result again in ``autograded/``. The first pass grades the submission as
    ``python -m autograder autograde`` does (the autograded notebook, the gradebook's scores
    and the flags, all stored) and hands nbgrader the autograded notebook; the second pass
    has nothing left to do (the course's configuration gives nbgrader's preprocessor lists
    no entries).
    """

    def from_filename(self, filename: str, resources: dict | None = None,
                      **kw: Any) -> tuple[str, dict]:
        converter = self.parent
        if resources is None or not getattr(converter, "_sanitizing", False):
            return super().from_filename(filename, resources, **kw)
        from autograder.pipeline.cluster import versions
        from autograder.pipeline.grade import _store, grade_safely, pack
        from autograder.sandbox.launcher import Limits

        course = course_of(converter.coursedir)
        student = resources["nbgrader"]["student"]
        chapter = resources["nbgrader"]["assignment"]
        self.log.info("Grading %s of %s in the sandbox", chapter, student)
        # Graded in this process, as one learner of `autograde --jobs 1` would be on its worker.
        outcome = grade_safely(pack(course, student, chapter, limits=Limits(),
                                    root=str(course.root),
                                    versions=versions(course.root, chapter)))
        summary = _store(outcome, course.config(), course)
        self.log.info("%s scored %g of %g autograded point(s)", student, summary.score,
                      summary.max_score)
        if summary.flags:
            self.log.warning("%s is flagged %s (the reasons are in %s)", student,
                             ", ".join(dict.fromkeys(f.code for f in summary.flags)),
                             course.flags_file(student, chapter))
        self._check_copies(course, chapter)
        return super().from_filename(str(course.notebook("autograded", student, chapter)),
                                     resources, **kw)


    def _check_copies(self, course: Course, chapter: str) -> None:
        """Copy detection of the chapter's class, with this learner graded: nbgrader grades
        one learner at a time (the Formgrader's button, one learner per click), so the class
        is checked again after each; the course's sources are read once per process."""
        from autograder.pipeline.similarity import after_grading

        after_grading([chapter], [], course)
        self.log.info("Copy detection of %s: %s", chapter,
                      course.folder / "similarity" / f"{chapter}.html")


class LearnersView(NbGraderPreprocessor):
    """A ``GenerateFeedback`` preprocessor: the notebook as learners may see it, without
    hidden tests and without the tracebacks of graded cells
    (:func:`~autograder.pipeline.grade.strip_for_learners`)."""

    def preprocess(self, nb: Any, resources: dict) -> tuple[Any, dict]:
        from autograder.pipeline.grade import strip_for_learners

        strip_for_learners(nb)
        return nb, resources


class GradesExport(ExportPlugin):
    """``ExportApp.plugin_class``: ``nbgrader export`` writes the course's grades CSV
    (:func:`~autograder.pipeline.report.export_csv`, flags and reasons included) to
    ``--to``, or to the course folder's ``grades.csv``; ``--student`` and ``--assignment``
    keep only those rows."""

    def export(self, gradebook: Any) -> None:
        from autograder.pipeline.report import export_csv

        course = course_of(self.parent.coursedir)
        rows = list(csv.reader(io.StringIO(export_csv(**course.as_kwargs()))))
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


class CourseCollect(ExchangeCollect):
    """``ExchangeFactory.collect``: ``nbgrader collect`` and the formgrader's Collect button
    run the course's collect (:func:`~autograder.pipeline.collect.collect`) on the exchange:
    every submission judged on its own, refusals and flags reported."""

    def start(self) -> None:
        from autograder.pipeline.collect import collect

        course = course_of(self.coursedir)
        report = collect(exchange=self.root, chapters=[self.coursedir.assignment_id],
                         **course.as_kwargs())
        for line in report.lines():
            log = self.log.warning if line.startswith(("REFUSED", "FLAG")) else self.log.info
            log("%s", line)


class ZipCollectRefused(ExtractorPlugin):
    """``ZipCollectApp.extractor_plugin``: ``nbgrader zip_collect`` would copy files into the
    course without the course's checks, so it stops at once and names the command to use."""

    def extract(self, archive_path: str, extracted_path: str) -> None:
        self.parent.fail("nbgrader zip_collect is not how this course collects: it would copy "
                         "the files without judging them. Run `python -m autograder collect "
                         f"{archive_path}/<export>.zip` from the repository root instead (a "
                         "folder of learner folders works too)")
