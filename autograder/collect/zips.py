"""LMS zips read member by member, without trusting their headers.

Members that are encrypted, compressed with an unsupported method, corrupt, or whose header
lies about their size are refused one by one; a member whose name is marked UTF-8 but is not
refuses that member only, not the whole zip.
"""

from __future__ import annotations

import io
import lzma
import mmap
import re
import stat
import struct
import zipfile
import zlib
from pathlib import Path

from autograder.collect.folders import (
    MAX_NOTEBOOK_BYTES,
    READ_CHUNK,
    TOO_LARGE,
    entry_kind,
    size_text,
)
from autograder.collect.names import nfc

# The name of a notebook in an LMS zip (nbgrader ``zip_collect`` style).
MEMBER_NAME = re.compile(r"(?P<student>.+)_(?P<chapter>ch\d\d_[a-z0-9_]+)\.ipynb")
# Compression methods Python's zipfile reads (stored, deflate, bzip2, lzma).
_ZIP_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}
_ZIP_METHOD_NAMES = {9: "Deflate64", 12: "bzip2", 14: "LZMA", 93: "Zstandard", 95: "xz",
                     98: "PPMd", 99: "AES encryption"}


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


def open_zip(archive: Path) -> tuple[io.FileIO, zipfile.ZipFile]:
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


def member_name(info: zipfile.ZipInfo) -> str | None:
    """The member's file name decoded as UTF-8 in form NFC, or None when its bytes are not
    UTF-8."""
    name = info.filename
    if not info.flag_bits & 0x800:
        # Without the UTF-8 flag, zipfile decoded the raw bytes as cp437: undo that.
        try:
            name = name.encode("cp437").decode("utf-8")
        except UnicodeDecodeError:
            return None
    return nfc(name)


def member_problem(info: zipfile.ZipInfo) -> str | None:
    """Why the member cannot be read, judged from its header, or None."""
    mode = info.external_attr >> 16
    if stat.S_IFMT(mode) and not stat.S_ISREG(mode):  # no type bits: a plain file
        return (f"{entry_kind(mode)} inside the zip, not a notebook file; links and special files "
                "are never extracted: put the notebook itself into the zip")
    if info.flag_bits & 0x1:
        return ("encrypted (password-protected); export the submissions without a password "
                "and collect again")
    if info.compress_type not in _ZIP_METHODS:
        method = _ZIP_METHOD_NAMES.get(info.compress_type, f"method {info.compress_type}")
        return (f"compressed with {method}, which cannot be read here; re-create the zip with "
                "ordinary (Deflate) compression and collect again")
    if info.file_size > MAX_NOTEBOOK_BYTES:
        return f"{size_text(info.file_size)} uncompressed, {TOO_LARGE}"
    return None


class MemberError(Exception):
    """A zip member that cannot be read; the message says why and what to do."""


def read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """The bytes of a member, read in bounded chunks; MemberError when they are corrupt or
    not the size that the header says."""
    chunks, total = [], 0
    try:
        with zf.open(info) as member:
            while chunk := member.read(READ_CHUNK):
                chunks.append(chunk)
                total += len(chunk)
                if total > MAX_NOTEBOOK_BYTES:
                    raise MemberError(f"more than {size_text(MAX_NOTEBOOK_BYTES)} uncompressed "
                                       f"although its header says {size_text(info.file_size)}; "
                                       "the zip is damaged or crafted: download it again")
    except MemberError:
        raise
    except (zipfile.BadZipFile, zlib.error, lzma.LZMAError, EOFError) as exc:
        raise MemberError(f"corrupt inside the zip ({exc}); download the export again, or "
                           "ask the learner to hand the notebook in again") from None
    except Exception as exc:  # any other failure to read it refuses this member only
        raise MemberError(f"cannot be read from the zip ({type(exc).__name__}: {exc}); "
                           "download the export again") from None
    if total != info.file_size:
        raise MemberError(f"its header says {size_text(info.file_size)} but it holds "
                           f"{size_text(total)}; the zip is damaged or crafted: download it again")
    return b"".join(chunks)
