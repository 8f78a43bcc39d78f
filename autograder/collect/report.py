"""What a collect run found: the candidates, the submissions taken, and the report of it all."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from autograder.collect.names import printable
from autograder.flags import Flag


@dataclass(frozen=True)
class Candidate:
    """One readable notebook found in a source, parked in the staging folder.

    Attributes:
        student: the normalised student id (see :func:`student_id`).
        spelling: the name as the source wrote it (to report collisions).
        chapter: the chapter id.
        origin: where it came from, for messages: a path or ``"archive.zip:member"``.
        timestamp: when it was handed in, from the source (UTC).
        staged: the copy of its bytes in the staging folder.
        digest: SHA-256 of its bytes.
        secret: nbgrader's ``submission_secret.txt`` from beside it, when there was one.
    """

    student: str
    spelling: str
    chapter: str
    origin: str
    timestamp: dt.datetime
    staged: Path
    digest: str
    secret: bytes | None = field(default=None, repr=False)
    flags: tuple[Flag, ...] = ()


@dataclass(frozen=True)
class Taken:
    """A submission that is in ``submitted/`` after the run.

    ``status`` is ``"new"`` (copied now), ``"unchanged"`` (the same file was collected before)
    or ``"kept"`` (an older copy than the one collected before; the earlier one stays).
    """

    student: str
    chapter: str
    origin: str
    timestamp: dt.datetime
    status: str


@dataclass
class CollectReport:
    """What a collect run did.

    Attributes:
        taken: the submissions in ``submitted/`` after the run, one per student and chapter.
        flagged: ``(student, chapter) -> flags`` for submissions kept with a warning.
        refused: ``(origin, reason)`` for entries that were not collected because of a problem
            that someone has to fix.
        ignored: ``(origin, reason)`` for entries that are not submissions to collect (a
            folder of Jupyter's checkpoints, a chapter this run does not collect, an older
            copy of a submission).
    """

    taken: list[Taken] = field(default_factory=list)
    flagged: dict[tuple[str, str], list[Flag]] = field(default_factory=dict)
    refused: list[tuple[str, str]] = field(default_factory=list)
    ignored: list[tuple[str, str]] = field(default_factory=list)

    @property
    def collected(self) -> list[tuple[str, str]]:
        """``(student, chapter)`` of each submission taken."""
        return [(t.student, t.chapter) for t in self.taken]

    def refuse(self, origin: str, reason: str) -> None:
        self.refused.append((printable(origin), reason))

    def ignore(self, origin: str, reason: str) -> None:
        self.ignored.append((printable(origin), reason))

    def lines(self) -> list[str]:
        """A human-readable summary: what was taken per learner and chapter, then flags and
        refusals, one line each."""
        learners = len({t.student for t in self.taken})
        out = [f"collected {len(self.taken)} submission(s) of {learners} learner(s), "
               f"refused {len(self.refused)}, ignored {len(self.ignored)}"]
        rows = [(t.student, t.chapter, f"{t.timestamp:%Y-%m-%d %H:%M:%S} UTC", t.status,
                 t.origin) for t in sorted(self.taken, key=lambda t: (t.student, t.chapter))]
        widths = [max((len(row[i]) for row in rows), default=0) for i in range(4)]
        out += ["  " + "  ".join([*(v.ljust(w) for v, w in zip(row, widths, strict=False)),
                                  row[-1]]) for row in rows]
        for (student, chapter), flags in sorted(self.flagged.items()):
            out += [f"FLAG {student}/{chapter}: {f.reason}" for f in flags]
        out += [f"REFUSED {origin}: {reason}" for origin, reason in self.refused]
        return out + self._ignored_lines()

    def _ignored_lines(self, shown: int = 3) -> list[str]:
        """One ``IGNORED`` line per reason, with the first entries it concerns."""
        by_reason: dict[str, list[str]] = defaultdict(list)
        for origin, reason in self.ignored:
            by_reason[reason].append(origin)
        lines = []
        for reason, origins in by_reason.items():
            more = f" and {len(origins) - shown} more" if len(origins) > shown else ""
            lines.append(f"IGNORED {', '.join(origins[:shown])}{more}: {reason}")
        return lines
