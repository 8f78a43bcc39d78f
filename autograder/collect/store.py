"""Storing what collect found: the newest copy of each learner's chapter into ``submitted/``.

Each collected submission gets a ``timestamp.txt`` (nbgrader's format) written by the
collector, so collecting the same files again changes nothing.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import shutil
import tempfile
import unicodedata
from collections import defaultdict
from pathlib import Path

from autograder.collect.report import Candidate, CollectReport, Taken
from autograder.course import SECRET_FILE, TIMESTAMP_FILE, TIMESTAMP_FORMAT, Course
from autograder.flags import Flag, write_flags


def _existing(target: Path) -> tuple[dt.datetime, str] | None:
    """The timestamp and digest of what was collected before into ``target``, or None."""
    # nbgrader takes a second to import: loaded when this runs, not with the module.
    from nbgrader.utils import parse_utc

    stamp = target / TIMESTAMP_FILE
    notebook = target / f"{target.name}.ipynb"
    if not (stamp.is_file() and notebook.is_file()):
        return None
    try:
        when = parse_utc(stamp.read_text(encoding="utf-8").strip()).replace(tzinfo=dt.UTC)
    except (ValueError, OverflowError, UnicodeDecodeError):
        return None
    return when, hashlib.sha256(notebook.read_bytes()).hexdigest()


def _collisions(candidates: list[Candidate], report: CollectReport) -> list[Candidate]:
    """The candidates without those whose id is spelt in more than one way (refused)."""
    spellings: dict[str, set[str]] = defaultdict(set)
    for candidate in candidates:
        spellings[candidate.student].add(unicodedata.normalize("NFC", candidate.spelling))
    clashing = {student for student, names in spellings.items() if len(names) > 1}
    for candidate in candidates:
        if candidate.student in clashing:
            names = " and ".join(repr(n) for n in sorted(spellings[candidate.student]))
            report.refuse(candidate.origin,
                          f"{names} are the same student id {candidate.student!r} (ids ignore "
                          "case and Unicode form), so nothing of either was collected; rename "
                          "the folders or files that are not this learner's id and collect "
                          "again")
    return [c for c in candidates if c.student not in clashing]


def store(course: Course, candidates: list[Candidate], report: CollectReport) -> None:
    """Copy the newest candidate of each (student, chapter) into ``<course>/submitted``."""
    groups: dict[tuple[str, str], list[Candidate]] = defaultdict(list)
    for candidate in _collisions(candidates, report):
        groups[(candidate.student, candidate.chapter)].append(candidate)
    for (student, chapter), group in sorted(groups.items()):
        # Newest first; the origin breaks ties so that the choice never depends on scan order.
        group.sort(key=lambda c: (c.timestamp, c.origin), reverse=True)
        newest = group[0]
        flags = [*newest.flags, *_duplicates(group, report)]
        target = course.step_dir("submitted", student, chapter)
        existing = _existing(target)
        status = "new"
        if existing is not None and existing[0] > newest.timestamp:
            status = "kept"
            flags.append(Flag("older_than_collected", None,
                              f"{newest.origin} is older than the submission collected before "
                              f"({existing[0]:%Y-%m-%d %H:%M:%S}); kept the earlier collected "
                              "one"))
        elif existing == (newest.timestamp, newest.digest):
            status = "unchanged"
        else:
            _write_submission(target, newest)
        report.taken.append(Taken(student, chapter, newest.origin, newest.timestamp, status))
        write_flags(course, student, chapter, "collect", flags)
        if flags:
            report.flagged[(student, chapter)] = flags


def _duplicates(group: list[Candidate], report: CollectReport) -> list[Flag]:
    """The ``duplicate_submission`` flag of a learner's submissions of one chapter (newest
    first), when there are several; the older ones are reported as ignored."""
    if len(group) < 2:
        return []
    newest = group[0]
    kept = f"{newest.origin} ({newest.timestamp:%Y-%m-%d %H:%M:%S})"
    for older in group[1:]:
        report.ignore(older.origin, f"an older copy of {newest.chapter} by {newest.student}; "
                                    f"the newest, {kept}, is collected")
    others = ", ".join(f"{c.origin} ({c.timestamp:%Y-%m-%d %H:%M:%S})" for c in group[1:])
    return [Flag("duplicate_submission", None,
                 f"{len(group)} submissions of {newest.chapter} by {newest.student}: kept the "
                 f"newest, {kept}; ignored {others}")]


def _write_submission(target: Path, candidate: Candidate) -> None:
    # Written next to the target and renamed, so that a crash never leaves half a submission.
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".collect-", dir=target.parent))
    shutil.copyfile(candidate.staged, staging / f"{candidate.chapter}.ipynb")
    (staging / TIMESTAMP_FILE).write_text(
        candidate.timestamp.strftime(TIMESTAMP_FORMAT) + "\n", encoding="utf-8")
    if candidate.secret is not None:
        (staging / SECRET_FILE).write_bytes(candidate.secret)
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)
