"""The class's settings files on the class server: one JSON object per file in the hub's state
folder, read into a dataclass (the class's limits, its LMS login)."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import TypeVar

Settings = TypeVar("Settings")


def read_settings(path: Path, kind: type[Settings], what: str) -> Settings | None:
    """The ``kind`` dataclass that the JSON file ``path`` holds; None when there is no file.

    Raises:
        ValueError: the file names a field ``kind`` lacks (``what``: the settings, in words),
            or a bad value.
    """
    if not path.is_file():
        return None
    values = json.loads(path.read_text())
    known = {f.name for f in fields(kind)}
    if unknown := sorted(set(values) - known):
        raise ValueError(f"{path}: unknown {what} {unknown}; known: {sorted(known)}")
    return kind(**values)
