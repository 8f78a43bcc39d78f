"""Folders read through file descriptors: links never followed, pipes never waited on.

A folder is opened once and each entry is read below it (``dir_fd``), so that a folder renamed
or replaced by a link while collect runs cannot send it elsewhere; files are read in bounded
chunks, up to :data:`MAX_NOTEBOOK_BYTES`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import stat
from collections.abc import Iterator

from autograder.collect.report import CollectReport
from autograder.course import SECRET_FILE

# Largest notebook accepted; a learner's executed notebook with plots is a few MB.
MAX_NOTEBOOK_BYTES = 50 * 1024 * 1024
# nbgrader's submission secret is 128 hex digits; anything much larger is not one.
MAX_SECRET_BYTES = 1024
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a named pipe must not wait for a writer.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
READ_CHUNK = 1 << 20


def entry_kind(mode: int) -> str:
    """What a file-system entry is, for a refusal."""
    kinds = [(stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
             (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"),
             (stat.S_ISREG, "a regular file")]
    return next((text for test, text in kinds if test(mode)), "a special file")


def size_text(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n:,} bytes"


TOO_LARGE = (f"larger than the limit of {MAX_NOTEBOOK_BYTES // 2**20} MB for a notebook; ask "
              "the learner to clear the outputs (Edit > Clear Outputs of All Cells), save and "
              "hand it in again")


@contextlib.contextmanager
def open_folder(name: str | os.PathLike, parent: int | None = None) -> Iterator[int]:
    """A file descriptor of a folder; with ``parent``, ``name`` is opened below it and must
    not be a link."""
    fd = (os.open(name, _DIR_FLAGS, dir_fd=parent) if parent is not None
          else os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
    try:
        yield fd
    finally:
        os.close(fd)


def sorted_entries(folder: int) -> list[os.DirEntry]:
    """The entries of an open folder, sorted by name (so that runs are reproducible)."""
    with os.scandir(folder) as it:
        return sorted(it, key=lambda e: e.name)


def link_refusal(entry: os.DirEntry, folder: int, what: str) -> str:
    try:
        target = f" to {os.readlink(entry.name, dir_fd=folder)!r}"
    except OSError:
        target = ""
    return (f"{what} is a symbolic link{target}; links are never followed (one could point at "
            "the solutions or another user's files): put the real files there and collect "
            "again")


def read_file(folder: int, name: str, origin: str, report: CollectReport
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
            report.refuse(origin, f"{entry_kind(info.st_mode)}, not a notebook file; hand in the "
                                  ".ipynb file itself")
            return None
        if info.st_size > MAX_NOTEBOOK_BYTES:
            report.refuse(origin, f"{size_text(info.st_size)}, {TOO_LARGE}")
            return None
        chunks, total = [], 0
        while chunk := os.read(fd, READ_CHUNK):
            chunks.append(chunk)
            total += len(chunk)
            if total > MAX_NOTEBOOK_BYTES:
                report.refuse(origin, f"more than {size_text(MAX_NOTEBOOK_BYTES)}, {TOO_LARGE}")
                return None
        return b"".join(chunks), info
    except OSError as exc:
        report.refuse(origin, f"cannot be read ({exc.strerror}); copy it again and collect")
        return None
    finally:
        os.close(fd)


def read_secret(folder: int) -> bytes | None:
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


def utc(timestamp: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(timestamp, tz=dt.UTC)


def special_refusal(entry: os.DirEntry) -> str:
    return (f"{entry_kind(entry.stat(follow_symlinks=False).st_mode)}, not a file or folder; "
            "special files are never read: remove it from the submission")
