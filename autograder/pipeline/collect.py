"""Collect learner submissions into ``<course>/submitted/<student>/<chapter>/``.

Three sources, all read-only (the originals are never modified):

* a folder of learner folders: ``<dir>/<student>/<chapter>/<chapter>.ipynb`` or
  ``<dir>/<student>/<chapter>.ipynb``;
* an LMS zip of files named ``<student>_<chapter>.ipynb`` (nbgrader ``zip_collect`` style;
  folders inside the zip are ignored);
* the nbgrader exchange (``nbgrader collect``), staged in a temporary folder first.

File names that are not UTF-8, or that would not make a safe student id or folder name, are
refused with a reason. When one student hands in the same chapter twice, the newest copy (by
timestamp: ``timestamp.txt`` next to the notebook, the zip entry's date, or the file's
modification time) is kept and the submission is flagged. Each collected submission gets a
``timestamp.txt`` (nbgrader's format), so collecting the same files again changes nothing.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import tempfile
import unicodedata
import zipfile
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from autograder.course import CHAPTERS, ROOT, Course, ensure_alembic_on_path
from autograder.flags import Flag, write_flags

# Largest notebook accepted; a learner's executed notebook with plots is a few MB.
MAX_NOTEBOOK_BYTES = 50 * 1024 * 1024
TIMESTAMP_FILE = "timestamp.txt"
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f %Z"
_STUDENT = re.compile(r"[^\W_][\w.@-]{0,63}")
_ZIP_NAME = re.compile(r"(?P<student>.+)_(?P<chapter>ch\d\d_[a-z0-9_]+)\.ipynb")


@dataclass(frozen=True)
class Candidate:
    """One notebook found in a source: who, which chapter, where, and when."""

    student: str
    chapter: str
    origin: str  # where it came from, for messages: a path or "archive.zip:member"
    timestamp: dt.datetime
    data: bytes = field(repr=False)


@dataclass
class CollectReport:
    """What a collect run did.

    Attributes:
        collected: ``(student, chapter)`` pairs copied into ``submitted/``.
        flagged: ``(student, chapter) -> flags`` for submissions kept with a warning.
        refused: ``(origin, reason)`` for files that were not collected.
    """

    collected: list[tuple[str, str]] = field(default_factory=list)
    flagged: dict[tuple[str, str], list[Flag]] = field(default_factory=dict)
    refused: list[tuple[str, str]] = field(default_factory=list)

    def lines(self) -> list[str]:
        """A human-readable summary, one line per event."""
        out = [f"collected {len(self.collected)} submission(s)"]
        for (student, chapter), flags in sorted(self.flagged.items()):
            out += [f"FLAG {student}/{chapter}: {f.reason}" for f in flags]
        out += [f"REFUSED {origin}: {reason}" for origin, reason in self.refused]
        return out


def _utc(timestamp: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(timestamp, tz=dt.UTC)


def _printable(name: str) -> str:
    # Undecodable bytes survive as surrogates; show them as escapes instead of crashing print().
    return name.encode("utf-8", "backslashreplace").decode("utf-8")


def check_name(name: str, what: str) -> str | None:
    """The reason why ``name`` is not acceptable as a ``what`` (student id, file), or None."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return (f"the {what} {_printable(name)!r} is not valid UTF-8; rename it with plain "
                "letters, digits, '.', '_', '-' or '@' and collect again")
    if unicodedata.normalize("NFC", name) != name or not _STUDENT.fullmatch(name):
        return (f"the {what} {name!r} is not a safe name: use 1-64 letters, digits, '.', '_', "
                "'-' or '@', starting with a letter or digit")
    return None


def _read_timestamp(folder: Path, fallback: float) -> dt.datetime:
    """nbgrader's ``timestamp.txt`` in ``folder`` when it parses, else ``fallback`` (epoch s)."""
    from nbgrader.utils import parse_utc

    stamp = folder / TIMESTAMP_FILE
    if stamp.is_file():
        try:
            parsed = parse_utc(stamp.read_text(encoding="utf-8").strip())
            return parsed.replace(tzinfo=dt.UTC)  # nbgrader gives naive UTC times
        except (ValueError, OverflowError, UnicodeDecodeError):
            pass
    return _utc(fallback)


def _read_notebook_file(path: Path, origin: str, report: CollectReport) -> bytes | None:
    if path.is_symlink() or not path.is_file():
        report.refused.append((origin, "not a regular file (links are not followed)"))
        return None
    if path.stat().st_size > MAX_NOTEBOOK_BYTES:
        report.refused.append((origin, f"larger than {MAX_NOTEBOOK_BYTES // 2**20} MB"))
        return None
    return path.read_bytes()


def scan_folder(source: Path, report: CollectReport) -> list[Candidate]:
    """Notebooks under ``source/<student>/``, in either of the two accepted layouts."""
    found: list[Candidate] = []
    for student_dir in sorted(source.iterdir()):
        origin = _printable(str(student_dir))
        if not student_dir.is_dir() or student_dir.is_symlink():
            if student_dir.name.endswith(".ipynb"):
                report.refused.append((origin, "a notebook outside a learner folder; expected "
                                               "<dir>/<student>/<chapter>.ipynb"))
            continue
        problem = check_name(student_dir.name, "learner folder")
        if problem:
            report.refused.append((origin, problem))
            continue
        for entry in sorted(student_dir.iterdir()):
            chapter_dir = entry if entry.is_dir() and not entry.is_symlink() else None
            notebooks = sorted(entry.glob("*.ipynb")) if chapter_dir else [entry]
            for path in notebooks:
                where = _printable(str(path))
                if path.suffix != ".ipynb":
                    continue
                problem = check_name(path.stem, "notebook name")
                if problem is None and path.stem not in CHAPTERS:
                    problem = (f"{path.name!r} is not a chapter notebook; expected one of "
                               f"{', '.join(c + '.ipynb' for c in CHAPTERS)}")
                if problem is None and chapter_dir is not None and chapter_dir.name != path.stem:
                    problem = (f"the notebook {path.name!r} lies in the folder "
                               f"{chapter_dir.name!r}; expected <student>/{path.stem}/")
                if problem:
                    report.refused.append((where, problem))
                    continue
                data = _read_notebook_file(path, where, report)
                if data is not None:
                    stamp_dir = path.parent if chapter_dir else path.parent / "__none__"
                    found.append(Candidate(student_dir.name, path.stem, where,
                                           _read_timestamp(stamp_dir, path.stat().st_mtime),
                                           data))
    return found


def _zip_member_name(info: zipfile.ZipInfo) -> str | None:
    """The member's file name decoded as UTF-8, or None when its bytes are not UTF-8."""
    name = info.filename
    if not info.flag_bits & 0x800:
        # Without the UTF-8 flag, zipfile decoded the raw bytes as cp437: undo that.
        try:
            name = name.encode("cp437").decode("utf-8")
        except UnicodeDecodeError:
            return None
    return name


def scan_zip(archive: Path, report: CollectReport) -> list[Candidate]:
    """Notebooks named ``<student>_<chapter>.ipynb`` in the zip ``archive``."""
    found: list[Candidate] = []
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        report.refused.append((str(archive), f"not a readable zip file ({exc})"))
        return found
    with zf:
        for index, info in enumerate(zf.infolist()):
            if info.is_dir():
                continue
            name = _zip_member_name(info)
            origin = f"{archive.name}:{name if name is not None else f'member {index}'}"
            if name is None:
                report.refused.append((origin, "the file name is not valid UTF-8; rename it "
                                               "<student>_<chapter>.ipynb and collect again"))
                continue
            base = name.rsplit("/", 1)[-1]
            if not base.endswith(".ipynb") or base.startswith("."):
                continue
            match = _ZIP_NAME.fullmatch(base)
            if not match or match["chapter"] not in CHAPTERS:
                report.refused.append((origin, "expected a file named <student>_<chapter>"
                                               f".ipynb with a chapter in {', '.join(CHAPTERS)}"))
                continue
            problem = check_name(match["student"], "student id")
            if problem:
                report.refused.append((origin, problem))
                continue
            if info.file_size > MAX_NOTEBOOK_BYTES:
                report.refused.append((origin, f"larger than {MAX_NOTEBOOK_BYTES // 2**20} MB"))
                continue
            try:
                when = dt.datetime(*info.date_time, tzinfo=dt.UTC)
            except ValueError:
                when = _utc(0)
            found.append(Candidate(match["student"], match["chapter"], origin, when,
                                   zf.read(info)))
    return found


def stage_exchange(
    exchange_root: Path, staging: Path, chapters: Iterable[str], course: Course
) -> None:
    """Run nbgrader's exchange collect for ``chapters`` into the folder ``staging``."""
    from nbgrader.apps.api import capture_log
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange.default.collect import ExchangeCollect

    ensure_alembic_on_path()
    config = course.config()
    config.CourseDirectory.submitted_directory = os.path.relpath(staging, course.root)
    config.Exchange.root = str(exchange_root)
    config.ExchangeCollect.check_owner = False  # learners' files are owned by the exchange user
    config.ExchangeCollect.update = True
    for chapter in chapters:
        coursedir = CourseDirectory(config=config)
        coursedir.assignment_id = chapter
        collector = ExchangeCollect(coursedir=coursedir, config=config)
        result = capture_log(collector)
        if not result["success"]:
            raise RuntimeError(f"nbgrader collect {chapter} from {exchange_root} failed:\n"
                               f"{result.get('log', '')}{result.get('error', '')}")


def _existing_timestamp(folder: Path) -> dt.datetime | None:
    return _read_timestamp(folder, 0) if (folder / TIMESTAMP_FILE).is_file() else None


def store(candidates: list[Candidate], course: Course, report: CollectReport) -> None:
    """Copy the newest candidate of each (student, chapter) into ``<course>/submitted``."""
    groups: dict[tuple[str, str], list[Candidate]] = defaultdict(list)
    for candidate in candidates:
        groups[(candidate.student, candidate.chapter)].append(candidate)
    for (student, chapter), group in sorted(groups.items()):
        # Newest first; the origin breaks ties so that the choice never depends on scan order.
        group.sort(key=lambda c: (c.timestamp, c.origin), reverse=True)
        newest = group[0]
        flags = []
        if len(group) > 1:
            others = ", ".join(f"{c.origin} ({c.timestamp:%Y-%m-%d %H:%M:%S})" for c in group[1:])
            flags.append(Flag("duplicate_submission", None,
                              f"{len(group)} submissions of {chapter} by {student}: kept the "
                              f"newest, {newest.origin} ({newest.timestamp:%Y-%m-%d %H:%M:%S}); "
                              f"ignored {others}"))
        target = course.step_dir("submitted", student, chapter)
        existing = _existing_timestamp(target)
        if existing is not None and existing > newest.timestamp:
            flags.append(Flag("older_than_collected", None,
                              f"{newest.origin} is older than the submission collected before "
                              f"({existing:%Y-%m-%d %H:%M:%S}); kept the earlier collected one"))
        else:
            _write_submission(target, newest)
        report.collected.append((student, chapter))
        write_flags(course.folder, student, chapter, "collect", flags)
        if flags:
            report.flagged[(student, chapter)] = flags


def _write_submission(target: Path, candidate: Candidate) -> None:
    # Written next to the target and renamed, so that a crash never leaves half a submission.
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".collect-", dir=target.parent))
    (staging / f"{candidate.chapter}.ipynb").write_bytes(candidate.data)
    (staging / TIMESTAMP_FILE).write_text(
        candidate.timestamp.strftime(TIMESTAMP_FORMAT) + "\n", encoding="utf-8")
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)


def collect(
    sources: Iterable[str | os.PathLike] = (),
    *,
    exchange: str | os.PathLike | None = None,
    chapters: Iterable[str] | None = None,
    root: str | os.PathLike = ROOT,
    course_dir: str | os.PathLike | None = None,
) -> CollectReport:
    """Collect submissions from folders, zips and/or the nbgrader exchange.

    Args:
        sources: folders of learner folders, or LMS zip files.
        exchange: an nbgrader exchange root to collect from (``nbgrader collect``).
        chapters: only these chapter ids (default: every chapter).
        root: the course root (holds ``solutions/`` and ``notebooks/``).
        course_dir: where ``submitted/`` lives; ``<root>/autograder/course`` by default.

    Returns:
        A :class:`CollectReport`; refused files and duplicates are listed with reasons.

    Raises:
        FileNotFoundError: a source does not exist.
    """
    course = Course.of(root, course_dir)
    wanted = set(chapters) if chapters is not None else set(CHAPTERS)
    report = CollectReport()
    candidates: list[Candidate] = []
    for source in map(Path, sources):
        if source.is_dir():
            candidates += scan_folder(source, report)
        elif source.is_file():
            candidates += scan_zip(source, report)
        else:
            raise FileNotFoundError(f"no folder or zip file at {source}; pass a folder of "
                                    "learner folders or an LMS zip of <student>_<chapter>.ipynb")
    if exchange is not None:
        with tempfile.TemporaryDirectory(prefix="exchange-") as staging:
            stage_exchange(Path(exchange), Path(staging), sorted(wanted), course)
            candidates += scan_folder(Path(staging), report)
    store([c for c in candidates if c.chapter in wanted], course, report)
    return report
