"""Collect learner submissions into ``<course>/submitted/<student>/<chapter>/``.

Three sources, all read-only (the originals are never modified):

* a folder of learner folders: ``<dir>/<student>/<chapter>/<chapter>.ipynb`` or
  ``<dir>/<student>/<chapter>.ipynb``;
* an LMS zip of files named ``<student>_<chapter>.ipynb`` (nbgrader ``zip_collect`` style;
  folders inside the zip are ignored);
* the nbgrader exchange: ``<exchange>/<course id>/inbound/<student>+<chapter>+<timestamp>``
  folders (with an optional ``+<random>`` tail), as ``nbgrader submit`` writes them.

Every folder entry and zip member is judged on its own, and each ends in the report: collected
(``new``, ``unchanged`` or ``kept``), ``REFUSED`` with a reason that says what to do, or
``IGNORED`` with the reason (what editors and operating systems leave beside files, a chapter
this run does not collect, the learner's own ``timestamp.txt``, a file of the release, an older
copy of a submission). Nothing is skipped without a word, and an error while reading one entry
(a folder that cannot be listed, a zip member whose data is corrupt) refuses that entry only.
Links are never followed (a link can point at the solutions or at another user's files); named
pipes, sockets and devices are refused; so are notebooks larger than :data:`MAX_NOTEBOOK_BYTES`,
zip members that are encrypted, compressed with an unsupported method, corrupt, or whose header
lies about their size. A file with several names (a hard link) is judged by who owns it
(:func:`hard_link_verdict`).

Names are read in Unicode normal form NFC, so a name that macOS wrote decomposed is the same
name. Student ids are case-folded too, so ``Zoë`` typed on any system is the learner ``zoë``;
two spellings that meet in one id (``Casey`` and ``casey``) are refused together, since only a
human can tell who is who. Submission times come from the source itself: the zip entry's date,
the file's modification time, or the timestamp in the exchange folder's name; never from a file
the learner wrote (``timestamp.txt`` in a submission is ignored). When a learner hands in a
chapter more than once, the newest copy is kept and the submission is flagged
``duplicate_submission``. Each collected submission gets a ``timestamp.txt`` (nbgrader's format)
written by the collector, so collecting the same files again changes nothing. The
``submission_secret.txt`` that ``nbgrader submit`` writes next to the notebook is kept with it:
nbgrader names the learner's feedback in the exchange after it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import hashlib
import io
import lzma
import mmap
import os
import pwd
import re
import shutil
import stat
import struct
import tempfile
import unicodedata
import zipfile
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
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
# What editors, Jupyter and operating systems leave beside files (and ``._*``, macOS's
# AppleDouble metadata files); never a submission.
_LITTER = {".ipynb_checkpoints", "__pycache__", "__MACOSX", ".DS_Store", "Thumbs.db",
           "desktop.ini"}
_LITTER_REASON = ("left by an editor or the operating system (Jupyter's checkpoints, macOS or "
                  "Windows folder metadata), never a submission")
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
        self.refused.append((_printable(origin), reason))

    def ignore(self, origin: str, reason: str) -> None:
        self.ignored.append((_printable(origin), reason))

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


@contextlib.contextmanager
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
               ) -> tuple[bytes, os.stat_result] | None:
    """The bytes and the status (``os.fstat``) of the regular file ``name`` in ``folder``, or
    None (refused, with the reason in ``report``). Links are not followed, pipes never waited
    on."""
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
        return b"".join(chunks), info
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


# ------------------------------------------------------------------------------- hard links


@dataclass(frozen=True)
class LinkName:
    """One name, inside a source, of a file that has several (a hard link).

    Attributes:
        origin: the name, as the report writes it.
        student: the learner id of the learner folder it lies in (None: in no learner folder).
        folder_uid: the owner of that learner folder.
        source_uid: the owner of the source (the inbox, or the exchange's inbound folder).
    """

    origin: str
    student: str | None
    folder_uid: int
    source_uid: int


def _login(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def _claims(name: LinkName, owner_uid: int) -> bool:
    """Whether the file's owner says that ``name``'s learner holds it: the owner's account
    owns that learner's folder (and is not the account that owns the whole source, which owns
    every folder when one account filled the inbox), or is named after the learner."""
    if name.student is None:
        return False
    login = _login(owner_uid)
    named = login is not None and student_id(login) == name.student
    return named or name.folder_uid == owner_uid != name.source_uid


def hard_link_verdict(me: LinkName, names: list[LinkName], nlink: int, owner_uid: int,
                      ) -> tuple[str | None, Flag | None]:
    """Whether the learner of ``me`` may hand in a file that has ``nlink`` names, ``names``
    of which lie in the sources collected (``me`` among them); ``owner_uid`` owns the file.

    The file belongs to the learner whose folder its owner owns, or whom its owner's account
    is named after: that learner keeps it, and every other name of it is refused (it is that
    learner's work, linked in). When no learner has that claim, a name outside the sources
    may be anyone's file (the solutions, another user's), so every name is refused; when all
    the names are in the sources and one account owns them all (an inbox that one account
    filled), nobody can tell whose it is: each learner keeps it, flagged ``shared_file``.

    Returns:
        ``(reason, None)`` to refuse ``me``, ``(None, flag)`` to collect it with a flag, or
        ``(None, None)`` to collect it.
    """
    claimants = [n for n in names if _claims(n, owner_uid)]
    others = ", ".join(n.origin for n in names if n.origin != me.origin)
    account = _login(owner_uid) or f"user id {owner_uid}"
    if claimants:
        if any(n.origin == me.origin for n in claimants):
            return None, None
        return (f"the same file (a hard link) as {claimants[0].origin}, which belongs there: "
                f"its owner, {account}, owns that learner's folder or is that learner, not "
                "this one; a file handed in from someone else's folder is not this learner's "
                "work: hand in your own copy and collect again"), None
    outside = nlink - len(names)
    if outside > 0:
        shared = f" (and with {others})" if others else ""
        return (f"a hard link shared with {outside} name(s) outside the collected sources"
                f"{shared}, and its owner, {account}, does not own this learner's folder: it "
                "may be another user's file, such as the solutions; hand in a plain copy"), None
    if len({n.student for n in names}) == 1:
        return None, None  # several names in one learner's own folders
    return None, Flag("shared_file", None,
                      f"{me.origin} is the same file (a hard link) as {others}; one account "
                      f"({account}) owns the file and every folder, so collect cannot tell "
                      "whose work it is and collected it for each learner: check who wrote it")


class _HardLinks:
    """Every name, inside the sources, of each regular file that has more than one."""

    def __init__(self) -> None:
        self.names: dict[tuple[int, int], list[LinkName]] = defaultdict(list)

    def index(self, top: Path, learner: Callable[[str], str]) -> None:
        """Record the names below ``top``; ``learner(name)`` is the learner id of a folder
        named ``name`` directly in ``top``."""
        source_uid = os.stat(top).st_uid
        owners = {}
        with os.scandir(top) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    owners[entry.name] = entry.stat(follow_symlinks=False).st_uid
        for path, first, info in _multi_linked(top):
            self.names[(info.st_dev, info.st_ino)].append(LinkName(
                path, learner(first) if first else None, owners.get(first, source_uid),
                source_uid))

    def verdict(self, origin: str, info: os.stat_result) -> tuple[str | None, Flag | None]:
        """:func:`hard_link_verdict` for the name ``origin`` of the file ``info``."""
        names = self.names.get((info.st_dev, info.st_ino), [])
        me = next((n for n in names if n.origin == origin), None)
        if me is None:
            return "a hard link that appeared while collect was running; collect again", None
        return hard_link_verdict(me, names, info.st_nlink, info.st_uid)


def _multi_linked(top: Path) -> Iterator[tuple[str, str | None, os.stat_result]]:
    """Every regular file below ``top`` that has more than one name: its path, the name of
    the folder of ``top`` that holds it (None: ``top`` itself), its status. Links are not
    followed, and what cannot be read is left out; the walk keeps no folder open, so however
    deep a folder is, it cannot run out of file descriptors or recursion."""
    stack: list[tuple[str, str | None]] = [(str(top), None)]
    while stack:
        folder, first = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                stack.append((entry.path, first or entry.name))
            elif stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                yield entry.path, first, info


# ------------------------------------------------------------------------------- scanning


def _nfc(name: str) -> str:
    return unicodedata.normalize("NFC", name)


def _litter(name: str) -> bool:
    return name in _LITTER or name.startswith("._")


@dataclass(frozen=True)
class _Place:
    """Where a notebook lies: the open folder, the learner, and what the folder says.

    Attributes:
        folder: the open folder that holds it.
        student: the learner, as the source spells the name.
        chapter_folder: the name of the chapter folder it lies in (None: a learner folder).
        when: the time the source gives it (an exchange folder's name), else None.
        secret: nbgrader's submission secret beside it.
    """

    folder: int
    student: str
    chapter_folder: str | None = None
    when: dt.datetime | None = None
    secret: bytes | None = None


@dataclass(frozen=True)
class _Found:
    """A readable notebook of a source, before its bytes are staged (see :class:`Candidate`)."""

    spelling: str
    chapter: str
    origin: str
    when: dt.datetime
    secret: bytes | None = None
    flags: tuple[Flag, ...] = ()


class _Scan:
    """Collects the candidates of every source into one staging folder."""

    def __init__(self, staging: Path, report: CollectReport, chapters: set[str],
                 course: Course):
        self.staging, self.report, self.chapters, self.course = staging, report, chapters, course
        self.candidates: list[Candidate] = []
        self.links = _HardLinks()

    def add(self, found: _Found, data: bytes) -> None:
        staged = self.staging / f"{len(self.candidates)}.ipynb"
        try:
            staged.write_bytes(data)
        except OSError as exc:  # the course folder's fault, not the entry's: stop the run
            raise RuntimeError(f"cannot write to the course folder {self.course.folder} "
                               f"({exc.strerror or exc}); free space or fix its permissions "
                               "and collect again") from exc
        self.candidates.append(Candidate(student_id(found.spelling), found.spelling,
                                         found.chapter, _printable(found.origin), found.when,
                                         staged, hashlib.sha256(data).hexdigest(), found.secret,
                                         found.flags))

    def learner_name(self, spelling: str, origin: str, what: str) -> bool:
        """True when ``spelling`` makes an acceptable student id; else refused."""
        # Judged as written (in NFC: a decomposed name is the same name) and as the id it makes.
        problem = (check_name(_nfc(spelling), what) or check_name(student_id(spelling), what))
        if problem:
            self.report.refuse(origin, problem)
        return problem is None

    def wanted(self, chapter: str, origin: str) -> bool:
        """True when this run collects ``chapter``; else ``origin`` is ignored."""
        if chapter not in self.chapters:
            self.report.ignore(origin, f"a submission of {chapter}, which this run does not "
                                       "collect (--chapter)")
        return chapter in self.chapters

    @contextlib.contextmanager
    def guarded(self, origin: str) -> Iterator[None]:
        """Refuse ``origin`` when reading it fails (the folder cannot be listed, the file
        cannot be read, it changed meanwhile); the scan goes on with the next entry."""
        try:
            yield
        except OSError as exc:
            self.report.refuse(origin, f"cannot be read ({exc.strerror or exc}); give the "
                                       "collector read access to it, or copy it again, and "
                                       "collect again")

    def each(self, folder: int, where: str, handle: Callable[[os.DirEntry, str, str], None],
             empty: str | None = None) -> None:
        """``handle(entry, origin, kind)`` for each entry of an open folder that is a folder or
        a regular file (``kind``); links, special files and litter are judged here. Each entry
        is read under :meth:`guarded`. A folder that holds nothing (or only litter) is
        refused with the reason ``empty``."""
        entries = _entries(folder)
        if empty is not None and all(_litter(_nfc(e.name)) for e in entries):
            self.report.refuse(where, empty)
        for entry in entries:
            origin = f"{where}/{entry.name}"
            with self.guarded(origin):
                kind = self._kind_of(entry, folder, origin)
                if kind is not None:
                    handle(entry, origin, kind)

    def _kind_of(self, entry: os.DirEntry, folder: int, origin: str) -> str | None:
        if _litter(_nfc(entry.name)):
            self.report.ignore(origin, _LITTER_REASON)
        elif entry.is_symlink():
            self.report.refuse(origin, _link_refusal(entry, folder, "this entry"))
        elif entry.is_dir(follow_symlinks=False):
            return "folder"
        elif entry.is_file(follow_symlinks=False):
            return "file"
        else:
            self.report.refuse(origin, _special(entry))
        return None

    def other_file(self, name: str, origin: str, chapter: str | None) -> None:
        """A file that is not a notebook, in a learner's or a chapter's folder."""
        if name == TIMESTAMP_FILE:
            self.report.ignore(origin, "a time written on the learner's side, never believed: "
                                       "the time comes from the source itself")
        elif name == SECRET_FILE:
            self.report.ignore(origin, "nbgrader's submission secret, kept with the notebook "
                                       "beside it" if chapter else "nbgrader's submission "
                                       "secret, outside a submission folder: not used")
        elif chapter in CHAPTERS and (self.course.release_dir(chapter) / name).is_file():
            self.report.ignore(origin, f"a file of the {chapter} release; grading uses the "
                                       "release's own copy")
        else:
            self.report.refuse(origin, "not a notebook: only <chapter>.ipynb files are "
                                       "collected; if it is part of the learner's work, it "
                                       "belongs in the notebook")

    # ---- a folder of learner folders

    def folder(self, source: Path) -> None:
        self.links.index(source, lambda name: student_id(_nfc(name)))
        with _open_folder(source) as top:
            self.each(top, str(source), functools.partial(self._learner_entry, top))

    def _learner_entry(self, top: int, entry: os.DirEntry, origin: str, kind: str) -> None:
        """An entry of the inbox: a learner folder, or something refused."""
        if kind == "file":
            self.report.refuse(origin, "a file outside a learner folder; expected "
                                       "<dir>/<student>/<chapter>.ipynb")
        elif _nfc(entry.name).endswith(".ipynb"):
            self.report.refuse(origin, "a folder named like a notebook, outside a learner "
                                       "folder; expected <dir>/<student>/<chapter>.ipynb")
        elif self.learner_name(entry.name, origin, "learner folder"):
            with _open_folder(entry.name, top) as folder:
                self.each(folder, origin, functools.partial(self._learner_file, folder,
                                                            entry.name),
                          "an empty learner folder: nothing was handed in; ask the learner "
                          "to hand in again")

    def _learner_file(self, folder: int, student: str, entry: os.DirEntry, origin: str,
                      kind: str) -> None:
        """An entry of a learner folder: a chapter folder or a notebook."""
        name = _nfc(entry.name)
        if kind == "folder" and name.endswith(".ipynb"):
            self.report.refuse(origin, _NOTEBOOK_FOLDER)
        elif kind == "folder" and name in CHAPTERS and not self.wanted(name, origin):
            return
        elif kind == "folder":
            with _open_folder(entry.name, folder) as inner:
                self._chapter_folder(_Place(inner, student, name), origin)
        elif name.endswith(".ipynb"):
            self._notebook(_Place(folder, student), entry.name, origin)
        else:
            self.other_file(name, origin, None)

    def _chapter_folder(self, place: _Place, where: str) -> None:
        """The notebooks in ``<student>/<chapter>/`` (or an exchange submission folder)."""
        if not any(_nfc(e.name).endswith(".ipynb") and not _litter(_nfc(e.name))
                   for e in _entries(place.folder)):
            self.report.refuse(where, "holds no notebook: nothing was handed in here (at most "
                                      "files beside a notebook); ask the learner to hand in "
                                      f"{place.chapter_folder}.ipynb")
            return
        place = dataclasses.replace(place, secret=_read_secret(place.folder))

        def handle(entry: os.DirEntry, origin: str, kind: str) -> None:
            name = _nfc(entry.name)
            if kind == "folder":
                self.report.refuse(origin, _NOTEBOOK_FOLDER if name.endswith(".ipynb") else
                                   "a folder inside a chapter folder; only the chapter's "
                                   "notebook is collected: hand in <chapter>.ipynb itself")
            elif name.endswith(".ipynb"):
                self._notebook(place, entry.name, origin)
            else:
                self.other_file(name, origin, place.chapter_folder)

        self.each(place.folder, where, handle)

    def _notebook(self, place: _Place, name: str, origin: str) -> None:
        stem = _nfc(name)[: -len(".ipynb")]
        problem = None
        if stem not in CHAPTERS:
            problem = (f"{_printable(name)!r} is not a chapter notebook; expected one of "
                       f"{', '.join(c + '.ipynb' for c in CHAPTERS)}")
        if problem is None and place.chapter_folder not in (None, stem):
            problem = (f"the notebook {name!r} lies in the folder {place.chapter_folder!r}; "
                       f"expected <student>/{stem}/")
        if problem:
            self.report.refuse(origin, problem)
            return
        if not self.wanted(stem, origin):
            return
        read = _read_file(place.folder, name, origin, self.report)
        if read is None:
            return
        data, info = read
        refusal, flag = self.links.verdict(origin, info) if info.st_nlink > 1 else (None, None)
        if refusal:
            self.report.refuse(origin, refusal)
            return
        self.add(_Found(place.student, stem, origin, place.when or _utc(info.st_mtime),
                        place.secret, (flag,) if flag else ()), data)

    # ---- the nbgrader exchange

    def exchange(self, exchange_root: Path, course_id: str) -> None:
        inbound = exchange_root / course_id / "inbound"
        if not inbound.is_dir():
            raise FileNotFoundError(
                f"no nbgrader inbound folder at {inbound}; --exchange takes the exchange root "
                f"(nbgrader's Exchange.root, e.g. /srv/nbgrader/exchange) of the course "
                f"{course_id!r}")
        self.links.index(inbound, lambda name: student_id(_nfc(name.split("+")[0])))
        with _open_folder(inbound) as top:
            self.each(top, str(inbound), functools.partial(self._exchange_entry, top))

    def _exchange_entry(self, top: int, entry: os.DirEntry, origin: str, kind: str) -> None:
        parts = _nfc(entry.name).split("+")
        if len(parts) not in (3, 4):
            self.report.refuse(origin, "not an nbgrader submission folder: expected "
                                       "<student>+<chapter>+<timestamp>[+<random>]")
            return
        spelling, chapter, stamp = parts[:3]
        if chapter not in CHAPTERS:
            self.report.refuse(origin, f"{chapter!r} is not a chapter of this course; expected "
                                       f"one of {', '.join(CHAPTERS)}")
            return
        if not self.wanted(chapter, origin):
            return
        when = _exchange_time(stamp)
        if when is None:
            self.report.refuse(origin, f"the time {stamp!r} in the folder name cannot be read "
                                       f"(nbgrader writes {TIMESTAMP_FORMAT!r})")
        elif kind != "folder":
            self.report.refuse(origin, "a file, not a folder; nbgrader submissions are folders")
        elif self.learner_name(spelling, origin, "student id"):
            with _open_folder(entry.name, top) as folder:
                self._chapter_folder(_Place(folder, spelling, chapter, when), origin)

    # ---- an LMS zip

    def zip(self, archive: Path) -> None:
        try:
            handle, zf = _open_zip(archive)
        except Exception as exc:  # whatever a damaged zip raises, it refuses the zip only
            self.report.refuse(str(archive), f"not a readable zip file ({exc}); it may be "
                                             "cut short (an interrupted download) or not a zip "
                                             "at all: download the export again; nothing of it "
                                             "was collected")
            return
        with handle, zf:
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
        student, chapter = self._zip_names(name, info, origin)
        if student is None or not self.wanted(chapter, origin):
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
        self.add(_Found(student, chapter, origin, when), data)

    def _zip_names(self, name: str, info: zipfile.ZipInfo, origin: str,
                   ) -> tuple[str | None, str]:
        """The student and chapter that a member's name gives, or ``(None, "")`` when it was
        judged here (refused, or ignored: a folder, litter)."""
        parts = name.rstrip("/").split("/")
        if any(_litter(part) for part in parts):
            self.report.ignore(origin, _LITTER_REASON)
        elif info.is_dir() and parts[-1].endswith(".ipynb"):
            self.report.refuse(origin, _NOTEBOOK_FOLDER)
        elif info.is_dir():
            self.report.ignore(origin, "a folder of the zip; only the files in it count, "
                                       "by their own names")
        elif not (match := _ZIP_NAME.fullmatch(parts[-1])) or match["chapter"] not in CHAPTERS:
            self.report.refuse(origin, "expected a notebook named <student>_<chapter>.ipynb "
                                       f"with a chapter in {', '.join(CHAPTERS)}")
        elif self.learner_name(match["student"], origin, "student id"):
            return match["student"], match["chapter"]
        return None, ""


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


class _PatchedFile(io.FileIO):
    """A file read with some of its bytes replaced (``patches``: offset -> byte); the file
    itself is never written."""

    def __init__(self, path: Path, patches: dict[int, int]) -> None:
        super().__init__(path, "rb")
        self.patches = patches

    def read(self, size: int = -1) -> bytes:
        start = self.tell()
        data = super().read(size)
        hits = [at for at in self.patches if start <= at < start + len(data)]
        if not hits:
            return data
        changed = bytearray(data)
        for at in hits:
            changed[at - start] = self.patches[at]
        return bytes(changed)


def _open_zip(archive: Path) -> tuple[io.FileIO, zipfile.ZipFile]:
    """The zip ``archive`` for reading, and the file it reads (close both).

    Python refuses a whole zip when one member's name is marked UTF-8 (flag bit 11) but its
    bytes are not UTF-8, as some tools write them. Such a member is read with the flag cleared
    instead, so that its name comes back undecodable and only that member is refused.
    """
    patches: dict[int, int] = {}
    while True:
        handle = _PatchedFile(archive, patches)
        try:
            return handle, zipfile.ZipFile(handle)
        except UnicodeDecodeError as exc:
            handle.close()
            at = _central_flags(archive, exc.object)
            if at is None or at in patches:
                raise
            patches[at] = _byte_at(archive, at) & ~0x08  # bit 11 of the little-endian flags
        except BaseException:
            handle.close()
            raise


def _central_flags(archive: Path, name: bytes) -> int | None:
    """The offset of the high byte of the flags of the central directory entry named
    ``name`` (zip APPNOTE 4.3.12: the flags at 8, the name's length at 28, the name at 46)."""
    with open(archive, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        at = len(data)
        while (at := data.rfind(name, 0, at)) >= 46:
            header = at - 46
            if data[header:header + 4] == b"PK\x01\x02" and struct.unpack_from(
                    "<H", data, header + 28)[0] == len(name):
                return header + 9
    return None


def _byte_at(archive: Path, offset: int) -> int:
    with open(archive, "rb") as f:
        f.seek(offset)
        return f.read(1)[0]


def _zip_member_name(info: zipfile.ZipInfo) -> str | None:
    """The member's file name decoded as UTF-8 in form NFC, or None when its bytes are not
    UTF-8."""
    name = info.filename
    if not info.flag_bits & 0x800:
        # Without the UTF-8 flag, zipfile decoded the raw bytes as cp437: undo that.
        try:
            name = name.encode("cp437").decode("utf-8")
        except UnicodeDecodeError:
            return None
    return _nfc(name)


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
    except _MemberError:
        raise
    except (zipfile.BadZipFile, zlib.error, lzma.LZMAError, EOFError) as exc:
        raise _MemberError(f"corrupt inside the zip ({exc}); download the export again, or "
                           "ask the learner to hand the notebook in again") from None
    except Exception as exc:  # any other failure to read it refuses this member only
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
        write_flags(course.folder, student, chapter, "collect", flags)
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
        A :class:`CollectReport`: what was taken, flagged, refused and ignored, with reasons;
        every entry of every source is in it.

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
        scan = _Scan(Path(staging), report, wanted, course)
        for source in sources:
            with scan.guarded(str(source)):
                if source.is_dir():
                    scan.folder(source)
                else:
                    scan.zip(source)
        if exchange is not None:
            scan.exchange(Path(exchange), course_id)
        store(scan.candidates, course, report)
    return report
