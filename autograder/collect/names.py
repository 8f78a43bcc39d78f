"""Names in submissions: student ids, and what an acceptable name is.

Names are read in Unicode normal form NFC, so a name that macOS wrote decomposed is the same
name. Student ids are case-folded too, so ``Zoë`` typed on any system is the learner ``zoë``.
"""

from __future__ import annotations

import re
import unicodedata

MAX_NAME_LENGTH = 64
_SAFE_CHARACTER = re.compile(r"[\w.@-]")
# What editors, Jupyter and operating systems leave beside files (and ``._*``, macOS's
# AppleDouble metadata files); never a submission.
LITTER = {".ipynb_checkpoints", "__pycache__", "__MACOSX", ".DS_Store", "Thumbs.db",
           "desktop.ini"}
LITTER_REASON = ("left by an editor or the operating system (Jupyter's checkpoints, macOS or "
                  "Windows folder metadata), never a submission")


def printable(name: str) -> str:
    # Undecodable bytes survive as surrogates; show them as escapes instead of crashing print().
    return name.encode("utf-8", "backslashreplace").decode("utf-8")


def student_id(name: str) -> str:
    """The student id of a name: case-folded, in Unicode normal form NFC.

    ``"Zoë"`` (whether typed as one character or as ``o`` plus a combining diaeresis) becomes
    ``"zoë"``: the same learner on every system.
    """
    return unicodedata.normalize("NFC", unicodedata.normalize("NFD", name).casefold())


def _character(char: str) -> str:
    """``"' ' (U+0020 SPACE)"``: a character named so that invisible ones can be told apart."""
    return f"{char!r} (U+{ord(char):04X} {unicodedata.name(char, 'unnamed character')})"


def _suggestion(name: str) -> str:
    fixed = re.sub(r"[^\w.@-]+", "_", unicodedata.normalize("NFC", name)).strip("._-@")
    return fixed[:MAX_NAME_LENGTH] or "<the learner's id>"


def check_name(name: str, what: str) -> str | None:
    """The reason why ``name`` is not acceptable as a ``what`` (student id, file), or None.

    A name is 1-64 letters, digits, ``.``, ``_``, ``-`` or ``@``, starts with a letter or a
    digit, and is valid UTF-8 in Unicode normal form NFC. The reason names the first problem
    exactly (which character, where) and how to fix it.
    """
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return (f"the {what} {printable(name)!r} is not valid UTF-8 (it was written in another "
                f"encoding); rename it {_suggestion(printable(name))!r} or another id of "
                "plain letters, digits, '.', '_', '-' or '@' and collect again")
    fix = f"rename it {_suggestion(name)!r} (or to the learner's real id) and collect again"
    if not name:
        return f"the {what} is empty; name it after the learner's id and collect again"
    if unicodedata.normalize("NFC", name) != name:
        combining = next((c for c in name if unicodedata.combining(c)), name[0])
        return (f"the {what} {name!r} is not in Unicode normal form NFC: it spells a letter "
                f"as a base letter plus the combining character {_character(combining)}; "
                f"write it as {unicodedata.normalize('NFC', name)!r} (one character per "
                "letter) and collect again")
    if len(name) > MAX_NAME_LENGTH:
        return (f"the {what} {name!r} is {len(name)} characters long, more than "
                f"{MAX_NAME_LENGTH}; {fix}")
    if not (name[0].isalnum()):
        return (f"the {what} {name!r} starts with {_character(name[0])}; it must start with a "
                f"letter or a digit: {fix}")
    for position, char in enumerate(name):
        if not _SAFE_CHARACTER.fullmatch(char):
            return (f"the {what} {name!r} contains {_character(char)} at position "
                    f"{position + 1}; only letters, digits, '.', '_', '-' and '@' are allowed: "
                    f"{fix}")
    return None


def nfc(name: str) -> str:
    return unicodedata.normalize("NFC", name)


def is_litter(name: str) -> bool:
    return name in LITTER or name.startswith("._")
