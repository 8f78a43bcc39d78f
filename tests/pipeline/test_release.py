"""The release keeps a chapter's trained models once: it links to the source's file, and
learners still receive the file itself."""

from __future__ import annotations

import os
import shutil

from autograder.course import COURSE_ID, ROOT, Course
from autograder.steps.exchange import release_to_exchange
from autograder.steps.release import generate

CH10 = "ch10_translation"


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
