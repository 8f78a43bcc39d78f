"""The class report of copy detection: one HTML page per chapter, for the instructor.

``<course>/similarity/<chapter>.html`` lists, for every graded cell, the most similar pairs
that :func:`autograder.copies.detect.check_chapter` found, learner against learner and
learner against the course's code: every flagged pair, then the closest of the others, so
that the instructor sees the near misses of each cell too. Each pair is shown side by side in
the form that was compared (normalised), with the shared runs of tokens highlighted, and the
code as written below it. Each learner's pairs can be reached by ``#learner-<id>``. The page
is sanitised like the learners' feedback pages
(:func:`autograder.steps.feedback.sanitise_page`): learners' code is text on it, never markup.
"""

from __future__ import annotations

import html
from pathlib import Path

from autograder.copies.pairs import (
    DICTATED,
    MIN_RARE_TOKENS,
    MIN_TOKENS,
    NOISE_TOKENS,
    ChapterCheck,
    Pair,
)
from autograder.copies.prose import MIN_PROSE_WORDS, PROSE_WORDS
from autograder.steps.feedback import sanitise_page

# Flagged pairs shown (the most similar first; the flag files name every one), then the
# closest pairs below the threshold of each cell.
FLAGGED_SHOWN = 200
CLOSEST_SHOWN = 10
_STYLE = """
body { font-family: sans-serif; margin: 2em; }
table.pairs td, table.pairs th { padding: 2px 8px; text-align: left; }
table.side { width: 100%; table-layout: fixed; border-collapse: collapse; }
table.side td { vertical-align: top; width: 50%; padding: 4px; border: 1px solid #ccc; }
pre { white-space: pre-wrap; font-size: 12px; margin: 0; }
mark { background: #ffd54f; }
.flagged { color: #b00020; font-weight: bold; }
"""


def highlighted(text: str, regions: tuple[tuple[int, int], ...]) -> str:
    """``text`` escaped for HTML with the character ranges ``regions`` in ``<mark>``."""
    merged: list[list[int]] = []
    for start, end in sorted(regions):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    parts, done = [], 0
    for start, end in merged:
        parts += [html.escape(text[done:start]), "<mark>", html.escape(text[start:end]),
                  "</mark>"]
        done = end
    parts.append(html.escape(text[done:]))
    return "".join(parts)


def _shown(check: ChapterCheck) -> list[Pair]:
    """The flagged pairs, then the :data:`CLOSEST_SHOWN` closest others of each cell, by cell
    (the pairs of ``check`` are most similar first)."""
    flagged = [p for p in check.pairs if p.flagged(check.threshold)][:FLAGGED_SHOWN]
    closest: dict[str, list[Pair]] = {}
    for pair in check.pairs:
        if not pair.flagged(check.threshold):
            closest.setdefault(pair.cell, []).append(pair)
    return flagged + [p for cell in sorted(closest) for p in closest[cell][:CLOSEST_SHOWN]]


def _summary(check: ChapterCheck) -> str:
    flagged = sum(1 for p in check.pairs if p.flagged(check.threshold))
    lines = [
        f"<p>{len(check.students)} learner(s) compared, {flagged} pair(s) flagged. A pair is "
        f"flagged when at least {check.threshold:.0%} of the other code is found in the "
        f"learner's cell, or of the learner's cell in the other code, and the shared code is "
        f"at least {MIN_TOKENS} tokens long, or between two learners at least "
        f"{MIN_RARE_TOKENS} of the shared tokens are rare: in runs that no honest answer of "
        f"the course's corpus holds; runs shorter than {NOISE_TOKENS} tokens do not count. "
        f"A pair with the course's code is flagged too, however short the code, when the "
        f"learner's cell holds at least {MIN_PROSE_WORDS} words of that code's own docstrings "
        f"and comments, in runs of {PROSE_WORDS} words that the release does not show "
        "(honest learners write their own words). "
        "Code is compared once names, comments, docstrings, asserts, type hints, layout, "
        "equivalent spellings and the order of definitions are set aside; the stub and the "
        "code the notebook shows every learner never count. Below the flagged pairs, "
        f"the {CLOSEST_SHOWN} closest pairs of every cell. Flags of copy detection are never "
        "shown to learners; the course's policy for copies says what they do to a score (by "
        "default nothing).</p>"]
    dictated = sorted(e for e in DICTATED if e[:4] == check.chapter[:4])
    if dictated:
        lines.append(
            f"<p>{html.escape(', '.join(dictated))}: the exercise's text dictates the code line "
            "by line, so learners who follow it write the course's answer. In these cells the "
            "course's answer counts as given, like the stub: what is left to share is what a "
            "copy keeps beyond it. A paste of the course's answer itself cannot be told from "
            "honest work there.</p>")
    if flagged > FLAGGED_SHOWN:
        lines.append(f"<p>The {FLAGGED_SHOWN} most similar flagged pairs are shown below; the "
                     "flags of every learner name all of theirs.</p>")
    if check.unreadable:
        lines.append("<p>Not compared (their autograded notebook could not be read): "
                     + ", ".join(html.escape(f"{s} ({why})") for s, why in check.unreadable)
                     + "</p>")
    return "\n".join(lines)


def _row(number: int, pair: Pair, threshold: float) -> str:
    mark = '<span class="flagged">flagged</span>' if pair.flagged(threshold) else ""
    found, compared = pair.elsewhere
    shares = "/".join(f"{share:.0%}" for share in pair.overlap.shares)
    cells = [f'<a href="#pair-{number}">{number}</a>', html.escape(pair.cell),
             html.escape(pair.learner.owner), html.escape(pair.other.label),
             f"{pair.similarity:.0%} ({shares})", str(pair.tokens), str(pair.rare),
             f"{found} of {compared}", str(pair.prose), mark]
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def _side_by_side(number: int, pair: Pair, threshold: float) -> str:
    flag = " (flagged)" if pair.flagged(threshold) else ""
    left = highlighted(pair.learner.unit.text, pair.overlap.regions[0])
    right = highlighted(pair.other.unit.text, pair.overlap.regions[1])
    return (f'<h3 id="pair-{number}">{number}. {html.escape(pair.cell)}: '
            f"{html.escape(pair.learner.label)} and {html.escape(pair.other.label)}, "
            f"{pair.similarity:.0%}{flag}</h3>\n"
            f"{_prose(pair)}"
            '<table class="side"><tr>'
            f"<td><pre>{left}</pre></td><td><pre>{right}</pre></td></tr>\n<tr>"
            f"<td><details><summary>as written</summary><pre>"
            f"{html.escape(pair.learner.source)}</pre></details></td>"
            f"<td><details><summary>as written</summary><pre>"
            f"{html.escape(pair.other.source)}</pre></details></td></tr></table>")


def _prose(pair: Pair) -> str:
    """The course's own prose found in the learner's cell, each passage quoted."""
    if not pair.prose:
        return ""
    quoted = "".join(f"<li>{html.escape(text)}</li>" for text in pair.passages)
    return (f"<p>{pair.prose} words of the course's own docstrings and comments "
            f"(which the release does not show) in the learner's cell:</p><ul>{quoted}</ul>\n")


def _anchors(pair: Pair, seen: set[str]) -> str:
    """``learner-<id>`` targets before the first pair of each learner it names (the Formgrader
    links a learner's flags there)."""
    owners = [c.owner for c in (pair.learner, pair.other) if not c.course and c.owner not in seen]
    seen.update(owners)
    return "".join(f'<p id="learner-{html.escape(owner, quote=True)}"></p>' for owner in owners)


def render(check: ChapterCheck) -> str:
    """The report's page, sanitised."""
    shown = _shown(check)
    header = "".join(f"<th>{h}</th>" for h in (
        "#", "cell", "learner", "similar to", "similarity (of the learner's / of the other)",
        "tokens", "of them rare (no honest answer holds them)", "others holding it",
        "words of the course's own prose", ""))
    rows = "\n".join(_row(n, p, check.threshold) for n, p in enumerate(shown, 1))
    seen: set[str] = set()
    sections = "\n".join(_anchors(p, seen) + _side_by_side(n, p, check.threshold)
                         for n, p in enumerate(shown, 1))
    title = f"Copy detection: {check.chapter}"
    page = (f"<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
            f"<h1>{html.escape(title)}</h1>\n{_summary(check)}\n"
            f'<table class="pairs"><tr>{header}</tr>\n{rows}</table>\n'
            f"{sections if shown else '<p>No two pieces of code share anything.</p>'}\n"
            "</body>\n</html>\n")
    return sanitise_page(page)


def write_report(check: ChapterCheck, path: Path) -> Path:
    """Write :func:`render` of ``check`` to ``path`` (replacing it) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(render(check), encoding="utf-8")
    temporary.replace(path)
    return path
