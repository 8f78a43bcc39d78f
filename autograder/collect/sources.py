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
import os
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from autograder.collect.folders import (
    link_refusal,
    open_folder,
    read_file,
    read_secret,
    sorted_entries,
    special_refusal,
    utc,
)
from autograder.collect.links import HardLinks
from autograder.collect.names import (
    LITTER_REASON,
    check_name,
    is_litter,
    nfc,
    printable,
    student_id,
)
from autograder.collect.report import Candidate, CollectReport
from autograder.collect.store import store
from autograder.collect.zips import (
    MEMBER_NAME,
    MemberError,
    member_name,
    member_problem,
    open_zip,
    read_member,
)
from autograder.course import (
    CHAPTERS,
    COURSE_ID,
    SECRET_FILE,
    TIMESTAMP_FILE,
    TIMESTAMP_FORMAT,
    Course,
)
from autograder.flags import Flag


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


class Scan:
    """Collects the candidates of every source into one staging folder."""

    def __init__(self, staging: Path, report: CollectReport, chapters: set[str],
                 course: Course):
        self.staging, self.report, self.chapters, self.course = staging, report, chapters, course
        self.candidates: list[Candidate] = []
        self.links = HardLinks()

    def add(self, found: _Found, data: bytes) -> None:
        staged = self.staging / f"{len(self.candidates)}.ipynb"
        try:
            staged.write_bytes(data)
        except OSError as exc:  # the course folder's fault, not the entry's: stop the run
            raise RuntimeError(f"cannot write to the course folder {self.course.folder} "
                               f"({exc.strerror or exc}); free space or fix its permissions "
                               "and collect again") from exc
        self.candidates.append(Candidate(student_id(found.spelling), found.spelling,
                                         found.chapter, printable(found.origin), found.when,
                                         staged, hashlib.sha256(data).hexdigest(), found.secret,
                                         found.flags))

    def learner_name(self, spelling: str, origin: str, what: str) -> bool:
        """True when ``spelling`` makes an acceptable student id; else refused."""
        # Judged as written (in NFC: a decomposed name is the same name) and as the id it makes.
        problem = (check_name(nfc(spelling), what) or check_name(student_id(spelling), what))
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
        entries = sorted_entries(folder)
        if empty is not None and all(is_litter(nfc(e.name)) for e in entries):
            self.report.refuse(where, empty)
        for entry in entries:
            origin = f"{where}/{entry.name}"
            with self.guarded(origin):
                kind = self._kind_of(entry, folder, origin)
                if kind is not None:
                    handle(entry, origin, kind)

    def _kind_of(self, entry: os.DirEntry, folder: int, origin: str) -> str | None:
        if is_litter(nfc(entry.name)):
            self.report.ignore(origin, LITTER_REASON)
        elif entry.is_symlink():
            self.report.refuse(origin, link_refusal(entry, folder, "this entry"))
        elif entry.is_dir(follow_symlinks=False):
            return "folder"
        elif entry.is_file(follow_symlinks=False):
            return "file"
        else:
            self.report.refuse(origin, special_refusal(entry))
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
        self.links.index(source, lambda name: student_id(nfc(name)))
        with open_folder(source) as top:
            self.each(top, str(source), functools.partial(self._learner_entry, top))

    def _learner_entry(self, top: int, entry: os.DirEntry, origin: str, kind: str) -> None:
        """An entry of the inbox: a learner folder, or something refused."""
        if kind == "file":
            self.report.refuse(origin, "a file outside a learner folder; expected "
                                       "<dir>/<student>/<chapter>.ipynb")
        elif nfc(entry.name).endswith(".ipynb"):
            self.report.refuse(origin, "a folder named like a notebook, outside a learner "
                                       "folder; expected <dir>/<student>/<chapter>.ipynb")
        elif self.learner_name(entry.name, origin, "learner folder"):
            with open_folder(entry.name, top) as folder:
                self.each(folder, origin, functools.partial(self._learner_file, folder,
                                                            entry.name),
                          "an empty learner folder: nothing was handed in; ask the learner "
                          "to hand in again")

    def _learner_file(self, folder: int, student: str, entry: os.DirEntry, origin: str,
                      kind: str) -> None:
        """An entry of a learner folder: a chapter folder or a notebook."""
        name = nfc(entry.name)
        if kind == "folder" and name.endswith(".ipynb"):
            self.report.refuse(origin, _NOTEBOOK_FOLDER)
        elif kind == "folder" and name in CHAPTERS and not self.wanted(name, origin):
            return
        elif kind == "folder":
            with open_folder(entry.name, folder) as inner:
                self._chapter_folder(_Place(inner, student, name), origin)
        elif name.endswith(".ipynb"):
            self._notebook(_Place(folder, student), entry.name, origin)
        else:
            self.other_file(name, origin, None)

    def _chapter_folder(self, place: _Place, where: str) -> None:
        """The notebooks in ``<student>/<chapter>/`` (or an exchange submission folder)."""
        if not any(nfc(e.name).endswith(".ipynb") and not is_litter(nfc(e.name))
                   for e in sorted_entries(place.folder)):
            self.report.refuse(where, "holds no notebook: nothing was handed in here (at most "
                                      "files beside a notebook); ask the learner to hand in "
                                      f"{place.chapter_folder}.ipynb")
            return
        place = dataclasses.replace(place, secret=read_secret(place.folder))

        def handle(entry: os.DirEntry, origin: str, kind: str) -> None:
            name = nfc(entry.name)
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
        stem = nfc(name)[: -len(".ipynb")]
        problem = None
        if stem not in CHAPTERS:
            problem = (f"{printable(name)!r} is not a chapter notebook; expected one of "
                       f"{', '.join(c + '.ipynb' for c in CHAPTERS)}")
        if problem is None and place.chapter_folder not in (None, stem):
            problem = (f"the notebook {name!r} lies in the folder {place.chapter_folder!r}; "
                       f"expected <student>/{stem}/")
        if problem:
            self.report.refuse(origin, problem)
            return
        if not self.wanted(stem, origin):
            return
        read = read_file(place.folder, name, origin, self.report)
        if read is None:
            return
        data, info = read
        refusal, flag = self.links.verdict(origin, info) if info.st_nlink > 1 else (None, None)
        if refusal:
            self.report.refuse(origin, refusal)
            return
        self.add(_Found(place.student, stem, origin, place.when or utc(info.st_mtime),
                        place.secret, (flag,) if flag else ()), data)

    # ---- the nbgrader exchange

    def exchange(self, exchange_root: Path, course_id: str) -> None:
        inbound = exchange_root / course_id / "inbound"
        if not inbound.is_dir():
            raise FileNotFoundError(
                f"no nbgrader inbound folder at {inbound}; --exchange takes the exchange root "
                f"(nbgrader's Exchange.root, e.g. /srv/nbgrader/exchange) of the course "
                f"{course_id!r}")
        self.links.index(inbound, lambda name: student_id(nfc(name.split("+")[0])))
        with open_folder(inbound) as top:
            self.each(top, str(inbound), functools.partial(self._exchange_entry, top))

    def _exchange_entry(self, top: int, entry: os.DirEntry, origin: str, kind: str) -> None:
        parts = nfc(entry.name).split("+")
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
            with open_folder(entry.name, top) as folder:
                self._chapter_folder(_Place(folder, spelling, chapter, when), origin)

    # ---- an LMS zip

    def zip(self, archive: Path) -> None:
        try:
            handle, zf = open_zip(archive)
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
        name = member_name(info)
        origin = f"{archive.name}:{name if name is not None else f'member {index}'}"
        if name is None:
            self.report.refuse(origin, "the file name is not valid UTF-8; rename it "
                                       "<student>_<chapter>.ipynb and collect again")
            return
        student, chapter = self._zip_names(name, info, origin)
        if student is None or not self.wanted(chapter, origin):
            return
        problem = member_problem(info)
        if problem is None:
            try:
                data = read_member(zf, info)
            except MemberError as exc:
                problem = str(exc)
        if problem:
            self.report.refuse(origin, problem)
            return
        try:
            when = dt.datetime(*info.date_time, tzinfo=dt.UTC)
        except ValueError:
            when = utc(0)
        self.add(_Found(student, chapter, origin, when), data)

    def _zip_names(self, name: str, info: zipfile.ZipInfo, origin: str,
                   ) -> tuple[str | None, str]:
        """The student and chapter that a member's name gives, or ``(None, "")`` when it was
        judged here (refused, or ignored: a folder, litter)."""
        parts = name.rstrip("/").split("/")
        if any(is_litter(part) for part in parts):
            self.report.ignore(origin, LITTER_REASON)
        elif info.is_dir() and parts[-1].endswith(".ipynb"):
            self.report.refuse(origin, _NOTEBOOK_FOLDER)
        elif info.is_dir():
            self.report.ignore(origin, "a folder of the zip; only the files in it count, "
                                       "by their own names")
        elif not (match := MEMBER_NAME.fullmatch(parts[-1])) or match["chapter"] not in CHAPTERS:
            self.report.refuse(origin, "expected a notebook named <student>_<chapter>.ipynb "
                                       f"with a chapter in {', '.join(CHAPTERS)}")
        elif self.learner_name(match["student"], origin, "student id"):
            return match["student"], match["chapter"]
        return None, ""


_NOTEBOOK_FOLDER = ("a folder named like a notebook; hand in the .ipynb file itself, not a "
                    "folder of that name")


def _exchange_time(stamp: str) -> dt.datetime | None:
    """The UTC time of an exchange folder's timestamp, parsed as nbgrader parses it."""
    # nbgrader takes a second to import: loaded when this runs, not with the module.
    from nbgrader.utils import parse_utc

    try:
        return parse_utc(stamp).replace(tzinfo=dt.UTC)  # nbgrader gives naive UTC times
    except (ValueError, OverflowError, TypeError):
        return None


def collect(
    course: Course,
    sources: Iterable[str | os.PathLike] = (),
    *,
    exchange: str | os.PathLike | None = None,
    chapters: Iterable[str] | None = None,
    course_id: str = COURSE_ID,
) -> CollectReport:
    """Collect submissions from folders, zips and/or the nbgrader exchange.

    Args:
        course: the course; ``submitted/`` is in its course folder.
        sources: folders of learner folders, or LMS zip files.
        exchange: an nbgrader exchange root (``Exchange.root``) to collect from.
        chapters: only these chapter ids (default: every chapter).
        course_id: the course's id in the exchange (nbgrader's ``CourseDirectory.course_id``).

    Returns:
        A :class:`CollectReport`: what was taken, flagged, refused and ignored, with reasons;
        every entry of every source is in it.

    Raises:
        FileNotFoundError: a source, or the exchange's inbound folder, does not exist.
    """
    wanted = set(chapters) if chapters is not None else set(CHAPTERS)
    report = CollectReport()
    sources = [Path(s) for s in sources]
    for source in sources:
        if not (source.is_dir() or source.is_file()):
            raise FileNotFoundError(f"no folder or zip file at {source}; pass a folder of "
                                    "learner folders or an LMS zip of <student>_<chapter>.ipynb")
    course.folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".collect-staging-", dir=course.folder) as staging:
        scan = Scan(Path(staging), report, wanted, course)
        for source in sources:
            with scan.guarded(str(source)):
                if source.is_dir():
                    scan.folder(source)
                else:
                    scan.zip(source)
        if exchange is not None:
            scan.exchange(Path(exchange), course_id)
        store(course, scan.candidates, report)
    return report
