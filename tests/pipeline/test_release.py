"""The release keeps a chapter's trained models once: it links to the source's file, and
learners still receive the file itself."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from autograder.course import COURSE_ID, ROOT, Course, alembic_head, ready_alembic
from autograder.steps.exchange import release_to_exchange
from autograder.steps.release import generate

CH02, CH10 = "ch02_attention", "ch10_translation"


def test_a_release_links_its_models_to_the_source_and_learners_get_the_file(tmp_path):
    source = tmp_path / "solutions" / CH10
    source.mkdir(parents=True)
    shutil.copy(ROOT / "solutions" / CH10 / f"{CH10}.ipynb", source)
    (source / "tiny.pt").write_bytes(b"trained weights")
    (source / "words.txt").write_text("a data file learners may edit\n")
    course = tmp_path / "course"

    for _ in range(2):  # a release over an earlier one, as `make release` does
        generate(Course.of(tmp_path, course), [CH10])
        release = tmp_path / "notebooks" / CH10
        assert os.readlink(release / "tiny.pt") == f"../../solutions/{CH10}/tiny.pt"
        assert (release / "tiny.pt").read_bytes() == b"trained weights"
        assert not (release / "words.txt").is_symlink()
    assert (source / "tiny.pt").read_bytes() == b"trained weights"  # the one copy, unchanged

    exchange = tmp_path / "exchange"
    exchange.mkdir()
    release_to_exchange(Course.of(tmp_path, course), [CH10], exchange)
    fetched = exchange / COURSE_ID / "outbound" / CH10 / "tiny.pt"
    assert not fetched.is_symlink() and fetched.read_bytes() == b"trained weights"


def test_the_repository_holds_chapter_10s_translator_once():
    released = ROOT / "notebooks" / CH10 / "multi30k_small.pt"
    assert released.is_symlink()
    assert released.resolve() == (ROOT / "solutions" / CH10 / "multi30k_small.pt").resolve()


def test_a_new_gradebook_gets_the_schema_version_nbgrader_itself_reads(tmp_path):
    """The release reads the gradebook's schema version in its own process (nbgrader starts the
    `alembic` command for it, seconds each time): the version nbgrader's command gives, which
    `nbgrader db upgrade` later compares with."""
    ready_alembic()
    source = tmp_path / "solutions" / CH02
    shutil.copytree(ROOT / "solutions" / CH02, source)
    generate(Course.of(tmp_path, tmp_path / "course"), [CH02])
    with sqlite3.connect(tmp_path / "course" / "gradebook.db") as db:
        (stamped,), = db.execute("SELECT version_num FROM alembic_version").fetchall()
    nbgraders = subprocess.run(
        [sys.executable, "-c", "import nbgrader.api; print(nbgrader.api.get_alembic_version())"],
        env={**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent),
                                                    os.environ["PATH"]])},
        capture_output=True, text=True, check=True, timeout=120)
    assert stamped == alembic_head() == nbgraders.stdout.strip()
