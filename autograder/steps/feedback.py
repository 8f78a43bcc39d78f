"""Feedback for learners: one HTML page per graded notebook, through nbgrader, sanitised.

The pages are rendered by nbgrader's ``GenerateFeedback`` from the autograded notebooks, which
:mod:`autograder.grade.learner` writes without hidden tests and without tracebacks in graded
cells, so learners see their scores, their outputs and each visible check's diagnosis, but no
hidden test code. A failed hidden check reads as a general sentence, never with its inputs, and
no "all passed" line stays above a failure (:func:`hide_hidden_checks`).

A page shows what the learner wrote (Markdown with raw HTML, HTML outputs), so it is cleaned
with the ``nh3`` sanitiser (the Ammonia HTML sanitiser) before it is written
(:class:`FeedbackExporter`, which the course's nbgrader configuration names, so that
``nbgrader generate_feedback`` writes the same pages): no script, no event handler, no frame,
form or learner style sheet, and nothing loaded from elsewhere. Images stay only as embedded
``data:`` URIs, which is how matplotlib's plots are stored, so learners' plots stay visible;
links may point at web pages and at the page's own anchors. The page's own style sheets come
from nbgrader's template, never from the notebook. Formulas show as their LaTeX source: the
template would load MathJax from the network, which a sanitised page does not do.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nh3
from jinja2 import BytecodeCache
from jinja2.bccache import Bucket
from nbconvert.exporters import HTMLExporter
from nbconvert.preprocessors import CoalesceStreamsPreprocessor
from nbformat import NotebookNode

from autograder.course import Course, ready_alembic
from autograder.flags import Flag, write_flags
from autograder.notebook import graded_test_cells

# What the rendered notebook is made of: text, code, tables and embedded images.
_TAGS = frozenset(nh3.ALLOWED_TAGS) - {"area", "map"}
_ATTRIBUTES = {
    **{tag: set(names) for tag, names in nh3.ALLOWED_ATTRIBUTES.items()},
    "*": {"class", "id", "title", "lang", "dir", "style"},
    "a": {"href", "name", "hreflang"},
}
# Style properties that change how text and boxes look; none of them can load anything.
_STYLE_PROPERTIES = frozenset({
    "color", "background-color", "font-weight", "font-style", "font-family", "font-size",
    "text-align", "text-decoration", "vertical-align", "white-space", "width", "height",
    "max-width", "max-height", "margin", "margin-left", "margin-right", "margin-top",
    "margin-bottom", "padding", "padding-left", "padding-right", "padding-top",
    "padding-bottom", "border", "border-collapse", "border-spacing", "display",
})
_IMAGE_DATA = re.compile(r"data:image/(png|jpeg|gif|webp|svg\+xml);base64,[A-Za-z0-9+/=\s]*")
_LINK = re.compile(r"(https?:|mailto:|#)", re.IGNORECASE)
# The last line of a traceback in nbgrader's log: "nbgrader.api.MissingEntry: No such grade".
_LOG_ERROR = re.compile(r"^\s*((?:\w+\.)*\w*(?:Error|Exception|Entry|Exit)\b.*)$", re.M)
# The most of one cell's source a page shows. Highlighting and sanitising cost time with every
# token: a pasted cell of 800,000 characters held the feedback of a whole class for minutes.
# The course's longest cell is under 4,000 characters.
MAX_SHOWN_SOURCE = 10_000
# Tags of nbgrader's page head: its title, and its own style sheets (never learner input).
_HEAD_TAGS = frozenset({"meta", "title", "style"})


# A check's success line (autograder.exercises.registry.grade_function), e.g.
# "ch02.softmax (hidden checks): all passed."
_PASS_LINE = re.compile(r"^\S+ \((?:visible|hidden) checks\): all passed\.\n?", re.M)
_EXERCISE_ID = re.compile(r"\bch\d\d\.[a-z_][a-z0-9_]*")
HIDDEN_FAILED = (
    "a hidden check, with other inputs than the visible checks, failed: your code is not yet "
    "right in general. Look for what the visible checks do not try (other shapes, axes, "
    "lengths, values or dtypes), test your function on such inputs yourself, and compare "
    "with what the exercise asks. The hidden checks themselves are not shown.")
NOT_CONFIRMED = (
    "your notebook reported a pass, but the grader's own run of this exercise's checks, "
    "outside your notebook, did not confirm it, so this cell scores 0. This happens when the "
    "function depends on something other than its arguments (a variable or state from another "
    "cell, a file, a changed library or check), or when it fails the hidden checks. Make it "
    "depend on its arguments only, restart the kernel, run every cell, and check again.")


def hide_hidden_checks(nb: NotebookNode) -> None:
    """Make a graded notebook's feedback give nothing of the hidden checks away (in place).

    In each graded test cell that failed, the failure of a hidden check (or of the grader's
    own check outside the notebook) reads as a general sentence instead of its diagnosis,
    which names the hidden inputs, and no check's "all passed" line stays above the failure.
    The autograded notebook itself, which instructors read, keeps the whole diagnosis.
    """
    for cell in graded_test_cells(nb):
        errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
        if not errors:
            continue
        for output in errors:
            secret = output.ename == "VerificationFailed" or "(hidden checks)" in output.evalue
            if secret:
                found = _EXERCISE_ID.search(output.evalue)
                general = NOT_CONFIRMED if output.ename == "VerificationFailed" else HIDDEN_FAILED
                output.evalue = f"{found.group(0)}: {general}" if found else general
                output.traceback = [f"{output.ename}: {output.evalue}"]
        for output in cell.outputs:
            if output.output_type == "stream":
                output.text = _PASS_LINE.sub("", output.text)
        cell.outputs = [o for o in cell.outputs if o.output_type != "stream" or o.text]


def _attribute_filter(tag: str, attribute: str, value: str) -> str | None:
    """Keep ``src`` only as an embedded image and ``href`` only as a web, mail or in-page
    link: nothing on the page can make the browser fetch anything."""
    if attribute == "src":
        return value if _IMAGE_DATA.fullmatch(value.strip()) else None
    if attribute == "href":
        return value if _LINK.match(value.strip()) else None
    return value


def sanitise_fragment(html: str) -> str:
    """HTML written or printed by a learner, with everything that could run or load removed:
    text, code, tables, links and ``data:`` images stay."""
    return nh3.clean(html, tags=set(_TAGS), attributes=_ATTRIBUTES,
                     attribute_filter=_attribute_filter,
                     url_schemes={"http", "https", "mailto", "data"},
                     filter_style_properties=set(_STYLE_PROPERTIES),
                     link_rel="noopener noreferrer nofollow", strip_comments=True)


def sanitise_page(html: str) -> str:
    """A whole HTML page with everything that could run or load removed.

    The head that nbgrader's template writes (title and style sheets, no learner input) keeps
    its ``<style>`` elements and loses its scripts; the body, which holds the learner's cells
    and outputs, keeps text, code, tables, links and ``data:`` images only.
    """
    head, found, body = html.partition("</head>")
    if not found:  # not a page of the template: clean all of it as body
        head, body = "", html
    clean_head = nh3.clean(head, tags=set(_HEAD_TAGS), attributes={"meta": {"charset"}},
                           clean_content_tags={"script"}, url_schemes=set(),
                           strip_comments=True)
    clean_body = sanitise_fragment(body)
    return ("<!DOCTYPE html>\n<html>\n<head>\n" + clean_head.strip() + "\n</head>\n<body>\n"
            + clean_body.strip() + "\n</body>\n</html>\n")


def shorten_long_sources(nb: NotebookNode) -> None:
    """Cut each cell's source longer than :data:`MAX_SHOWN_SOURCE` to its first lines, with a
    line that says how much the page leaves out (in place)."""
    for cell in nb.cells:
        source = cell.source
        if len(source) <= MAX_SHOWN_SOURCE:
            continue
        cut = source.rfind("\n", 0, MAX_SHOWN_SOURCE)
        shown = source[:cut if cut > 0 else MAX_SHOWN_SOURCE]
        note = (f"[this page shows the first {len(shown):,} of the cell's {len(source):,} "
                "characters; the whole cell is in your notebook]")
        cell.source = shown + "\n" + (f"# {note}" if cell.cell_type == "code" else note)


class _CompiledTemplates(BytecodeCache):
    """nbgrader makes an exporter per page, and each compiled the template's files again
    (half a second a page): compiled once per process, kept by name and source checksum."""

    def __init__(self) -> None:
        self.compiled: dict[tuple[str, str], bytes] = {}

    def load_bytecode(self, bucket: Bucket) -> None:
        code = self.compiled.get((bucket.key, bucket.checksum))
        if code is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket: Bucket) -> None:
        self.compiled[(bucket.key, bucket.checksum)] = bucket.bytecode_to_string()


_TEMPLATES = _CompiledTemplates()


class FeedbackExporter(HTMLExporter):
    """nbconvert's HTML exporter, as nbgrader's feedback configures it, whose pages are
    sanitised with :func:`sanitise_page`, and whose cells show at most
    :data:`MAX_SHOWN_SOURCE` characters of source each. Consecutive prints of a cell are
    shown as one output: the kernel splits them into messages as timing decides, and the
    same notebook must give the same page on every run."""

    def from_notebook_node(self, nb: Any, resources: dict | None = None,
                           **kw: Any) -> tuple[str, dict]:
        nb, _ = CoalesceStreamsPreprocessor().preprocess(copy.deepcopy(nb), {})
        shorten_long_sources(nb)
        self.environment.bytecode_cache = _TEMPLATES
        html, resources = super().from_notebook_node(nb, resources, **kw)
        return sanitise_page(html), resources


@dataclass
class FeedbackReport:
    """What a feedback run wrote.

    Attributes:
        written: the HTML files written, sorted.
        failed: ``(student, chapter, reason)`` of the pages that could not be written; each
            is also a ``feedback_failed`` flag of that learner.
    """

    written: list[Path] = field(default_factory=list)
    failed: list[tuple[str, str, str]] = field(default_factory=list)


def _one_page(config: Any, course: Course, student: str, chapter: str) -> str | None:
    """Write one learner's page; the reason when nbgrader could not, else None."""
    # nbgrader takes a second to import: loaded when this runs, not with the module.
    from nbgrader.apps.api import capture_log
    from nbgrader.converters import GenerateFeedback
    from nbgrader.coursedir import CourseDirectory

    coursedir = CourseDirectory(config=config)
    coursedir.assignment_id, coursedir.student_id = chapter, student
    try:
        converter = GenerateFeedback(coursedir=coursedir, config=config)
        converter.force = True
        result = capture_log(converter)
    except Exception as exc:  # one learner's odd notebook must not stop the class
        return f"{type(exc).__name__}: {exc}"
    if result["success"]:
        return None
    # The log holds the traceback of the real error, then nbgrader's generic summary.
    errors = [m.group(1) for m in _LOG_ERROR.finditer(result.get("log") or "")
              if "NbGraderException" not in m.group(1)]
    return errors[-1][:500] if errors else "nbgrader generate_feedback failed"


def generate_feedback(
    course: Course, chapters: Iterable[str], *, students: Iterable[str] | None = None
) -> FeedbackReport:
    """Write ``<course>/feedback/<student>/<chapter>/<chapter>.html`` for graded submissions.

    One learner's failure never stops the others: it is reported in the result and as that
    learner's ``feedback_failed`` flag (a later successful run clears it).

    Args:
        course: the course.
        chapters: chapter ids.
        students: only these students (default: every autograded one).

    Returns:
        A :class:`FeedbackReport`: the pages written and the learners without one.
    """
    ready_alembic()
    config = course.config()
    report = FeedbackReport()
    for chapter in chapters:
        graded = course.students("autograded", chapter)
        for student in graded if students is None else sorted(set(students) & set(graded)):
            problem = _one_page(config, course, student, chapter)
            flags = []
            if problem is not None:
                reason = (f"no feedback page for {chapter}: nbgrader could not render it "
                          f"({problem})")
                report.failed.append((student, chapter, reason))
                flags.append(Flag("feedback_failed", None, reason))
            else:
                report.written += sorted(
                    course.step_dir("feedback", student, chapter).glob("*.html"))
            write_flags(course, student, chapter, "feedback", flags)
    report.written.sort()
    return report
