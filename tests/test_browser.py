"""The course in a real browser: JupyterLab from this environment, driven by headless Chromium.

JupyterLab starts as the Makefile starts it: the course's configuration layers
(``autograder/learner/jupyter/``) on ``JUPYTER_CONFIG_PATH``, a configuration folder of its own
for settings and workspaces (the Makefile's ``build/jupyter``, here a temporary one), and no
``--allow-root`` on the command line, also when the tests run as root (as in CI).

* Learner mode (`make lab`), served from a copy of ``notebooks/``: the file browser shows the
  chapters and nothing else, the notebook has nbgrader's Validate button, no instructor tool,
  error dialog or news pop-up appears, the server logs no warning; Run All on the chapter 1
  release meets the first stub's NotImplementedError.
* Instructor mode (`make instructor`), served from a folder holding ``notebooks/`` and
  ``solutions/`` as the repository does: formgrader, "Create assignment" and the course list
  are there; the chapter 1 solution notebook runs clean with its figures.
* A class with an nbgrader exchange (`make lab EXCHANGE=...`): the Assignment List shows a
  chapter that nbgrader released into the exchange, and fetches it; the "(view feedback)" of a
  submission whose feedback was fetched opens the feedback page itself (the course's JupyterLab
  plugin in the exchange layer).

The ``browser`` fixture (Debian's Chromium through Playwright) is in conftest.py. Every served
folder is a temporary copy, because JupyterLab saves what it runs and the
repository must not change. Chromium comes from Debian (`make browser`, which `make test` runs
first); Playwright drives it through `executable_path` and never downloads a browser of its
own. Screenshots are written under the test's temporary folder and their paths printed
(`pytest -s` shows them).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from autograder.course import CHAPTERS, COURSE_ID, course_config, ready_alembic

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ROOT / "autograder" / "learner" / "jupyter"
# The configuration layers of each mode, first wins (as the Makefile sets JUPYTER_CONFIG_PATH).
MODES = {
    "learner": ["learner"],
    "instructor": ["instructor", "learner"],
    "exchange": ["exchange", "learner"],
}
CHAPTER = "ch01_positional_encoding"
NOTEBOOK = Path(CHAPTER) / f"{CHAPTER}.ipynb"
# The tests' one JupyterLab setting: every cell stays attached to the DOM, so that all outputs
# can be found. Everything else (no news pop-up included) comes from the course's layers.
LAB_SETTINGS = {"@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"}}
# nbgrader 0.9's JupyterLab menu items and the "Create assignment" side panel.
INSTRUCTOR_MENU_ITEMS = ["Course List", "Formgrader", "Create assignment"]
CREATE_ASSIGNMENT_TAB = '.lm-TabBar-tab[data-id="nbgrader-create_assignemnt"]'
ANNOUNCEMENTS_PLUGIN = "@jupyterlab/apputils-extension:announcements"
# What the server logs when nbgrader, root or a kernel has something to complain about.
LOG_COMPLAINTS = ["nbgrader_config.py", "exchange directory", "Running as root",
                  "without encryption", "Traceback"]
# The notebook's kernel is connected and idle: the toolbar's indicator says "idle" even before a
# kernel exists, so the status bar's "<kernel> | Idle" is what tells that the kernel is up.
KERNEL_IDLE_JS = """() => {
    const indicator = document.querySelector(
        '.jp-NotebookPanel-toolbar .jp-Notebook-ExecutionIndicator');
    const statusbar = document.querySelector('#jp-main-statusbar');
    return indicator?.dataset.status === 'idle'
        && (statusbar?.innerText || '').includes('(ipykernel) | Idle');
}"""
# After Run All: the first code cell has an execution count and no prompt shows "[*]".
RUN_FINISHED_JS = """() => {
    const prompts = [...document.querySelectorAll(
        '.jp-NotebookPanel .jp-CodeCell .jp-InputPrompt')].map(p => p.textContent);
    return /\\d/.test(prompts[0] || '') && !prompts.some(p => p.includes('*'));
}"""
SERVER_START_S = 90
KERNEL_START_MS = 60_000
RUN_ALL_MS = 120_000
UI_MS = 30_000

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@dataclass(frozen=True)
class Lab:
    """A running JupyterLab: where it answers, its token, the folder it serves and its log."""

    url: str
    token: str
    root: Path
    log: Path

    def status_of(self, path: str) -> int:
        """The HTTP status of a GET of ``path`` on the server, with the token."""
        request = urllib.request.Request(f"{self.url}{path}",
                                         headers={"Authorization": f"token {self.token}"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code


def _wait_until_serving(url: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"JupyterLab exited with code {server.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    pytest.fail(f"JupyterLab did not answer within {SERVER_START_S} s:\n{log.read_text()}")


@contextlib.contextmanager
def _jupyterlab(home: Path, root: Path, mode: str, port: int,
                exchange: Path | None = None) -> Iterator[Lab]:
    """JupyterLab in ``mode`` serving ``root``, started as the Makefile starts it.

    Its own configuration, data, runtime and IPython folders are under ``home``, so the user's
    Jupyter set-up plays no part and nothing outside ``home`` and ``root`` is written. Like
    `make lab`, the server runs in another folder than the one it serves (here ``home``).
    """
    config_dir = home / "config"
    for plugin, values in LAB_SETTINGS.items():
        path = config_dir / "lab" / "user-settings" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))

    token = secrets.token_hex(16)
    command = [
        sys.executable, "-m", "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
    ]
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(config_dir),
        JUPYTER_CONFIG_PATH=os.pathsep.join(str(LAYERS / layer) for layer in MODES[mode]),
        JUPYTER_DATA_DIR=str(home / "data"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        IPYTHONDIR=str(home / "ipython"),
        TRANSFORMER_COURSE_EXCHANGE=str(exchange or ""),
    )
    url = f"http://127.0.0.1:{port}"
    log = home / "jupyterlab.log"
    with log.open("w") as log_file:
        server = subprocess.Popen(
            command, cwd=home, env=env, stdout=log_file, stderr=subprocess.STDOUT
        )
    try:
        _wait_until_serving(f"{url}/api/status?token={token}", server, log)
        yield Lab(url, token, root, log)
    finally:
        # The REST shutdown also stops the kernels; terminate and kill are the fallbacks.
        try:
            request = urllib.request.Request(
                f"{url}/api/shutdown", method="POST",
                headers={"Authorization": f"token {token}"},
            )
            urllib.request.urlopen(request, timeout=10).close()
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture(scope="module")
def learner_lab(browser: Browser, tmp_path_factory: pytest.TempPathFactory,
                free_port: Callable[[], int]) -> Iterator[Lab]:
    """`make lab`: learner mode on a copy of notebooks/ (the chapters and conftest.py)."""
    home = tmp_path_factory.mktemp("learner")
    root = home / "notebooks"
    shutil.copytree(ROOT / "notebooks", root,
                    ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    with _jupyterlab(home, root, "learner", free_port()) as lab:
        yield lab


@pytest.fixture(scope="module")
def instructor_lab(browser: Browser, tmp_path_factory: pytest.TempPathFactory,
                   free_port: Callable[[], int]) -> Iterator[Lab]:
    """`make instructor`: instructor mode on a folder laid out like the repository."""
    home = tmp_path_factory.mktemp("instructor")
    root = home / "course"
    for folder in ("notebooks", "solutions"):
        shutil.copytree(ROOT / folder / CHAPTER, root / folder / CHAPTER)
    with _jupyterlab(home, root, "instructor", free_port()) as lab:
        yield lab


@pytest.fixture(scope="module")
def exchange_lab(browser: Browser, tmp_path_factory: pytest.TempPathFactory,
                 free_port: Callable[[], int]) -> Iterator[Lab]:
    """`make lab EXCHANGE=...`: a learner's empty folder, and an exchange into which nbgrader
    has released chapter 1 from a course of its own."""
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    home = tmp_path_factory.mktemp("exchange")
    course, exchange, root = home / "course", home / "exchange", home / "learner"
    for folder in ("solutions", "notebooks"):  # a release regenerates the chapter first
        shutil.copytree(ROOT / folder / CHAPTER, course / folder / CHAPTER)
    exchange.mkdir()
    root.mkdir()
    ready_alembic()
    config = course_config(course)
    config.Exchange.root = str(exchange)
    api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
    released = api.release_assignment(CHAPTER)
    assert released["success"], released
    with _jupyterlab(home, root, "exchange", free_port(), exchange=exchange) as lab:
        yield lab


@pytest.fixture
def page(browser: Browser, tmp_path: Path) -> Iterator[Page]:
    """A fresh browser page; what it showed last is saved as last.png, to see why a test failed."""
    from playwright.sync_api import Error

    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        yield page
    finally:
        with contextlib.suppress(Error):
            _screenshot(page, tmp_path, "last")
        context.close()


def _open_lab(page: Page, lab: Lab) -> None:
    """Open JupyterLab with an empty workspace and wait for its menu bar and file browser."""
    # `reset` starts from an empty workspace, so what an earlier test opened is not reopened.
    page.goto(f"{lab.url}/lab?reset&token={lab.token}")
    page.locator("#jp-MainMenu").get_by_text("File", exact=True).wait_for(timeout=UI_MS)
    page.locator(".jp-DirListing-content").wait_for(state="attached", timeout=UI_MS)


def _open_notebook(page: Page, lab: Lab, notebook: Path) -> None:
    """Open a notebook in JupyterLab and wait until its kernel is connected and idle."""
    page.goto(f"{lab.url}/lab/tree/{notebook.as_posix()}?reset&token={lab.token}")
    page.wait_for_function(KERNEL_IDLE_JS, timeout=KERNEL_START_MS)


def _file_browser_names(page: Page) -> list[str]:
    return page.locator(".jp-DirListing-item .jp-DirListing-itemName").all_inner_texts()


def _menu_bar_labels(page: Page) -> list[str]:
    return page.locator("#jp-MainMenu .lm-MenuBar-itemLabel").all_inner_texts()


def _nbgrader_menu_labels(page: Page) -> list[str]:
    """Open the Nbgrader menu and return the labels of the items it shows."""
    page.locator("#jp-MainMenu").get_by_text("Nbgrader", exact=True).click()
    menu = page.locator("#jp-mainmenu-nbgrader")
    menu.wait_for(timeout=UI_MS)
    # Items whose command no loaded plugin provides stay in the menu, hidden.
    return menu.locator(".lm-Menu-itemLabel:visible").all_inner_texts()


def _disabled_plugins(page: Page) -> list[str]:
    """The plugins the server told this page to leave out (JupyterLab's page config)."""
    config = page.locator("#jupyter-config-data").text_content()
    return json.loads(config or "{}").get("disabledExtensions", [])


def _assert_no_dialog_or_popup(page: Page, shot: Path) -> None:
    dialogs = page.locator(".jp-Dialog").all_inner_texts()
    assert dialogs == [], f"a dialog is open ({shot}): {dialogs}"
    toasts = page.locator(".Toastify__toast").all_inner_texts()
    assert toasts == [], f"a notification pops up ({shot}): {toasts}"


def _assert_quiet_log(lab: Lab) -> None:
    # Tornado logs a websocket that the browser closed while a message was on its way (a page
    # that navigates away): the browser's doing, not the server's complaint.
    text = re.sub(r"Traceback \(most recent call last\):\n(?:[ \t].*\n)*tornado\.iostream\."
                  r"StreamClosedError: Stream is closed\n\nDuring handling of the above "
                  r"exception, another exception occurred:\n\nTraceback \(most recent call "
                  r"last\):\n(?:[ \t].*\n)*tornado\.websocket\.WebSocketClosedError\n", "",
                  lab.log.read_text())
    complaints = [line for line in text.splitlines()
                  if any(c in line for c in LOG_COMPLAINTS)]
    assert complaints == [], f"the server log of {lab.root} complains:\n" + "\n".join(complaints)


def _run_all_cells(page: Page) -> None:
    """Run > Run All Cells from the main menu, then wait until nothing is queued or running.

    JupyterLab stops a run at the first error; the cells after it are left unexecuted.
    """
    page.locator("#jp-MainMenu").get_by_text("Run", exact=True).click()
    page.locator(".lm-Menu").get_by_text("Run All Cells", exact=True).click()
    page.wait_for_function(RUN_FINISHED_JS, timeout=RUN_ALL_MS)
    page.wait_for_function(KERNEL_IDLE_JS, timeout=RUN_ALL_MS)


def _screenshot(page: Page, folder: Path, name: str, focus: Locator | None = None) -> Path:
    """Save a full-page screenshot, scrolled to `focus` first if present, and print its path."""
    if focus is not None and focus.count():
        focus.scroll_into_view_if_needed()
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    return path


def _error_outputs(page: Page) -> Locator:
    """The outputs of the open notebook that JupyterLab renders as errors or stderr text."""
    return page.locator(
        '.jp-NotebookPanel .jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
    )


def _error_texts(page: Page) -> list[str]:
    """The text of every traceback or error shown in the open notebook's outputs."""
    texts = _error_outputs(page).all_inner_texts()
    return [text for text in texts if "Traceback" in text or "Error" in text]


def _prompts(page: Page) -> list[str]:
    return page.locator(".jp-NotebookPanel .jp-CodeCell .jp-InputPrompt").all_inner_texts()


# ------------------------------------------------------------------ learner mode (`make lab`)


def test_learner_mode_shows_the_chapters_and_the_learner_tools_only(
    page: Page, learner_lab: Lab, tmp_path: Path
) -> None:
    _open_lab(page, learner_lab)
    chapters = sorted(p.name for p in learner_lab.root.iterdir() if p.name in CHAPTERS)
    assert chapters and (learner_lab.root / "conftest.py").is_file()
    page.locator(".jp-DirListing-item", has_text=chapters[-1]).wait_for(timeout=UI_MS)
    assert sorted(_file_browser_names(page)) == chapters  # no conftest.py

    _open_notebook(page, learner_lab, NOTEBOOK)
    shot = _screenshot(page, tmp_path, "learner_mode")
    # Learners validate before they submit ...
    assert page.locator(".jp-NotebookPanel-toolbar .validate-button").is_visible()
    # ... and meet no instructor tool: no Nbgrader menu (without an exchange it would hold
    # only instructors' items), no "Create assignment" panel, no formgrader on the server.
    assert "File" in _menu_bar_labels(page)
    assert "Nbgrader" not in _menu_bar_labels(page), shot
    assert page.locator(CREATE_ASSIGNMENT_TAB).count() == 0, shot
    # The news question would pop up once the workspace is restored, long before the kernel
    # is idle; its plugin is not even loaded.
    assert ANNOUNCEMENTS_PLUGIN in _disabled_plugins(page)
    _assert_no_dialog_or_popup(page, shot)
    _assert_quiet_log(learner_lab)
    for path in ("/formgrader", "/assignments", "/courses"):
        assert learner_lab.status_of(path) == 404, f"{path} is served in learner mode"


def test_release_notebook_stops_at_the_first_stub(
    page: Page, learner_lab: Lab, tmp_path: Path
) -> None:
    _open_notebook(page, learner_lab, NOTEBOOK)
    _run_all_cells(page)

    errors = _error_texts(page)
    shot = _screenshot(page, tmp_path, "release_run_all", _error_outputs(page).first)
    assert len(errors) == 1, f"expected one error, at the first stub's check ({shot}): {errors}"
    assert "NotImplementedError" in errors[0], errors[0]
    assert "ch01.positional_encoding (visible checks) failed" in errors[0], errors[0]
    # The learner reads the check's sentence first, not a traceback through the grader.
    assert errors[0].lstrip().startswith("ch01.positional_encoding"), errors[0]
    assert "Traceback" not in errors[0] and "registry.py" not in errors[0], errors[0]
    # The run stopped there: the cells after the failing check were not executed.
    prompts = _prompts(page)
    assert any(prompt.strip() in ("[ ]:", "[ ]") for prompt in prompts), prompts


# ------------------------------------------------------------------ instructor mode


def test_instructor_mode_adds_the_instructor_tools(
    page: Page, instructor_lab: Lab, tmp_path: Path
) -> None:
    _open_notebook(page, instructor_lab, Path("solutions") / NOTEBOOK)
    assert page.locator(".jp-NotebookPanel-toolbar .validate-button").is_visible()
    assert page.locator(CREATE_ASSIGNMENT_TAB).count() == 1
    labels = _nbgrader_menu_labels(page)
    shot = _screenshot(page, tmp_path, "instructor_menu")
    for item in INSTRUCTOR_MENU_ITEMS:
        assert item in labels, f"{item!r} missing from the Nbgrader menu ({shot}): {labels}"
    # The Assignment List needs an exchange, which this server has none of.
    assert "Assignment List" not in labels, shot
    # The course's formgrader (nbgrader's, with flags), not nbgrader's own.
    log = instructor_lab.log.read_text()
    assert "Loading the course's formgrader" in log
    assert "Loading the formgrader nbgrader serverextension" not in log
    _assert_no_dialog_or_popup(page, shot)
    _assert_quiet_log(instructor_lab)


def test_solution_notebook_runs_clean_with_figures(
    page: Page, instructor_lab: Lab, tmp_path: Path
) -> None:
    _open_notebook(page, instructor_lab, Path("solutions") / NOTEBOOK)
    _run_all_cells(page)

    images = page.locator(".jp-NotebookPanel .jp-OutputArea-output.jp-RenderedImage img")
    shot = _screenshot(page, tmp_path, "solution_run_all", images.first)
    assert _error_texts(page) == [], f"the solution notebook shows an error ({shot})"
    prompts = _prompts(page)
    assert all(any(ch.isdigit() for ch in prompt) for prompt in prompts), (
        f"not every code cell ran: {prompts}"
    )
    outputs = "\n".join(page.locator(".jp-NotebookPanel .jp-OutputArea").all_inner_texts())
    for exercise in ("positional_encoding", "relative_position_matrix"):
        for kind in ("visible", "hidden"):
            assert f"ch01.{exercise} ({kind} checks): all passed." in outputs
    # Two heatmaps, three line plots and the rotary-position (RoPE) heatmaps, each decoded to a
    # real picture by the browser.
    assert images.count() == 6
    for index in range(images.count()):
        assert images.nth(index).evaluate("img => img.complete && img.naturalWidth > 100")


# ------------------------------------------------------------------ a class with an exchange


def test_assignment_list_fetches_a_released_chapter(
    page: Page, exchange_lab: Lab, tmp_path: Path
) -> None:
    _open_lab(page, exchange_lab)
    labels = _nbgrader_menu_labels(page)
    assert labels == ["Assignment List"], labels  # and no instructor tool
    page.locator("#jp-mainmenu-nbgrader").get_by_text("Assignment List", exact=True).click()
    released = page.locator("#released_assignments_list")
    released.get_by_text(CHAPTER).wait_for(timeout=UI_MS)
    shot = _screenshot(page, tmp_path, "assignment_list")
    assert COURSE_ID in released.inner_text(), shot
    assert "Error" not in page.locator(".nbgrader-mainarea-widget").inner_text(), shot

    released.get_by_role("button", name="Fetch").click()
    page.locator("#fetched_assignments_list").get_by_text(CHAPTER).first.wait_for(timeout=UI_MS)
    _screenshot(page, tmp_path, "assignment_list_fetched")
    # Into the folder the learner sees, not the server's working folder (its parent here).
    assert (exchange_lab.root / NOTEBOOK).is_file()
    assert not (exchange_lab.root.parent / CHAPTER).exists()
    _assert_no_dialog_or_popup(page, shot)
    _assert_quiet_log(exchange_lab)


def test_the_exchange_layer_installs_the_assignment_list_plugin() -> None:
    """What JupyterLab finds on the paths the exchange layer adds: the course's plugin, whose
    script is there (no browser needed, so this holds where the browser tests skip)."""
    from jupyterlab_server.config import get_federated_extensions
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("jupyter_server_config.py", str(LAYERS / "exchange")).load_config()
    found = get_federated_extensions(config.LabApp.extra_labextensions_path)
    plugin = found["@build-the-transformer/assignment-list"]
    assert (Path(plugin["ext_path"]) / plugin["jupyterlab"]["_build"]["load"]).is_file()


def test_view_feedback_opens_the_feedback_page(
    page: Page, exchange_lab: Lab, tmp_path: Path
) -> None:
    # A submission of another chapter, and its feedback fetched, where nbgrader keeps them: the
    # copy `nbgrader submit` caches (JUPYTER_DATA_DIR) and <chapter>/feedback/<timestamp>/.
    chapter, stamp = CHAPTERS[1], "2026-11-28 10:00:00.000000 UTC"
    cached = (exchange_lab.root.parent / "data" / "nbgrader_cache" / COURSE_ID
              / f"learner+{chapter}+{stamp}")
    cached.mkdir(parents=True)
    (cached / f"{chapter}.ipynb").write_text(json.dumps(
        {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    feedback = exchange_lab.root / chapter / "feedback" / stamp / f"{chapter}.html"
    feedback.parent.mkdir(parents=True)
    mark = f"The feedback of {chapter}, {secrets.token_hex(4)}"
    feedback.write_text(f"<html><body><h1>{mark}</h1></body></html>")

    _open_lab(page, exchange_lab)
    page.locator("#jp-MainMenu").get_by_text("Nbgrader", exact=True).click()
    page.locator("#jp-mainmenu-nbgrader").get_by_text("Assignment List", exact=True).click()
    submitted = page.locator("#submitted_assignments_list")
    submitted.get_by_text("(view feedback)").wait_for(timeout=UI_MS)
    # Its feedback is fetched and none waits in the exchange: nothing to fetch is offered.
    fetch = submitted.locator("button", has_text="Fetch Feedback")
    assert fetch.count() == 1 and not fetch.is_visible()
    submitted.get_by_text("(view feedback)").click()
    # The page itself, in JupyterLab's HTML viewer (its tab named for the page).
    page.frame_locator(".jp-HTMLViewer iframe").get_by_text(mark).wait_for(timeout=UI_MS)
    shot = _screenshot(page, tmp_path, "feedback_opened")
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current").inner_text()
    assert f"{chapter}.html" in tab, shot
    _assert_no_dialog_or_popup(page, shot)
    _assert_quiet_log(exchange_lab)
