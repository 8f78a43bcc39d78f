"""The class server's roster, passwords and accounts (`python -m autograder hub ...`), and who
its authenticator lets in. The whole hub in a browser is tests/test_hub.py."""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from autograder.cli import main
from autograder.hub.auth import RosterAuthenticator
from autograder.hub.classroom import PREFIX_ENV, STATE_ENV, Classroom
from autograder.lms_ids import LmsId, read_lms_ids


@pytest.fixture
def classroom(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Classroom]:
    """An empty class in a temporary state folder; accounts under a prefix of this test."""
    prefix = f"t{secrets.token_hex(3)}-"
    monkeypatch.setenv(STATE_ENV, str(tmp_path / "state"))
    monkeypatch.setenv(PREFIX_ENV, prefix)
    room = Classroom.from_env()
    yield room
    # Every account of this test, on the roster or taken off it.
    for entry in pwd.getpwall():
        if entry.pw_name.startswith(prefix):
            subprocess.run(["userdel", entry.pw_name], capture_output=True, check=False)
    subprocess.run(["groupdel", room.staff_group], capture_output=True, check=False)


def _passwords(out: str) -> dict[str, str]:
    return dict(re.findall(r"^(\w+)  (\S+)$", out, flags=re.M))


@pytest.mark.skipif(os.geteuid() != 0, reason="creating system accounts needs root")
def test_add_creates_accounts_and_prints_passwords_once(classroom: Classroom, capsys) -> None:
    assert main(["hub", "add", "alice", "bob"]) == 0
    passwords = _passwords(capsys.readouterr().out)
    assert sorted(passwords) == ["alice", "bob"]
    assert classroom.check_password("alice", passwords["alice"])
    assert not classroom.check_password("alice", passwords["bob"])
    # Only hashes are stored, in a folder only root can read.
    stored = classroom.password_file.read_text()
    assert passwords["alice"] not in stored and "scrypt$" in json.loads(stored)["alice"]
    assert classroom.hub_dir.stat().st_mode & 0o777 == 0o700
    for name in ("alice", "bob"):
        entry = pwd.getpwnam(classroom.account(name))
        home = classroom.home(name)
        assert (home.stat().st_uid, home.stat().st_mode & 0o777) == (entry.pw_uid, 0o700)

    # Adding again keeps the password; `hub password` replaces it.
    assert main(["hub", "add", "alice"]) == 0
    assert _passwords(capsys.readouterr().out) == {}
    assert main(["hub", "password", "alice"]) == 0
    new = _passwords(capsys.readouterr().out)["alice"]
    assert classroom.check_password("alice", new)
    assert not classroom.check_password("alice", passwords["alice"])


def test_bad_names_and_double_roles_are_refused(classroom: Classroom, capsys) -> None:
    for name in ("Alice", "al ice", "1alice", "x" * 40):
        assert main(["hub", "add", name, "--instructor"]) == 1
        assert "not a valid user name" in capsys.readouterr().err or len(name) == 40
    assert main(["hub", "add", "carol", "--instructor"]) == 0
    assert main(["hub", "add", "carol"]) == 1
    assert "already on the roster as instructor" in capsys.readouterr().err
    assert main(["hub", "password", "dave"]) == 1
    assert "not on the roster" in capsys.readouterr().err


def test_the_authenticator_follows_the_roster(classroom: Classroom, capsys) -> None:
    assert main(["hub", "add", "carol", "--instructor"]) == 0
    password = _passwords(capsys.readouterr().out)["carol"]
    auth = RosterAuthenticator()

    def login(name: str, secret: str) -> dict | None:
        return asyncio.run(auth.authenticate(None, {"username": name, "password": secret}))

    assert login("carol", password) == {"name": "carol", "admin": True}
    assert login("carol", password + "x") is None
    assert login("mallory", password) is None
    assert auth.check_allowed("carol") and not auth.check_allowed("mallory")
    # Taken off the roster, carol can no longer log in, even with her password.
    assert main(["hub", "remove", "carol"]) == 0
    assert login("carol", password) is None and not auth.check_allowed("carol")


def test_hub_add_records_each_learners_email_or_lms_id(classroom: Classroom, capsys) -> None:
    """What the grade exports for Canvas and Moodle name learners by."""
    # As instructors: no system account is needed where this runs without root.
    assert main(["hub", "add", "erin=erin@uni.edu,s42", "fay", "--instructor"]) == 0
    assert "recorded the email or LMS id of 1 learner(s)" in capsys.readouterr().out
    assert classroom.roster("instructor") == ["erin", "fay"]
    assert read_lms_ids(classroom.course) == {"erin": LmsId("erin@uni.edu", "s42")}
    assert main(["hub", "add", "gil=not an id", "--instructor"]) == 1
    assert "is not an email or LMS id" in capsys.readouterr().err
    assert "gil" not in classroom.roster("instructor")


def _allows(spec: str, major: int) -> bool:
    """Whether an npm ``engines.node`` range admits Node.js ``major``.0.0 and later releases of
    that major: each ``||`` alternative is ``*``, ``^N``, or ``>= N[.m.p]``."""
    for alternative in spec.split("||"):
        alternative = alternative.strip()
        caret, floor = re.fullmatch(r"\^(\d+)", alternative), re.fullmatch(
            r">=\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?", alternative)
        if alternative == "*" or (caret and int(caret[1]) == major):
            return True
        if floor and (int(floor[1]), int(floor[2] or 0), int(floor[3] or 0)) <= (major, 0, 0):
            return True
        if not (caret or floor):
            raise ValueError(f"an engines range this test does not read: {spec!r}")
    return False


def test_the_proxy_lock_runs_on_the_node_version_make_hub_asks_for(project_root: Path) -> None:
    """Every package of the proxy's lock runs on the Node.js major `make hub` checks for (no
    EBADENGINE warning on Debian's Node.js 20), and the class server's page names the same two
    versions."""
    makefile = (project_root / "Makefile").read_text()
    major = int(re.search(r"^NODE_MAJOR := (\d+)$", makefile, flags=re.M)[1])
    lock = json.loads((project_root / "autograder" / "hub" / "package-lock.json").read_text())
    too_new = {name: package["engines"]["node"] for name, package in lock["packages"].items()
               if "node" in package.get("engines", {})
               and not _allows(package["engines"]["node"], major)}
    assert too_new == {}, f"these need a newer Node.js than {major}: {too_new}"
    proxy = lock["packages"]["node_modules/configurable-http-proxy"]["version"]
    page = " ".join((project_root / "docs" / "class-server.md").read_text().split())
    assert f"configurable-http-proxy {proxy}" in page
    assert f"Node.js {major} or newer" in page
    assert _allows(">= 20", 20) and not _allows(">=22.12.0", 20) and _allows("^16 || >=20", 22)


def test_hub_secret(classroom: Classroom, capsys) -> None:
    """`hub secret` makes the class's grading secret once and says where it is and how to grade
    with it; `--rotate` replaces it; the grader accepts the file."""
    from autograder.exercises.checking import SECRET_ENV, SECRET_FILE_ENV
    from autograder.grade.secret import require_grading_secret

    assert main(["hub", "secret"]) == 0
    out = capsys.readouterr().out
    path = classroom.secret_file
    assert f"{SECRET_FILE_ENV}={path}" in out and "autograde" in out
    first = path.read_text()
    assert main(["hub", "secret"]) == 0 and path.read_text() == first
    assert main(["hub", "secret", "--rotate"]) == 0
    assert "wrote a new grading secret" in capsys.readouterr().out
    assert path.read_text() != first and path.stat().st_mode & 0o777 == 0o600
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(SECRET_ENV, raising=False)
        patch.setenv(SECRET_FILE_ENV, str(path))
        assert not require_grading_secret().development


@pytest.mark.skipif(os.geteuid() != 0, reason="learners' accounts and views need root")
def test_a_learner_cannot_read_the_class_secret(classroom: Classroom) -> None:
    """Neither inside the learner's view (which does not hold the hub's folder) nor by file
    permissions on the machine (as the learner's own account) can a learner read the class's
    grading secret."""
    from autograder.hub.spawner import learner_view
    from autograder.sandbox.launcher import bwrap_path

    classroom.add(["alice"], "learner")
    entry = classroom.ensure_account("alice")
    secret = classroom.ensure_secret()
    value = secret.read_text().strip()
    as_alice = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}",
                "--clear-groups", "--"]
    attempts = [as_alice]
    if bwrap_path() is not None:
        attempts.append(learner_view(classroom, "alice", entry.pw_uid, entry.pw_gid))
    for prefix in attempts:
        result = subprocess.run([*prefix, "cat", str(secret)], capture_output=True, text=True,
                                timeout=60, check=False)
        assert result.returncode != 0 and value not in result.stdout, result


@pytest.fixture
def open_classroom(classroom: Classroom, monkeypatch: pytest.MonkeyPatch) -> Iterator[Classroom]:
    """The class of ``classroom`` (its accounts' prefix) in a folder that every account may pass
    through: the staff's clients run as their own accounts, and pytest's temporary folders are
    root's alone (any pytest that starts makes them so again)."""
    folder = Path(tempfile.mkdtemp(prefix="class-"))
    folder.chmod(0o711)
    monkeypatch.setenv(STATE_ENV, str(folder / "state"))
    yield Classroom.from_env()
    shutil.rmtree(folder)


# A client of the grading service as small as the wire: one JSON line out, one back.
CLIENT = ("import json, socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
          "s.sendall(sys.argv[2].encode() + b'\\n'); print(s.makefile().readline())")


@pytest.mark.skipif(os.geteuid() != 0, reason="the staff's accounts and the service need root")
def test_the_grading_service_does_what_each_role_may(open_classroom: Classroom) -> None:
    """The service knows who asks from the kernel (the account), and runs only what the
    account's role may: a teaching assistant grades but cannot change the roster, an instructor
    can (here with the commands in their terminal), a learner can do neither. The staff's
    accounts share the course folder as a group, and none of them can read the secret or write
    the roster."""
    from autograder.hub.grading import grading_service

    classroom = open_classroom
    accounts = {}
    for name, role in (("carol", "instructor"), ("dave", "ta"), ("alice", "learner")):
        classroom.add([name], role)
        accounts[name] = classroom.ensure_account(name, role)
    secret = classroom.ensure_secret()
    service = grading_service(classroom)
    threading.Thread(target=service.serve_forever, daemon=True).start()

    def as_user(name: str, *command: str) -> subprocess.CompletedProcess:
        entry = accounts[name]
        return subprocess.run(["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}",
                               "--init-groups", "--", *command], capture_output=True,
                              text=True, timeout=60, check=False)

    def ask(name: str, **request: object) -> dict:
        result = as_user(name, sys.executable, "-I", "-c", CLIENT,
                         str(classroom.grading_socket), json.dumps(request))
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    try:
        add_eve = {"op": "roster", "action": "add", "names": ["eve"], "role": "learner"}
        refused = ask("dave", **add_eve)
        assert not refused["ok"] and "a teaching assistant may not ask for roster" in (
            refused["error"]), refused
        assert "eve" not in classroom.roster("learner")
        # Grading is the teaching assistant's to ask: refused for want of work, not of rights.
        nothing = ask("dave", op="autograde", chapter="ch02_attention")
        assert not nothing["ok"] and "nothing to grade" in nothing["error"], nothing
        assert "may not" in ask("alice", op="autograde", chapter="ch02_attention")["error"]
        escape = ask("dave", op="autograde", chapter="ch02_attention", students=["../x"])
        assert "a list of user names" in escape["error"], escape
        # The commands in a staff member's terminal ask the service too (the hub's test grades
        # with `autograde` there).
        added = as_user("carol", sys.executable, "-m", "autograder", "hub", "add", "eve")
        assert added.returncode == 0, added.stdout + added.stderr
        assert "eve" in classroom.roster("learner") and "eve" in _passwords(added.stdout)
    finally:
        service.shutdown()
        service.server_close()
    course_file = classroom.course_dir / "written-by-dave"
    for name in ("carol", "dave"):
        assert as_user(name, "cat", str(secret)).returncode != 0
        assert as_user(name, "sh", "-c", f"echo mallory >> {classroom.roster_file('ta')}"
                       ).returncode != 0
    assert as_user("dave", "touch", str(course_file)).returncode == 0
    assert as_user("alice", "touch", str(course_file)).returncode != 0
    assert classroom.roster("ta") == ["dave"]
