"""One grading path: nbgrader's own commands and the formgrader's buttons grade, give feedback,
export and collect as ``python -m autograder`` does, and no kernel sees the grader's secret.

A class of three (honest, a cheat who also prints the kernel's secret, broken JSON) is graded
twice from the same submissions: by
``python -m autograder autograde`` in one course folder and by plain ``nbgrader autograde``
(a separate process, run from a folder holding the course's ``nbgrader_config.py``) in
another. Then a Jupyter server in instructor mode, reading a course of its own, is asked
through the formgrader's HTTP API (what its buttons call) to autograde the cheat, write her
feedback and collect from an exchange.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import nbformat
import pytest

from autograder.cli import main
from autograder.copies.pairs import CODES as COPY_FLAGS
from autograder.course import ROOT, Course, course_config
from autograder.flags import read_flags
from autograder.grade.gradebook import read_scores
from autograder.steps.release import generate

CH = "ch02_attention"
SECRET = "the-graders-own-secret-7f3a"
STUDENTS = ("broken", "cheat", "honest")
LAYERS = ROOT / "autograder" / "learner" / "jupyter"
NBGRADER = str(Path(sys.executable).with_name("nbgrader"))
CONFIG = """\
from autograder.course import course_config

c = get_config()  # noqa: F821
c.merge(course_config({root!r}, {course!r}))
{extra}"""
SERVER_START_S = 90

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning"),
]


def _course_classes(section) -> Iterator[str]:
    """Every dotted name of the course's code in a configuration, at any depth."""
    for value in section.values():
        if hasattr(value, "values"):
            yield from _course_classes(value)
        for name in value if isinstance(value, list) else [value]:
            if isinstance(name, str) and name.startswith("autograder."):
                yield name


def test_the_configuration_names_every_hook_and_each_name_loads_its_class():
    """The course's configuration names its hook classes as text (learners' kernels import it
    without the grader): each name must load a class, and every hook must be named."""
    from traitlets.utils.importstring import import_item

    from autograder.nbgrader_hooks import commands

    named = {import_item(name) for name in _course_classes(course_config(ROOT))}
    assert all(isinstance(hook, type) for hook in named), named
    classes = {value for value in vars(commands).values()
               if isinstance(value, type) and value.__module__ == commands.__name__}
    # A base the hooks share (their start through the grading service) is not one itself.
    shared = {base for cls in classes for base in cls.__mro__[1:] if base in classes}
    hooks = classes - shared
    assert hooks and hooks <= named, hooks - named


def _class(root: Path) -> dict[str, bytes]:
    """The submitted notebooks (slim ch02 notebooks, as in test_bad_submissions)."""
    from test_bad_submissions import answered, cell_with, slim

    honest = slim(answered(root / "notebooks" / CH / f"{CH}.ipynb",
                           root / "solutions" / CH / f"{CH}.ipynb"))

    def variant(edit) -> bytes:
        nb = nbformat.reads(nbformat.writes(honest), as_version=4)
        edit(nb)
        return nbformat.writes(nb).encode()

    def cheat(nb) -> None:
        cell_with(nb, "ch02_softmax_solution").source = (
            "def softmax(x, axis=-1):\n    return x\n\n"
            "import os\nprint('secret:', os.environ.get('AUTOGRADER_SECRET'))\n"
            "import autograder\nfrom autograder.exercises import registry\n"
            "autograder.check = lambda *args, **kwargs: None\n"
            "registry.check = autograder.check\n")

    text = nbformat.writes(honest).encode()
    return {"honest": text, "cheat": variant(cheat), "broken": text[: len(text) // 2]}


def _submit(course: Path, notebooks: dict[str, bytes], students=STUDENTS) -> None:
    for student in students:
        folder = course / "submitted" / student / CH
        folder.mkdir(parents=True)
        (folder / f"{CH}.ipynb").write_bytes(notebooks[student])


def _config_folder(folder: Path, root: Path, course: Path, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "nbgrader_config.py").write_text(
        CONFIG.format(root=str(root), course=str(course), extra=extra))
    return folder


def _nbgrader(folder: Path, *args: str, status: int = 0) -> subprocess.CompletedProcess:
    result = subprocess.run([NBGRADER, *args], cwd=folder, capture_output=True, text=True,
                            env=dict(os.environ, AUTOGRADER_SECRET=SECRET), timeout=900)
    assert result.returncode == status, result.stdout + result.stderr
    return result


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def _scores(root: Path, course: Path) -> dict[str, tuple]:
    return {s.student: (s.auto_score, s.auto_max_score, s.max_score)
            for s in read_scores(Course.of(root, course))}


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict:
    """The class graded by ``python -m autograder`` (course ``ours``) and by plain nbgrader
    (course ``plain``), from the same submissions and with the same secret."""
    base = tmp_path_factory.mktemp("plain")
    root = base / "root"
    shutil.copytree(ROOT / "solutions" / CH, root / "solutions" / CH)
    ours, plain = root / "ours", root / "plain"
    for course in (ours, plain):
        generate(Course.of(root, course), [CH])
    notebooks = _class(root)
    for course in (ours, plain):
        _submit(course, notebooks)
    submitted = _files(plain / "submitted")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AUTOGRADER_SECRET", SECRET)
        assert main(["autograde", "ch02", "--jobs", "2", "--root", str(root), "--course-dir",
                     str(ours)]) == 0
    folder = _config_folder(base / "plain-config", root, plain)
    log = _nbgrader(folder, "autograde", CH, "--force")
    return {"base": base, "root": root, "ours": ours, "plain": plain, "folder": folder,
            "log": log.stdout + log.stderr, "submitted": submitted, "notebooks": notebooks}


def test_plain_nbgrader_autograde_is_the_course_grading(graded):
    root, ours, plain = graded["root"], graded["ours"], graded["plain"]
    assert _scores(root, plain) == _scores(root, ours)
    scores = _scores(root, plain)
    assert scores["honest"] == (7, 7, 11)
    assert scores["cheat"] == (2, 7, 11)  # softmax and attention fail outside the kernel
    assert scores["broken"] == (0, 7, 11)
    for student in STUDENTS:
        assert (read_flags(Course.of(root, plain), student, CH)
                == read_flags(Course.of(root, ours), student, CH)), student
        mine, theirs = (course / "autograded" / student / CH / f"{CH}.ipynb"
                        for course in (ours, plain))
        assert theirs.read_bytes() == mine.read_bytes(), student
    codes = {s: {f.code for f in read_flags(Course.of(root, plain), s, CH)} for s in STUDENTS}
    assert "verification_failed" in codes["cheat"]
    assert "unreadable_notebook" in codes["broken"]
    # The honest learner hands in the course's solutions, which copy detection (run by plain
    # nbgrader after each learner as autograde does after the class) does not flag: the
    # chapter's short answers (softmax, the masks) are what every honest learner writes, and
    # its one long answer, scaled dot-product attention, is what its exercise's text dictates.
    assert codes["honest"] == set()
    report = Path("similarity") / f"{CH}.html"
    assert (plain / report).read_bytes() == (ours / report).read_bytes()
    assert "cheat is flagged" in graded["log"]
    assert _files(plain / "submitted") == graded["submitted"]  # originals untouched


def test_no_kernel_saw_the_graders_secret(graded):
    autograded = graded["plain"] / "autograded" / "cheat" / CH / f"{CH}.ipynb"
    text = autograded.read_text(encoding="utf-8")
    assert "secret: " in text  # the cheat's print ran ...
    assert SECRET not in text  # ... and showed only the kernel's own, derived secret
    assert "secret: None" not in text


def test_plain_generate_feedback_never_shows_hidden_tests(graded):
    plain = graded["plain"]
    # A notebook autograded elsewhere, hidden tests and all (as nbgrader's own grading
    # writes them), stands in for the honest learner's.
    source = graded["root"] / "solutions" / CH / f"{CH}.ipynb"
    autograded = plain / "autograded" / "honest" / CH / f"{CH}.ipynb"
    autograded.write_bytes(source.read_bytes())
    assert "BEGIN HIDDEN TESTS" in autograded.read_text(encoding="utf-8")
    result = _nbgrader(graded["folder"], "generate_feedback", CH, "--force")
    # The course's preprocessor is a plain nbconvert one: no "Config option
    # display_data_priority not recognized by LearnersView" for each page.
    assert "not recognized" not in result.stdout + result.stderr
    pages = sorted((plain / "feedback").glob(f"*/{CH}/{CH}.html"))
    assert [p.parts[-3] for p in pages] == sorted(STUDENTS)
    for page in pages:
        html = page.read_text(encoding="utf-8")
        assert "BEGIN HIDDEN TESTS" not in html and "hidden=True" not in html, page
        assert "most recent call last" not in html, page


def test_plain_export_writes_the_course_csv_with_flags(graded, tmp_path):
    root, plain, folder = graded["root"], graded["plain"], graded["folder"]
    _nbgrader(folder, "export")
    assert not (folder / "grades.csv").exists()  # nothing untracked where nbgrader ran
    expected = (tmp_path / "ours.csv")
    assert main(["export", "--output", str(expected), "--root", str(root), "--course-dir",
                 str(plain)]) == 0
    assert (plain / "grades.csv").read_bytes() == expected.read_bytes()
    rows = list(csv.DictReader(io.StringIO(expected.read_text(encoding="utf-8"))))
    assert "verification_failed" in next(r for r in rows if r["student"] == "cheat")["flags"]

    _nbgrader(folder, "export", "--to", str(tmp_path / "cheat.csv"), "--student", "cheat")
    rows = list(csv.DictReader(io.StringIO((tmp_path / "cheat.csv").read_text())))
    assert [r["student"] for r in rows] == ["cheat"]


def test_plain_zip_collect_stops_and_names_the_courses_collect(graded, tmp_path):
    folder, plain = graded["folder"], graded["plain"]
    archive = graded["root"] / "downloaded" / CH / "archive"  # nbgrader's place for LMS zips
    archive.mkdir(parents=True)
    with zipfile.ZipFile(archive / "export.zip", "w") as zf:
        zf.writestr(f"zoe_{CH}.ipynb", graded["notebooks"]["honest"])
    before = _files(plain / "submitted")
    result = _nbgrader(folder, "zip_collect", CH, status=1)
    assert "python -m autograder collect" in result.stdout + result.stderr
    assert _files(plain / "submitted") == before


# ------------------------------------------------------------------ the formgrader


class Server:
    """A Jupyter server in instructor mode; :meth:`call` sends a formgrader API request."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token

    def call(self, method: str, path: str) -> dict:
        request = urllib.request.Request(f"{self.url}{path}", method=method,
                                         data=b"" if method == "POST" else None,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=900) as response:
            return json.loads(response.read())

    def page(self, path: str) -> str:
        """The HTML of a formgrader page."""
        request = urllib.request.Request(f"{self.url}{path}",
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=300) as response:
            return response.read().decode("utf-8")


@contextlib.contextmanager
def _instructor_server(home: Path, root: Path, layer: Path, port: int) -> Iterator[Server]:
    """``jupyter server`` serving ``root`` with the instructor mode's layers and the exchange's,
    ``layer`` first, as a class server starts an instructor's (``JUPYTERHUB_USER`` included,
    which the exchange layer would take as the student id)."""
    token = "formgrader-test-token"
    env = dict(os.environ, AUTOGRADER_SECRET=SECRET, JUPYTERHUB_USER="ivy",
               JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_DATA_DIR=str(home / "data"),
               JUPYTER_RUNTIME_DIR=str(home / "runtime"), IPYTHONDIR=str(home / "ipython"),
               JUPYTER_CONFIG_PATH=os.pathsep.join(
                   [str(layer), str(LAYERS / "instructor"), str(LAYERS / "exchange"),
                    str(LAYERS / "learner")]))
    log = home / "server.log"
    url = f"http://127.0.0.1:{port}"
    with log.open("w") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "jupyter_server", "--no-browser", "--ServerApp.ip=127.0.0.1",
             f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
             f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}"],
            cwd=home, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            assert server.poll() is None, f"the server exited:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"no answer:\n{log.read_text()}"
            try:
                Server(url, token).call("GET", "/formgrader/api/status")
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.5)
        yield Server(url, token)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_formgrader_buttons_take_the_course_path(graded, tmp_path,
                                                 free_port: Callable[[], int]):
    root, ours = graded["root"], graded["ours"]
    formgrader = root / "formgrader"
    generate(Course.of(root, formgrader), [CH])
    # The cheat also writes HTML that would run in the instructor's grading page.
    cheat = nbformat.reads(graded["notebooks"]["cheat"].decode(), as_version=4)
    cheat.cells.append(nbformat.v4.new_markdown_cell(
        '<script>document.title = "owned"</script><img src="x" onerror="alert(1)"> $a^2$'))
    _submit(formgrader, {**graded["notebooks"], "cheat": nbformat.writes(cheat).encode()},
            ["cheat", "honest"])
    exchange = tmp_path / "exchange"
    inbound = exchange / "build-the-transformer" / "inbound"
    for name in ("dana", "Zoë Smith"):
        folder = inbound / f"{name}+{CH}+2026-11-20 10:00:00.000000 UTC"
        folder.mkdir(parents=True)
        (folder / f"{CH}.ipynb").write_bytes(graded["notebooks"]["honest"])
    layer = _config_folder(tmp_path / "layer", root, formgrader,
                           extra=f"c.Exchange.root = {str(exchange)!r}\n")
    home = tmp_path / "home"
    home.mkdir()
    with _instructor_server(home, root, layer, free_port()) as server:
        for student in ("cheat", "honest"):
            result = server.call("POST", f"/formgrader/api/submission/{CH}/{student}/autograde")
            assert result["success"], result
            # The Formgrader's dialog reads how the grading ended first.
            assert result["log"].startswith(f"Outcome: {student} scored "), result["log"]
        submission = server.call("GET", f"/formgrader/api/submission/{CH}/cheat")
        listed = {s["student"]: s for s in server.call("GET", f"/formgrader/api/submissions/{CH}")}
        notebooks = server.call("GET", f"/formgrader/api/submitted_notebooks/{CH}/{CH}")
        page = server.page("/formgrader/submissions/"
                           f"{next(n['id'] for n in notebooks if n['student'] == 'cheat')}/")
        result = server.call("POST", f"/formgrader/api/assignment/{CH}/cheat/generate_feedback")
        assert result["success"], result
        # The whole chapter's feedback, though JUPYTERHUB_USER names the instructor.
        chapter_feedback = server.call("POST", f"/formgrader/api/assignment/{CH}/generate_feedback")
        result = server.call("POST", f"/formgrader/api/assignment/{CH}/collect")
        assert result["success"], result
        collect_log = result["log"]
        # One learner's extension, given and taken back on the Manage Submissions page.
        extensions = f"/formgrader/api/course/extensions/{CH}"
        given = server.call("POST", f"{extensions}/dana?until=2026-12-05T18:00%2B01:00")
        assert given["success"] and "dana's deadline" in given["log"], given
        listed_extensions = server.call("GET", extensions)
        refused = server.call("POST", f"{extensions}/dana?until=friday")
        server.call("POST", f"{extensions}/dana?remove=1")
        after = server.call("GET", extensions)
        submissions_page = server.page(f"/formgrader/manage_submissions/{CH}")
    assert listed_extensions == {"due": None,
                                 "extensions": {"dana": "2026-12-05T17:00:00+00:00"}}
    assert not refused["success"] and "friday" in refused["error"]
    assert after["extensions"] == {}
    assert 'id="course-extensions"' in submissions_page and "extensions.js" in submissions_page
    # The chapter's reports: copy detection's is linked, the analysis not written yet is named.
    assert f'/formgrader/course/similarity/{CH}.html">the' in submissions_page
    assert f"no analysis yet: run\n      <code>python -m autograder analysis {CH}</code>" in (
        submissions_page)

    # The same score and flags as `python -m autograder autograde` gave her (copy detection,
    # which ran after her grading, compared her with a class of one here), in the submissions
    # list with their reasons, and on her page above the notebook.
    assert _scores(root, formgrader)["cheat"] == _scores(root, ours)["cheat"]
    assert submission["score"] == _scores(root, ours)["cheat"][0]
    flags = read_flags(Course.of(root, formgrader), "cheat", CH)
    ours_codes = ({f.code for f in read_flags(Course.of(root, ours), "cheat", CH)}
                  - {"similar_submissions"})
    assert ours_codes < {f.code for f in flags}
    assert "cell_added" in {f.code for f in flags}  # the markdown cell she added
    assert submission["flags"] == listed["cheat"]["flags"] == [
        {"code": f.code, "cell": f.cell, "reason": f.reason} for f in flags]
    assert {f["code"] for f in listed["honest"]["flags"]} <= set(COPY_FLAGS)
    assert listed["honest"]["last_name"] == "honest"
    assert (formgrader / "similarity" / f"{CH}.html").is_file()
    assert 'id="course-flags"' in page and "verification_failed" in page
    # Formulas are typeset by this server's MathJax; the learner's HTML does not run.
    assert "/static/jupyter_server_mathjax/MathJax.js" in page and "cdnjs" not in page
    assert "<script>document.title" not in page
    assert not re.search(r"<img[^>]*onerror", page)
    assert chapter_feedback["success"], chapter_feedback
    assert "wrote the feedback page of cheat" in chapter_feedback["log"]
    assert "wrote the feedback page of honest" in chapter_feedback["log"]
    page = (formgrader / "feedback" / "cheat" / CH / f"{CH}.html").read_text(encoding="utf-8")
    assert "BEGIN HIDDEN TESTS" not in page and SECRET not in page
    # Collect took the course's path: the unsafe name is refused, the other collected.
    assert sorted(p.name for p in (formgrader / "submitted").iterdir()) == [
        "cheat", "dana", "honest"]
    assert "REFUSED" in collect_log and "Zo" in collect_log
    assert collect_log.startswith("Outcome: collected 1 submission(s) of 1 learner(s), "
                                  "refused 1"), collect_log
