"""A class on one machine: its state folder, its roster and the learners' system accounts.

Everything the class server keeps lives in one folder, the *state* (``build/hub/`` of the
checkout unless ``TRANSFORMER_HUB_STATE`` or ``make hub STATE=...`` names another)::

    <state>/hub/            JupyterHub's database (users, servers) and cookie secret,
                            ``passwords.json``, the users' hashed passwords, and
                            ``autograder_secret``, the class's grading secret      root, 0700
    <state>/course/         the gradebook, submitted/, autograded/, feedback/, flags/ and
                            grades.csv of the class            root and the staff group, 2770
    <state>/course/view/    what learners see of the course's code (autograder.steps.view)
    <state>/exchange/       nbgrader's exchange: released chapters, submissions, feedback
                            (nbgrader sets the permissions of what it puts there)
    <state>/checks/socket   the checking service that runs learners' visible checks
    <state>/grading/socket  the grading service that grades for instructors and teaching
                            assistants (autograder.hub.grading)
    <state>/home/<name>/    each user's files: a learner's chapters, JupyterLab settings
                            (the user's own system account, 0700)
    <state>/instructors.txt, <state>/tas.txt, <state>/learners.txt    the roster, one name
                            per line (root, 0644)

Passwords are stored as scrypt hashes (salted, memory-hard: Python's ``hashlib.scrypt``); the
instructor hands each person the password that ``hub add`` or ``hub password`` printed.

The grading secret (:meth:`Classroom.ensure_secret`, file mode 0600) draws the inputs of the
hidden checks. `make hub` creates it on the first start; only root reads it: the grading service
(:mod:`autograder.hub.grading`), which root runs, grades with it. ``python -m autograder hub
secret --rotate`` writes a new one (see :mod:`autograder.grade.secret`).

Each user's server runs as a system account of its own, ``<prefix><name>`` (prefix
``jupyter-`` unless ``TRANSFORMER_HUB_USER_PREFIX`` says otherwise), which
:meth:`Classroom.ensure_account` creates with ``useradd`` when it is missing. The accounts of
the *staff*, instructors and teaching assistants (role ``ta``), are also in the group
``<prefix>staff``, which may read and write the class's course folder (the gradebook,
submissions, feedback) but not the hub's folder with the secret and the passwords.

    python -m autograder hub add alice bob            # learners; prints their passwords
    python -m autograder hub add eve=eve@uni.edu      # with an email or LMS id (grade exports)
    python -m autograder hub add carol --instructor
    python -m autograder hub add dave --ta            # a teaching assistant
    python -m autograder hub password alice           # a new password for alice
    python -m autograder hub list
    python -m autograder hub secret [--rotate]        # where the grading secret is
"""

from __future__ import annotations

import base64
import grp
import hashlib
import hmac
import json
import os
import pwd
import re
import secrets
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from autograder.course import COURSE_ROOT_ENV, ROOT, Course
from autograder.lms_ids import LmsId, record_lms_ids, split_name

STATE_ENV = "TRANSFORMER_HUB_STATE"
PREFIX_ENV = "TRANSFORMER_HUB_USER_PREFIX"
# Where a staff member's server finds the grading service (autograder.hub.grading).
GRADING_SOCKET_ENV = "TRANSFORMER_GRADING_SOCKET"
DEFAULT_STATE = ROOT / "build" / "hub"
DEFAULT_PREFIX = "jupyter-"
ROLES = ("learner", "ta", "instructor")
# The roles that grade: their servers serve the course with the Formgrader.
STAFF = ("instructor", "ta")
# A name is a JupyterHub user name, an nbgrader student id and, behind the prefix, a Linux
# account name, so it must be all three: lower case, and short enough for useradd.
NAME = re.compile(r"[a-z][a-z0-9_-]*")
MAX_ACCOUNT_NAME = 32
# The grading secret: 32 random bytes, as 64 hex digits.
SECRET_BYTES = 32
# scrypt's cost (n, r, p): 16 MiB and about 50 ms per check, as Python's documentation suggests.
SCRYPT = {"n": 2**14, "r": 8, "p": 1}
PASSWORD_BYTES = 12  # a generated password: 16 characters of URL-safe base64


@dataclass(frozen=True)
class Classroom:
    """The class kept in the folder ``state``; learners' accounts are ``<prefix><name>``."""

    state: Path
    prefix: str = DEFAULT_PREFIX

    @classmethod
    def from_env(cls, state: str | os.PathLike | None = None) -> Classroom:
        """The class of ``state``, else of ``$TRANSFORMER_HUB_STATE``, else ``build/hub``."""
        folder = state or os.environ.get(STATE_ENV) or DEFAULT_STATE
        return cls(Path(folder).resolve(), os.environ.get(PREFIX_ENV) or DEFAULT_PREFIX)

    # ---- the folders

    @property
    def hub_dir(self) -> Path:
        return self.state / "hub"

    @property
    def course_dir(self) -> Path:
        return self.state / "course"

    @property
    def exchange(self) -> Path:
        return self.state / "exchange"

    @property
    def checks_socket(self) -> Path:
        """Where the class's checking service listens (:mod:`autograder.hub.checking`)."""
        return self.state / "checks" / "socket"

    @property
    def course(self) -> Course:
        """The class's course: the repository (or the copy of it that the hub's
        ``TRANSFORMER_COURSE_ROOT`` names), with the class's course folder."""
        return Course.of(os.environ.get(COURSE_ROOT_ENV) or ROOT, self.course_dir)

    @property
    def grading_socket(self) -> Path:
        """Where the class's grading service listens (:mod:`autograder.hub.grading`)."""
        return self.state / "grading" / "socket"

    @property
    def staff_group(self) -> str:
        """The system group of the instructors' and teaching assistants' accounts."""
        return f"{self.prefix}staff"

    def home(self, name: str) -> Path:
        return self.state / "home" / name

    def roster_file(self, role: str) -> Path:
        return self.state / f"{role}s.txt"

    def prepare(self) -> None:
        """Create the state folder with the permissions above (idempotent)."""
        for folder, mode in ((self.state, 0o755), (self.hub_dir, 0o700),
                             (self.course_dir, 0o2770), (self.state / "home", 0o755),
                             (self.exchange, 0o777), (self.checks_socket.parent, 0o755),
                             (self.grading_socket.parent, 0o755)):
            folder.mkdir(parents=True, exist_ok=True)
            folder.chmod(mode)  # mkdir's mode is cut by the umask

    def share_with_staff(self) -> None:
        """Give the staff group read and write on everything in the course folder (folders
        also setgid, so that what is made there stays the group's). Root only; what grading
        copies keeps its source's modes, so the grading service calls this after each step.
        Links are left alone, and each file is changed through its own descriptor: a staff
        member who puts a link in a file's place changes nothing outside the folder."""
        gid = self.ensure_staff_group()
        for _, _, files, folder in os.fwalk(self.course_dir):
            _give_group(folder, gid, 0o2070)
            for name in files:
                try:
                    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK,
                                 dir_fd=folder)
                except OSError:  # a link, or gone since it was listed
                    continue
                try:
                    _give_group(fd, gid, 0o060)
                finally:
                    os.close(fd)

    # ---- the roster

    def roster(self, role: str) -> list[str]:
        """The names of one role (``learner`` or ``instructor``), in the order added."""
        path = self.roster_file(role)
        if not path.is_file():
            return []
        lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
        return [line for line in lines if line]

    def staff(self) -> list[str]:
        """The instructors and teaching assistants."""
        return [name for role in STAFF for name in self.roster(role)]

    def role_of(self, name: str) -> str | None:
        return next((role for role in ROLES if name in self.roster(role)), None)

    def check_name(self, name: str) -> str | None:
        """Why ``name`` cannot be a user of this class, or None when it can."""
        account = self.account(name)
        if not NAME.fullmatch(name):
            return (f"{name!r} is not a valid user name: use lower-case letters, digits, '-' "
                    "and '_', starting with a letter")
        if len(account) > MAX_ACCOUNT_NAME:
            return (f"{name!r} is too long: its system account {account!r} would have more "
                    f"than {MAX_ACCOUNT_NAME} characters")
        return None

    def add(self, names: Iterable[str], role: str) -> list[str]:
        """Put ``names`` on the roster as ``role``; return those that were not there yet.

        Raises:
            ValueError: a name is invalid, or already on the roster in another role.
        """
        names = list(dict.fromkeys(names))
        problems = [p for p in map(self.check_name, names) if p]
        problems += [f"{name!r} is already on the roster as {other}; remove it first"
                     for name in names
                     if (other := self.role_of(name)) not in (None, role)]
        if problems:
            raise ValueError("; ".join(problems))
        new = [name for name in names if name not in self.roster(role)]
        self.prepare()
        with self.roster_file(role).open("a") as roster:
            roster.writelines(f"{name}\n" for name in new)
        return new

    def remove(self, names: Iterable[str]) -> list[str]:
        """Take ``names`` off the roster; return those that were on it. Their files stay."""
        removed = []
        for role in ROLES:
            kept = [name for name in self.roster(role) if name not in names]
            removed += [name for name in self.roster(role) if name in names]
            if self.roster_file(role).is_file():
                self.roster_file(role).write_text("".join(f"{name}\n" for name in kept))
        return removed

    def change_roster(self, action: str, names: list[str], role: str = "learner") -> list[str]:
        """``hub add`` (as ``role``), ``hub remove`` or ``hub password`` of ``names``; the lines
        to print: ``NAME  PASSWORD`` for each new password, then what was done.

        Raises:
            ValueError: an unknown action, no names, or names that cannot be added.
            PermissionError: creating a system account, not as root.
            RuntimeError: an account tool failed.
        """
        if not names:
            raise ValueError(f"hub {action}: name at least one user")
        if action == "remove":
            removed = self.remove(names)
            return [f"took {len(removed)} name(s) off the roster of {self.state}: they can no "
                    "longer log in. Their files and system accounts stay (userdel removes one)."]
        if action == "password":
            unknown = [name for name in names if self.role_of(name) is None]
            if unknown:
                raise ValueError(f"not on the roster: {' '.join(unknown)}; add them with "
                                 "`python -m autograder hub add NAME`")
            return [f"{name}  {self.new_password(name)}" for name in names]
        if action != "add":
            raise ValueError(f"unknown roster action {action!r}: add, remove or password")
        names, ids = self._with_lms_ids(names)
        self.add(names, role)
        record_lms_ids(self.course, ids)
        lines = []
        for name in names:
            # A staff member's account is otherwise made when their server first starts.
            if role == "learner" or os.geteuid() == 0:
                self.ensure_account(name, role)
            if not self.has_password(name):
                lines.append(f"{name}  {self.new_password(name)}")
        if ids:
            lines.append(f"recorded the email or LMS id of {len(ids)} learner(s) in "
                         f"{self.course.lms_ids_file} (the grade exports for Canvas and Moodle "
                         "name learners by them)")
        return [*lines, f"{len(names)} {role}(s) on the roster of {self.state}; each new one's "
                "password is printed above (hand it to them). They log in at <hub "
                "address>/hub/login."]

    @staticmethod
    def _with_lms_ids(names: list[str]) -> tuple[list[str], dict[str, LmsId]]:
        """The user names of ``hub add``'s ``NAME[=EMAIL|LMS_ID]`` arguments, and the ids given
        (:mod:`autograder.lms_ids`).

        Raises:
            ValueError: ids that cannot be read.
        """
        pairs = [split_name(name) for name in names]
        return [name for name, _ in pairs], {name: ids for name, ids in pairs if ids}

    # ---- the grading secret

    @property
    def secret_file(self) -> Path:
        return self.hub_dir / "autograder_secret"

    def ensure_secret(self, rotate: bool = False) -> Path:
        """The file of the class's grading secret, written with a new random secret when it
        is missing (or ``rotate``); readable by its owner alone.

        Raises:
            PermissionError: the state folder is not this user's to write (run as root).
        """
        if self.secret_file.is_file() and not rotate:
            return self.secret_file
        self.prepare()
        fd, staging = tempfile.mkstemp(dir=self.hub_dir, prefix=".secret-")  # mode 0600
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(SECRET_BYTES) + "\n")
        os.replace(staging, self.secret_file)
        return self.secret_file

    # ---- passwords

    @property
    def password_file(self) -> Path:
        return self.hub_dir / "passwords.json"

    def _hashes(self) -> dict[str, str]:
        if not self.password_file.is_file():
            return {}
        return json.loads(self.password_file.read_text())

    def new_password(self, name: str) -> str:
        """Give ``name`` a new random password; store only its hash, return the password."""
        password = base64.urlsafe_b64encode(secrets.token_bytes(PASSWORD_BYTES)).decode()
        salt = secrets.token_bytes(16)
        digest = hashlib.scrypt(password.encode(), salt=salt, **SCRYPT)
        hashes = self._hashes()
        hashes[name] = f"scrypt${salt.hex()}${digest.hex()}"
        self.prepare()
        # Written next to the file and renamed: a crash never leaves half a password file.
        fd, staging = tempfile.mkstemp(dir=self.hub_dir, prefix=".passwords-")
        with os.fdopen(fd, "w") as out:
            json.dump(hashes, out, indent=1, sort_keys=True)
        os.replace(staging, self.password_file)
        return password

    def has_password(self, name: str) -> bool:
        return name in self._hashes()

    def check_password(self, name: str, password: str) -> bool:
        """Whether ``password`` is the one ``name`` was given (constant time in the hash)."""
        stored = self._hashes().get(name)
        if stored is None:
            return False
        _, salt, digest = stored.split("$")
        candidate = hashlib.scrypt(password.encode(), salt=bytes.fromhex(salt), **SCRYPT)
        return hmac.compare_digest(candidate.hex(), digest)

    # ---- system accounts

    def account(self, name: str) -> str:
        """The system account of the learner ``name``."""
        return f"{self.prefix}{name}"

    def ensure_account(self, name: str, role: str = "learner") -> pwd.struct_passwd:
        """The user's system account and home folder, created when missing; the staff's
        accounts (``role`` in :data:`STAFF`) are members of :attr:`staff_group`.

        The account has no password (nobody logs in to the machine with it) and its home is
        ``<state>/home/<name>``, readable by that account alone.

        Raises:
            PermissionError: not root, and the account does not exist yet.
            RuntimeError: useradd failed.
        """
        account = self.account(name)
        home = self.home(name)
        try:
            entry = pwd.getpwnam(account)
        except KeyError:
            if os.geteuid() != 0:
                raise PermissionError(f"creating the system account {account!r} needs root: "
                                      "run this command with sudo") from None
            _system(["useradd", "--no-create-home", "--home-dir", str(home), "--shell",
                     "/bin/bash", "--user-group", "--comment",
                     f"Build the Transformer {role} {name}", account])
            entry = pwd.getpwnam(account)
        if role in STAFF and account not in grp.getgrgid(self.ensure_staff_group()).gr_mem:
            _system(["usermod", "--append", "--groups", self.staff_group, account])
        self.prepare()
        home.mkdir(exist_ok=True)
        os.chown(home, entry.pw_uid, entry.pw_gid)
        home.chmod(0o700)
        return entry

    def ensure_staff_group(self) -> int:
        """The id of :attr:`staff_group`, created when missing (root only)."""
        try:
            return grp.getgrnam(self.staff_group).gr_gid
        except KeyError:
            _system(["groupadd", self.staff_group])
            return grp.getgrnam(self.staff_group).gr_gid


def _give_group(fd: int, gid: int, bits: int) -> None:
    """Make the open file ``fd`` the group ``gid``'s, adding the mode ``bits``."""
    os.fchown(fd, -1, gid)
    os.fchmod(fd, os.fstat(fd).st_mode & 0o7777 | bits)

def grading_socket(classroom: Classroom | None = None) -> Path | None:
    """The socket of the class's grading service (:mod:`autograder.hub.grading`): the one this
    process's environment names, else ``classroom``'s when its service is listening; None
    without either."""
    if path := os.environ.get(GRADING_SOCKET_ENV):
        return Path(path)
    if classroom is not None and classroom.grading_socket.is_socket():
        return classroom.grading_socket
    return None


def delegated(classroom: Classroom | None = None) -> bool:
    """Whether this process asks the grading service (:func:`grading_socket`) instead of
    doing root's steps itself: it is not root, and there is a service to ask."""
    return os.geteuid() != 0 and grading_socket(classroom) is not None


def _system(command: list[str]) -> None:
    """Run an account tool (useradd, usermod, groupadd).

    Raises:
        RuntimeError: it failed; the message holds its error output.
    """
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:1] + command[-1:])} failed: "
                           f"{result.stderr.strip()}")
