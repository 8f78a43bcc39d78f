"""Collect learner submissions into ``<course>/submitted/<student>/<chapter>/``.

Three sources, all read-only (the originals are never modified):

* a folder of learner folders: ``<dir>/<student>/<chapter>/<chapter>.ipynb`` or
  ``<dir>/<student>/<chapter>.ipynb``;
* an LMS zip of files named ``<student>_<chapter>.ipynb`` (nbgrader ``zip_collect`` style;
  folders inside the zip are ignored);
* the nbgrader exchange: ``<exchange>/<course id>/inbound/<student>+<chapter>+<timestamp>``
  folders (with an optional ``+<random>`` tail), as ``nbgrader submit`` writes them.

Every folder entry and zip member is judged on its own: a bad one is refused with a reason
that says what to do, and the rest of the source is still collected. Links are never followed
(a link can point at the solutions or at another user's files); named pipes, sockets and
devices are refused; so are notebooks larger than :data:`MAX_NOTEBOOK_BYTES`, zip members
that are encrypted, compressed with an unsupported method, corrupt, or whose header lies
about their size.

Student ids are case-folded and put in Unicode normal form NFC, so ``Zoë`` typed on any
system is the learner ``zoë``; two spellings that meet in one id (``Casey`` and ``casey``)
are refused together, since only a human can tell who is who. Submission times come from the
source itself: the zip entry's date, the file's modification time, or the timestamp in the
exchange folder's name; never from a file the learner wrote (``timestamp.txt`` in a submission
is ignored). When a learner hands in a chapter more than once, the newest copy is kept and the
submission is flagged ``duplicate_submission``. Each collected submission gets a
``timestamp.txt`` (nbgrader's format) written by the collector, so collecting the same files
again changes nothing. The ``submission_secret.txt`` that ``nbgrader submit`` writes next to the
notebook is kept with it: nbgrader names the learner's feedback in the exchange after it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import shutil
import stat
import tempfile
import unicodedata
import zipfile
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from autograder.course import CHAPTERS, COURSE_ID, ROOT, Course
from autograder.flags import Flag, write_flags

# Largest notebook accepted; a learner's executed notebook with plots is a few MB.
MAX_NOTEBOOK_BYTES = 50 * 1024 * 1024
TIMESTAMP_FILE = "timestamp.txt"
SECRET_FILE = "submission_secret.txt"
# nbgrader's submission secret is 128 hex digits; anything much larger is not one.
MAX_SECRET_BYTES = 1024
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f %Z"
MAX_NAME_LENGTH = 64
_SAFE_CHARACTER = re.compile(r"[\w.@-]")
_ZIP_NAME = re.compile(r"(?P<student>.+)_(?P<chapter>ch\d\d_[a-z0-9_]+)\.ipynb")
# Compression methods Python's zipfile reads (stored, deflate, bzip2, lzma).
_ZIP_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}
_ZIP_METHOD_NAMES = {9: "Deflate64", 12: "bzip2", 14: "LZMA", 93: "Zstandard", 95: "xz",
                     98: "PPMd", 99: "AES encryption"}
# Folders that editors and Jupyter leave beside a notebook; never a submission.
_IGNORED_FOLDERS = {".ipynb_checkpoints", "__pycache__", "__MACOSX"}
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a named pipe must not wait for a writer.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_READ_CHUNK = 1 << 20


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
        refused: ``(origin, reason)`` for entries that were not collected.
    """

    taken: list[Taken] = field(default_factory=list)
    flagged: dict[tuple[str, str], list[Flag]] = field(default_factory=dict)
    refused: list[tuple[str, str]] = field(default_factory=list)

    @property
    def collected(self) -> list[tuple[str, str]]:
        """``(student, chapter)`` of each submission taken."""
        return [(t.student, t.chapter) for t in self.taken]

    def refuse(self, origin: str, reason: str) -> None:
        self.refused.append((_printable(origin), reason))

    def lines(self) -> list[str]:
        """A human-readable summary: what was taken per learner and chapter, then flags and
        refusals, one line each."""
        learners = len({t.student for t in self.taken})
        out = [f"collected {len(self.taken)} submission(s) of {learners} learner(s), "
               f"refused {len(self.refused)}"]
        rows = [(t.student, t.chapter, f"{t.timestamp:%Y-%m-%d %H:%M:%S} UTC", t.status,
                 t.origin) for t in sorted(self.taken, key=lambda t: (t.student, t.chapter))]
        widths = [max((len(row[i]) for row in rows), default=0) for i in range(4)]
        out += ["  " + "  ".join([*(v.ljust(w) for v, w in zip(row, widths, strict=False)),
                                  row[-1]]) for row in rows]
        for (student, chapter), flags in sorted(self.flagged.items()):
            out += [f"FLAG {student}/{chapter}: {f.reason}" for f in flags]
        out += [f"REFUSED {origin}: {reason}" for origin, reason in self.refused]
        return out


# ------------------------------------------------------------------------------- names


def _printable(name: str) -> str:
    # Undecodable bytes survive as surrogates; show them as escapes instead of crashing print().
    return name.encode("utf-8", "backslashreplace").decode("utf-8")


def student_id(name: str) -> str:
    """The student id of a name: case-folded, in Unicode normal form NFC.

    ``"Zoë"`` (whether typed as one character or as ``o`` plus a combining diaeresis) becomes
    ``"zoë"``: the same learner on every system.
    """
    return unicodedata.normalize("NFC", unicodedata.normalize("NFD", name).casefold())


def _character(char: str) -> str:
    """``"' ' (U+0020 SPACE)"``: a character named so that invisible ones can be told apart."""
    return f"{char!r} (U+{ord(char):04X} {unicodedata.name(char, 'unnamed character')})"


def _suggestion(name: str) -> str:
    fixed = re.sub(r"[^\w.@-]+", "_", unicodedata.normalize("NFC", name)).strip("._-@")
    return fixed[:MAX_NAME_LENGTH] or "<the learner's id>"


def check_name(name: str, what: str) -> str | None:
    """The reason why ``name`` is not acceptable as a ``what`` (student id, file), or None.

    A name is 1-64 letters, digits, ``.``, ``_``, ``-`` or ``@``, starts with a letter or a
    digit, and is valid UTF-8 in Unicode normal form NFC. The reason names the first problem
    exactly (which character, where) and how to fix it.
    """
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return (f"the {what} {_printable(name)!r} is not valid UTF-8 (it was written in another "
                f"encoding); rename it {_suggestion(_printable(name))!r} or another id of "
                "plain letters, digits, '.', '_', '-' or '@' and collect again")
    fix = f"rename it {_suggestion(name)!r} (or to the learner's real id) and collect again"
    if not name:
        return f"the {what} is empty; name it after the learner's id and collect again"
    if unicodedata.normalize("NFC", name) != name:
        combining = next((c for c in name if unicodedata.combining(c)), name[0])
        return (f"the {what} {name!r} is not in Unicode normal form NFC: it spells a letter "
                f"as a base letter plus the combining character {_character(combining)}; "
                f"write it as {unicodedata.normalize('NFC', name)!r} (one character per "
                "letter) and collect again")
    if len(name) > MAX_NAME_LENGTH:
        return (f"the {what} {name!r} is {len(name)} characters long, more than "
                f"{MAX_NAME_LENGTH}; {fix}")
    if not (name[0].isalnum()):
        return (f"the {what} {name!r} starts with {_character(name[0])}; it must start with a "
                f"letter or a digit: {fix}")
    for position, char in enumerate(name):
        if not _SAFE_CHARACTER.fullmatch(char):
            return (f"the {what} {name!r} contains {_character(char)} at position "
                    f"{position + 1}; only letters, digits, '.', '_', '-' and '@' are allowed: "
                    f"{fix}")
    return None


# ------------------------------------------------------------------------------- reading


def _kind(mode: int) -> str:
    """What a file-system entry is, for a refusal."""
    kinds = [(stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
             (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"),
             (stat.S_ISREG, "a regular file")]
    return next((text for test, text in kinds if test(mode)), "a special file")


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n:,} bytes"


_TOO_LARGE = (f"larger than the limit of {MAX_NOTEBOOK_BYTES // 2**20} MB for a notebook; ask "
              "the learner to clear the outputs (Edit > Clear Outputs of All Cells), save and "
              "hand it in again")


@contextmanager
def _open_folder(name: str | os.PathLike, parent: int | None = None) -> Iterator[int]:
    """A file descriptor of a folder; with ``parent``, ``name`` is opened below it and must
    not be a link."""
    fd = (os.open(name, _DIR_FLAGS, dir_fd=parent) if parent is not None
          else os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
    try:
        yield fd
    finally:
        os.close(fd)


def _entries(folder: int) -> list[os.DirEntry]:
    """The entries of an open folder, sorted by name (so that runs are reproducible)."""
    with os.scandir(folder) as it:
        return sorted(it, key=lambda e: e.name)


def _link_refusal(entry: os.DirEntry, folder: int, what: str) -> str:
    try:
        target = f" to {os.readlink(entry.name, dir_fd=folder)!r}"
    except OSError:
        target = ""
    return (f"{what} is a symbolic link{target}; links are never followed (one could point at "
            "the solutions or another user's files): put the real files there and collect "
            "again")


def _read_file(folder: int, name: str, origin: str, report: CollectReport
               ) -> tuple[bytes, float] | None:
    """The bytes and modification time of the regular file ``name`` in ``folder``, or None
    (refused, with the reason in ``report``). Links are not followed, pipes never waited on."""
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=folder)
    except OSError as exc:
        report.refuse(origin, f"cannot be opened ({exc.strerror}); if it is a link, put the "
                              "real file there and collect again")
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            report.refuse(origin, f"{_kind(info.st_mode)}, not a notebook file; hand in the "
                                  ".ipynb file itself")
            return None
        if info.st_nlink > 1:
            report.refuse(origin, f"a hard link shared with {info.st_nlink - 1} other name(s); "
                                  "it may be another user's file: hand in a plain copy")
            return None
        if info.st_size > MAX_NOTEBOOK_BYTES:
            report.refuse(origin, f"{_size(info.st_size)}, {_TOO_LARGE}")
            return None
        chunks, total = [], 0
        while chunk := os.read(fd, _READ_CHUNK):
            chunks.append(chunk)
            total += len(chunk)
            if total > MAX_NOTEBOOK_BYTES:
                report.refuse(origin, f"more than {_size(MAX_NOTEBOOK_BYTES)}, {_TOO_LARGE}")
                return None
        return b"".join(chunks), info.st_mtime
    except OSError as exc:
        report.refuse(origin, f"cannot be read ({exc.strerror}); copy it again and collect")
        return None
    finally:
        os.close(fd)


def _read_secret(folder: int) -> bytes | None:
    """nbgrader's ``submission_secret.txt`` in an open folder, when it is a small regular
    file (not a link); None otherwise."""
    try:
        fd = os.open(SECRET_FILE, _FILE_FLAGS, dir_fd=folder)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SECRET_BYTES:
            return None
        return os.read(fd, MAX_SECRET_BYTES + 1)[:MAX_SECRET_BYTES]
    except OSError:
        return None
    finally:
        os.close(fd)


def _utc(timestamp: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(timestamp, tz=dt.UTC)


class _Scan:
    """Collects the candidates of every source into one staging folder."""

    def __init__(self, staging: Path, report: CollectReport, chapters: set[str]):
        self.staging, self.report, self.chapters = staging, report, chapters
        self.candidates: list[Candidate] = []

    def add(self, spelling: str, chapter: str, origin: str, when: dt.datetime,
            data: bytes, secret: bytes | None = None) -> None:
        if chapter not in self.chapters:
            return
        staged = self.staging / f"{len(self.candidates)}.ipynb"
        staged.write_bytes(data)
        self.candidates.append(Candidate(student_id(spelling), spelling, chapter,
                                         _printable(origin), when, staged,
                                         hashlib.sha256(data).hexdigest(), secret))

    def learner_name(self, spelling: str, origin: str, what: str) -> bool:
        """True when ``spelling`` makes an acceptable student id; else refused."""
        # Judged as written (in NFC: a decomposed name is the same name) and as the id it makes.
        problem = (check_name(unicodedata.normalize("NFC", spelling), what)
                   or check_name(student_id(spelling), what))
        if problem:
            self.report.refuse(origin, problem)
        return problem is None

    # ---- a folder of learner folders

    def folder(self, source: Path) -> None:
        with _open_folder(source) as top:
            for entry in _entries(top):
                origin = str(source / entry.name)
                if entry.is_symlink():
                    self.report.refuse(origin, _link_refusal(entry, top, "the learner folder"))
                elif entry.is_dir(follow_symlinks=False):
                    if entry.name.endswith(".ipynb"):
                        self.report.refuse(origin, "a folder named like a notebook, outside a "
                                                   "learner folder; expected "
                                                   "<dir>/<student>/<chapter>.ipynb")
                    elif entry.name not in _IGNORED_FOLDERS and self.learner_name(
                            entry.name, origin, "learner folder"):
                        self._learner(top, entry.name, origin)
                elif entry.name.endswith(".ipynb"):
                    self.report.refuse(origin, "a notebook outside a learner folder; expected "
                                               "<dir>/<student>/<chapter>.ipynb")
                elif not entry.is_file(follow_symlinks=False):
                    self.report.refuse(origin, _special(entry))

    def _learner(self, parent: int, student: str, where: str) -> None:
        with _open_folder(student, parent) as folder:
            for entry in _entries(folder):
                origin = f"{where}/{entry.name}"
                if entry.is_symlink():
                    self.report.refuse(origin, _link_refusal(entry, folder, "this entry"))
                elif entry.is_dir(follow_symlinks=False):
                    if entry.name.endswith(".ipynb"):
                        self.report.refuse(origin, _NOTEBOOK_FOLDER)
                    elif entry.name not in _IGNORED_FOLDERS:
                        with _open_folder(entry.name, folder) as inner:
                            self._chapter_folder(inner, student, entry.name, origin, None)
                elif entry.name.endswith(".ipynb"):
                    self._notebook(folder, entry.name, student, origin, None, None)
                elif not entry.is_file(follow_symlinks=False):
                    self.report.refuse(origin, _special(entry))

    def _chapter_folder(self, folder: int, student: str, chapter_folder: str, where: str,
                        when: dt.datetime | None) -> None:
        """The notebooks in ``<student>/<chapter>/`` (or an exchange submission folder)."""
        secret = _read_secret(folder)
        for entry in _entries(folder):
            origin = f"{where}/{entry.name}"
            if entry.is_symlink():
                self.report.refuse(origin, _link_refusal(entry, folder, "this entry"))
            elif entry.is_dir(follow_symlinks=False):
                if entry.name.endswith(".ipynb"):
                    self.report.refuse(origin, _NOTEBOOK_FOLDER)
            elif entry.name.endswith(".ipynb"):
                self._notebook(folder, entry.name, student, origin, chapter_folder, when, secret)
            elif not entry.is_file(follow_symlinks=False):
                self.report.refuse(origin, _special(entry))

    def _notebook(self, folder: int, name: str, student: str, origin: str,
                  chapter_folder: str | None, when: dt.datetime | None,
                  secret: bytes | None = None) -> None:
        stem = name[: -len(".ipynb")]
        problem = None
        if stem not in CHAPTERS:
            problem = (f"{_printable(name)!r} is not a chapter notebook; expected one of "
                       f"{', '.join(c + '.ipynb' for c in CHAPTERS)}")
        if problem is None and chapter_folder is not None and chapter_folder != stem:
            problem = (f"the notebook {name!r} lies in the folder {chapter_folder!r}; expected "
                       f"<student>/{stem}/")
        if problem:
            self.report.refuse(origin, problem)
            return
        read = _read_file(folder, name, origin, self.report)
        if read is not None:
            data, mtime = read
            self.add(student, stem, origin, when or _utc(mtime), data, secret)

    # ---- the nbgrader exchange

    def exchange(self, exchange_root: Path, course_id: str) -> None:
        inbound = exchange_root / course_id / "inbound"
        if not inbound.is_dir():
            raise FileNotFoundError(
                f"no nbgrader inbound folder at {inbound}; --exchange takes the exchange root "
                f"(nbgrader's Exchange.root, e.g. /srv/nbgrader/exchange) of the course "
                f"{course_id!r}")
        with _open_folder(inbound) as top:
            for entry in _entries(top):
                self._exchange_entry(top, entry, str(inbound / entry.name))

    def _exchange_entry(self, top: int, entry: os.DirEntry, origin: str) -> None:
        parts = entry.name.split("+")
        if len(parts) not in (3, 4):
            self.report.refuse(origin, "not an nbgrader submission folder: expected "
                                       "<student>+<chapter>+<timestamp>[+<random>]")
            return
        spelling, chapter, stamp = parts[:3]
        if chapter not in CHAPTERS:
            self.report.refuse(origin, f"{chapter!r} is not a chapter of this course; expected "
                                       f"one of {', '.join(CHAPTERS)}")
            return
        if chapter not in self.chapters:
            return
        when = _exchange_time(stamp)
        if when is None:
            self.report.refuse(origin, f"the time {stamp!r} in the folder name cannot be read "
                                       f"(nbgrader writes {TIMESTAMP_FORMAT!r})")
            return
        if entry.is_symlink():
            self.report.refuse(origin, _link_refusal(entry, top, "the submission folder"))
        elif not entry.is_dir(follow_symlinks=False):
            self.report.refuse(origin, f"{_special(entry)}; nbgrader submissions are folders")
        elif self.learner_name(spelling, origin, "student id"):
            with _open_folder(entry.name, top) as folder:
                self._chapter_folder(folder, spelling, chapter, origin, when)

    # ---- an LMS zip

    def zip(self, archive: Path) -> None:
        try:
            zf = zipfile.ZipFile(archive)
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            self.report.refuse(str(archive), f"not a readable zip file ({exc}); download the "
                                             "export again")
            return
        with zf:
            for index, info in enumerate(zf.infolist()):
                self._zip_member(zf, archive, index, info)

    def _zip_member(self, zf: zipfile.ZipFile, archive: Path, index: int,
                    info: zipfile.ZipInfo) -> None:
        name = _zip_member_name(info)
        origin = f"{archive.name}:{name if name is not None else f'member {index}'}"
        if name is None:
            self.report.refuse(origin, "the file name is not valid UTF-8; rename it "
                                       "<student>_<chapter>.ipynb and collect again")
            return
        base = name.rsplit("/", 1)[-1]
        if info.is_dir() or not base.endswith(".ipynb") or base.startswith("."):
            if info.is_dir() and name.rstrip("/").endswith(".ipynb"):
                self.report.refuse(origin, _NOTEBOOK_FOLDER)
            return
        match = _ZIP_NAME.fullmatch(base)
        if not match or match["chapter"] not in CHAPTERS:
            self.report.refuse(origin, "expected a file named <student>_<chapter>.ipynb with a "
                                       f"chapter in {', '.join(CHAPTERS)}")
            return
        if not self.learner_name(match["student"], origin, "student id"):
            return
        problem = _zip_member_problem(info)
        if problem is None:
            try:
                data = _read_member(zf, info)
            except _MemberError as exc:
                problem = str(exc)
        if problem:
            self.report.refuse(origin, problem)
            return
        try:
            when = dt.datetime(*info.date_time, tzinfo=dt.UTC)
        except ValueError:
            when = _utc(0)
        self.add(match["student"], match["chapter"], origin, when, data)


_NOTEBOOK_FOLDER = ("a folder named like a notebook; hand in the .ipynb file itself, not a "
                    "folder of that name")


def _special(entry: os.DirEntry) -> str:
    return (f"{_kind(entry.stat(follow_symlinks=False).st_mode)}, not a file or folder; "
            "special files are never read: remove it from the submission")


def _exchange_time(stamp: str) -> dt.datetime | None:
    """The UTC time of an exchange folder's timestamp, parsed as nbgrader parses it."""
    from nbgrader.utils import parse_utc

    try:
        return parse_utc(stamp).replace(tzinfo=dt.UTC)  # nbgrader gives naive UTC times
    except (ValueError, OverflowError, TypeError):
        return None


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


def _zip_member_problem(info: zipfile.ZipInfo) -> str | None:
    """Why the member cannot be read, judged from its header, or None."""
    mode = info.external_attr >> 16
    if stat.S_IFMT(mode) and not stat.S_ISREG(mode):  # no type bits: a plain file
        return (f"{_kind(mode)} inside the zip, not a notebook file; links and special files "
                "are never extracted: put the notebook itself into the zip")
    if info.flag_bits & 0x1:
        return ("encrypted (password-protected); export the submissions without a password "
                "and collect again")
    if info.compress_type not in _ZIP_METHODS:
        method = _ZIP_METHOD_NAMES.get(info.compress_type, f"method {info.compress_type}")
        return (f"compressed with {method}, which cannot be read here; re-create the zip with "
                "ordinary (Deflate) compression and collect again")
    if info.file_size > MAX_NOTEBOOK_BYTES:
        return f"{_size(info.file_size)} uncompressed, {_TOO_LARGE}"
    return None


class _MemberError(Exception):
    """A zip member that cannot be read; the message says why and what to do."""


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """The bytes of a member, read in bounded chunks; _MemberError when they are corrupt or
    not the size that the header says."""
    chunks, total = [], 0
    try:
        with zf.open(info) as member:
            while chunk := member.read(_READ_CHUNK):
                chunks.append(chunk)
                total += len(chunk)
                if total > MAX_NOTEBOOK_BYTES:
                    raise _MemberError(f"more than {_size(MAX_NOTEBOOK_BYTES)} uncompressed "
                                       f"although its header says {_size(info.file_size)}; "
                                       "the zip is damaged or crafted: download it again")
    except zipfile.BadZipFile as exc:
        raise _MemberError(f"corrupt inside the zip ({exc}); download the export again, or "
                           "ask the learner to hand the notebook in again") from None
    except (EOFError, OSError, ValueError, NotImplementedError, RuntimeError) as exc:
        raise _MemberError(f"cannot be read from the zip ({type(exc).__name__}: {exc}); "
                           "download the export again") from None
    if total != info.file_size:
        raise _MemberError(f"its header says {_size(info.file_size)} but it holds "
                           f"{_size(total)}; the zip is damaged or crafted: download it again")
    return b"".join(chunks)


# ------------------------------------------------------------------------------- storing


def _existing(target: Path) -> tuple[dt.datetime, str] | None:
    """The timestamp and digest of what was collected before into ``target``, or None."""
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


def store(candidates: list[Candidate], course: Course, report: CollectReport) -> None:
    """Copy the newest candidate of each (student, chapter) into ``<course>/submitted``."""
    groups: dict[tuple[str, str], list[Candidate]] = defaultdict(list)
    for candidate in _collisions(candidates, report):
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
        write_flags(course.folder, student, chapter, "collect", flags)
        if flags:
            report.flagged[(student, chapter)] = flags


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


def collect(
    sources: Iterable[str | os.PathLike] = (),
    *,
    exchange: str | os.PathLike | None = None,
    chapters: Iterable[str] | None = None,
    root: str | os.PathLike = ROOT,
    course_dir: str | os.PathLike | None = None,
    course_id: str = COURSE_ID,
) -> CollectReport:
    """Collect submissions from folders, zips and/or the nbgrader exchange.

    Args:
        sources: folders of learner folders, or LMS zip files.
        exchange: an nbgrader exchange root (``Exchange.root``) to collect from.
        chapters: only these chapter ids (default: every chapter).
        root: the course root (holds ``solutions/`` and ``notebooks/``).
        course_dir: where ``submitted/`` lives; ``<root>/autograder/course`` by default.
        course_id: the course's id in the exchange (nbgrader's ``CourseDirectory.course_id``).

    Returns:
        A :class:`CollectReport`: what was taken, flagged and refused, with reasons.

    Raises:
        FileNotFoundError: a source, or the exchange's inbound folder, does not exist.
    """
    course = Course.of(root, course_dir)
    wanted = set(chapters) if chapters is not None else set(CHAPTERS)
    report = CollectReport()
    sources = [Path(s) for s in sources]
    for source in sources:
        if not (source.is_dir() or source.is_file()):
            raise FileNotFoundError(f"no folder or zip file at {source}; pass a folder of "
                                    "learner folders or an LMS zip of <student>_<chapter>.ipynb")
    course.folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".collect-staging-", dir=course.folder) as staging:
        scan = _Scan(Path(staging), report, wanted)
        for source in sources:
            if source.is_dir():
                scan.folder(source)
            else:
                scan.zip(source)
        if exchange is not None:
            scan.exchange(Path(exchange), course_id)
        store(scan.candidates, course, report)
    return report
