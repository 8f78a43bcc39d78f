"""What instructors read: the per-learner summary table and the grades CSV."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from pathlib import Path

from autograder.course import ROOT, Course
from autograder.flags import read_flags
from autograder.pipeline.grade import Summary
from autograder.pipeline.gradebook import read_scores

CSV_COLUMNS = ("student", "chapter", "score", "max_score", "flags", "reasons")


def _number(value: float) -> str:
    return f"{value:g}"


def summary_table(rows: Sequence[Summary]) -> str:
    """A fixed-width table: student, chapter, autograded score, seconds and flag codes."""
    header = ("student", "chapter", "score", "time", "flags")
    body = [(r.student, r.chapter, f"{_number(r.score)}/{_number(r.max_score)}",
             f"{r.seconds:.0f}s", ", ".join(dict.fromkeys(f.code for f in r.flags)) or "-")
            for r in rows]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in [header, *body]]
    flagged = sum(1 for r in rows if r.flags)
    lines.append(f"{len(rows)} submission(s) graded, {flagged} flagged for review")
    return "\n".join(lines)


def export_csv(
    path: str | os.PathLike | None = None,
    *,
    root: str | os.PathLike = ROOT,
    course_dir: str | os.PathLike | None = None,
) -> str:
    """Write the grades CSV (one row per learner and chapter) and return its text.

    Columns: student, chapter, score (autograded plus manual points so far), max_score (all
    points of the chapter, written answers included), flags (codes separated by ``;``),
    reasons (sentences separated by `` | ``). Rows are sorted, numbers written the same way
    every time, so exporting the same gradebook twice gives byte-identical files.

    Args:
        path: where to write it; ``None`` only returns the text.
        root, course_dir: the course (see :func:`autograder.course.course_config`).
    """
    course = Course.of(root, course_dir)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in read_scores(course.config()):
        flags = read_flags(course.folder, row.student, row.chapter)
        writer.writerow([row.student, row.chapter, _number(row.score), _number(row.max_score),
                         ";".join(dict.fromkeys(f.code for f in flags)),
                         " | ".join(f.reason for f in flags)])
    text = buffer.getvalue()
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text, encoding="utf-8", newline="")
    return text
