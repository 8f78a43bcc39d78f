"""A whole class on the class server (`make hub`), driven in a real browser as people do it.

The hub starts as the Makefile starts it (``jupyterhub -f autograder/hub/jupyterhub_config.py``,
the proxy from build/proxy), once, on free localhost ports, with a state folder of its own and
system accounts under a prefix of this run (removed at the end). Its environment holds no
grading secret: grading uses the class's own, which the hub made and gives its grading service.

* The instructor creates the class (``python -m autograder hub add``), logs in, opens the
  Formgrader from JupyterLab's Nbgrader menu (in JupyterLab's own frame) and releases chapter 2.
* Two learners log in, fetch it from the Assignment List, each fills the softmax exercise
  (alice correctly, bob with a bug from the course's mutants; bob validates) and submits.
* alice looks for softmax's reference in the course's packages from a notebook of her own and
  finds neither its file nor its code; the instructor closes chapter 2 (its due date, in the
  Formgrader) and alice, in a fresh kernel, finds and imports it (and her Assignment List no
  longer submits the chapter), while bob, given an extension on the chapter's Manage
  Submissions page after the release, still cannot.
* The instructor's server runs as the instructor's own account, not root. In the Formgrader,
  the instructor collects; a teaching assistant autogrades bob from a terminal of theirs and
  the instructor alice in the Formgrader, each through the class's grading service (with the
  class's secret, which neither can read; nor can the teaching assistant change the roster);
  the instructor reads the flags in the submissions list and on bob's page (formulas typeset
  with nothing fetched from outside the hub), generates and releases the feedback of the
  chapter.
* alice fetches her feedback, opens it from the Assignment List's "(view feedback)" and reads
  it, and cannot reach bob's.
* For a semester: the submissions list fits a 1280-pixel screen (in its own tab and in
  JupyterLab's frame) and links the report of copy detection, each learner's pairs in it and the
  item analysis (once written); the instructor regrades bob from his row and grades the whole
  chapter with its progress display; the dialogs of Release, Collect, Autograde and Release
  Feedback show how the step ended first, with no debug record; before their feedback is
  released, learners are offered no "Fetch Feedback".

Every step asserts what the person sees. Needs root (learners' servers run as their own
accounts), Debian's Chromium and the proxy (`make test` installs both); outside CI a missing one
skips, in CI (CI=true) it fails.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from unittest import mock

import nbformat
import pytest
from ci_env import in_ci
from test_browser import KERNEL_IDLE_JS, UI_MS, _screenshot

from autograder.copies.pairs import SIMILAR_SUBMISSIONS
from autograder.course import COURSE_DIR_ENV, COURSE_ID, COURSE_ROOT_ENV
from autograder.exercises.checking import SECRET_ENV, SECRET_FILE_ENV
from autograder.exercises.registry import all_exercises
from autograder.grade.secret import DEVELOPMENT_ENV
from autograder.hub.limits import class_cgroups
from tests.fixtures.sample_class import load_chapter, mutant_source

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, FrameLocator, Locator, Page

ROOT = Path(__file__).resolve().parents[1]
PROXY = ROOT / "build" / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy"
CHAPTER = "ch02_attention"
NOTEBOOK = f"{CHAPTER}/{CHAPTER}.ipynb"
EXERCISE = "ch02.softmax"
BUG = "softmax_axis_ignored"
LEARNERS = ("alice", "bob")
INSTRUCTOR = "carol"
TA = "dave"
HUB_START_S = 90
SPAWN_MS = 180_000
VALIDATE_MS = 180_000
RELEASE_MS = 120_000  # nbgrader generates the chapter first
VIEW_REFRESH_S = 120  # the checking service refreshes the view every 30 s, between checks
GRADE_MS = 300_000  # one learner in the sandbox, in the instructor's server, on a busy machine

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _needs(reason: str) -> None:
    if in_ci():
        pytest.fail(f"CI must run the class-server test, but {reason}")
    pytest.skip(reason)


def _run(*args: str, env: dict[str, str], timeout: float = 600) -> str:
    """``python -m autograder ARGS`` as the instructor types it; its output."""
    result = subprocess.run([sys.executable, "-m", "autograder", *args], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"autograder {' '.join(args)}:\n{result.stdout}{result.stderr}"
    return result.stdout


@dataclass
class Hub:
    """A running class server and what the test needs to know about it."""

    state: Path
    root: Path  # the course's root (a copy holding chapter 2)
    env: dict[str, str]
    passwords: dict[str, str]
    prefix: str
    ports: tuple[int, int, int]
    log: Path
    process: subprocess.Popen | None = None
    starts: int = 0
    accounts: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.ports[0]}"

    def start(self) -> None:
        """Start the hub as `make hub` does and wait until its login page answers."""
        public, api, proxy_api = self.ports
        self.starts += 1
        command = [str(Path(sys.executable).parent / "jupyterhub"),
                   "-f", str(ROOT / "autograder" / "hub" / "jupyterhub_config.py"),
                   f"--JupyterHub.bind_url=http://127.0.0.1:{public}",
                   f"--JupyterHub.hub_bind_url=http://127.0.0.1:{api}",
                   f"--ConfigurableHTTPProxy.api_url=http://127.0.0.1:{proxy_api}"]
        with self.log.open("a") as log:
            log.write(f"---- start {self.starts}\n")
            log.flush()
            self.process = subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + HUB_START_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"the hub exited with {self.process.returncode}:\n"
                            f"{self.log.read_text()}")
            if self.status(f"{self.url}/hub/login") == 200:
                return
            time.sleep(0.5)
        pytest.fail(f"the hub did not answer within {HUB_START_S} s:\n{self.log.read_text()}")

    def stop(self) -> None:
        """Stop the hub as Ctrl-C does (it stops the servers and the proxy), else kill all."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=60)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)  # the proxy, if it was left behind
        self.process.wait()
        self.process = None

    @staticmethod
    def status(url: str) -> int | None:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None


@pytest.fixture(scope="module")
def hub(browser: Browser, tmp_path_factory: pytest.TempPathFactory,
        free_port: Callable[[], int]) -> Iterator[Hub]:
    """A class with two learners and an instructor; its instructors serve a copy of the course
    holding chapter 2 (so that releasing never rewrites the repository's notebooks/)."""
    if os.geteuid() != 0:
        _needs("the class server runs learners' servers as their own accounts, which needs "
               "root")
    if not PROXY.is_file():
        _needs(f"{PROXY} is missing: run `make proxy` (needs npm)")
    base = tmp_path_factory.mktemp("hub")
    state, root = base / "state", base / "course"
    for folder in ("solutions", "notebooks"):
        (root / folder).mkdir(parents=True)
        subprocess.run(["cp", "-r", str(ROOT / folder / CHAPTER), str(root / folder)], check=True)
    prefix = f"t{secrets.token_hex(3)}-"
    # No grading secret and no development setting: the class's own secret must do.
    env = {key: value for key, value in os.environ.items()
           if key not in (SECRET_ENV, SECRET_FILE_ENV, DEVELOPMENT_ENV)}
    env.update(TRANSFORMER_HUB_STATE=str(state), TRANSFORMER_HUB_USER_PREFIX=prefix,
               TRANSFORMER_COURSE_ROOT=str(root))
    server = Hub(state, root, env, {}, prefix, (free_port(), free_port(), free_port()),
                 base / "hub.log")
    try:
        for names, extra in ((LEARNERS, ()), ((INSTRUCTOR,), ("--instructor",)),
                             ((TA,), ("--ta",))):
            out = _run("hub", "add", *names, *extra, env=env)
            server.accounts += [prefix + name for name in names]
            server.passwords.update(re.findall(r"^(\w+)  (\S+)$", out, flags=re.M))
        assert sorted(server.passwords) == sorted([*LEARNERS, INSTRUCTOR, TA])
        server.start()
        yield server
    finally:
        server.stop()
        print(f"hub log: {server.log}")
        for account in server.accounts:
            subprocess.run(["userdel", account], capture_output=True, check=False)
        subprocess.run(["groupdel", f"{prefix}staff"], capture_output=True, check=False)


# ----------------------------------------------------------------------------- the browser side


# JupyterLab's menu is up, or the hub says the server failed to start.
LAB_OR_SPAWN_FAILED_JS = """() => !!document.querySelector('#jp-MainMenu')
    || /Spawn failed|failed to start|Server not running|503/.test(document.body?.innerText || '')"""


def _log_in(page: Page, hub: Hub, name: str) -> None:
    """Log in at /hub/login and wait until the learner's JupyterLab is up; fail with what the
    page and the hub's log say when it does not come up."""
    from playwright.sync_api import Error as PlaywrightError

    page.goto(f"{hub.url}/hub/login")
    page.fill("#username_input", name)
    page.fill("#password_input", hub.passwords[name])
    page.click("#login_submit")
    try:
        page.wait_for_function(LAB_OR_SPAWN_FAILED_JS, timeout=SPAWN_MS, polling=500)
        page.locator("#jp-MainMenu").get_by_text("File", exact=True).wait_for(timeout=UI_MS)
    except PlaywrightError as exc:
        log = hub.log.read_text(errors="replace").splitlines()
        text = page.locator("body").inner_text(timeout=5_000)[-2_000:]
        pytest.fail(f"{name}'s JupyterLab did not come up ({exc.message.splitlines()[0]}) at "
                    f"{page.url}; the page says:\n{text}\n\nthe hub's log ends:\n"
                    + "\n".join(line[:400] for line in log[-60:]))


def _assignment_list(page: Page) -> None:
    page.locator("#jp-MainMenu").get_by_text("Nbgrader", exact=True).click()
    page.locator("#jp-mainmenu-nbgrader").get_by_text("Assignment List", exact=True).click()
    page.locator("#released_assignments_list").wait_for(timeout=UI_MS)


def _notebook_file(hub: Hub, name: str) -> Path:
    return hub.state / "home" / name / NOTEBOOK


def _fill_exercise(page: Page, hub: Hub, name: str, source: str) -> None:
    """Open the fetched notebook, replace the exercise's stub with ``source`` and save."""
    page.goto(f"{hub.url}/user/{name}/lab/tree/{NOTEBOOK}?reset")
    page.wait_for_function(KERNEL_IDLE_JS, timeout=SPAWN_MS)
    stub = page.locator(".jp-CodeCell", has_text="def softmax(x, axis=-1):").first
    stub.locator(".cm-content").click()
    page.keyboard.press("ControlOrMeta+a")
    # Inserted as one piece of text: no auto-indent or bracket closing, as when pasting.
    page.keyboard.insert_text(source)
    page.keyboard.press("ControlOrMeta+s")
    marker = source.strip().splitlines()[-1].strip()
    deadline = time.monotonic() + UI_MS / 1000
    while marker not in _softmax_source(hub, name):
        assert time.monotonic() < deadline, f"{name}'s notebook was not saved with the edit"
        time.sleep(0.5)


def _softmax_source(hub: Hub, name: str) -> str:
    path = _notebook_file(hub, name)
    if not path.is_file():
        return ""
    nb = nbformat.read(path, as_version=4)
    return next(c.source for c in nb.cells if "def softmax(" in c.source)


def _validate(page: Page) -> str:
    """Press Validate; return the text of nbgrader's result dialog, then close it."""
    page.locator(".jp-NotebookPanel-toolbar .validate-button").click()
    dialog = page.locator(".jp-Dialog", has_text="Validat")
    dialog.wait_for(timeout=VALIDATE_MS)
    page.wait_for_function(
        "() => !(document.querySelector('.jp-Dialog')?.innerText || '').includes('Validating')",
        timeout=VALIDATE_MS)
    text = dialog.inner_text()
    dialog.locator("button").last.click()
    return text


def _learner_works(page: Page, hub: Hub, name: str, source: str, shots: Path,
                   validate: bool) -> str:
    """Log in, fetch chapter 2, fill the exercise, validate if asked and submit; the text of
    the validation dialog ("" without one)."""
    _log_in(page, hub, name)
    _assignment_list(page)
    released = page.locator("#released_assignments_list")
    released.get_by_text(CHAPTER).wait_for(timeout=UI_MS)
    assert COURSE_ID in released.inner_text()
    released.get_by_role("button", name="Fetch").click()
    page.locator("#fetched_assignments_list").get_by_text(CHAPTER).first.wait_for(timeout=UI_MS)
    assert _notebook_file(hub, name).is_file(), "fetched into the learner's own folder"

    _fill_exercise(page, hub, name, source)
    if class_cgroups()[0] is not None:  # the server and its kernel, each in a group of theirs
        groups, account = _memory_cgroups_of_server(hub, name), hub.prefix + name
        assert f"learner-{account}/server" in groups, groups
        assert any(group.startswith(f"learner-{account}/kernel-") for group in groups), groups
    validation = _validate(page) if validate else ""

    _assignment_list(page)
    fetched = page.locator("#fetched_assignments_list")
    fetched.get_by_role("button", name="Submit").first.click()
    page.locator("#submitted_assignments_list .list_item").first.wait_for(timeout=UI_MS)
    _screenshot(page, shots, f"{name}_submitted")
    _no_feedback_to_fetch(page)
    inbound = hub.state / "exchange" / COURSE_ID / "inbound"
    assert list(inbound.glob(f"{name}+{CHAPTER}+*")), f"{name}'s submission is not in {inbound}"
    return validation


def _no_feedback_to_fetch(page: Page) -> None:
    """The Assignment List of a submission without feedback offers no "Fetch Feedback"."""
    button = page.locator("#submitted_assignments_list button", has_text="Fetch Feedback")
    button.first.wait_for(state="attached", timeout=UI_MS)
    assert not button.first.is_visible(), "Fetch Feedback is offered before any feedback"


def _fetch_feedback(page: Page, hub: Hub, name: str, shots: Path) -> Path:
    """Log in, fetch the feedback in the Assignment List; the feedback page in the home."""
    _log_in(page, hub, name)
    _assignment_list(page)
    submitted = page.locator("#submitted_assignments_list")
    submitted.get_by_text("feedback available to fetch").wait_for(timeout=UI_MS)
    submitted.get_by_role("button", name="Fetch Feedback").click()
    submitted.get_by_text("(view feedback)").wait_for(timeout=UI_MS)
    _screenshot(page, shots, f"{name}_assignment_list")
    pages = list((hub.state / "home" / name / CHAPTER / "feedback").glob(f"*/{CHAPTER}.html"))
    assert len(pages) == 1, pages
    # "(view feedback)" opens the page itself, in JupyterLab's HTML viewer.
    submitted.get_by_text("(view feedback)").click()
    viewer = page.frame_locator(".jp-HTMLViewer iframe")
    viewer.get_by_text(f"{CHAPTER} (Score: ").wait_for(timeout=UI_MS)
    _screenshot(page, shots, f"{name}_feedback")
    return pages[0]


# What a learner's code finds of chapter 2's answer, softmax, in the course's packages.
PROBE = """\
import pathlib
import autograder, transformer_ref
found = sorted(p.name for package in (autograder, transformer_ref)
               for p in pathlib.Path(package.__file__).parent.rglob("*.py")
               if "def softmax(" in p.read_text())
print("FOUND:", found)
try:
    from transformer_ref.numpy.scaled_attention import softmax
    print("IMPORTED:", softmax.__module__)
except ImportError as exc:
    print("REFUSED:", exc)
"""


def _probe(page: Page, hub: Hub, name: str) -> str:
    """Look for chapter 2's answer from ``name``'s own notebook, in a fresh kernel, as a learner
    would; the cell's output."""
    entry = pwd.getpwnam(hub.prefix + name)
    path = hub.state / "home" / name / "probe.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PROBE)], metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nbformat.write(nb, path)
    os.chown(path, entry.pw_uid, entry.pw_gid)
    page.goto(f"{hub.url}/user/{name}/lab/tree/probe.ipynb?reset")
    page.wait_for_function(KERNEL_IDLE_JS, timeout=SPAWN_MS)
    page.locator(".jp-CodeCell .cm-content").first.click()
    page.keyboard.press("Shift+Enter")
    output = page.locator(".jp-CodeCell .jp-OutputArea-output").first
    output.wait_for(timeout=UI_MS)
    page.wait_for_function(KERNEL_IDLE_JS, timeout=UI_MS)
    text = page.locator(".jp-CodeCell .jp-OutputArea").first.inner_text()
    page.locator("#jp-MainMenu").get_by_text("Kernel", exact=True).click()
    page.locator("#jp-mainmenu-kernel").get_by_text("Shut Down Kernel", exact=True).click()
    return text


# ----------------------------------------------------------------------------- the Formgrader


def _open_formgrader(page: Page) -> FrameLocator:
    """Nbgrader > Formgrader in JupyterLab; the Formgrader's frame, once it shows its page."""
    page.locator("#jp-MainMenu").get_by_text("Nbgrader", exact=True).click()
    page.locator("#jp-mainmenu-nbgrader").get_by_text("Formgrader", exact=True).click()
    frame = page.frame_locator("#formgrader-iframe iframe")
    frame.get_by_role("heading", name="Manage Assignments").wait_for(timeout=UI_MS)
    return frame


def _close_in_formgrader(page: Page, hub: Hub, shots: Path) -> None:
    """The instructor sets chapter 2's due date to a minute ago in Manage Assignments; the
    class's view then holds its answer (the hub's checking service brings it up to date)."""
    page.reload()
    formgrader = _open_formgrader(page)
    _assignment_row(formgrader).locator(".edit a").click()
    modal = formgrader.locator("#edit-assignment-modal")
    due = datetime.now(UTC) - timedelta(minutes=1)
    modal.locator("input.modal-duedate").fill(due.strftime("%Y-%m-%dT%H:%M"))
    modal.locator("input.modal-timezone").fill("+0000")
    modal.locator("button.save").click()
    modal.wait_for(state="detached", timeout=UI_MS)
    _assignment_row(formgrader).locator(".duedate", has_text=due.strftime("%Y-%m-%d")).wait_for(
        timeout=UI_MS)
    _screenshot(page, shots, "formgrader_due_date")
    answer = hub.state / "course" / "view" / "transformer_ref" / "numpy" / "scaled_attention.py"
    deadline = time.monotonic() + VIEW_REFRESH_S
    while "def softmax(" not in answer.read_text():
        assert time.monotonic() < deadline, "the closed chapter's answer never joined the view"
        time.sleep(1)


def _press(frame: FrameLocator, row: Locator, button: str, timeout: int = UI_MS) -> str:
    """Press a Formgrader button (the cell of class ``button`` in ``row``), wait for its
    answer and return the dialog's text (message and log); closes the dialog. A dialog that
    reports an error fails the test with its text."""
    row.locator(f".{button} a").click()
    dialog = frame.locator("#success-modal, #error-modal")
    dialog.wait_for(timeout=timeout)
    text = dialog.inner_text()
    assert frame.locator("#error-modal").count() == 0, f"{button} failed:\n{text}"
    dialog.locator("button.btn-primary").click()
    dialog.wait_for(state="detached", timeout=UI_MS)
    return text


def _assignment_row(frame: FrameLocator) -> Locator:
    row = frame.locator("#main-table tr", has_text=CHAPTER)
    row.locator(".status .label").wait_for(timeout=UI_MS)
    return row


def _submission_row(frame: FrameLocator, name: str) -> Locator:
    return frame.locator("#main-table tr", has=frame.locator(".student-id", has_text=name))


def _server_processes(hub: Hub, name: str) -> list[Path]:
    """The /proc folders of the processes of ``name``'s server on ``hub`` (those whose
    environment names them as this hub's user), but bubblewrap's, which sets up the view and
    hands over to the account's."""
    markers = {f"JUPYTERHUB_USER={name}".encode(),
               f"JUPYTERHUB_API_URL=http://127.0.0.1:{hub.ports[1]}/hub/api".encode()}
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            program = (proc / "cmdline").read_bytes().split(b"\0")[0].decode()
            if (markers <= set((proc / "environ").read_bytes().split(b"\0"))
                    and not program.endswith("/bwrap")):
                found.append(proc)
    return found


def _uids_of_server(hub: Hub, name: str) -> dict[int, set[str]]:
    """The real and effective user ids of the processes of ``name``'s server on ``hub``, each
    with the programs that run as it."""
    uids: dict[int, set[str]] = {}
    for proc in _server_processes(hub, name):
        with contextlib.suppress(OSError):
            program = (proc / "cmdline").read_bytes().split(b"\0")[0].decode()
            status = (proc / "status").read_text()
            for uid in re.search(r"^Uid:\s+(\d+)\s+(\d+)", status, flags=re.M).groups():
                uids.setdefault(int(uid), set()).add(program)
    return uids


def _memory_cgroups_of_server(hub: Hub, name: str) -> set[str]:
    """The memory cgroups (their last two folders) of the processes of ``name``'s server."""
    groups = set()
    for proc in _server_processes(hub, name):
        with contextlib.suppress(OSError):
            for line in (proc / "cgroup").read_text().splitlines():
                _, controllers, path = line.split(":", 2)
                if controllers in ("memory", ""):
                    groups.add("/".join(path.split("/")[-2:]))
    return groups


def _as_staff(hub: Hub, name: str, *command: str) -> subprocess.Popen:
    """Start ``command`` as a terminal of staff member ``name``'s server would: as their own
    account, in their view, with the grading service's socket named."""
    from autograder.hub.classroom import Classroom
    from autograder.hub.spawner import staff_view

    entry = pwd.getpwnam(hub.prefix + name)
    classroom = Classroom(hub.state, hub.prefix)
    with mock.patch.dict(os.environ, {COURSE_ROOT_ENV: str(hub.root)}):  # as in the hub
        view = staff_view(classroom, name, entry.pw_uid, entry.pw_gid)
    env = {**hub.env, "HOME": str(hub.state / "home" / name),
           "TRANSFORMER_GRADING_SOCKET": str(hub.state / "grading" / "socket"),
           COURSE_DIR_ENV: str(classroom.course_dir), COURSE_ROOT_ENV: str(hub.root)}
    return subprocess.Popen([*view, *command], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _outcome_first(dialog: str, outcome: str) -> None:
    """A Formgrader dialog's log starts with how the step ended, and holds no debug record."""
    log = dialog.split("Log Output", 1)[-1].strip()
    assert log.startswith(f"Outcome: {outcome}") and "[DEBUG]" not in dialog, dialog


def _fits(page: Page | FrameLocator, what: str) -> None:
    """Nothing on the page (or in the frame) reaches past its right edge."""
    widths = page.locator("body").evaluate(
        "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth,"
        " Math.max(...[...document.querySelectorAll('#main-table td.flags')].map("
        "cell => cell.getBoundingClientRect().right))]")
    assert widths[0] <= widths[1] and widths[2] <= widths[1], f"{what} is too wide: {widths}"


def _copy_flag(hub: Hub) -> None:
    """Give bob a flag of copy detection, as a class with copies has them: a long cell name,
    a long code and a long reason (his next grading checks the class again and replaces it)."""
    from autograder.flags import Flag, write_flags
    from autograder.hub.classroom import Classroom

    cell = "ch02_scaled_dot_product_attention_solution"
    reason = (f"{cell}: this answer and that of alice (97%: 95% and 99% of either, 212 tokens "
              "in common; 0 of the 1 other learner(s) of the cell hold most of the shared code "
              "too) are alike once names and layout are set aside. Compare them side by side "
              f"in similarity/{CHAPTER}.html. Flags of copy detection never change a score.")
    course = Classroom(hub.state, hub.prefix).course
    write_flags(course, "bob", CHAPTER, "similarity", [Flag(SIMILAR_SUBMISSIONS, cell, reason)])
    course.flags_file("bob", CHAPTER).chmod(0o644)


def _submissions_for_a_semester(instructor: BrowserContext, lab: Page, hub: Hub,
                                shots: Path) -> None:
    """Manage Submissions of the graded chapter, bob with a copy flag (:func:`_copy_flag`), at
    1400 and 1280 pixels in JupyterLab's frame (``lab``) and at 1280 in a tab of its own: the
    columns fit, and the reports are linked (:func:`_reports_linked`); bob is regraded from his
    row and the whole chapter is graded with a progress display."""
    _copy_flag(hub)
    lab.reload()
    formgrader = _open_formgrader(lab)
    _assignment_row(formgrader).locator(".num-submissions a", has_text="2").click()
    _submission_row(formgrader, "bob").locator(".flags", has_text=SIMILAR_SUBMISSIONS).wait_for(
        timeout=UI_MS)
    _fits(formgrader, "the Formgrader in JupyterLab at 1400 px")
    _screenshot(lab, shots, "formgrader_submissions_copy_flag")
    lab.set_viewport_size({"width": 1280, "height": 900})
    _fits(formgrader, "the Formgrader in JupyterLab at 1280 px")
    _screenshot(lab, shots, "formgrader_submissions_in_lab_1280")
    lab.set_viewport_size({"width": 1400, "height": 1000})
    page = instructor.new_page()
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{hub.url}/user/{INSTRUCTOR}/formgrader/manage_submissions/{CHAPTER}")
    rows = {name: _submission_row(page, name) for name in LEARNERS}
    rows["bob"].locator(".flags li").first.wait_for(timeout=UI_MS)
    _fits(page, "Manage Submissions at 1280 px")
    _screenshot(page, shots, "formgrader_submissions_1280")
    _reports_linked(instructor, page, rows, hub)

    # bob, graded by the teaching assistant, regraded from his row.
    button = rows["bob"].locator(".autograde a")
    assert button.inner_text().strip() == "regrade", button.inner_text()
    _outcome_first(_press(page, rows["bob"], "autograde", timeout=GRADE_MS), "bob scored 0 of")

    # The whole chapter: a progress bar and each learner's outcome as it comes.
    panel = page.locator("#course-autograde")
    panel.get_by_role("button", name="Autograde the chapter").click()
    panel.locator(".summary", has_text="grading ").wait_for(timeout=UI_MS)
    panel.locator(".progress-bar").wait_for(timeout=UI_MS)
    _screenshot(page, shots, "formgrader_autograde_progress", panel)
    panel.locator(".summary", has_text="graded 2 of 2").wait_for(timeout=2 * GRADE_MS)
    outcomes = panel.locator(".outcomes").inner_text()
    assert "alice: alice scored" in outcomes and "bob: bob scored 0 of" in outcomes, outcomes
    assert panel.locator(".progress-bar").inner_text().strip() == "2 / 2"
    _screenshot(page, shots, "formgrader_autograded_chapter", panel)
    page.close()


def _reports_linked(instructor: BrowserContext, page: Page, rows: dict[str, Locator],
                    hub: Hub) -> None:
    """On Manage Submissions (``page``, with the learners' ``rows``): the report of copy
    detection, each learner's pairs in it, and the item analysis, named with its command until
    the instructor runs it in a terminal, then linked."""
    analysis = page.locator("#course-analysis")
    analysis.get_by_text(f"no analysis yet: run python -m autograder analysis {CHAPTER}"
                         ).wait_for(timeout=UI_MS)
    report = page.locator("#course-similarity a.report").get_attribute("href")
    for name, row in rows.items():
        href = row.locator(".flags a.pairs", has_text="closest pairs").get_attribute("href")
        assert href == f"{report}#learner-{name}", href
    copy_flag = rows["bob"].locator(".flags a.pairs", has_text="see the pair in the report")
    assert copy_flag.get_attribute("href") == f"{report}#learner-bob"
    pairs = instructor.new_page()
    pairs.goto(f"{hub.url}{report}#learner-bob")
    assert pairs.locator("#learner-bob").count() == 1 and pairs.locator("#learner-alice").count()
    pairs.close()

    analysed = _as_staff(hub, INSTRUCTOR, sys.executable, "-m", "autograder", "analysis",
                         CHAPTER)
    out = analysed.communicate(timeout=GRADE_MS / 1000)[0]
    assert analysed.returncode == 0 and "recognised mistake(s); wrote" in out, out
    page.reload()
    with page.expect_popup() as opened:
        analysis.locator("a.report", has_text="the chapter's analysis").click()
    opened.value.get_by_text(f"Item analysis: {CHAPTER}").first.wait_for(timeout=UI_MS)
    section = opened.value.evaluate("""id => {
        let node = document.getElementById(id), text = '';
        while ((node = node.nextElementSibling) && node.tagName !== 'H2') text += node.innerText;
        return text; }""", EXERCISE)
    # bob's softmax ignores its axis: a mistake the checks recognise, counted, not named.
    assert "No hint fired." not in section and "softmax over the wrong axis" in section, section
    assert "bob" not in section, section
    opened.value.close()
    rows["bob"].locator(".flags a.pairs", has_text="closest pairs").wait_for(timeout=UI_MS)


# ----------------------------------------------------------------------------- the test


def test_an_instructor_runs_a_class_through_the_formgrader(
    browser: Browser, hub: Hub, tmp_path: Path
) -> None:
    chapter = load_chapter(CHAPTER, hub.root)
    sources = {"alice": chapter.solutions[EXERCISE], "bob": mutant_source(EXERCISE, BUG)}
    points = {e.id: e.points for e in all_exercises()}
    # The chapter's points: every graded cell's, the checks' and the written answers'.
    chapter_points = sum(cell.metadata["nbgrader"]["points"] for cell in nbformat.read(
        hub.root / "notebooks" / NOTEBOOK, as_version=4).cells
        if cell.metadata.get("nbgrader", {}).get("points"))
    instructor = browser.new_context(viewport={"width": 1400, "height": 1000})
    outside: list[str] = []  # what the instructor's pages fetched from beyond the hub
    instructor.on("request", lambda request: None if request.url.startswith(
        (hub.url, "data:", "blob:", "about:")) else outside.append(request.url))
    try:
        # A wrong password is refused.
        page = instructor.new_page()
        page.goto(f"{hub.url}/hub/login")
        page.fill("#username_input", INSTRUCTOR)
        page.fill("#password_input", hub.passwords["bob"])
        page.click("#login_submit")
        page.locator(".login_error").wait_for(timeout=UI_MS)

        # The instructor opens the Formgrader from JupyterLab's menu and releases chapter 2:
        # the gradebook records it, with its points.
        _log_in(page, hub, INSTRUCTOR)
        carol = pwd.getpwnam(hub.prefix + INSTRUCTOR).pw_uid
        deadline = time.monotonic() + 10  # a view being set up is root's for a moment
        while (uids := _uids_of_server(hub, INSTRUCTOR)).keys() != {carol}:
            assert time.monotonic() < deadline, f"the instructor's server is not theirs: {uids}"
            time.sleep(0.5)
        formgrader = _open_formgrader(page)
        row = _assignment_row(formgrader)
        assert "draft" in row.locator(".status").inner_text()
        released = _press(formgrader, row, "release", timeout=RELEASE_MS)
        assert f"Successfully released '{CHAPTER}'" in released
        assert "the gradebook holds its points" in released, released
        _outcome_first(released, f"released {CHAPTER} to the exchange")
        formgrader.locator("#main-table tr", has_text=CHAPTER).locator(
            ".status", has_text="released").wait_for(timeout=UI_MS)
        _screenshot(page, tmp_path, "formgrader_released")
        # bob gets a day more on the chapter's Manage Submissions page, before his server
        # first starts.
        submissions = instructor.new_page()
        submissions.goto(f"{hub.url}/user/{INSTRUCTOR}/formgrader/manage_submissions/{CHAPTER}")
        panel = submissions.locator("#course-extensions")
        panel.locator("li", has_text="no extension given").wait_for(timeout=UI_MS)
        panel.locator("input.student").fill("bob")
        panel.locator("input.until").fill(
            (datetime.now() + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M"))
        panel.get_by_role("button", name="Give extension").click()
        panel.locator(".result", has_text="bob's deadline").wait_for(timeout=UI_MS)
        panel.locator("li", has_text="bob").wait_for(timeout=UI_MS)
        _screenshot(submissions, tmp_path, "formgrader_extension")
        submissions.close()

        # Two learners fetch, work and submit; bob validates first.
        validations = {}
        for name in LEARNERS:
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            try:
                validations[name] = _learner_works(context.new_page(), hub, name,
                                                   sources[name], tmp_path,
                                                   validate=name == "bob")
            finally:
                context.close()
        assert f"{EXERCISE} (visible checks) failed" in validations["bob"], validations["bob"]

        # While chapter 2 is open, its answer is nowhere in a learner's view of the course;
        # once the instructor closes it (its due date, set in the Formgrader, has passed), the
        # answer is there.
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        try:
            learner = context.new_page()
            _log_in(learner, hub, "alice")
            seen = _probe(learner, hub, "alice")
            assert "FOUND: []" in seen and "REFUSED:" in seen and "still open" in seen, seen
            _close_in_formgrader(page, hub, tmp_path)
            seen = _probe(learner, hub, "alice")
            assert "FOUND: ['scaled_attention.py']" in seen, seen
            assert "IMPORTED: transformer_ref.numpy.scaled_attention" in seen, seen
            # Now her Assignment List refuses to submit the chapter, and says why.
            _assignment_list(learner)
            learner.locator("#fetched_assignments_list").get_by_role(
                "button", name="Submit").first.click()
            refused = learner.locator(".jp-Dialog", has_text="Invalid Submission")
            refused.wait_for(timeout=UI_MS)
            reason = refused.locator("pre")
            reason.get_by_text(f"{CHAPTER} is closed for you").wait_for(timeout=UI_MS)
            # The reason alone, whole: nbgrader's traceback is gone.
            assert reason.inner_text().startswith(f"{CHAPTER} is closed for you"), (
                reason.inner_text())
            assert "for an extension." in reason.inner_text(), reason.inner_text()
            _screenshot(learner, tmp_path, "alice_submit_refused")
            refused.locator("button").last.click()
        finally:
            context.close()
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        try:  # bob's extension runs: the answer stays out of his view
            learner = context.new_page()
            _log_in(learner, hub, "bob")
            seen = _probe(learner, hub, "bob")
            assert "FOUND: []" in seen and "still open for you" in seen, seen
        finally:
            context.close()
        for name in LEARNERS:  # each learner's folder is theirs alone
            home = hub.state / "home" / name
            assert home.stat().st_uid == pwd.getpwnam(hub.prefix + name).pw_uid
            assert home.stat().st_mode & 0o777 == 0o700

        # The instructor collects; the teaching assistant autogrades bob from a terminal of
        # theirs, the instructor alice in the Formgrader, both through the class's grading
        # service, with the class's secret. Meanwhile the teaching assistant tries to read the
        # secret and to put someone on the roster.
        page.reload()
        formgrader = _open_formgrader(page)
        collected = _press(formgrader, _assignment_row(formgrader), "collect")
        assert "collected 2 submission(s)" in collected, collected
        _outcome_first(collected, "collected 2 submission(s)")
        secret = hub.state / "hub" / "autograder_secret"
        attempts = [_as_staff(hub, TA, "cat", str(secret)),
                    _as_staff(hub, TA, sys.executable, "-m", "autograder", "hub", "add", "eve")]
        by_ta = _as_staff(hub, TA, sys.executable, "-m", "autograder", "autograde", "ch02",
                          "--student", "bob")
        graded = by_ta.communicate(timeout=GRADE_MS / 1000)[0]
        assert by_ta.returncode == 0 and "bob scored 0 of" in graded, graded
        assert f"grading with the class's secret from {SECRET_FILE_ENV}" in graded, graded
        _assignment_row(formgrader).locator(".num-submissions a", has_text="2").click()
        graded = _press(formgrader, _submission_row(formgrader, "alice"), "autograde",
                        timeout=GRADE_MS)
        assert f"Successfully autograded '{CHAPTER}' for student 'alice'" in graded
        assert f"grading with the class's secret from {SECRET_FILE_ENV}" in graded, graded
        _outcome_first(graded, "alice scored")
        read, add = (attempt.communicate(timeout=120)[0] for attempt in attempts)
        assert attempts[0].returncode != 0 and secret.read_text().strip() not in read, read
        assert attempts[1].returncode == 1, add
        assert "a teaching assistant may not ask for roster" in add, add
        assert "eve" not in (hub.state / "learners.txt").read_text()

        # The submissions list: names from the roster, scores out of the chapter's points,
        # and each submission's flags with their reasons.
        rows = {name: _submission_row(formgrader, name) for name in LEARNERS}
        rows["bob"].locator(".score", has_text="/").wait_for(timeout=UI_MS)
        _screenshot(page, tmp_path, "formgrader_submissions")
        for name, row in rows.items():
            assert row.locator(".student-name").inner_text().strip() == name
            expected = points[EXERCISE] if name == "alice" else 0
            assert row.locator(".score").inner_text().split() == [
                f"{expected:g}", "/", f"{chapter_points:g}"], row.inner_text()
            flags = row.locator(".flags").inner_text()
            assert "cell_error" in flags and "raised NotImplementedError" in flags, flags
        _submissions_for_a_semester(instructor, page, hub, tmp_path)

        # bob's page, where written answers are graded: his flags above the notebook, and
        # the chapter's formulas typeset.
        rows["bob"].locator(".student-name a").click()
        formgrader.locator("#main-table a", has_text=CHAPTER).click()
        flags = formgrader.locator("#course-flags")
        flags.wait_for(timeout=UI_MS)
        assert "read these before you trust the score" in flags.inner_text()
        assert "cell_error" in flags.inner_text()
        formgrader.locator(".MathJax").first.wait_for(timeout=UI_MS)
        title = formgrader.locator("h1", has_text="Scaled dot-product attention")
        assert title.count() == 1  # Markdown shown as a page, not as escaped HTML
        assert "<p>" not in formgrader.locator(".text_cell_render").first.inner_text()
        _screenshot(page, tmp_path, "formgrader_submission")

        # The feedback of the whole chapter: generated, then released, each naming learners.
        page.reload()
        formgrader = _open_formgrader(page)
        written = _press(formgrader, _assignment_row(formgrader), "generate-feedback",
                         timeout=GRADE_MS)
        assert f"Successfully generated feedback of '{CHAPTER}'" in written
        assert all(f"wrote the feedback page of {name}" in written for name in LEARNERS)
        handed = _press(formgrader, _assignment_row(formgrader), "release-feedback")
        assert (f"released the feedback of 2 submission(s) of {CHAPTER}: alice, bob"
                in handed), handed
        _outcome_first(handed, "released the feedback of 2 submission(s)")
        assert outside == [], f"the instructor's pages fetched from outside the hub: {outside}"
    finally:
        instructor.close()

    # alice fetches and reads her feedback, and cannot reach bob's.
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        feedback = _fetch_feedback(page, hub, "alice", tmp_path)
        relative = feedback.relative_to(hub.state / "home" / "alice").as_posix()
        page.goto(f"{hub.url}/user/alice/files/{relative}")
        text = page.locator("body").inner_text()
        assert re.search(rf"Score: {points[EXERCISE]:g}(\.0)? / ", text), text[:500]
        response = page.goto(f"{hub.url}/user/bob/files/{relative}")
        assert response is not None and response.status in (403, 404), (
            f"alice reached bob's feedback: {response and response.status}")
    finally:
        context.close()
