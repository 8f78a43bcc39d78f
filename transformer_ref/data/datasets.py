"""Data for the reference model: generated toy tasks and the Multi30k German–English corpus.

Synthetic tasks (no download)::

    >>> synthetic_pairs("reverse", 2, max_len=4, seed=0)
    [([9, 6, 7, 4, 2], [4, 7, 6, 9, 2]), ([4, 4, 5, 2], [5, 4, 4, 2])]

Symbols are the ids ``4 .. 4 + num_symbols - 1`` (ids 0..3 are the special tokens of
:mod:`transformer_ref.data.vocab`) and both sequences end with ``EOS_ID``.

Multi30k (task 1, raw text) is read from a directory: ``MULTI30K_DIR`` when that variable is
set, otherwise ``data/multi30k`` in the course folder (the checkout that holds this package),
wherever Python runs: a notebook's kernel, which runs in its chapter's folder, finds the same
files as a shell in the course folder. Each file is checked against its SHA-256 sum before
use. From a shell::

    python -m transformer_ref.data download multi30k [--dir D]   # fetch missing files
    python -m transformer_ref.data verify multi30k [--dir D]     # check the checksums
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import sys
import tempfile
import urllib.request
from pathlib import Path

import numpy as np

from transformer_ref.data.vocab import EOS_ID, SPECIAL_TOKENS
from transformer_ref.validation import require_int

FIRST_SYMBOL_ID = len(SPECIAL_TOKENS)
SYNTHETIC_TASKS = ("copy", "reverse", "sort")

MULTI30K_SPLITS = ("train", "val", "test_2016_flickr", "test_2017_flickr")
MULTI30K_LANGUAGES = ("de", "en")
MULTI30K_BASE_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"
MULTI30K_ENV = "MULTI30K_DIR"
MULTI30K_DEFAULT_DIR = Path("data") / "multi30k"
MULTI30K_SHA256 = {
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2017_flickr.de.gz": "a2c89666db00c495cd8513b9d708d5a3acc205d7de312ef2bf5fb7ebc1540aee",
    "test_2017_flickr.en.gz": "76a444ee25172e72695cddb13ae4a3bda59430617be88e0bb46b60504f054074",
}
DOWNLOAD_TIMEOUT_S = 15.0

_FIX = (
    "run `python -m transformer_ref.data download multi30k` (into data/multi30k in the course "
    f"folder, or {MULTI30K_ENV} when set; --dir DIR for another directory), or set "
    f"{MULTI30K_ENV} to a directory that holds the eight Multi30k files before Python starts "
    f"(for the notebooks: `{MULTI30K_ENV}=/path/to/multi30k make lab`; restarting a kernel does "
    "not read a variable exported later)"
)


class DownloadError(RuntimeError):
    """A Multi30k file could not be fetched (no network, server error or bad checksum)."""


# ---------------------------------------------------------------------------------------------
# Synthetic tasks


def _transform(task: str, symbols: list[int]) -> list[int]:
    if task == "copy":
        return list(symbols)
    if task == "reverse":
        return symbols[::-1]
    return sorted(symbols)


def synthetic_pairs(
    task: str,
    n: int,
    *,
    num_symbols: int = 10,
    min_len: int = 1,
    max_len: int = 10,
    seed: int = 0,
) -> list[tuple[list[int], list[int]]]:
    """Generate ``n`` (source, target) id sequences for a toy sequence-to-sequence task.

    Args:
        task: ``"copy"`` (target = source), ``"reverse"`` (target = source reversed) or
            ``"sort"`` (target = source sorted ascending).
        n: number of pairs (``>= 0``).
        num_symbols: alphabet size; symbols are the ids ``4 .. 4 + num_symbols - 1``.
        min_len, max_len: the number of symbols per sequence is drawn uniformly from
            ``[min_len, max_len]`` (EOS not counted).
        seed: seed of the NumPy generator; equal arguments give equal pairs.

    Returns:
        A list of ``n`` pairs ``(src, tgt)`` of Python ``int`` lists, each ending with ``EOS_ID``.
    """
    where = "synthetic_pairs"
    if task not in SYNTHETIC_TASKS:
        raise ValueError(f"{where}: unknown task {task!r}; choose one of {SYNTHETIC_TASKS}")
    n = require_int(n, "n", where, minimum=0)
    num_symbols = require_int(num_symbols, "num_symbols", where, minimum=1)
    min_len = require_int(min_len, "min_len", where, minimum=1)
    max_len = require_int(max_len, "max_len", where, minimum=1)
    if min_len > max_len:
        raise ValueError(
            f"{where}: min_len={min_len} is larger than max_len={max_len}; "
            f"pass min_len <= max_len"
        )
    rng = np.random.default_rng(seed)
    lengths = rng.integers(min_len, max_len + 1, size=n)
    pairs = []
    for length in lengths:
        ids = rng.integers(FIRST_SYMBOL_ID, FIRST_SYMBOL_ID + num_symbols, size=length)
        symbols = [int(i) for i in ids]
        pairs.append((symbols + [EOS_ID], _transform(task, symbols) + [EOS_ID]))
    return pairs


# ---------------------------------------------------------------------------------------------
# Multi30k: location and checksums


def course_root() -> Path | None:
    """The course folder this package belongs to (``pyproject.toml`` beside ``transformer_ref/``),
    or ``None`` for a copy installed elsewhere (site-packages)."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() else None


def multi30k_dir() -> Path:
    """The Multi30k directory: ``$MULTI30K_DIR`` if set, else ``data/multi30k`` in the course
    folder, whatever the current directory (below the current directory only for a copy of
    the package installed outside a course folder)."""
    configured = os.environ.get(MULTI30K_ENV)
    if configured:
        return Path(configured).expanduser()
    root = course_root()
    return MULTI30K_DEFAULT_DIR if root is None else root / MULTI30K_DEFAULT_DIR


def multi30k_files(split: str) -> tuple[str, str]:
    """File names ``(<split>.de.gz, <split>.en.gz)`` of one split."""
    if split not in MULTI30K_SPLITS:
        raise ValueError(f"unknown Multi30k split {split!r}; choose one of {MULTI30K_SPLITS}")
    return tuple(f"{split}.{lang}.gz" for lang in MULTI30K_LANGUAGES)


def sha256_file(path: Path) -> str:
    """Hex SHA-256 digest of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _problem(data_dir: Path, name: str) -> str | None:
    """Describe what is wrong with one file, or ``None`` when its checksum matches."""
    path = data_dir / name
    expected = MULTI30K_SHA256[name]
    if not path.is_file():
        return f"{path}: missing (expected SHA-256 {expected}, actual: no file)"
    actual = sha256_file(path)
    if actual != expected:
        return f"{path}: checksum mismatch (expected SHA-256 {expected}, actual {actual})"
    return None


def verify_multi30k(data_dir: str | Path | None = None, names: list[str] | None = None) -> Path:
    """Check Multi30k files against their SHA-256 sums.

    Args:
        data_dir: the directory (default :func:`multi30k_dir`).
        names: file names to check (default: all eight).

    Returns:
        The directory as a ``Path`` when every file is present and intact.

    Raises:
        FileNotFoundError: the directory or a file is missing.
        ValueError: a file is present but its checksum differs (a corrupt or partial copy).
    """
    data_dir = Path(data_dir) if data_dir is not None else multi30k_dir()
    names = list(MULTI30K_SHA256) if names is None else names
    if not data_dir.is_dir():
        raise FileNotFoundError(
            f"Multi30k directory {data_dir.resolve()} does not exist. To provide the data, {_FIX}."
        )
    problems = [p for p in (_problem(data_dir, name) for name in names) if p is not None]
    if problems:
        listed = "\n  ".join(problems)
        message = f"Multi30k files in {data_dir} failed verification:\n  {listed}\nFix: {_FIX}."
        if any(": missing (" in p for p in problems):
            raise FileNotFoundError(message)
        raise ValueError(message)
    return data_dir


def _read_lines(path: Path) -> list[str]:
    # Split on "\n" only: str.splitlines would also break on rare Unicode separators inside a
    # sentence and misalign the German and English sides.
    text = gzip.decompress(path.read_bytes()).decode("utf-8")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.strip() for line in lines]


def load_multi30k(split: str, data_dir: str | Path | None = None) -> list[tuple[str, str]]:
    """Load one Multi30k split as sentence pairs, after checking both files' checksums.

    Args:
        split: ``"train"`` (29,000 pairs), ``"val"`` (1,014), ``"test_2016_flickr"`` (1,000)
            or ``"test_2017_flickr"`` (1,000).
        data_dir: the directory with the ``.gz`` files (default :func:`multi30k_dir`).

    Returns:
        A list of ``(german, english)`` strings, line ``i`` of one file paired with line ``i``
        of the other.
    """
    names = multi30k_files(split)
    data_dir = verify_multi30k(data_dir, list(names))
    german, english = (_read_lines(data_dir / name) for name in names)
    if len(german) != len(english):
        raise ValueError(
            f"Multi30k split {split!r} in {data_dir}: {names[0]} has {len(german)} lines but "
            f"{names[1]} has {len(english)}; the files must be parallel. Fix: {_FIX}."
        )
    return list(zip(german, english, strict=True))


# ---------------------------------------------------------------------------------------------
# Multi30k: download


def _fetch(url: str, target: Path, expected: str, timeout: float) -> None:
    """Download ``url`` into ``target`` through a temporary file, checking the checksum."""
    fd, part_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    part = Path(part_name)
    try:
        digest = hashlib.sha256()
        with (
            os.fdopen(fd, "wb") as handle,
            urllib.request.urlopen(url, timeout=timeout) as response,
        ):
            for block in iter(lambda: response.read(1 << 16), b""):
                digest.update(block)
                handle.write(block)
        if digest.hexdigest() != expected:
            raise DownloadError(
                f"downloaded {url} but its checksum differs (expected SHA-256 {expected}, "
                f"actual {digest.hexdigest()}); the file was not saved. Try again later, or "
                f"copy a good copy of {target.name} into {target.parent}"
            )
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)


def download_multi30k(
    data_dir: str | Path | None = None,
    *,
    base_url: str = MULTI30K_BASE_URL,
    timeout: float = DOWNLOAD_TIMEOUT_S,
) -> list[Path]:
    """Fetch every Multi30k file that is missing or fails its checksum.

    Args:
        data_dir: target directory (default :func:`multi30k_dir`), created when needed.
        base_url: where the files live; ``<base_url>/<name>.gz`` is fetched.
        timeout: seconds to wait for the server before giving up.

    Returns:
        The paths that were downloaded (empty when everything was already in place).

    Raises:
        DownloadError: the server could not be reached or sent a file with the wrong checksum.
            The message says how to provide the files by hand.
    """
    data_dir = Path(data_dir) if data_dir is not None else multi30k_dir()
    data_dir.mkdir(parents=True, exist_ok=True)
    fetched = []
    for name, expected in MULTI30K_SHA256.items():
        target = data_dir / name
        if target.is_file() and sha256_file(target) == expected:
            continue
        url = f"{base_url.rstrip('/')}/{name}"
        try:
            _fetch(url, target, expected, timeout)
        except OSError as error:  # URLError, timeouts and refused connections
            reason = getattr(error, "reason", None) or error
            raise DownloadError(
                f"could not download {name} from {url} ({reason}). Without internet access, "
                f"copy the eight Multi30k files ({', '.join(MULTI30K_SHA256)}) into "
                f"{data_dir.resolve()}, or set {MULTI30K_ENV} to a directory that holds them; "
                f"then check them with `python -m transformer_ref.data verify multi30k`"
            ) from error
        fetched.append(target)
    return fetched


# ---------------------------------------------------------------------------------------------
# Command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m transformer_ref.data",
        description="Download or verify the Multi30k German-English data.",
    )
    parser.add_argument("action", choices=("download", "verify"))
    parser.add_argument("dataset", choices=("multi30k",))
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help=f"data directory (default: ${MULTI30K_ENV}, else {MULTI30K_DEFAULT_DIR} in the "
        "course folder)",
    )
    parser.add_argument(
        "--base-url", default=MULTI30K_BASE_URL, help="address the files are fetched from"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m transformer_ref.data``; returns the exit status."""
    args = _parser().parse_args(argv)
    data_dir = args.dir if args.dir is not None else multi30k_dir()
    try:
        if args.action == "download":
            fetched = download_multi30k(data_dir, base_url=args.base_url)
            print(f"downloaded {len(fetched)} file(s) into {data_dir.resolve()}")
        verify_multi30k(data_dir)
    except (DownloadError, FileNotFoundError, ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"Multi30k files in {data_dir.resolve()} are complete and match their SHA-256 sums")
    return 0

