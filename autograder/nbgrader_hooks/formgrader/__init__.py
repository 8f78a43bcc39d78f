"""The course's Formgrader: nbgrader's, with what an instructor reads before trusting a score.

The instructor mode's Jupyter configuration loads this server extension instead of
``nbgrader.server_extensions.formgrader``. Every page and button is nbgrader's (its buttons
take the course's path through :mod:`autograder.nbgrader_hooks.commands`), except:

* **Manage Submissions** has a Flags column: each submission's flags with their reasons (the
  course's flag files, :mod:`autograder.flags`), and shows learners under the names the class
  knows (their ids when the gradebook has no other), never "None, None"
  (``templates/manage_submissions.tpl``, ``static/submissions.js``);
* **a submission's page** (manual grading) lists its flags above the notebook; its formulas
  are typeset by the MathJax that ``jupyter_server_mathjax`` serves from this server, so they
  render offline; and the learner's HTML and Markdown are sanitised, since the page runs in
  the instructor's server (:class:`FormgradeExporter`, ``templates/course_formgrade/``);
* **Manage Submissions** links to the chapter's class reports (:data:`REPORTS`, each
  ``<name>/<chapter>.html`` of the course folder, served to logged-in users only under
  ``formgrader/course/<name>/``): copy detection, where each graded learner and each copy flag
  links to the learner's pairs, and the item analysis; a report not yet written is named with
  the command that writes it (:class:`ManageSubmissions`);
* **Manage Submissions** puts nbgrader's three buttons of a row in one column, so that the
  table fits a 1280-pixel screen; a graded learner's Autograde reads "regrade"; **Autograde the
  chapter** grades every learner listed, one after the other through nbgrader's Autograde of
  one learner, with a progress bar and each outcome (``static/autograde_all.js``);
* **Manage Submissions** also lists the chapter's extensions and gives or takes back one
  learner's (``static/extensions.js``, :class:`Extensions`);
* **Release**, **Collect**, **Autograde** and **Release Feedback** answer with how the step
  ended first, then the rest of the log without nbgrader's debug records; a refusal of the
  course (the chapters to close first and the command) reads as a few lines, without a
  traceback (:func:`readable`);
* **Generate Feedback**, for a chapter or one learner, is the course's
  (:func:`autograder.steps.feedback.generate_feedback`): one page per learner, a learner
  whose page fails is flagged and named in the log, the others get theirs.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import ChoiceLoader, Environment, FileSystemLoader, PrefixLoader, pass_context
from jupyter_server.base.handlers import AuthenticatedFileHandler
from jupyter_server.utils import url_path_join
from nbconvert.exporters import HTMLExporter
from nbgrader.server_extensions.formgrader import apihandlers, handlers
from nbgrader.server_extensions.formgrader.base import check_notebook_dir, check_xsrf
from nbgrader.server_extensions.formgrader.formgrader import FormgradeExtension
from tornado import web
from traitlets import Unicode

from autograder.course import Course
from autograder.deadlines import deadline, due_dates, extend, extensions
from autograder.flags import read_flags
from autograder.nbgrader_hooks.commands import course_of
from autograder.nbgrader_hooks.steps import OUTCOME
from autograder.steps.feedback import generate_feedback, sanitise_fragment

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"
# jupyter_server_mathjax serves MathJax 2 under this path of the server; this configuration
# of it typesets TeX with fonts it serves too.
MATHJAX = "static/jupyter_server_mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe"
# The class reports of a chapter that Manage Submissions links to: each is
# ``<course folder>/<name>/<chapter>.html``, written by ``python -m autograder <name> CHAPTER``
# and served under ``formgrader/course/<name>/``.
REPORTS = ("similarity", "analysis")
# A line of nbgrader's captured log (or of the grading service's) that says how a step ended:
# the record's level, the service's mark of a warning, then the outcome itself.
OUTCOME_LINE = re.compile(rf"^(?:\[\w+\] )?(?:WARNING )?({re.escape(OUTCOME)}.*)$")


def flags_of(coursedir: Any, student: str, chapter: str) -> list[dict[str, str | None]]:
    """The flags of one submission as JSON-ready dicts (``code``, ``cell``, ``reason``)."""
    return [{"code": f.code, "cell": f.cell, "reason": f.reason}
            for f in read_flags(course_of(coursedir), student, chapter)]


class FormgradeExporter(HTMLExporter):
    """nbgrader's page of one submission, with its flags (``resources["course_flags"]``),
    MathJax from this server (``mathjax_url``) and the learner's HTML sanitised as on the
    feedback pages (:func:`~autograder.steps.feedback.sanitise_fragment`): Markdown cells
    (which nbgrader's template renders without nbconvert's ``sanitize_html``) and outputs."""

    course_root = Unicode(help="the root of the course whose flag files are read")
    course_folder = Unicode(help="the course folder whose flag files are read")

    def default_filters(self):
        yield from super().default_filters()
        # What nbconvert's templates pass HTML outputs through when sanitize_html is on.
        yield "clean_html", sanitise_fragment

    @pass_context
    def markdown2html(self, context: Any, source: str) -> str:
        """nbconvert's Markdown filter, whose HTML is then sanitised."""
        return sanitise_fragment(super().markdown2html(context, source))

    def from_filename(self, filename: str, resources: dict | None = None,
                      **kw: Any) -> tuple[str, dict]:
        resources = dict(resources or {})
        student, chapter = resources.get("student"), resources.get("assignment_id")
        course = Course(Path(self.course_root), Path(self.course_folder))
        flags = read_flags(course, student, chapter) if student and chapter else []
        resources["course_flags"] = flags
        return super().from_filename(filename, resources, **kw)


# ------------------------------------------------------------------ handlers


class SubmissionsWithFlags(apihandlers.SubmissionCollectionHandler):
    """``/formgrader/api/submissions/<chapter>``: nbgrader's list, each with its flags."""

    @web.authenticated
    @check_xsrf
    @check_notebook_dir
    def get(self, assignment_id: str) -> None:
        submissions = self.api.get_submissions(assignment_id)
        for submission in submissions:
            submission["flags"] = flags_of(self.coursedir, submission["student"], assignment_id)
        self.write(json.dumps(submissions))


class Extensions(apihandlers.BaseApiHandler):
    """``/formgrader/api/course/extensions/<chapter>``: the chapter's due date and each
    learner's extension (GET); ``.../<chapter>/<student>?until=WHEN`` gives one, and
    ``?remove=1`` takes it back (POST) (:mod:`autograder.deadlines`)."""

    @web.authenticated
    @check_xsrf
    @check_notebook_dir
    def get(self, assignment_id: str) -> None:
        course = course_of(self.coursedir)
        due = due_dates(course).get(assignment_id)
        self.write(json.dumps({
            "due": None if due is None else due.isoformat(),
            "extensions": {learner: until.isoformat()
                           for (chapter, learner), until in sorted(extensions(course).items())
                           if chapter == assignment_id}}))

    @web.authenticated
    @check_xsrf
    @check_notebook_dir
    def post(self, assignment_id: str, student_id: str) -> None:
        course = course_of(self.coursedir)
        try:
            until = (None if self.get_argument("remove", "") else
                     datetime.fromisoformat(self.get_argument("until")).astimezone(UTC))
            extend(course, assignment_id, student_id, until)
        except (ValueError, web.MissingArgumentError) as exc:
            self.write(json.dumps({"success": False, "error": str(exc)}))
            return
        when = deadline(course, assignment_id, student_id)
        self.write(json.dumps({"success": True, "deadline": None if when is None else
                               when.isoformat(),
                               "log": f"{student_id}'s deadline for {assignment_id}: "
                                      f"{'none yet' if when is None else when.isoformat()}"}))


class SubmissionWithFlags(apihandlers.SubmissionHandler):
    """``/formgrader/api/submission/<chapter>/<student>``: nbgrader's, with its flags."""

    @web.authenticated
    @check_xsrf
    @check_notebook_dir
    def get(self, assignment_id: str, student_id: str) -> None:
        submission = self.api.get_submission(assignment_id, student_id)
        if submission is None:
            raise web.HTTPError(404)
        submission["flags"] = flags_of(self.coursedir, student_id, assignment_id)
        self.write(json.dumps(submission))


def _feedback(handler: apihandlers.BaseApiHandler, chapter: str,
              student: str | None) -> dict[str, Any]:
    """The course's feedback for ``chapter`` (one ``student`` or all), as the formgrader's
    buttons expect an answer: ``success`` and a ``log`` naming each page and each failure."""
    course = course_of(handler.coursedir)
    report = generate_feedback(course, [chapter], students=None if student is None else [student])
    lines = [f"wrote the feedback page of {path.parts[-3]}: {path}" for path in report.written]
    lines += [f"FAILED {name}: {reason}" for name, _, reason in report.failed]
    if not report.written and not report.failed:
        who = f" of {student}" if student else ""
        lines.append(f"nothing to write: no autograded submission{who} of {chapter}; "
                     "autograde first")
        return {"success": False, "log": "\n".join(lines), "error": lines[-1]}
    if report.failed:
        return {"success": False, "log": "\n".join(lines),
                "error": f"{len(report.failed)} page(s) failed; those learners are flagged "
                         "feedback_failed"}
    return {"success": True, "log": "\n".join(lines)}


class GenerateAllFeedback(apihandlers.GenerateAllFeedbackHandler):
    """Generate Feedback of a chapter: the course's feedback for every graded learner."""

    @web.authenticated
    @check_xsrf
    @check_notebook_dir
    def post(self, assignment_id: str) -> None:
        self.write(json.dumps(_feedback(self, assignment_id, None)))


class GenerateFeedback(apihandlers.GenerateFeedbackHandler):
    """Generate Feedback of one learner: the course's feedback."""

    @web.authenticated
    @check_xsrf
    @check_notebook_dir
    def post(self, assignment_id: str, student_id: str) -> None:
        self.write(json.dumps(_feedback(self, assignment_id, student_id)))


def readable(result: dict[str, Any]) -> dict[str, Any]:
    """nbgrader's answer to a Formgrader button as an instructor reads it: how the step ended
    first (its lines marked :data:`~autograder.nbgrader_hooks.steps.OUTCOME`, each without its
    record's level), then the rest of its log without the ``[DEBUG]`` records and, when the
    course refused the action (nbgrader's ``ExchangeError``, whose reason the log holds),
    without a traceback."""
    outcomes, kept, debug = [], [], False
    for line in result.get("log", "").splitlines():
        if line.startswith("["):  # a record starts; its message may go on over more lines
            debug = line.startswith("[DEBUG]")
        found = OUTCOME_LINE.match(line)
        if found:
            outcomes.append(found.group(1))
        elif not debug:
            kept.append(line)
    answer = {**result, "log": "\n".join(outcomes + [""] * bool(outcomes and kept) + kept)}
    if not result["success"] and "ExchangeError: " in result.get("error", ""):
        answer.pop("error")
    return answer


class ReadableAnswer:
    """A Formgrader button's handler whose answer is :func:`readable`: nbgrader's handler
    writes its API's result as JSON, which this reads before it is sent (an error page goes
    out as it is)."""

    def write(self, chunk: Any) -> None:
        if isinstance(chunk, str) and self.get_status() == 200:
            chunk = json.dumps(readable(json.loads(chunk)))
        super().write(chunk)


class ReleaseReadably(ReadableAnswer, apihandlers.ReleaseHandler):
    """Release of a chapter (the course's, :class:`~autograder.nbgrader_hooks.commands.
    CourseRelease`): a refusal reads as its few lines, not under a traceback."""


class CollectReadably(ReadableAnswer, apihandlers.CollectHandler):
    """Collect of a chapter: how many were collected and refused, first."""


class AutogradeReadably(ReadableAnswer, apihandlers.AutogradeHandler):
    """Autograde (or regrade) of one learner: their score and flags, first."""


class ReleaseAllFeedbackReadably(ReadableAnswer, apihandlers.ReleaseAllFeedbackHandler):
    """Release Feedback of a chapter: the learners whose feedback was released, first."""


class ReleaseFeedbackReadably(ReadableAnswer, apihandlers.ReleaseFeedbackHandler):
    """Release Feedback of one learner: whether it was released, first."""


class ManageSubmissions(handlers.ManageSubmissionsHandler):
    """Manage Submissions of a chapter, with its class reports (:data:`REPORTS`) linked where
    they have been written, and the command that writes each where not."""

    @web.authenticated
    @check_xsrf
    @check_notebook_dir
    def get(self, assignment_id: str) -> None:
        folder = course_of(self.coursedir).folder
        self.write(self.render(
            "manage_submissions.tpl", course_dir=self.coursedir.root,
            assignment_id=assignment_id, base_url=self.base_url,
            reports={name: (folder / name / f"{assignment_id}.html").is_file()
                     for name in REPORTS}))


# nbgrader's handler class -> the course's, by the route nbgrader gives it.
REPLACED = {
    handlers.ManageSubmissionsHandler: ManageSubmissions,
    apihandlers.ReleaseHandler: ReleaseReadably,
    apihandlers.CollectHandler: CollectReadably,
    apihandlers.AutogradeHandler: AutogradeReadably,
    apihandlers.ReleaseAllFeedbackHandler: ReleaseAllFeedbackReadably,
    apihandlers.ReleaseFeedbackHandler: ReleaseFeedbackReadably,
    apihandlers.SubmissionCollectionHandler: SubmissionsWithFlags,
    apihandlers.SubmissionHandler: SubmissionWithFlags,
    apihandlers.GenerateAllFeedbackHandler: GenerateAllFeedback,
    apihandlers.GenerateFeedbackHandler: GenerateFeedback,
}


class CourseFormgrader(FormgradeExtension):
    """nbgrader's formgrader with the course's templates, exporter and handlers."""

    def init_tornado_settings(self, webapp) -> None:
        super().init_tornado_settings(webapp)
        nbgrader_templates = FileSystemLoader([handlers.template_path])
        # The course's templates first; nbgrader's own under "nbgrader/" too, so that a course
        # template can extend the nbgrader template it stands in for.
        webapp.settings["nbgrader_jinja2_env"] = Environment(loader=ChoiceLoader([
            FileSystemLoader([str(TEMPLATES)]), nbgrader_templates,
            PrefixLoader({"nbgrader": nbgrader_templates})]))
        course = course_of(self.coursedir)
        webapp.settings["nbgrader_exporter"] = FormgradeExporter(
            config=self.config, template_name="course_formgrade",
            extra_template_basedirs=[str(TEMPLATES), handlers.template_path],
            # so that the course's page can extend 'formgrade/index.html.j2', nbgrader's
            extra_template_paths=[handlers.template_path],
            mathjax_url=url_path_join(webapp.settings["base_url"], MATHJAX),
            sanitize_html=True, course_root=str(course.root),
            course_folder=str(course.folder))

    def init_handlers(self, webapp) -> None:
        routes = [_replaced(route) for route in
                  (*handlers.default_handlers, *apihandlers.default_handlers)]
        folder = course_of(self.coursedir).folder
        routes += [
            (r"/formgrader/api/course/extensions/([^/]+)", Extensions),
            (r"/formgrader/api/course/extensions/([^/]+)/([^/]+)", Extensions),
            # The class reports hold learners' code and scores: logged-in users only.
            *((rf"/formgrader/course/{name}/(.*)", AuthenticatedFileHandler,
               {"path": str(folder / name)}) for name in REPORTS),
            (r"/formgrader/course/(.*)", web.StaticFileHandler, {"path": str(STATIC)}),
            (r"/formgrader/static/(.*)", web.StaticFileHandler,
             {"path": handlers.static_path}),
            (r"/formgrader/.*", handlers.Template404),
        ]
        base_url = webapp.settings["base_url"]
        webapp.add_handlers(".*$", [(url_path_join(base_url, route[0].lstrip("/")), *route[1:])
                                    for route in routes])


def _replaced(route: tuple) -> tuple:
    """``route`` with the course's handler where the course replaces nbgrader's."""
    return (route[0], REPLACED.get(route[1], route[1]), *route[2:])


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": __name__}]


def _load_jupyter_server_extension(serverapp) -> None:
    """Load the course's formgrader (as nbgrader loads its own)."""
    serverapp.log.info("Loading the course's formgrader (nbgrader's, with flags)")
    formgrader = CourseFormgrader(parent=serverapp)
    formgrader.root_dir = serverapp.root_dir
    formgrader.log = serverapp.log
    formgrader.initialize([])
    formgrader.init_tornado_settings(serverapp.web_app)
    formgrader.init_handlers(serverapp.web_app)
