"""Synthetic tasks and the Multi30k loader, checksum checks and download command."""

import gzip
import hashlib
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from transformer_ref.data import datasets as data
from transformer_ref.data.datasets import (
    MULTI30K_SHA256,
    DownloadError,
    course_root,
    download_multi30k,
    load_multi30k,
    multi30k_dir,
    synthetic_pairs,
    verify_multi30k,
)
from transformer_ref.data.vocab import EOS_ID

# ---------------------------------------------------------------------------------------------
# Synthetic tasks


@pytest.mark.parametrize(
    ("task", "rule"),
    [("copy", list), ("reverse", lambda s: s[::-1]), ("sort", sorted)],
)
def test_synthetic_targets_follow_the_task(task, rule):
    pairs = synthetic_pairs(task, 200, num_symbols=7, min_len=2, max_len=9, seed=1)
    assert len(pairs) == 200
    for src, tgt in pairs:
        assert src[-1] == EOS_ID and tgt[-1] == EOS_ID
        assert EOS_ID not in src[:-1] and EOS_ID not in tgt[:-1]
        assert 2 <= len(src) - 1 <= 9
        assert all(4 <= s < 4 + 7 for s in src[:-1])
        assert tgt[:-1] == list(rule(src[:-1]))
        assert all(type(i) is int for i in src + tgt)


def test_synthetic_is_seeded_and_covers_the_range():
    a = synthetic_pairs("reverse", 300, num_symbols=5, min_len=1, max_len=4, seed=7)
    assert a == synthetic_pairs("reverse", 300, num_symbols=5, min_len=1, max_len=4, seed=7)
    assert a != synthetic_pairs("reverse", 300, num_symbols=5, min_len=1, max_len=4, seed=8)
    assert {len(src) - 1 for src, _ in a} == {1, 2, 3, 4}
    assert {s for src, _ in a for s in src[:-1]} == set(range(4, 9))


def test_synthetic_rejects_bad_arguments():
    with pytest.raises(ValueError, match="unknown task 'rotate'.*copy"):
        synthetic_pairs("rotate", 3)
    with pytest.raises(ValueError, match="min_len=5 is larger than max_len=2"):
        synthetic_pairs("copy", 3, min_len=5, max_len=2)
    with pytest.raises(ValueError, match="min_len must be at least 1"):
        synthetic_pairs("copy", 3, min_len=0)
    with pytest.raises(TypeError, match="n must be an integer"):
        synthetic_pairs("copy", 2.5)


# ---------------------------------------------------------------------------------------------
# Multi30k


def test_checksums_in_code_match_the_shared_list(multi30k_dir):
    listed = dict(
        reversed(line.split()) for line in (multi30k_dir / "SHA256SUMS").read_text().splitlines()
    )
    assert listed == MULTI30K_SHA256


def test_load_multi30k_sizes_and_first_pair(multi30k_dir):
    train = load_multi30k("train", multi30k_dir)
    test = load_multi30k("test_2016_flickr", multi30k_dir)
    assert len(train) == 29_000
    assert len(test) == 1_000
    assert len(load_multi30k("val", multi30k_dir)) == 1_014
    german, english = train[0]
    assert german.startswith("Zwei junge weiße Männer")
    assert english.startswith("Two young, White males")
    assert all(de and en and de == de.strip() for de, en in test)


def test_multi30k_dir_follows_the_environment(monkeypatch, tmp_path):
    """Without MULTI30K_DIR the data sit in the course folder's data/multi30k, wherever Python
    runs: a notebook's kernel runs in its chapter's folder and must find the files that the
    download command, run from the course folder, put there."""
    monkeypatch.delenv("MULTI30K_DIR", raising=False)
    course = Path(__file__).resolve().parents[2]
    assert course_root() == course
    for folder in (course, course / "notebooks" / "ch10_translation", tmp_path):
        monkeypatch.chdir(folder)
        assert multi30k_dir() == course / "data" / "multi30k"
    monkeypatch.setenv("MULTI30K_DIR", str(tmp_path))
    assert multi30k_dir() == tmp_path


def test_an_installed_copy_looks_below_the_current_directory(monkeypatch, tmp_path):
    """A copy of the package outside a course folder (no pyproject.toml beside it) keeps the
    relative default."""
    monkeypatch.delenv("MULTI30K_DIR", raising=False)
    copy = tmp_path / "site-packages" / "transformer_ref" / "data"
    copy.mkdir(parents=True)
    monkeypatch.setattr(data, "__file__", str(copy / "datasets.py"))
    assert course_root() is None
    assert multi30k_dir().as_posix() == "data/multi30k"


def test_unknown_split_is_rejected(multi30k_dir):
    with pytest.raises(ValueError, match="unknown Multi30k split 'dev'.*test_2016_flickr"):
        load_multi30k("dev", multi30k_dir)


def test_missing_directory_says_how_to_get_the_data(tmp_path, monkeypatch):
    monkeypatch.setenv("MULTI30K_DIR", str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError) as info:
        load_multi30k("train")
    message = str(info.value)
    assert "absent" in message
    assert "python -m transformer_ref.data download multi30k" in message
    assert "MULTI30K_DIR" in message


def test_corrupt_copy_is_caught(multi30k_dir, tmp_path):
    for name in ("test_2016_flickr.de.gz", "test_2016_flickr.en.gz"):
        shutil.copy(multi30k_dir / name, tmp_path / name)
    assert len(load_multi30k("test_2016_flickr", tmp_path)) == 1_000
    bad = tmp_path / "test_2016_flickr.en.gz"
    lines = gzip.decompress(bad.read_bytes()).decode().replace("dog", "cat", 1)
    bad.write_bytes(gzip.compress(lines.encode()))
    with pytest.raises(ValueError) as info:
        load_multi30k("test_2016_flickr", tmp_path)
    message = str(info.value)
    assert "test_2016_flickr.en.gz" in message
    assert MULTI30K_SHA256["test_2016_flickr.en.gz"] in message
    assert hashlib.sha256(bad.read_bytes()).hexdigest() in message
    assert "download multi30k" in message


def test_missing_file_is_named(multi30k_dir, tmp_path):
    shutil.copy(multi30k_dir / "val.de.gz", tmp_path / "val.de.gz")
    with pytest.raises(FileNotFoundError, match=r"val\.en\.gz: missing"):
        load_multi30k("val", tmp_path)
    with pytest.raises(FileNotFoundError, match="train.de.gz"):
        verify_multi30k(tmp_path)


def _closed_port_url() -> str:
    # Bind and release a port: nothing listens there, so a connection is refused at once.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_download_offline_explains_how_to_provide_files(tmp_path):
    with pytest.raises(DownloadError) as info:
        download_multi30k(tmp_path, base_url=_closed_port_url(), timeout=2)
    message = str(info.value)
    assert "train.de.gz" in message
    assert "copy the eight Multi30k files" in message and "MULTI30K_DIR" in message
    assert not list(tmp_path.iterdir()), "no partial file may be left behind"


def test_download_skips_files_that_are_already_good(multi30k_dir, tmp_path, monkeypatch):
    for name in MULTI30K_SHA256:
        shutil.copy(multi30k_dir / name, tmp_path / name)

    def no_network(*args, **kwargs):
        raise AssertionError("nothing should be fetched")

    monkeypatch.setattr(data.urllib.request, "urlopen", no_network)
    assert download_multi30k(tmp_path, base_url=_closed_port_url()) == []


def test_download_command_offline_fails_cleanly(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "transformer_ref.data", "download", "multi30k",
         "--dir", str(tmp_path), "--base-url", _closed_port_url()],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "MULTI30K_DIR" in result.stderr and "copy" in result.stderr


def test_verify_command(multi30k_dir, tmp_path, capsys):
    assert data.main(["verify", "multi30k", "--dir", str(multi30k_dir)]) == 0
    assert "match their SHA-256 sums" in capsys.readouterr().out
    assert data.main(["verify", "multi30k", "--dir", str(tmp_path)]) == 1
    assert "download multi30k" in capsys.readouterr().err
