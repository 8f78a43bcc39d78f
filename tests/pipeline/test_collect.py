"""``collect``: folders, LMS zips and the nbgrader exchange into ``submitted/``.

Every test works in a temporary course folder; the originals are hashed before and after.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path

import pytest

from autograder.cli import main
from autograder.course import COURSE_ID
from autograder.flags import read_flags
from autograder.pipeline.collect import check_name, collect

CH = "ch02_attention"


def tree_hashes(folder: Path) -> dict[str, str]:
    """``relative path -> sha256`` of every file below ``folder`` (bytes names included)."""
    out = {}
    for dirpath, _, files in os.walk(os.fsencode(folder)):
        for name in files:
            path = os.path.join(dirpath, name)
            out[os.fsdecode(os.path.relpath(path, os.fsencode(folder)))] = hashlib.sha256(
                Path(os.fsdecode(path)).read_bytes()).hexdigest()
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
    write(source / "alice" / CH / f"{CH}.ipynb", notebook_bytes("alice"))
    (source / "alice" / CH / "timestamp.txt").write_text("2024-03-01 10:00:00.000000 UTC")
    write(source / "bob" / f"{CH}.ipynb", notebook_bytes("bob"), mtime=1_700_000_000)
    write(source / "carol" / "ch03_attention_head.ipynb", notebook_bytes("carol"))
    before = tree_hashes(source)

    report = collect([source], root=tmp_path, course_dir=course)

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
    collect([source], root=tmp_path, course_dir=course)
    first = tree_hashes(course)
    collect([source], root=tmp_path, course_dir=course)
    assert tree_hashes(course) == first


def test_duplicates_keep_the_newest_and_are_flagged(tmp_path, course):
    source = tmp_path / "inbox"
    write(source / "alice" / CH / f"{CH}.ipynb", notebook_bytes("old"), mtime=1_600_000_000)
    write(source / "alice" / f"{CH}.ipynb", notebook_bytes("new"), mtime=1_700_000_000)
    report = collect([source], root=tmp_path, course_dir=course)
    assert submitted(course, "alice") == notebook_bytes("new")
    flags = read_flags(course, "alice", CH)
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

    report = collect([source], root=tmp_path, course_dir=course)

    assert tree_hashes(source) == before
    assert report.collected == [("good", CH)]
    reasons = "\n".join(f"{origin}: {reason}" for origin, reason in report.refused)
    assert len(report.refused) == 5, reasons
    assert "not valid UTF-8" in reasons and "not a safe name" in reasons
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

    report = collect([archive], root=tmp_path, course_dir=course)

    assert hashlib.sha256(archive.read_bytes()).hexdigest() == digest
    assert sorted(report.collected) == [("alice", CH), ("bob_smith", CH)]
    assert submitted(course, "alice") == notebook_bytes("alice-new")
    assert [f.code for f in read_flags(course, "alice", CH)] == ["duplicate_submission"]
    reasons = [reason for _, reason in report.refused]
    assert len(reasons) == 3, reasons
    assert any("not valid UTF-8" in r for r in reasons)
    assert any("<student>_<chapter>.ipynb" in r for r in reasons)
    assert any("not a safe name" in r for r in reasons)


def test_nbgrader_exchange(tmp_path, course):
    inbound = tmp_path / "exchange" / COURSE_ID / "inbound"
    for stamp, tag in [("2024-01-01 10:00:00.000000 UTC+a1", "old"),
                       ("2024-01-02 10:00:00.000000 UTC+b2", "new"),
                       ("2024-01-01 11:00:00.000000 UTC+c3", "bob")]:
        folder = inbound / f"{'bob' if tag == 'bob' else 'alice'}+{CH}+{stamp}"
        write(folder / f"{CH}.ipynb", notebook_bytes(tag))
        # `nbgrader submit` writes the submission time next to the notebook.
        (folder / "timestamp.txt").write_text(stamp.split("+")[0])
    before = tree_hashes(inbound)

    code = main(["collect", "--exchange", str(tmp_path / "exchange"), "--chapter", "ch02",
                 "--root", str(tmp_path), "--course-dir", str(course)])

    assert code == 0
    assert tree_hashes(inbound) == before
    assert submitted(course, "alice") == notebook_bytes("new")  # nbgrader keeps the newest
    assert submitted(course, "bob") == notebook_bytes("bob")
    stamp = (course / "submitted" / "alice" / CH / "timestamp.txt").read_text()
    assert stamp.startswith("2024-01-02 10:00:00")


def test_cli_collect_prints_refusals(tmp_path, course, capsys):
    source = tmp_path / "inbox"
    write(source / "ok" / f"{CH}.ipynb", notebook_bytes("x"))
    write(source / "not ok" / f"{CH}.ipynb", notebook_bytes("x"))
    assert main(["collect", str(source), "--root", str(tmp_path),
                 "--course-dir", str(course)]) == 0
    out = capsys.readouterr().out
    assert "collected 1 submission(s)" in out and "REFUSED" in out and "not ok" in out
    assert main(["collect", str(tmp_path / "missing"), "--root", str(tmp_path),
                 "--course-dir", str(course)]) == 1
    assert "no folder or zip file" in capsys.readouterr().err
