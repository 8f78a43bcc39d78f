"""``collect``: folders, LMS zips and the nbgrader exchange into ``submitted/``.

Every test works in a temporary course folder; the originals are hashed before and after.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import re
import stat
import struct
import zipfile
from pathlib import Path

import pytest

from autograder.cli import main
from autograder.collect.links import LinkName, hard_link_verdict
from autograder.collect.names import check_name, student_id
from autograder.collect.sources import collect
from autograder.course import COURSE_ID, Course
from autograder.flags import read_flags

CH = "ch02_attention"


def tree_hashes(folder: Path) -> dict[str, str]:
    """``relative path -> sha256`` of every regular file below ``folder`` (bytes names
    included), and ``relative path -> kind`` of links (with their target) and special files,
    which are never opened."""
    out = {}
    for dirpath, dirs, files in os.walk(os.fsencode(folder)):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(dirpath, d))]:
            path = os.path.join(dirpath, name)
            key = os.fsdecode(os.path.relpath(path, os.fsencode(folder)))
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                out[key] = f"link to {os.fsdecode(os.readlink(path))}"
            elif not stat.S_ISREG(mode):
                out[key] = stat.filemode(mode)
            else:
                out[key] = hashlib.sha256(Path(os.fsdecode(path)).read_bytes()).hexdigest()
    return out


def notebook_bytes(tag: str) -> bytes:
    return json.dumps({"cells": [], "metadata": {"tag": tag}, "nbformat": 4,
                       "nbformat_minor": 5}).encode()


def write(path: Path, data: bytes, mtime: float | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def submitted(course: Path, student: str, chapter: str = CH) -> bytes:
    return (course / "submitted" / student / chapter / f"{chapter}.ipynb").read_bytes()


@pytest.fixture
def course(tmp_path) -> Path:
    return tmp_path / "course"


def test_folder_layouts_are_collected_and_originals_untouched(tmp_path, course):
    source = tmp_path / "inbox"
    write(source / "alice" / CH / f"{CH}.ipynb", notebook_bytes("alice"), mtime=1_709_287_200)
    # A time the learner wrote is never believed: the file's own time counts.
    (source / "alice" / CH / "timestamp.txt").write_text("2000-01-01 00:00:00.000000 UTC")
    write(source / "bob" / f"{CH}.ipynb", notebook_bytes("bob"), mtime=1_700_000_000)
    write(source / "carol" / "ch03_attention_head.ipynb", notebook_bytes("carol"))
    before = tree_hashes(source)

    report = collect(Course.of(tmp_path, course), [source])

    assert tree_hashes(source) == before
    assert sorted(report.collected) == [("alice", CH), ("bob", CH),
                                        ("carol", "ch03_attention_head")]
    assert not report.refused and not report.flagged
    assert submitted(course, "alice") == notebook_bytes("alice")
    assert submitted(course, "carol", "ch03_attention_head") == notebook_bytes("carol")
    stamp = (course / "submitted" / "alice" / CH / "timestamp.txt").read_text()
    assert stamp.startswith("2024-03-01 10:00:00")
    stamp = (course / "submitted" / "bob" / CH / "timestamp.txt").read_text()
    assert stamp.startswith("2023-11-14 22:13:20")  # the file's modification time, in UTC


def test_collecting_twice_changes_nothing(tmp_path, course):
    source = tmp_path / "inbox"
    write(source / "alice" / f"{CH}.ipynb", notebook_bytes("a"), mtime=1_700_000_000)
    collect(Course.of(tmp_path, course), [source])
    first = tree_hashes(course)
    collect(Course.of(tmp_path, course), [source])
    assert tree_hashes(course) == first


def test_duplicates_keep_the_newest_and_are_flagged(tmp_path, course):
    source = tmp_path / "inbox"
    write(source / "alice" / CH / f"{CH}.ipynb", notebook_bytes("old"), mtime=1_600_000_000)
    write(source / "alice" / f"{CH}.ipynb", notebook_bytes("new"), mtime=1_700_000_000)
    report = collect(Course.of(tmp_path, course), [source])
    assert submitted(course, "alice") == notebook_bytes("new")
    flags = read_flags(Course.of(tmp_path, course),
                     "alice", CH)
    assert [f.code for f in flags] == ["duplicate_submission"]
    assert "kept the newest" in flags[0].reason
    assert report.flagged[("alice", CH)] == flags


def test_unsafe_and_undecodable_names_are_refused(tmp_path, course):
    source = tmp_path / "inbox"
    write(source / "good" / f"{CH}.ipynb", notebook_bytes("good"))
    write(source / "has space" / f"{CH}.ipynb", notebook_bytes("x"))
    write(source / ".hidden" / f"{CH}.ipynb", notebook_bytes("x"))
    write(source / "dave" / "Untitled.ipynb", notebook_bytes("x"))
    write(source / "erin" / "ch03_attention_head" / f"{CH}.ipynb", notebook_bytes("x"))
    raw = os.path.join(os.fsencode(source), b"caf\xe9")  # Latin-1, not UTF-8
    os.makedirs(raw)
    with open(os.path.join(raw, f"{CH}.ipynb".encode()), "wb") as handle:
        handle.write(notebook_bytes("x"))
    before = tree_hashes(source)

    report = collect(Course.of(tmp_path, course), [source])

    assert tree_hashes(source) == before
    assert report.collected == [("good", CH)]
    reasons = "\n".join(f"{origin}: {reason}" for origin, reason in report.refused)
    assert len(report.refused) == 5, reasons
    assert "not valid UTF-8" in reasons
    assert "contains ' ' (U+0020 SPACE) at position 4" in reasons and "'has_space'" in reasons
    assert "starts with '.' (U+002E FULL STOP)" in reasons
    assert "not a chapter notebook" in reasons and "lies in the folder" in reasons
    assert sorted(p.name for p in (course / "submitted").iterdir()) == ["good"]


@pytest.mark.parametrize("name", ["../x", "a/b", "", ".x", "x" * 65, "a\nb", "a b", "e\u0301"])
def test_check_name_rejects(name):
    assert check_name(name, "student id") is not None


@pytest.mark.parametrize("name", ["alice", "bob.smith", "s-01", "zoë", "a_b@uni"])
def test_check_name_accepts(name):
    assert check_name(name, "student id") is None


def make_zip(path: Path, members: list[tuple[str, bytes, tuple]]) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data, date in members:
            zf.writestr(zipfile.ZipInfo(name, date_time=date), data)


def test_lms_zip(tmp_path, course):
    archive = tmp_path / "lms.zip"
    make_zip(archive, [
        (f"alice_{CH}.ipynb", notebook_bytes("alice-old"), (2024, 1, 1, 9, 0, 0)),
        (f"later/alice_{CH}.ipynb", notebook_bytes("alice-new"), (2024, 1, 2, 9, 0, 0)),
        (f"bob_smith_{CH}.ipynb", notebook_bytes("bob"), (2024, 1, 1, 9, 0, 0)),
        ("XX_ch02_attention.ipynb", notebook_bytes("latin"), (2024, 1, 1, 9, 0, 0)),
        ("carol_ch99_nothing.ipynb", notebook_bytes("x"), (2024, 1, 1, 9, 0, 0)),
        (f"bad name_{CH}.ipynb", notebook_bytes("x"), (2024, 1, 1, 9, 0, 0)),
        ("readme.txt", b"not a notebook", (2024, 1, 1, 9, 0, 0)),
    ])
    # A member name in Latin-1 bytes without the UTF-8 flag, as old LMS exports write them.
    archive.write_bytes(archive.read_bytes().replace(b"XX_ch02", b"\xe9\xe9_ch02"))
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()

    report = collect(Course.of(tmp_path, course), [archive])

    assert hashlib.sha256(archive.read_bytes()).hexdigest() == digest
    assert sorted(report.collected) == [("alice", CH), ("bob_smith", CH)]
    assert submitted(course, "alice") == notebook_bytes("alice-new")
    assert [f.code for f in read_flags(Course.of(tmp_path, course),
                     "alice", CH)] == ["duplicate_submission"]
    reasons = [reason for _, reason in report.refused]
    assert len(reasons) == 4, reasons
    assert any("not valid UTF-8" in r for r in reasons)
    assert "<student>_<chapter>.ipynb" in refused_for(report, "carol_ch99_nothing.ipynb")
    assert "<student>_<chapter>.ipynb" in refused_for(report, "lms.zip:readme.txt")
    assert any("contains ' ' (U+0020 SPACE)" in r for r in reasons)
    # The older of alice's two copies is accounted for too.
    assert [o for o, _ in report.ignored] == [f"lms.zip:alice_{CH}.ipynb"]


def test_nbgrader_exchange(tmp_path, course):
    inbound = tmp_path / "exchange" / COURSE_ID / "inbound"
    for stamp, tag in [("2024-01-01 10:00:00.000000 UTC+a1", "old"),
                       ("2024-01-02 10:00:00.000000 UTC+b2", "new"),
                       ("2024-01-01 11:00:00.000000 UTC+c3", "bob")]:
        folder = inbound / f"{'bob' if tag == 'bob' else 'alice'}+{CH}+{stamp}"
        write(folder / f"{CH}.ipynb", notebook_bytes(tag))
        # `nbgrader submit` writes a timestamp.txt too, but the learner can edit it: the
        # folder's name, which the exchange keeps, is what counts.
        (folder / "timestamp.txt").write_text("2030-01-01 00:00:00.000000 UTC")
    before = tree_hashes(inbound)

    code = main(["collect", "--exchange", str(tmp_path / "exchange"), "--chapter", "ch02",
                 "--root", str(tmp_path), "--course-dir", str(course)])

    assert code == 0
    assert tree_hashes(inbound) == before
    assert submitted(course, "alice") == notebook_bytes("new")  # the newest is kept ...
    assert submitted(course, "bob") == notebook_bytes("bob")
    stamp = (course / "submitted" / "alice" / CH / "timestamp.txt").read_text()
    assert stamp.startswith("2024-01-02 10:00:00")
    flags = read_flags(Course.of(tmp_path, course),
                     "alice", CH)  # ... and the duplicate is flagged
    assert [f.code for f in flags] == ["duplicate_submission"]
    assert "2024-01-01 10:00:00" in flags[0].reason and read_flags(Course.of(tmp_path, course),
                     "bob", CH) == []


def test_cli_collect_prints_refusals(tmp_path, course, capsys):
    source = tmp_path / "inbox"
    write(source / "ok" / f"{CH}.ipynb", notebook_bytes("x"))
    write(source / "not ok" / f"{CH}.ipynb", notebook_bytes("x"))
    assert main(["collect", str(source), "--root", str(tmp_path),
                 "--course-dir", str(course)]) == 0
    out = capsys.readouterr().out
    assert "collected 1 submission(s) of 1 learner(s), refused 1" in out
    assert "REFUSED" in out and "not ok" in out
    assert re.search(rf"^  ok +{CH} +\d{{4}}-\d\d-\d\d [\d:]+ UTC +new +\S+ok/{CH}\.ipynb$",
                     out, re.M), out
    assert main(["collect", str(tmp_path / "missing"), "--root", str(tmp_path),
                 "--course-dir", str(course)]) == 1
    assert "no folder or zip file" in capsys.readouterr().err


# ------------------------------------------------------------------ every entry on its own


def refusals(report) -> dict[str, str]:
    """``origin -> reason`` of a report's refusals."""
    return dict(report.refused)


def refused_for(report, tail: str) -> str:
    """The reason of the one refusal whose origin ends with ``tail``."""
    found = [reason for origin, reason in report.refused if origin.endswith(tail)]
    assert len(found) == 1, (tail, report.refused)
    return found[0]


def test_links_special_files_and_notebook_folders_are_refused_one_by_one(tmp_path, course):
    secret_notebook = tmp_path / "solutions" / CH / f"{CH}.ipynb"
    write(secret_notebook, notebook_bytes("the instructor's solutions"))
    source = tmp_path / "inbox"
    write(source / "honest" / CH / f"{CH}.ipynb", notebook_bytes("honest"))
    write(source / "flat" / f"{CH}.ipynb", notebook_bytes("flat"))
    write(tmp_path / "elsewhere" / CH / f"{CH}.ipynb", notebook_bytes("linked learner"))
    (source / "linked_learner").symlink_to(tmp_path / "elsewhere")
    (source / "linked_chapter").mkdir()
    (source / "linked_chapter" / CH).symlink_to(tmp_path / "elsewhere" / CH)
    (source / "to_source" / CH).mkdir(parents=True)
    (source / "to_source" / CH / f"{CH}.ipynb").symlink_to(secret_notebook)
    (source / "to_shadow").mkdir()
    (source / "to_shadow" / f"{CH}.ipynb").symlink_to("/etc/shadow")
    (source / "pipe" / CH).mkdir(parents=True)
    os.mkfifo(source / "pipe" / CH / f"{CH}.ipynb")
    (source / "folder_named" / f"{CH}.ipynb").mkdir(parents=True)
    (source / "nested" / CH / f"{CH}.ipynb").mkdir(parents=True)
    (source / "x.ipynb").mkdir()
    write(source / "hardlink" / f"{CH}.ipynb", b"")
    (source / "hardlink" / f"{CH}.ipynb").unlink()
    os.link(secret_notebook, source / "hardlink" / f"{CH}.ipynb")
    huge = source / "huge" / f"{CH}.ipynb"
    huge.parent.mkdir()
    with open(huge, "wb") as handle:  # sparse: 60 MB on paper, nothing on disk
        handle.truncate(60 * 2**20)
    before = tree_hashes(tmp_path / "solutions")

    report = collect(Course.of(tmp_path, course), [source])

    assert sorted(report.collected) == [("flat", CH), ("honest", CH)]
    assert sorted(p.name for p in (course / "submitted").iterdir()) == ["flat", "honest"]
    assert "symbolic link" in refused_for(report, "linked_learner")
    assert "symbolic link" in refused_for(report, f"linked_chapter/{CH}")
    assert str(secret_notebook) in refused_for(report, f"to_source/{CH}/{CH}.ipynb")
    assert "'/etc/shadow'" in refused_for(report, f"to_shadow/{CH}.ipynb")
    assert "named pipe (FIFO)" in refused_for(report, f"pipe/{CH}/{CH}.ipynb")
    assert "folder named like a notebook" in refused_for(report, f"folder_named/{CH}.ipynb")
    assert "folder named like a notebook" in refused_for(report, f"nested/{CH}/{CH}.ipynb")
    assert "folder named like a notebook" in refused_for(report, "inbox/x.ipynb")
    assert "hard link" in refused_for(report, f"hardlink/{CH}.ipynb")
    assert "60.0 MB" in refused_for(report, f"huge/{CH}.ipynb")
    assert len(report.refused) == 10, report.refused
    assert tree_hashes(tmp_path / "solutions") == before


def test_student_ids_are_case_folded_and_nfc_and_collisions_refused(tmp_path, course):
    source = tmp_path / "inbox"
    write(source / "Chloe\u0308" / f"{CH}.ipynb", notebook_bytes("chloe"))  # as macOS spells it
    write(source / "Casey" / f"{CH}.ipynb", notebook_bytes("Casey"))
    write(source / "casey" / CH / f"{CH}.ipynb", notebook_bytes("casey"))
    write(source / "Dana" / f"{CH}.ipynb", notebook_bytes("dana"))

    report = collect(Course.of(tmp_path, course), [source])

    assert sorted(report.collected) == [("chloë", CH), ("dana", CH)]
    assert submitted(course, "chloë") == notebook_bytes("chloe")
    reasons = [reason for origin, reason in report.refused if "asey" in origin]
    assert len(reasons) == 2, report.refused
    assert all("'Casey' and 'casey' are the same student id 'casey'" in r for r in reasons)
    assert not (course / "submitted" / "casey").exists()


def test_check_name_says_what_is_wrong_and_how_to_fix_it():
    reason = check_name("chloe\u0308", "learner folder")
    assert "not in Unicode normal form NFC" in reason
    assert "U+0308 COMBINING DIAERESIS" in reason and "'chloë'" in reason
    assert "'a_b' (or to the learner's real id)" in check_name("a/b", "student id")
    assert "65 characters long" in check_name("x" * 65, "student id")


def zip_with(members: list[tuple[str, bytes]], path: Path, edit=None) -> None:
    """A zip of ``members``; ``edit(raw, index_of_member)`` may change the bytes after."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            zf.writestr(name, data)
    raw = bytearray(path.read_bytes())
    if edit is not None:
        edit(raw)
    path.write_bytes(bytes(raw))


def header_offsets(raw: bytearray, member: int) -> tuple[int, int]:
    """Offsets of the local header and the central directory entry of the ``member``-th file."""
    local = central = -1
    for _ in range(member + 1):
        local = raw.index(b"PK\x03\x04", local + 1)
        central = raw.index(b"PK\x01\x02", central + 1)
    return local, central


def set_field(raw: bytearray, member: int, local_offset: int, central_offset: int, fmt: str,
              value: int) -> None:
    """Write ``value`` into the same field of both headers of a member (zip APPNOTE 4.3.7
    and 4.3.12 give the offsets)."""
    local, central = header_offsets(raw, member)
    struct.pack_into(fmt, raw, local + local_offset, value)
    struct.pack_into(fmt, raw, central + central_offset, value)


def corrupt_crc(raw):
    local, central = header_offsets(raw, 0)
    raw[local + 14] ^= 0xFF
    raw[central + 16] ^= 0xFF


def corrupt_stream(raw):
    """Make the first member's deflate stream invalid: its first block claims the reserved
    block type 3 (RFC 1951, 3.2.3), which zlib rejects at once."""
    local, _ = header_offsets(raw, 0)
    name_length, extra_length = struct.unpack_from("<HH", raw, local + 26)
    raw[local + 30 + name_length + extra_length] |= 0b111


@pytest.mark.parametrize(("edit", "expected"), [
    (corrupt_crc, "corrupt inside the zip (Bad CRC-32"),
    (corrupt_stream, "corrupt inside the zip (Error -3 while decompressing data: invalid block "
                     "type); download the export again"),
    (lambda raw: set_field(raw, 0, 6, 8, "<H", 0x1), "encrypted (password-protected)"),
    (lambda raw: set_field(raw, 0, 8, 10, "<H", 9), "compressed with Deflate64"),
    (lambda raw: set_field(raw, 0, 22, 24, "<I", 10), "corrupt inside the zip"),  # says less
    (lambda raw: set_field(raw, 0, 22, 24, "<I", 99_999), "its header says 99,999 bytes but"),
])
def test_a_bad_zip_member_is_refused_and_the_rest_collected(tmp_path, course, edit, expected):
    archive = tmp_path / "lms.zip"
    zip_with([(f"bad_{CH}.ipynb", notebook_bytes("bad") * 50),
              (f"good_{CH}.ipynb", notebook_bytes("good"))], archive, edit)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()

    report = collect(Course.of(tmp_path, course), [archive])

    assert report.collected == [("good", CH)]
    assert expected in refused_for(report, f"lms.zip:bad_{CH}.ipynb")
    assert submitted(course, "good") == notebook_bytes("good")
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == digest


def test_zip_bombs_links_and_notebook_folders_in_a_zip_are_refused(tmp_path, course):
    archive = tmp_path / "lms.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"bomb_{CH}.ipynb", b"0" * (60 * 2**20))  # 60 MB of zeros, 60 kB packed
        link = zipfile.ZipInfo(f"link_{CH}.ipynb")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "/etc/shadow")
        zf.writestr(f"folder_{CH}.ipynb/", b"")
        zf.writestr(f"good_{CH}.ipynb", notebook_bytes("good"))
    assert archive.stat().st_size < 2**20

    report = collect(Course.of(tmp_path, course), [archive])

    assert report.collected == [("good", CH)]
    assert "60.0 MB uncompressed" in refused_for(report, f"bomb_{CH}.ipynb")
    assert "a symbolic link inside the zip" in refused_for(report, f"link_{CH}.ipynb")
    assert "folder named like a notebook" in refused_for(report, f"folder_{CH}.ipynb/")


def test_exchange_refuses_links_pipes_and_odd_folders_and_keeps_the_rest(tmp_path, course):
    secret_notebook = tmp_path / "solutions" / CH / f"{CH}.ipynb"
    write(secret_notebook, notebook_bytes("the instructor's solutions"))
    inbound = tmp_path / "exchange" / COURSE_ID / "inbound"
    stamp = "2024-05-01 08:00:00.000000 UTC"

    def submission(student: str) -> Path:
        folder = inbound / f"{student}+{CH}+{stamp}"
        folder.mkdir(parents=True)
        return folder

    write(submission("honest") / f"{CH}.ipynb", notebook_bytes("honest"))
    (submission("linker") / f"{CH}.ipynb").symlink_to(secret_notebook)
    (submission("shadow") / f"{CH}.ipynb").symlink_to("/etc/shadow")
    os.mkfifo(submission("piper") / f"{CH}.ipynb")
    (inbound / f"folderlink+{CH}+{stamp}").symlink_to(tmp_path / "solutions" / CH)
    write(inbound / f"notime+{CH}+yesterday" / f"{CH}.ipynb", notebook_bytes("x"))
    write(inbound / "no-plus-signs" / f"{CH}.ipynb", notebook_bytes("x"))
    # Another chapter than the one collected is left alone, and the report says so.
    write(inbound / f"honest+ch03_attention_head+{stamp}" / "ch03_attention_head.ipynb",
          notebook_bytes("x"))
    before = tree_hashes(tmp_path)

    report = collect(Course.of(tmp_path, course), exchange=tmp_path / "exchange", chapters=[CH])

    assert report.collected == [("honest", CH)]
    assert report.taken[0].timestamp.isoformat() == "2024-05-01T08:00:00+00:00"
    assert str(secret_notebook) in refused_for(report, f"linker+{CH}+{stamp}/{CH}.ipynb")
    assert "/etc/shadow" in refused_for(report, f"shadow+{CH}+{stamp}/{CH}.ipynb")
    assert "named pipe" in refused_for(report, f"piper+{CH}+{stamp}/{CH}.ipynb")
    assert "symbolic link" in refused_for(report, f"folderlink+{CH}+{stamp}")
    assert "'yesterday' in the folder name cannot be read" in refused_for(
        report, f"notime+{CH}+yesterday")
    assert "not an nbgrader submission folder" in refused_for(report, "no-plus-signs")
    assert len(report.refused) == 6, report.refused
    assert dict(report.ignored)[str(inbound / f"honest+ch03_attention_head+{stamp}")] == (
        "a submission of ch03_attention_head, which this run does not collect (--chapter)")
    after = tree_hashes(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith("course")} == before
    with pytest.raises(FileNotFoundError, match="Exchange.root"):
        collect(Course.of(tmp_path, course), exchange=tmp_path / "nowhere")


def test_collecting_again_reports_unchanged_and_keeps_newer_work(tmp_path, course, capsys):
    source = tmp_path / "inbox"
    write(source / "alice" / f"{CH}.ipynb", notebook_bytes("new"), mtime=1_700_000_000)
    where = ["--root", str(tmp_path), "--course-dir", str(course)]
    assert main(["collect", str(source), *where]) == 0
    assert re.search(rf"^  alice +{CH} +2023-11-14 22:13:20 UTC +new ", capsys.readouterr().out,
                     re.M)
    first = tree_hashes(course)
    assert main(["collect", str(source), *where]) == 0
    assert " unchanged " in capsys.readouterr().out and tree_hashes(course) == first
    # An older copy arriving later never replaces newer collected work.
    write(tmp_path / "old" / "alice" / f"{CH}.ipynb", notebook_bytes("old"), mtime=1_600_000_000)
    report = collect(Course.of(tmp_path, course), [tmp_path / "old"])
    assert report.taken[0].status == "kept" and submitted(course, "alice") == notebook_bytes("new")
    assert [f.code for f in read_flags(Course.of(tmp_path, course),
                     "alice", CH)] == ["older_than_collected"]


# ------------------------------------------------------------------ nothing lost without a word


def clear_utf8_flags(raw: bytearray) -> None:
    """Clear the UTF-8 flag (bit 11) of every member, in both headers, as tools that write
    UTF-8 names without saying so do."""
    for signature, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = -1
        while (at := raw.find(signature, at + 1)) >= 0:
            raw[at + flags_at + 1] &= ~0x08 & 0xFF


@pytest.mark.parametrize("edit", [None, clear_utf8_flags])
def test_a_decomposed_member_name_is_the_learner_it_spells(tmp_path, course, edit):
    archive = tmp_path / "lms.zip"
    # As macOS writes accented names: "e" followed by U+0308 COMBINING DIAERESIS.
    zip_with([(f"chloe\u0308_{CH}.ipynb", notebook_bytes("chloe")),
              (f"good_{CH}.ipynb", notebook_bytes("good"))], archive, edit)

    report = collect(Course.of(tmp_path, course), [archive])

    assert sorted(report.collected) == [("chloë", CH), ("good", CH)]
    assert submitted(course, "chloë") == notebook_bytes("chloe")
    assert report.taken[0].origin == f"lms.zip:chloë_{CH}.ipynb"  # in NFC, as it is matched
    assert not report.refused and not report.ignored


def test_a_member_name_marked_utf8_that_is_not_refuses_that_member_only(tmp_path, course):
    archive = tmp_path / "lms.zip"

    def latin1(raw: bytearray) -> None:  # "é" in UTF-8 (2 bytes) -> two Latin-1 bytes
        raw[:] = raw.replace("é".encode(), b"\xe9\xe9")

    zip_with([(f"é_{CH}.ipynb", notebook_bytes("x")), (f"good_{CH}.ipynb",
                                                       notebook_bytes("good"))], archive, latin1)
    with pytest.raises(UnicodeDecodeError):  # Python alone gives up on the whole zip
        zipfile.ZipFile(archive)

    report = collect(Course.of(tmp_path, course), [archive])

    assert report.collected == [("good", CH)]
    assert "not valid UTF-8" in refused_for(report, "lms.zip:member 0")
    assert len(report.refused) == 1


def test_a_truncated_zip_is_refused_and_the_other_sources_collected(tmp_path, course, capsys):
    archive = tmp_path / "lms.zip"
    zip_with([(f"zipped_{CH}.ipynb", notebook_bytes("zipped"))], archive)
    archive.write_bytes(archive.read_bytes()[:-30])  # an interrupted download
    write(tmp_path / "inbox" / "alice" / f"{CH}.ipynb", notebook_bytes("alice"))

    assert main(["collect", str(archive), str(tmp_path / "inbox"), "--root", str(tmp_path),
                 "--course-dir", str(course)]) == 0

    out = capsys.readouterr().out
    assert re.search(r"^REFUSED \S*lms\.zip: not a readable zip file .*cut short .*download the "
                     r"export again; nothing of it was collected$", out, re.M), out
    assert submitted(course, "alice") == notebook_bytes("alice")


def test_an_entry_that_cannot_be_read_is_refused_and_the_rest_collected(tmp_path, course,
                                                                        monkeypatch):
    from autograder.collect import sources as module

    source = tmp_path / "inbox"
    write(source / "locked" / CH / f"{CH}.ipynb", notebook_bytes("locked"))
    write(source / "open" / CH / f"{CH}.ipynb", notebook_bytes("open"))
    locked = (source / "locked" / CH).stat()
    listed = module.sorted_entries

    def entries(folder: int) -> list:
        # What the system answers for a folder the collector may not list (as root, chmod
        # cannot show it: root lists everything).
        info = os.fstat(folder)
        if (info.st_dev, info.st_ino) == (locked.st_dev, locked.st_ino):
            raise PermissionError(13, "Permission denied")
        return listed(folder)

    monkeypatch.setattr(module, "sorted_entries", entries)
    report = collect(Course.of(tmp_path, course), [source])

    assert report.collected == [("open", CH)]
    assert "cannot be read (Permission denied); give the collector read access" in refused_for(
        report, f"locked/{CH}")


def outcomes(report) -> set[str]:
    """Every origin the report accounts for: collected, refused or ignored."""
    return ({t.origin for t in report.taken} | {o for o, _ in report.refused}
            | {o for o, _ in report.ignored})


def unaccounted(folder: Path, accounted: set[str]) -> list[str]:
    """Entries below ``folder`` (files, links, special files and empty folders) for which
    neither they nor a folder above them are accounted for."""
    def covered(path: str) -> bool:
        return any(p in accounted for p in [path, *map(str, Path(path).parents)])

    missing = []
    for top, dirs, files in os.walk(folder):
        leaves = files + [d for d in dirs if os.path.islink(os.path.join(top, d))]
        if not dirs and not files:
            leaves = [""]
        missing += [p for p in (os.path.join(top, n).rstrip("/") for n in leaves)
                    if not covered(p)]
    return missing


def inbox_of_every_kind(inbox: Path) -> None:
    """A folder inbox with one entry of each kind."""
    for path in [f"alice/{CH}/{CH}.ipynb", f"bob/{CH}.ipynb", f"chloe\u0308/{CH}.ipynb",
                 f"dana/{CH}/{CH}.ipynb", "erin/ch03_attention_head.ipynb",
                 f"fred/{CH}/.ipynb_checkpoints/{CH}-checkpoint.ipynb", f"gina/{CH}.ipynb",
                 "has space/x.ipynb", f"top_{CH}.ipynb", f"hank/{CH}/notes/{CH}.ipynb",
                 f"ivy/{CH}/Untitled.ipynb"]:
        write(inbox / path, notebook_bytes(path))
    write(inbox / "dana" / f"{CH}.ipynb", notebook_bytes("older"), mtime=1_000_000_000)
    for path in [f"alice/{CH}/timestamp.txt", f"alice/{CH}/submission_secret.txt",
                 f"alice/{CH}/weights.npz", f"alice/{CH}/notes.txt", "bob/.DS_Store",
                 "bob/._ch02_attention.ipynb", "README.txt", "__MACOSX/._bob"]:
        write(inbox / path, b"not a notebook")
    (inbox / "empty").mkdir()
    (inbox / "only_litter" / ".ipynb_checkpoints").mkdir(parents=True)
    (inbox / "jack" / CH).mkdir(parents=True)
    (inbox / "link").symlink_to(inbox / "alice")
    os.mkfifo(inbox / "gina" / "pipe.ipynb")
    (inbox / "kim" / CH).mkdir(parents=True)
    os.link(inbox / "alice" / CH / f"{CH}.ipynb", inbox / "kim" / CH / f"{CH}.ipynb")


def zip_of_every_kind(archive: Path) -> None:
    """An LMS zip with one member of each kind (``broken_...`` has a corrupt stream)."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in [f"zed_{CH}.ipynb", f"later/zed_{CH}.ipynb", f"zoe_{CH}.ipynb",
                     "zed_ch03_attention_head.ipynb", "readme.txt", f"__MACOSX/._zed_{CH}.ipynb",
                     ".DS_Store", f"bad name_{CH}.ipynb", f"broken_{CH}.ipynb"]:
            info = zipfile.ZipInfo(name, (2024, 1, 2 if "later" in name else 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, notebook_bytes(name) * 20)
        zf.writestr("later/", b"")
    raw = bytearray(archive.read_bytes())
    name = f"broken_{CH}.ipynb".encode()
    raw[raw.index(name) + len(name)] |= 0b111  # its deflate stream (see corrupt_stream)
    archive.write_bytes(bytes(raw))


STAMP = "2024-05-01 08:00:00.000000 UTC"


def exchange_of_every_kind(inbound: Path) -> None:
    for folder in [f"xena+{CH}+{STAMP}", f"yuri+ch03_attention_head+{STAMP}"]:
        write(inbound / folder / f"{CH}.ipynb", notebook_bytes(folder))
        write(inbound / folder / "timestamp.txt", b"2030-01-01 00:00:00.000000 UTC")
    write(inbound / "stray.txt", b"x")
    write(inbound / f"yuri+{CH}+{STAMP}" / "submission_secret.txt", b"0" * 128)


def test_every_entry_of_every_source_is_collected_refused_or_ignored(tmp_path, course, capsys):
    """One entry of each kind, in each kind of source: each ends in the report."""
    write(tmp_path / "notebooks" / CH / "weights.npz", b"a data file of the release")
    inbox, archive, exchange = tmp_path / "inbox", tmp_path / "lms.zip", tmp_path / "exchange"
    inbound = exchange / COURSE_ID / "inbound"
    inbox_of_every_kind(inbox)
    zip_of_every_kind(archive)
    exchange_of_every_kind(inbound)

    assert main(["collect", str(inbox), str(archive), "--exchange", str(exchange), "--chapter",
                 CH, "--root", str(tmp_path), "--course-dir", str(course)]) == 0
    out = capsys.readouterr().out
    report = collect(Course.of(tmp_path, course), [inbox, archive], exchange=exchange,
                     chapters=[CH])

    accounted = outcomes(report)
    assert unaccounted(inbox, accounted) == []
    assert unaccounted(inbound, accounted) == []
    with zipfile.ZipFile(archive) as zf:
        assert {f"lms.zip:{i.filename}" for i in zf.infolist()} <= accounted
    for origin, reason in report.refused:
        assert f"REFUSED {origin}: {reason}" in out.splitlines()
    ignored = dict(report.ignored)
    assert "editor or the operating system" in ignored[str(inbox / "bob" / ".DS_Store")]
    assert "never believed" in ignored[str(inbox / "alice" / CH / "timestamp.txt")]
    assert "release's own copy" in ignored[str(inbox / "alice" / CH / "weights.npz")]
    assert "an older copy" in ignored[str(inbox / "dana" / f"{CH}.ipynb")]
    assert "does not collect" in ignored[str(inbox / "erin" / "ch03_attention_head.ipynb")]
    assert "not a notebook" in refused_for(report, f"alice/{CH}/notes.txt")
    assert "an empty learner folder" in refused_for(report, "inbox/empty")
    assert "an empty learner folder" in refused_for(report, "inbox/only_litter")
    for folder in (f"inbox/jack/{CH}", f"inbox/fred/{CH}", f"yuri+{CH}+{STAMP}"):
        assert "holds no notebook" in refused_for(report, folder)
    assert "invalid block type" in refused_for(report, f"broken_{CH}.ipynb")
    assert sorted(report.collected) == [("alice", CH), ("bob", CH), ("chloë", CH), ("dana", CH),
                                        ("gina", CH), ("kim", CH), ("xena", CH), ("zed", CH),
                                        ("zoe", CH)]


# ------------------------------------------------------------------ hard links

# Accounts that no system has (pwd knows no name for them), and the instructor's (root).
ALICE_UID, MALLORY_UID, ROOT_UID = 424_201, 424_202, 0


def name(student: str | None, folder_uid: int) -> LinkName:
    return LinkName(f"inbox/{student or 'top'}/{CH}.ipynb", student, folder_uid, ROOT_UID)


def test_a_hard_link_belongs_to_the_learner_whose_folder_its_owner_owns():
    alice, mallory = name("alice", ALICE_UID), name("mallory", MALLORY_UID)
    for nlink in (2, 3):  # with or without a third name outside the inbox
        assert hard_link_verdict(alice, [alice, mallory], nlink, ALICE_UID) == (None, None)
        reason, flag = hard_link_verdict(mallory, [alice, mallory], nlink, ALICE_UID)
        assert flag is None and alice.origin in reason and "hand in your own copy" in reason
        assert "user id 424201" in reason


def test_a_hard_link_to_a_file_nobody_in_the_inbox_owns_is_refused():
    mallory = name("mallory", MALLORY_UID)
    # The solutions (owned by the instructor) linked into a learner's folder.
    reason, _ = hard_link_verdict(mallory, [mallory], 2, ROOT_UID)
    assert "1 name(s) outside the collected sources" in reason and "solutions" in reason
    # The same when one account owns everything and a name lies outside the inbox.
    alice, bob = name("alice", ROOT_UID), name("bob", ROOT_UID)
    reason, _ = hard_link_verdict(alice, [alice, bob], 3, ROOT_UID)
    assert f"(and with {bob.origin})" in reason


def test_a_hard_link_between_learners_of_one_account_is_collected_for_each_and_flagged():
    alice, bob = name("alice", ROOT_UID), name("bob", ROOT_UID)
    reason, flag = hard_link_verdict(alice, [alice, bob], 2, ROOT_UID)
    assert reason is None and flag.code == "shared_file" and bob.origin in flag.reason
    # Two names in one learner's own folders are that learner's own file.
    again = LinkName(f"inbox/alice/{CH}/{CH}.ipynb", "alice", ROOT_UID, ROOT_UID)
    assert hard_link_verdict(alice, [alice, again], 2, ROOT_UID) == (None, None)


def test_a_hard_link_belongs_to_the_learner_its_owner_is_named_after():
    me = pwd.getpwuid(os.getuid()).pw_name
    owner, other = name(student_id(me), ROOT_UID), name("mallory", ROOT_UID)
    assert hard_link_verdict(owner, [owner, other], 2, os.getuid()) == (None, None)
    assert owner.origin in hard_link_verdict(other, [owner, other], 2, os.getuid())[0]


def test_learners_sharing_one_file_in_an_inbox_of_one_account_are_flagged(tmp_path, course):
    source = tmp_path / "inbox"
    write(source / "alice" / CH / f"{CH}.ipynb", notebook_bytes("alice"))
    (source / "bob").mkdir()
    os.link(source / "alice" / CH / f"{CH}.ipynb", source / "bob" / f"{CH}.ipynb")

    report = collect(Course.of(tmp_path, course), [source])

    assert sorted(report.collected) == [("alice", CH), ("bob", CH)] and not report.refused
    for student, other in (("alice", "bob"), ("bob", "alice")):
        flags = read_flags(Course.of(tmp_path, course),
                     student, CH)
        assert [f.code for f in flags] == ["shared_file"]
        assert f"inbox/{other}/" in flags[0].reason


@pytest.mark.skipif(os.geteuid() != 0, reason="giving files to other accounts needs root")
def test_a_peer_who_hard_links_a_learners_file_cannot_take_it(tmp_path, course):
    """The inbox of a class server: each learner's folder and files are their own."""
    source = tmp_path / "inbox"
    honest = source / "alice" / CH / f"{CH}.ipynb"
    write(honest, notebook_bytes("alice"))
    (source / "mallory").mkdir()
    os.link(honest, source / "mallory" / f"{CH}.ipynb")
    os.link(honest, tmp_path / "elsewhere.ipynb")  # a third name, outside the inbox
    for path in (source / "alice", source / "alice" / CH, honest):
        os.chown(path, ALICE_UID, ALICE_UID)
    os.chown(source / "mallory", MALLORY_UID, MALLORY_UID)

    report = collect(Course.of(tmp_path, course), [source])

    assert report.collected == [("alice", CH)]
    assert submitted(course, "alice") == notebook_bytes("alice")
    assert read_flags(Course.of(tmp_path, course),
                     "alice", CH) == []
    reason = refused_for(report, f"mallory/{CH}.ipynb")
    assert str(honest) in reason and "hand in your own copy" in reason
