"""The item analysis as the instructor reads it: ``<course>/analysis/<chapter>.html`` and
``<chapter>.csv`` (:meth:`~autograder.course.Course.analysis_page`).

The page shows the chapter's score distribution (a histogram, embedded as a PNG), the
exercises ranked by the share of points the class lost beside the difficulty the course
declares, and for each exercise its shares of full, partial and no points, mean and spread,
hidden-only failures, minutes spent and the hints that fired with their counts. The CSV holds
the same numbers: one row per exercise, then one row per hint of it (``hint_id``, ``hint``,
``hint_count``). Neither names a learner unless ``names`` is asked for; then the page lists
who made each mistake and who failed only the hidden checks, and so does the CSV's ``names``
column (on an exercise's row its hidden-only failures, on a hint's row who made that mistake).
"""

from __future__ import annotations

import base64
import csv
import html
import io
import statistics
from pathlib import Path

from autograder.course import Course
from autograder.steps.analysis import ChapterAnalysis, ExerciseAnalysis

CSV_COLUMNS = ("exercise", "title", "points", "declared_difficulty", "class_rank", "learners",
               "full", "partial", "none", "mean", "spread", "hidden_only", "median_minutes",
               "hint_id", "hint", "hint_count", "names")
MAX_BARS = 20
_STYLE = """
body { font-family: sans-serif; margin: 2em; max-width: 70em; }
table { border-collapse: collapse; margin-bottom: 1em; }
td, th { padding: 2px 8px; text-align: left; border-bottom: 1px solid #ddd; }
td.n { text-align: right; }
"""


def histogram_png(analysis: ChapterAnalysis) -> bytes:
    """The learners' totals of the chapter as a histogram (matplotlib, PNG)."""
    # matplotlib takes a second to import: loaded when a page is drawn. A Figure of its own
    # (no pyplot) leaves the process's plotting backend and open figures alone.
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    figure = Figure(figsize=(6, 3), dpi=100)
    axes = figure.subplots()
    top = max(analysis.max_score, 1.0)
    # One bar per point, centred on it, or 20 bars for a long chapter.
    bins = ([i - 0.5 for i in range(int(top) + 2)] if top <= MAX_BARS else MAX_BARS)
    axes.hist(list(analysis.totals.values()), bins=bins, range=(0, top),
              color="#4c72b0", edgecolor="white")
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel(f"points (of {top:g})")
    axes.set_ylabel("learners")
    axes.set_title(f"{analysis.chapter}: scores of {len(analysis.totals)} learner(s)")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _percent(share: float) -> str:
    return f"{share:.0%}"


def _minutes(item: ExerciseAnalysis) -> str:
    if not item.minutes:
        return ""
    return f"{statistics.median(item.minutes.values()):.0f}"


def _ranking(analysis: ChapterAnalysis) -> str:
    rows = "".join(
        f"<tr><td class='n'>{rank}</td><td>{html.escape(item.exercise.id)}</td>"
        f"<td class='n'>{_percent(item.lost)}</td>"
        f"<td>{html.escape(item.exercise.difficulty)}</td></tr>"
        for rank, item in enumerate(analysis.ranked(), 1))
    return ("<h2>Exercises by difficulty</h2>\n<table><tr><th>rank</th><th>exercise</th>"
            "<th>points lost by the class</th><th>declared difficulty</th></tr>"
            f"{rows}</table>")


def _exercise(item: ExerciseAnalysis, names: bool) -> str:
    full, partial, none = item.shares()
    ex = item.exercise

    def who(people: list[str]) -> str:
        return f" ({html.escape(', '.join(sorted(people)))})" if names and people else ""

    minutes = _minutes(item)
    facts = [("learners", str(len(item.scores))), ("full points", _percent(full)),
             ("partial points", _percent(partial)), ("no points", _percent(none)),
             ("mean", f"{item.mean:.2f} of {ex.points}"), ("spread (SD)", f"{item.spread:.2f}"),
             ("hidden-only failures", f"{len(item.hidden_only)}{who(item.hidden_only)}"),
             ("minutes spent (median)", f"{minutes} ({len(item.minutes)} learner(s) show it)"
              if minutes else f"not recorded (the course estimates {ex.minutes})")]
    table = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in facts)
    hints = "".join(
        f"<tr><td class='n'>{count}</td><td><code>{hint}</code></td>"
        f"<td>{html.escape(item.hint_texts[hint])}{who(item.hints[hint])}</td></tr>"
        for hint, count in item.hint_counts())
    hint_table = (f"<table><tr><th>learners</th><th>hint id</th><th>hint</th></tr>{hints}"
                  "</table>" if hints else "<p>No hint fired.</p>")
    return (f"<h2 id='{html.escape(ex.id, quote=True)}'>{html.escape(ex.id)}: "
            f"{html.escape(ex.title)}</h2>\n<table>{table}</table>\n"
            f"<h3>Mistakes the checks recognised</h3>\n{hint_table}")


def render(analysis: ChapterAnalysis, names: bool = False) -> str:
    """The page; learners are named only when ``names``."""
    picture = base64.b64encode(histogram_png(analysis)).decode()
    title = f"Item analysis: {analysis.chapter}"
    body = "\n".join(_exercise(item, names) for item in analysis.exercises)
    return ("<!DOCTYPE html>\n<html>\n<head>\n<meta charset='utf-8'>\n"
            f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
            f"<h1>{html.escape(title)}</h1>\n"
            f"<p>{len(analysis.totals)} learner(s) graded; the chapter has "
            f"{analysis.max_score:g} points.</p>\n"
            f"<img alt='histogram of the learners&#39; scores' "
            f"src='data:image/png;base64,{picture}'>\n"
            f"{_ranking(analysis)}\n{body}\n</body>\n</html>\n")


def table(analysis: ChapterAnalysis, names: bool = False) -> str:
    """The CSV: one row per exercise (hint columns empty), then one per hint of it."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    rank = {item.exercise.id: n for n, item in enumerate(analysis.ranked(), 1)}
    for item in analysis.exercises:
        ex = item.exercise
        full, partial, none = item.shares()
        writer.writerow([ex.id, ex.title, ex.points, ex.difficulty, rank[ex.id],
                         len(item.scores), f"{full:.4f}", f"{partial:.4f}", f"{none:.4f}",
                         f"{item.mean:.4f}", f"{item.spread:.4f}", len(item.hidden_only),
                         _minutes(item), "", "", "",
                         " ".join(sorted(item.hidden_only)) if names else ""])
        for hint, count in item.hint_counts():
            writer.writerow([ex.id, *[""] * 12, hint, item.hint_texts[hint], count,
                             " ".join(sorted(item.hints[hint])) if names else ""])
    return buffer.getvalue()


def write_analysis(course: Course, analysis: ChapterAnalysis,
                   names: bool = False) -> tuple[Path, Path]:
    """Write the page and the CSV of ``analysis``; their paths."""
    page, sheet = course.analysis_page(analysis.chapter), course.analysis_csv(analysis.chapter)
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(render(analysis, names), encoding="utf-8")
    sheet.write_text(table(analysis, names), encoding="utf-8", newline="")
    return page, sheet
