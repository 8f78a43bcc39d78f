"""The static audit: each kind of suspicious code is found on its line; honest work is not."""

from __future__ import annotations

import re

import nbformat
import pytest

from autograder.cli import main as cli_main
from autograder.course import ROOT, Course
from autograder.grade import audit
from autograder.grade.audit import Finding, audit_file, audit_notebook
from autograder.steps.release import chapters_in
from tests.fixtures.sample_class import ALTERNATIVES, mutant_source

CHAPTERS = chapters_in(Course.of(ROOT))

# (snippet, line of the finding, expected code). Each snippet sits after a first line that
# imports what it needs, so the line numbers also prove that findings point at the right line.
CASES = [
    ("import numpy as np\nnp.testing.assert_allclose = print", 2, audit.MONKEYPATCH),
    ("import numpy\nnumpy.allclose = lambda *a, **k: True", 2, audit.MONKEYPATCH),
    ("import numpy as np\nsetattr(np, 'allclose', print)", 2, audit.MONKEYPATCH),
    ("import numpy as np\ndel np.testing", 2, audit.MONKEYPATCH),
    ("x = 1\n__builtins__.len = lambda s: 0", 2, audit.MONKEYPATCH),
    ("import builtins\nbuiltins.print = None", 2, audit.MONKEYPATCH),
    ("import sys\nsys.modules['autograder'] = None", 2, audit.MONKEYPATCH),
    ("import autograder\nautograder.check = print", 2, audit.MONKEYPATCH),
    ("x = 1\ndef check(*args):\n    pass", 2, audit.MONKEYPATCH),
    ("x = 1\nfrom autograder.exercises import registry as r", 2, audit.GRADER_ACCESS),
    ("x = 1\nfrom autograder.tutorial_style.implementations import numpy_softmax", 2,
     audit.GRADER_ACCESS),
    ("x = 1\nfrom transformer_ref.np_attention import softmax", 2, audit.REFERENCE),
    ("x = 1\nfrom transformer_ref.np_attention import softmax as s", 2, audit.REFERENCE),
    ("import transformer_ref.np_attention as ref\nsoftmax = ref.softmax", 2, audit.REFERENCE),
    ("from transformer_ref import np_attention\nsoftmax = np_attention.softmax", 2,
     audit.REFERENCE),
    ("import sys\nsys.path.insert(0, 'x')", 2, audit.IMPORT_TRICK),
    ("import sys\nsys.path = ['x']", 2, audit.IMPORT_TRICK),
    ("x = 1\nm = __import__('transformer_ref')", 2, audit.IMPORT_TRICK),
    ("x = 1\nimport importlib", 2, audit.IMPORT_TRICK),
    ("import importlib as il\nil.import_module('transformer_ref.np_attention')", 2,
     audit.IMPORT_TRICK),
    ("x = 1\nexec('y = 2')", 2, audit.DYNAMIC_CODE),
    ("x = 1\ntext = open('/etc/passwd').read()", 2, audit.FILE_ACCESS),
    ("x = 1\ntext = open('../../notes.txt').read()", 2, audit.FILE_ACCESS),
    ("from pathlib import Path\np = Path('/home/someone')", 2, audit.FILE_ACCESS),
    ("from pathlib import Path\np = Path.cwd().parent", 2, audit.FILE_ACCESS),
    ("import os\nos.chdir('somewhere')", 2, audit.FILE_ACCESS),
    ("x = 1\np = 'solutions/ch02_attention/ch02_attention.ipynb'", 2, audit.SOLUTION_ACCESS),
    ("x = 1\np = 'autograder/course/gradebook.db'", 2, audit.SOLUTION_ACCESS),
    ("import os\nkey = os.environ['AUTOGRADER_SECRET']", 2, audit.SECRET),
    ("x = 1\nimport subprocess", 2, audit.PROCESS),
    ("import os\nos.system('ls')", 2, audit.PROCESS),
    ("x = 1\nfrom os import popen", 2, audit.PROCESS),
    ("x = 1\nimport ctypes", 2, audit.PROCESS),
    ("x = 1\nimport socket", 2, audit.NETWORK),
    ("x = 1\nimport urllib.request", 2, audit.NETWORK),
    ("x = 1\nfrom http.client import HTTPConnection", 2, audit.NETWORK),
    ("x = 1\nimport requests", 2, audit.NETWORK),
    ("import sys\nsys.settrace(None)", 2, audit.INTROSPECTION),
    ("import gc\nobjects = gc.get_objects()", 2, audit.INTROSPECTION),
    ("from torch import nn\nclasses = nn.Module.__subclasses__()", 2, audit.INTROSPECTION),
    ("import sys\ncaller = sys._getframe(1).f_globals", 2, audit.INTROSPECTION),
    ("x = 1\ng = (lambda: 0).__globals__", 2, audit.INTROSPECTION),
    # IPython syntax: shell escapes and magics.
    ("x = 1\n!cat /etc/passwd", 2, audit.SHELL),
    ("x = 1\nfiles = !ls", 2, audit.SHELL),
    ("%%bash\nls", 1, audit.SHELL),
    ("x = 1\n%cd ..", 2, audit.FILE_ACCESS),
    ("x = 1\n%time import subprocess", 2, audit.PROCESS),
    ("%%time\nx = 1\nimport socket", 3, audit.NETWORK),
    # A cell that does not parse cannot run, but is still searched as text.
    ("def broken(:\n    import subprocess", 2, audit.PROCESS),
]


def notebook(*sources: str, chapter_check: str = "ch02.softmax") -> nbformat.NotebookNode:
    """A notebook with a graded test cell of ``chapter_check`` and then the given cells."""
    nb = nbformat.v4.new_notebook()
    test = f'from autograder import check\ncheck("{chapter_check}", softmax)'
    nb.cells = [nbformat.v4.new_code_cell(test)]
    nb.cells += [nbformat.v4.new_code_cell(s) for s in sources]
    return nb


@pytest.mark.parametrize(("source", "line", "code"), CASES, ids=[c[0] for c in CASES])
def test_each_category_is_flagged_on_its_line(source: str, line: int, code: str) -> None:
    findings = audit_notebook(notebook(source))
    matching = [f for f in findings if f.code == code and f.line == line]
    assert matching, f"expected a {code} finding on line {line}, got {findings}"
    assert all(isinstance(f, Finding) and f.cell == 1 and f.reason.strip() for f in matching)


@pytest.mark.parametrize("chapter", CHAPTERS)
@pytest.mark.parametrize("folder", ["solutions", "notebooks"])
def test_course_notebooks_have_no_findings(chapter: str, folder: str) -> None:
    """The course's own notebooks (every code cell, setup imports of earlier building blocks
    from transformer_ref included) raise nothing: no false positives."""
    nb = nbformat.read(ROOT / folder / chapter / f"{chapter}.ipynb", as_version=4)
    assert audit_notebook(nb) == []


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_solution_cells_alone_have_no_findings(chapter: str) -> None:
    nb = nbformat.read(ROOT / "solutions" / chapter / f"{chapter}.ipynb", as_version=4)
    solution_cells = [c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {})
                      .get("solution") and c.cell_type == "code"]
    assert solution_cells
    nb.cells = solution_cells
    assert audit_notebook(nb) == []


@pytest.mark.parametrize("exercise", sorted(ALTERNATIVES))
def test_honest_alternatives_have_no_findings(exercise: str) -> None:
    source = mutant_source(exercise, ALTERNATIVES[exercise])
    assert audit_notebook(notebook(source, chapter_check=exercise)) == []


def test_subclassing_the_reference_of_a_graded_class_is_flagged() -> None:
    nb = notebook("import transformer_ref.modules as ref",
                  "class MultiHeadAttention(ref.MultiHeadAttention):\n    pass",
                  chapter_check="ch07.multi_head_attention")
    nb.cells[0].source = nb.cells[0].source.replace("softmax", "MultiHeadAttention")
    found = [(f.cell, f.line, f.code) for f in audit.audit_notebook(nb)]
    assert (2, 1, audit.REFERENCE) in found


def test_harmless_magics_and_ordinary_code_are_not_flagged() -> None:
    cells = [
        "%matplotlib inline\nimport numpy as np",
        "%timeit np.zeros(3)",
        "np.zeros(3)?",
        "import matplotlib.pyplot as plt\nplt.rcParams['figure.figsize'] = (6, 4)",
        "rng = np.random.default_rng(0)\nx = rng.standard_normal(3)\nx.shape = (3, 1)",
        "print('ratio 3/4, see solutions of the quiz')",
        "import math\nfrom transformer_ref.figures.plots import plot_attention",
    ]
    assert audit_notebook(notebook(*cells)) == []


def test_reference_imports_are_flagged_only_when_they_answer_an_exercise() -> None:
    # Earlier building blocks and reference modules used for comparisons are course practice.
    setup = ("from transformer_ref.np_attention import multi_head_attention\n"
             "import transformer_ref.np_layers as ref\n"
             "expected = ref.layer_norm")
    assert audit_notebook(notebook(setup, chapter_check="ch05.layer_norm")) == []
    # The reference of the exercise graded here, imported by name, or used where the answer
    # is defined, is flagged.
    alias = "import transformer_ref.np_layers as ref\n"
    cheats = [("from transformer_ref.np_layers import layer_norm", 1),
              (alias + "def layer_norm(x):\n    return ref.layer_norm(x)", 3),
              (alias + "layer_norm = ref.layer_norm", 2)]
    for source, line in cheats:
        findings = audit_notebook(notebook(source, chapter_check="ch05.layer_norm"))
        assert [(f.line, f.code) for f in findings] == [(line, audit.REFERENCE)], source


def test_cells_identical_to_the_release_are_skipped() -> None:
    release = notebook("import socket")
    assert [f.code for f in audit_notebook(release)] == [audit.NETWORK]
    assert audit_notebook(release, release=release) == []


def test_findings_are_sorted_and_unique_per_line_and_code() -> None:
    nb = notebook("import os\nos.system('a'); os.system('b')", "import socket")
    findings = audit_notebook(nb)
    assert findings == sorted(findings, key=lambda f: (f.cell, f.line, f.code, f.reason))
    assert [(f.cell, f.line, f.code) for f in findings] == [(1, 2, audit.PROCESS),
                                                            (2, 1, audit.NETWORK)]
    assert str(findings[0]).startswith("cell 1, line 2: [process] ")


def test_raw_json_notebooks_with_list_sources_are_read() -> None:
    raw = {"cells": [{"cell_type": "code", "source": ["import os\n", "os.system('ls')\n"],
                      "metadata": {}, "outputs": [], "execution_count": None}]}
    assert [(f.line, f.code) for f in audit_notebook(raw)] == [(2, audit.PROCESS)]


def test_bad_input_and_unreadable_files(tmp_path) -> None:
    with pytest.raises(TypeError, match="expects a notebook"):
        audit_notebook("import os")  # type: ignore[arg-type]
    broken = tmp_path / "broken.ipynb"
    broken.write_text('{"cells": [', encoding="utf-8")
    (finding,) = audit_file(broken)
    assert finding.code == audit.UNREADABLE and "not a readable notebook" in finding.reason


def test_command_line_on_files(tmp_path, capsys) -> None:
    path = tmp_path / "ch02_attention.ipynb"
    nbformat.write(notebook("x = 1\nimport subprocess"), path)
    assert cli_main(["audit", "ch02", str(path), "--student", "ada"]) == 1
    out = capsys.readouterr().out
    assert "student" in out and "reason" in out
    row = next(line for line in out.splitlines() if line.startswith("ada"))
    assert row.split()[:5] == ["ada", "ch02_attention", "1", "2", "process"]
    assert "1 finding(s) in 1 notebook(s)" in out

    clean = tmp_path / "clean.ipynb"
    nbformat.write(notebook("x = 1"), clean)
    assert cli_main(["audit", str(clean)]) == 0
    assert cli_main(["audit", "ch99_nothing"]) == 2


def test_command_line_on_collected_submissions(tmp_path, capsys) -> None:
    course = tmp_path / "course"
    for student, source in (("ada", "x = 1"), ("finn", "import numpy as np\nnp.sum = len")):
        folder = course / "submitted" / student / "ch02_attention"
        folder.mkdir(parents=True)
        nbformat.write(notebook(source), folder / "ch02_attention.ipynb")
    assert cli_main(["audit", "all", "--course-dir", str(course)]) == 1
    out = capsys.readouterr().out
    assert "finn" in out and "monkeypatch" in out and "ada " not in out
    assert "1 finding(s) in 2 notebook(s)" in out
    assert cli_main(["audit", "ch02", "--course-dir", str(course), "--student", "ada"]) == 0


def test_words_in_comments_docstrings_and_prose_are_never_findings() -> None:
    cells = [
        "# I checked my solutions against the worked examples",
        '"""Compare with transformer_ref, as the solutions of the gradebook do; no subprocess,\n'
        'no socket, no setattr, no builtins, never sys.modules or AUTOGRADER_SECRET."""\n'
        "x = 1",
        "def f():\n    '''Uses autograder.exercises? No: import subprocess is not here.'''\n"
        "    return 2",
        "print('the gradebook is kept by the instructor, ../ means the parent folder')",
        "label = 'solutions'\nnote = 'read the AUTOGRADER_SECRET docs'",
        # A cell that does not parse: its comments and strings do not count either.
        "def broken(:\n    # import subprocess\n    s = 'import socket'",
    ]
    assert audit_notebook(notebook(*cells)) == []


def test_paths_to_the_course_files_are_found_wherever_they_are_built() -> None:
    cases = [
        ("from pathlib import Path\np = Path('..') / 'solutions'", {audit.SOLUTION_ACCESS}),
        ("x = 1\ndata = open('gradebook.db', 'rb').read()", {audit.SOLUTION_ACCESS}),
        ("import os\nkey = os.getenv('AUTOGRADER_SECRET')", {audit.SECRET}),
    ]
    for source, codes in cases:
        found = {f.code for f in audit_notebook(notebook(source)) if f.line == 2}
        assert codes <= found, (source, found)


def test_oversized_and_deeply_nested_cells_are_reported_with_their_size() -> None:
    huge = "x = " + " + ".join(["1"] * 200_000)
    too_deep_to_parse = "y = " + "+".join(["1"] * 5_000)
    deep = "z = " + "+".join(["1"] * 500)
    nb = notebook(huge, too_deep_to_parse, deep, "import socket")
    findings = audit_notebook(nb)
    by_cell = {f.cell: f for f in findings}
    assert by_cell[1].code == audit.OVERSIZED and f"{len(huge):,} characters" in by_cell[1].reason
    assert by_cell[2].code == audit.OVERSIZED and "too deeply for Python's parser" in by_cell[
        2].reason
    assert by_cell[3].code == audit.OVERSIZED
    assert re.search(r"nests 50\d levels deep, more than the 100", by_cell[3].reason)
    assert by_cell[4].code == audit.NETWORK  # the rest of the notebook is audited as usual


def test_one_unauditable_notebook_never_stops_the_audit_of_the_class(tmp_path, capsys) -> None:
    course = tmp_path / "course"
    cells = {"deep": ("x = " + "+".join(["1"] * 200_000),),
             "finn": ("import numpy as np\nnp.sum = len",)}
    for student, sources in cells.items():
        folder = course / "submitted" / student / "ch02_attention"
        folder.mkdir(parents=True)
        nbformat.write(notebook(*sources), folder / "ch02_attention.ipynb")
    nested = course / "submitted" / "nested" / "ch02_attention" / "ch02_attention.ipynb"
    nested.parent.mkdir(parents=True)
    nested.write_text('{"cells": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8")
    assert cli_main(["audit", "all", "--course-dir", str(course)]) == 1
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines()[1:-1]}
    assert "oversized" in rows["deep"] and "monkeypatch" in rows["finn"]
    assert "unreadable" in rows["nested"]
    assert "3 finding(s) in 3 notebook(s)" in out
