"""The course in a real browser: JupyterLab from this environment, driven by headless Chromium.

What a learner does after `make lab`: open the chapter 1 notebook, run all cells and meet the
stubs' NotImplementedError; what an instructor does: run the solution notebook and see it pass
with its figures, with nbgrader's JupyterLab extension loaded. Both notebooks are copied into a
temporary folder first, because JupyterLab saves what it runs and the repository must not change.

Chromium comes from Debian (`make browser`, which `make test` runs first); Playwright drives it
through `executable_path` and never downloads a browser of its own. Screenshots are written under
the test's temporary folder and their paths printed (`pytest -s` shows them).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = "ch01_positional_encoding"
NOTEBOOKS = {
    "release": Path("notebooks") / CHAPTER / f"{CHAPTER}.ipynb",
    "solution": Path("solutions") / CHAPTER / f"{CHAPTER}.ipynb",
}
CHROMIUM = Path("/usr/bin/chromium")
# The machine may have no outside network: without these flags Chromium keeps trying to reach
# Google's services and fills the log with refused connections.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# JupyterLab user settings for the test server. No news or update pop-up may cover the page,
# and every cell stays attached to the DOM so that all outputs can be found.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
}
# nbgrader 0.9's JupyterLab menu, as a learner and an instructor see it.
NBGRADER_MENU_ITEMS = ["Assignment List", "Course List", "Formgrader", "Create assignment"]
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

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def _missing_browser_reason() -> str | None:
    """Why this machine cannot run the browser tests, or None when it can."""
    if not CHROMIUM.is_file():
        return (f"{CHROMIUM} not found: run `make browser` (or, as root, "
                "`apt-get install chromium`)")
    if find_spec("playwright") is None:
        return "the playwright package is missing from this environment: run `make install`"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, headless, launched by Playwright; closed whatever happens."""
    reason = _missing_browser_reason()
    if reason is not None:
        if _in_ci():
            # CI installs Chromium before the tests (`make test` runs `make browser`), so a
            # missing browser there is a broken set-up, not a machine without one.
            pytest.fail(f"CI must run the browser tests, but {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield chromium
        finally:
            chromium.close()


def _write_lab_settings(settings_dir: Path) -> None:
    for plugin, values in LAB_SETTINGS.items():
        path = settings_dir / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


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


@pytest.fixture(scope="module")
def lab(browser: Browser, tmp_path_factory: pytest.TempPathFactory,
        free_port: Callable[[], int]) -> Iterator[dict]:
    """A JupyterLab server from this environment on a free localhost port.

    Its root is a temporary folder holding copies of the two chapter 1 notebooks; its
    configuration, runtime and IPython folders are temporary too, so the user's own Jupyter
    set-up plays no part and nothing outside the temporary folder is written.
    """
    home = tmp_path_factory.mktemp("jupyterlab")
    root = home / "course"
    for notebook in NOTEBOOKS.values():
        (root / notebook).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / notebook, root / notebook)
    _write_lab_settings(home / "settings")

    port, token = free_port(), secrets.token_hex(16)
    command = [
        sys.executable, "-m", "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        f"--LabApp.user_settings_dir={home / 'settings'}",
        f"--LabApp.workspaces_dir={home / 'workspaces'}",
    ]
    if os.geteuid() == 0:
        command.append("--allow-root")
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_DATA_DIR=str(home / "data"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        IPYTHONDIR=str(home / "ipython"),
    )
    base_url = f"http://127.0.0.1:{port}"
    log = home / "jupyterlab.log"
    with log.open("w") as log_file:
        server = subprocess.Popen(
            command, cwd=root, env=env, stdout=log_file, stderr=subprocess.STDOUT
        )
    try:
        _wait_until_serving(f"{base_url}/api/status?token={token}", server, log)
        yield {"url": base_url, "token": token}
    finally:
        # The REST shutdown also stops the kernels; terminate and kill are the fallbacks.
        try:
            request = urllib.request.Request(
                f"{base_url}/api/shutdown", method="POST",
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


@pytest.fixture
def page(browser: Browser, lab: dict, tmp_path: Path) -> Iterator[Page]:
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


def _open_notebook(page: Page, lab: dict, notebook: Path) -> None:
    """Open a notebook in JupyterLab and wait until its kernel is connected and idle."""
    # `reset` starts from an empty workspace, so the notebook of an earlier test is not reopened.
    page.goto(f"{lab['url']}/lab/tree/{notebook.as_posix()}?reset&token={lab['token']}")
    page.wait_for_function(KERNEL_IDLE_JS, timeout=KERNEL_START_MS)


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


def test_release_notebook_stops_at_the_first_stub(page: Page, lab: dict, tmp_path: Path) -> None:
    _open_notebook(page, lab, NOTEBOOKS["release"])
    _run_all_cells(page)

    errors = _error_texts(page)
    shot = _screenshot(page, tmp_path, "release_run_all", _error_outputs(page).first)
    assert len(errors) == 1, f"expected one error, at the first stub's check ({shot}): {errors}"
    assert "NotImplementedError" in errors[0], errors[0]
    assert "ch01.positional_encoding (visible checks) failed" in errors[0], errors[0]
    # The run stopped there: the cells after the failing check were not executed.
    prompts = _prompts(page)
    assert any(prompt.strip() in ("[ ]:", "[ ]") for prompt in prompts), prompts


def test_solution_notebook_runs_clean_with_figures(page: Page, lab: dict, tmp_path: Path) -> None:
    _open_notebook(page, lab, NOTEBOOKS["solution"])
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
    # Two heatmaps and three line plots, each decoded to a real picture by the browser.
    assert images.count() == 5
    for index in range(images.count()):
        assert images.nth(index).evaluate("img => img.complete && img.naturalWidth > 100")


def test_nbgrader_extension_is_loaded(page: Page, lab: dict, tmp_path: Path) -> None:
    _open_notebook(page, lab, NOTEBOOKS["release"])
    # The notebook toolbar holds nbgrader's Validate button, which learners use before submitting.
    assert page.locator(".jp-NotebookPanel-toolbar .validate-button").is_visible()

    page.locator("#jp-MainMenu").get_by_text("Nbgrader", exact=True).click()
    menu = page.locator("#jp-mainmenu-nbgrader")
    menu.wait_for()
    _screenshot(page, tmp_path, "nbgrader_menu")
    labels = menu.locator(".lm-Menu-itemLabel").all_inner_texts()
    for item in NBGRADER_MENU_ITEMS:
        assert item in labels, f"{item!r} missing from the Nbgrader menu: {labels}"
