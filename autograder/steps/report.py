"""What instructors read: the per-learner summary table and the grades CSV.

Both read their numbers from the gradebook through :func:`~autograder.grade.gradebook.
read_scores`, so a score is defined once: the table and the CSV always agree.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from pathlib import Path

from autograder.course import Course
from autograder.flags import Flag, read_flags
from autograder.grade.gradebook import Score, read_scores
from autograder.grade.store import Summary

CSV_COLUMNS = ("student", "chapter", "score", "max_score", "auto_score", "auto_max",
               "manual_score", "manual_max", "manual_pending", "late_penalty", "flags",
               "reasons")
# Reasons longer than this are cut in the CSV (the flag file keeps the whole text), so that
# every field stays far below the 131,072 characters Python's csv reader accepts by default.
MAX_REASON_CHARS = 300
MAX_REASONS_CHARS = 2_000


def points_text(value: float) -> str:
    """A number of points as every table of grades writes it: ``7``, ``2.5``."""
    return f"{value:g}"


def _points(score: float, max_score: float) -> str:
    return f"{points_text(score)}/{points_text(max_score)}"


def _by_hand(score: Score) -> str:
    """The hand-graded part for the table: ``"-"`` (none), ``"4 pending"`` or ``"3/4"``."""
    if not score.manual_max_score:
        return "-"
    if score.manual_pending:
        return f"{points_text(score.manual_pending)} pending"
    return _points(score.manual_score, score.manual_max_score)


def summary_table(rows: Sequence[Summary], scores: Sequence[Score]) -> str:
    """A fixed-width table: student, chapter, the autograded and hand-graded points and their
    total (from the gradebook, as in the CSV), seconds and flag codes.

    Args:
        rows: the graded submissions (for the time and the flags).
        scores: the gradebook's scores (:func:`~autograder.grade.gradebook.read_scores`);
            a submission missing there (its results could not be stored) shows ``-``.
    """
    by_key = {(s.student, s.chapter): s for s in scores}
    header = ("student", "chapter", "auto", "by hand", "total", "time", "flags")
    body = []
    for r in rows:
        score = by_key.get((r.student, r.chapter))
        points = (("-", "-", "-") if score is None else
                  (_points(score.auto_score, score.auto_max_score), _by_hand(score),
                   _points(score.score, score.max_score)))
        body.append((r.student, r.chapter, *points, f"{r.seconds:.0f}s",
                     ", ".join(dict.fromkeys(f.code for f in r.flags)) or "-"))
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in [header, *body]]
    flagged = sum(1 for r in rows if r.flags)
    lines.append(f"{len(rows)} submission(s) graded, {flagged} flagged for review")
    return "\n".join(lines)


def _reasons(flags: list[Flag], student: str, chapter: str, course: Course) -> str:
    """The flags' reasons for one CSV field, each cut to a readable length."""
    where = course.flags_file(student, chapter).relative_to(course.folder)
    cut = f" [... cut; the whole text is in {where}]"
    parts = [f.reason if len(f.reason) <= MAX_REASON_CHARS
             else f.reason[:MAX_REASON_CHARS].rstrip() + cut for f in flags]
    text = " | ".join(parts)
    if len(text) > MAX_REASONS_CHARS:
        text = text[:MAX_REASONS_CHARS].rstrip() + f" [... more reasons in {where}]"
    return text


def export_csv(course: Course, path: str | os.PathLike | None = None) -> str:
    """Write the grades CSV (one row per learner and chapter) and return its text.

    Columns (:data:`CSV_COLUMNS`):

    * ``score``, ``max_score``: the chapter's points so far and all its points (autograded
      plus hand-graded), as before;
    * ``auto_score``, ``auto_max``: the autograded test cells;
    * ``manual_score``, ``manual_max``: the written answers graded by hand (formgrader);
    * ``manual_pending``: hand-graded points nobody has graded yet (0 when done);
    * ``late_penalty``: points the chapter's late policy took (already out of ``score``; the
      ``late`` flag's reason says how late and which policy);
    * ``flags``: codes separated by ``;``; ``reasons``: their sentences separated by
      `` | ``, each cut at :data:`MAX_REASON_CHARS` characters (the flag file
      ``flags/<student>/<chapter>.json`` keeps the whole text).

    Rows are sorted and numbers written the same way every time, so exporting the same
    gradebook twice gives byte-identical files; Python's default ``csv`` reader reads them.

    Args:
        course: the course.
        path: where to write it; ``None`` only returns the text.
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in read_scores(course):
        flags = read_flags(course, row.student, row.chapter)
        writer.writerow([row.student, row.chapter, points_text(row.score),
                         points_text(row.max_score), points_text(row.auto_score),
                         points_text(row.auto_max_score),
                         points_text(row.manual_score), points_text(row.manual_max_score),
                         points_text(row.manual_pending), points_text(row.late_penalty),
                         ";".join(dict.fromkeys(f.code for f in flags)),
                         _reasons(flags, row.student, row.chapter, course)])
    text = buffer.getvalue()
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text, encoding="utf-8", newline="")
    return text
