"""Hard links: whose work a file with several names is.

A file with several names is judged by who owns it (:func:`hard_link_verdict`).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import stat
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from autograder.collect.names import student_id
from autograder.flags import Flag


@dataclass(frozen=True)
class LinkName:
    """One name, inside a source, of a file that has several (a hard link).

    Attributes:
        origin: the name, as the report writes it.
        student: the learner id of the learner folder it lies in (None: in no learner folder).
        folder_uid: the owner of that learner folder.
        source_uid: the owner of the source (the inbox, or the exchange's inbound folder).
    """

    origin: str
    student: str | None
    folder_uid: int
    source_uid: int


def _login(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def _claims(name: LinkName, owner_uid: int) -> bool:
    """Whether the file's owner says that ``name``'s learner holds it: the owner's account
    owns that learner's folder (and is not the account that owns the whole source, which owns
    every folder when one account filled the inbox), or is named after the learner."""
    if name.student is None:
        return False
    login = _login(owner_uid)
    named = login is not None and student_id(login) == name.student
    return named or name.folder_uid == owner_uid != name.source_uid


def hard_link_verdict(me: LinkName, names: list[LinkName], nlink: int, owner_uid: int,
                      ) -> tuple[str | None, Flag | None]:
    """Whether the learner of ``me`` may hand in a file that has ``nlink`` names, ``names``
    of which lie in the sources collected (``me`` among them); ``owner_uid`` owns the file.

    The file belongs to the learner whose folder its owner owns, or whom its owner's account
    is named after: that learner keeps it, and every other name of it is refused (it is that
    learner's work, linked in). When no learner has that claim, a name outside the sources
    may be anyone's file (the solutions, another user's), so every name is refused; when all
    the names are in the sources and one account owns them all (an inbox that one account
    filled), nobody can tell whose it is: each learner keeps it, flagged ``shared_file``.

    Returns:
        ``(reason, None)`` to refuse ``me``, ``(None, flag)`` to collect it with a flag, or
        ``(None, None)`` to collect it.
    """
    claimants = [n for n in names if _claims(n, owner_uid)]
    others = ", ".join(n.origin for n in names if n.origin != me.origin)
    account = _login(owner_uid) or f"user id {owner_uid}"
    if claimants:
        if any(n.origin == me.origin for n in claimants):
            return None, None
        return (f"the same file (a hard link) as {claimants[0].origin}, which belongs there: "
                f"its owner, {account}, owns that learner's folder or is that learner, not "
                "this one; a file handed in from someone else's folder is not this learner's "
                "work: hand in your own copy and collect again"), None
    outside = nlink - len(names)
    if outside > 0:
        shared = f" (and with {others})" if others else ""
        return (f"a hard link shared with {outside} name(s) outside the collected sources"
                f"{shared}, and its owner, {account}, does not own this learner's folder: it "
                "may be another user's file, such as the solutions; hand in a plain copy"), None
    if len({n.student for n in names}) == 1:
        return None, None  # several names in one learner's own folders
    return None, Flag("shared_file", None,
                      f"{me.origin} is the same file (a hard link) as {others}; one account "
                      f"({account}) owns the file and every folder, so collect cannot tell "
                      "whose work it is and collected it for each learner: check who wrote it")


class HardLinks:
    """Every name, inside the sources, of each regular file that has more than one."""

    def __init__(self) -> None:
        self.names: dict[tuple[int, int], list[LinkName]] = defaultdict(list)

    def index(self, top: Path, learner: Callable[[str], str]) -> None:
        """Record the names below ``top``; ``learner(name)`` is the learner id of a folder
        named ``name`` directly in ``top``."""
        source_uid = os.stat(top).st_uid
        owners = {}
        with os.scandir(top) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    owners[entry.name] = entry.stat(follow_symlinks=False).st_uid
        for path, first, info in _multi_linked(top):
            self.names[(info.st_dev, info.st_ino)].append(LinkName(
                path, learner(first) if first else None, owners.get(first, source_uid),
                source_uid))

    def verdict(self, origin: str, info: os.stat_result) -> tuple[str | None, Flag | None]:
        """:func:`hard_link_verdict` for the name ``origin`` of the file ``info``."""
        names = self.names.get((info.st_dev, info.st_ino), [])
        me = next((n for n in names if n.origin == origin), None)
        if me is None:
            return "a hard link that appeared while collect was running; collect again", None
        return hard_link_verdict(me, names, info.st_nlink, info.st_uid)


def _multi_linked(top: Path) -> Iterator[tuple[str, str | None, os.stat_result]]:
    """Every regular file below ``top`` that has more than one name: its path, the name of
    the folder of ``top`` that holds it (None: ``top`` itself), its status. Links are not
    followed, and what cannot be read is left out; the walk keeps no folder open, so however
    deep a folder is, it cannot run out of file descriptors or recursion."""
    stack: list[tuple[str, str | None]] = [(str(top), None)]
    while stack:
        folder, first = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                stack.append((entry.path, first or entry.name))
            elif stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                yield entry.path, first, info
