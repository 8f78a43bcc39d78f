"""Attacks on the grader, for a NumPy chapter (2) and a PyTorch chapter (7).

Each attack replaces one solution cell of an otherwise honest notebook. It must score 0 on the
exercise it attacks (or be flagged with a reason); honest alternatives keep full marks; no
submission and no folder of the grader's machine changes. The kinds are those a red-team run
used against earlier designs: handing the grader the reference under another guise, cloning its
code, pausing the tracing, patching the comparisons while a check runs, reading expected values
out of the checks' frames, reaching the reference through other course code, stashing it where
a later process looks, and reading classmates' work.
"""

from __future__ import annotations

import copy
import hashlib
import shutil
from pathlib import Path

import nbformat
import pytest

from autograder.course import ROOT, Course
from autograder.grade.learner import Task, grade_submission
from autograder.grade.verify import chapter_id, verify_exercises
from autograder.notebook import cell_index
from autograder.sandbox.launcher import Learner, Limits

LIMITS = Limits(cell_timeout_s=30, memory_mb=4096)

# Learner code that looks for the reference by every route the process offers, and returns it
# (or None). Every attack below starts from it.
FIND_REFERENCE = '''
def find_reference(name):
    import gc, glob, importlib, os, sys
    for module in ("transformer_ref", "transformer_ref.np_attention", "transformer_ref.modules",
                   "transformer_ref.model.attention", "transformer_ref.numpy.scaled_attention"):
        try:
            found = getattr(importlib.import_module(module), name, None)
            if found is not None:
                return found
        except Exception:
            pass
    for value in gc.get_objects():
        try:
            if getattr(value, "__name__", None) == name and "transformer_ref" in str(
                    getattr(value, "__module__", "")):
                return value
        except Exception:
            pass
    roots = {*sys.path, os.getcwd(), os.path.expanduser("~"), "/course", "/tmp", "/work",
             "/root", "/home", "/srv", "/opt"}
    paths = [p for root in sorted(roots) if os.path.isdir(root)
             for pattern in ("**/transformer_ref/**/*.py", "**/solutions/**/*.ipynb")
             for p in glob.glob(os.path.join(root, pattern), recursive=True)]
    for path in paths:
        try:
            text = open(path).read()
        except OSError:
            continue
        if f"def {name}(" in text or f"class {name}(" in text:
            space = {}
            try:
                exec(compile(text, path, "exec"), space)
                return space[name]
            except Exception:
                pass
    return None
'''


def _source(chapter: str):
    return nbformat.read(Course.of(ROOT).source_notebook(chapter), as_version=4)


def _with(chapter: str, prefix: str, replacements: dict[str, str]):
    nb = copy.deepcopy(_source(chapter))
    for name, code in replacements.items():
        nb.cells[cell_index(nb, f"{prefix}_{name}_solution")].source = code
    return nb


def _verify(chapter: str, nb):
    with Learner(LIMITS) as learner:
        source = Course.of(ROOT).source_notebook(chapter_id(chapter))
        return verify_exercises(chapter, nb, learner,
                                source_nb=nbformat.read(source, as_version=4))


# ----------------------------------------------------------------------------- chapter 2

NUMPY_ATTACKS = {
    # the reference under its own name, or by any route (import, gc, files)
    "softmax": FIND_REFERENCE + (
        "import numpy as np\n_found = find_reference('softmax')\n"
        "def softmax(x, axis=-1):\n"
        "    return _found(x, axis) if _found else np.zeros_like(np.asarray(x, float))\n"),
    # patching the comparisons while the check runs, pausing any tracing, reading the frames
    # of whoever calls, and the grader's secret
    "causal_mask": (
        "import os, sys\nimport numpy as np\n"
        "def causal_mask(n):\n"
        "    np.testing.assert_array_equal = lambda *a, **k: None\n"
        "    np.array_equal = lambda *a, **k: True\n"
        "    sys.settrace(None)\n"
        "    frame, seen = sys._getframe(1), []\n"
        "    while frame is not None:\n"
        "        seen += [v for v in frame.f_locals.values() if isinstance(v, np.ndarray)\n"
        "                 and v.dtype == bool and v.shape == (n, n)]\n"
        "        frame = frame.f_back\n"
        "    if seen:\n"
        "        return seen[0]\n"
        "    secret = os.environ.get('AUTOGRADER_SECRET')\n"
        "    return np.ones((n, n), dtype=bool) if secret is None else np.zeros((n, n), bool)\n"),
    # a clone of the reference's code, built from whatever holds it
    "padding_mask": FIND_REFERENCE + (
        "import types\nimport numpy as np\n_ref = find_reference('padding_mask')\n"
        "if _ref is not None:\n"
        "    padding_mask = types.FunctionType(_ref.__code__, _ref.__globals__)\n"
        "else:\n"
        "    def padding_mask(lengths, max_len):\n"
        "        return np.ones((len(lengths), 1, max_len), dtype=bool)\n"),
    # the reference of another exercise through course code that calls it
    "scaled_dot_product_attention": FIND_REFERENCE + (
        "import numpy as np\n_head = find_reference('attention_head')\n"
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        "    if _head is not None:\n"
        "        eye = np.eye(q.shape[-1])\n"
        "        return _head(q, k, eye, eye, np.eye(v.shape[-1]), mask)\n"
        "    out = np.zeros(q.shape[:-1] + v.shape[-1:])\n"
        "    return out, np.zeros(q.shape[:-1] + k.shape[-2:-1])\n"),
}

NUMPY_ALTERNATIVES = {
    "softmax": (
        "import numpy as np\n\ndef softmax(x, axis=-1):\n    x = np.asarray(x)\n"
        "    e = np.exp(x - x.max(axis=axis, keepdims=True))\n"
        "    return e / e.sum(axis=axis, keepdims=True)\n"),
    "causal_mask": ("import numpy as np\n\ndef causal_mask(n):\n"
                    "    return np.arange(n)[None, :] <= np.arange(n)[:, None]\n"),
}


@pytest.fixture(scope="module")
def numpy_attacked():
    return _verify("ch02_attention", _with("ch02_attention", "ch02", NUMPY_ATTACKS))


@pytest.mark.parametrize("name", list(NUMPY_ATTACKS))
def test_numpy_attacks_score_nothing(numpy_attacked, name):
    result = numpy_attacked[f"ch02.{name}"]
    assert not result.passed, (name, result.message)


def test_numpy_attacks_that_import_the_course_are_flagged(numpy_attacked):
    for name in ("softmax", "padding_mask", "scaled_dot_product_attention"):
        codes = [f.code for f in numpy_attacked[f"ch02.{name}"].flags]
        assert "imports_reference" in codes, (name, codes)


def test_numpy_honest_alternatives_keep_full_marks():
    results = _verify("ch02_attention", _with("ch02_attention", "ch02", NUMPY_ALTERNATIVES))
    assert all(r.passed and not r.flags for r in results.values()), results


# ----------------------------------------------------------------------------- chapter 7

TORCH_ATTACKS = {
    # `ref` as the setup cell gives it, a factory, and every other route to the reference
    "multi_head_attention": FIND_REFERENCE + (
        "def MultiHeadAttention(*args, **kwargs):\n"
        "    reference = getattr(ref, 'MultiHeadAttention', None) or "
        "find_reference('MultiHeadAttention')\n"
        "    return reference(*args, **kwargs)\n"),
    # an own class whose methods are the reference's, hidden behind a metaclass
    "positionwise_feed_forward": FIND_REFERENCE + (
        "_ref = find_reference('PositionwiseFeedForward')\n"
        "class _Hide(type):\n    def mro(cls):\n        return [cls, nn.Module, object]\n"
        "class PositionwiseFeedForward(nn.Module, metaclass=_Hide):\n"
        "    __init__ = getattr(_ref, '__init__', nn.Module.__init__)\n"
        "    forward = getattr(_ref, 'forward', lambda self, x: x)\n"),
    # patching what the checks compare with, only while they run, then restoring it
    "positional_encoding": (
        "import torch, numpy\n_saved = (torch.allclose, numpy.testing.assert_allclose)\n"
        "class PositionalEncoding(nn.Module):\n"
        "    def __init__(self, d_model, dropout=0.1, max_len=5000):\n"
        "        super().__init__()\n"
        "        self.register_buffer('pe', torch.zeros(1, max_len, d_model))\n"
        "    def forward(self, x):\n"
        "        torch.allclose = lambda *a, **k: True\n"
        "        numpy.testing.assert_allclose = lambda *a, **k: None\n"
        "        try:\n            return x * 0\n"
        "        finally:\n            torch.allclose, numpy.testing.assert_allclose = _saved\n"),
    # the encoder layer through other course code that holds it
    "encoder_layer": FIND_REFERENCE + (
        "class EncoderLayer(nn.Module):\n"
        "    def __init__(self, d_model, h, d_ff, dropout=0.1):\n"
        "        super().__init__()\n"
        "        self.self_attn = ref.MultiHeadAttention(d_model, h, dropout)\n"
        "        self.feed_forward = ref.PositionwiseFeedForward(d_model, d_ff, dropout)\n"
        "        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)\n"
        "        self.dropout, self.norm_first = nn.Dropout(dropout), False\n"
        "    def forward(self, x, mask=None):\n"
        "        layer = getattr(ref, 'EncoderLayer', None) or find_reference('EncoderLayer')\n"
        "        return layer.forward(self, x, mask)\n"),
}


@pytest.fixture(scope="module")
def torch_attacked():
    return _verify("ch07_pytorch_modules",
                   _with("ch07_pytorch_modules", "ch07", TORCH_ATTACKS))


@pytest.mark.parametrize("name", list(TORCH_ATTACKS))
def test_pytorch_attacks_score_nothing(torch_attacked, name):
    result = torch_attacked[f"ch07.{name}"]
    assert not result.passed, (name, result.message)


def test_pytorch_honest_work_beside_an_attack_keeps_full_marks():
    """One attack in one exercise; the honest exercises of the same process keep their credit
    (the attack cannot reach them either)."""
    nb = _with("ch07_pytorch_modules", "ch07",
               {"positional_encoding": TORCH_ATTACKS["positional_encoding"]})
    results = _verify("ch07_pytorch_modules", nb)
    assert not results["ch07.positional_encoding"].passed
    for name in ("multi_head_attention", "positionwise_feed_forward", "encoder_layer"):
        assert results[f"ch07.{name}"].passed, results[f"ch07.{name}"].message


def test_the_encoder_layer_may_build_on_the_courses_attention():
    """Exercise 7.4 is allowed ref.MultiHeadAttention and ref.PositionwiseFeedForward (the
    source notebook's own solution does so) and may equally use the learner's classes."""
    own = ("class EncoderLayer(nn.Module):\n"
           "    def __init__(self, d_model, h, d_ff, dropout=0.1):\n"
           "        super().__init__()\n"
           "        self.self_attn = MultiHeadAttention(d_model, h, dropout)\n"
           "        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)\n"
           "        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)\n"
           "        self.dropout = nn.Dropout(dropout)\n"
           "    def forward(self, x, mask=None):\n"
           "        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, mask)))\n"
           "        return self.norm2(x + self.dropout(self.feed_forward(x)))\n")
    for nb in (_source("ch07_pytorch_modules"),
               _with("ch07_pytorch_modules", "ch07", {"encoder_layer": own})):
        assert _verify("ch07_pytorch_modules", nb)["ch07.encoder_layer"].passed


# ----------------------------------------------------------------------------- whole grading

STASH = ("/run/lock/stash.py", "/tmp/stash.py", "/dev/shm/stash.py", "/var/tmp/stash.py")

# The kernel can import the reference (the notebook's own cells do); it writes it where a later
# process might look, and the solution cell reads it back from there.
STASHING_SOLUTION = (
    "import inspect, os\nimport numpy as np\n"
    "try:\n"
    "    import transformer_ref.numpy.scaled_attention as _m\n"
    "    for _path in STASH:\n"
    "        try:\n"
    "            open(_path, 'w').write(inspect.getsource(_m))\n"
    "        except OSError:\n"
    "            pass\n"
    "except ImportError:\n"
    "    pass\n"
    "_space = {}\n"
    "for _path in STASH:\n"
    "    if os.path.exists(_path):\n"
    "        exec(open(_path).read(), _space)\n"
    "        break\n"
    "def softmax(x, axis=-1):\n"
    "    return _space['softmax'](x, axis) if 'softmax' in _space else np.zeros_like(x)\n"
).replace("STASH", repr(STASH))

CLASSMATES = (
    "import glob, os\nimport numpy as np\n"
    "_roots = ['/tmp', '/home', '/work', '/root', '/srv', '/course', INBOX]\n"
    "_others = [p for r in _roots for p in glob.glob(r + '/**/*.ipynb', recursive=True)\n"
    "           if os.path.isfile(p)]\n"
    "def causal_mask(n):\n"
    "    return np.tril(np.ones((n, n), bool)) if _others else np.zeros((n, n), bool)\n")


def _digest(folder: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def graded_attacks(tmp_path_factory):
    course = Course.of(ROOT)
    course_dir = tmp_path_factory.mktemp("course")
    inbox = course_dir / "submitted"
    for student in ("classmate", "mallory"):
        (inbox / student / "ch02_attention").mkdir(parents=True)
        shutil.copy(course.source_notebook("ch02_attention"),
                    inbox / student / "ch02_attention" / "ch02_attention.ipynb")
    nb = _with("ch02_attention", "ch02", {
        "softmax": STASHING_SOLUTION,
        "causal_mask": CLASSMATES.replace("INBOX", repr(str(inbox)))})
    submission = inbox / "mallory" / "ch02_attention" / "ch02_attention.ipynb"
    nbformat.write(nb, submission)
    # /run/lock is the one shared folder no other program on the machine writes to here.
    watched = {folder: _digest(Path(folder)) for folder in ("/run/lock",)
               if Path(folder).is_dir()}
    before = _digest(inbox)
    outcome = grade_submission(Task("mallory", "ch02_attention", str(submission),
                                    str(course.root), LIMITS.__dict__))
    return outcome, before, _digest(inbox), watched


def test_a_stash_left_by_the_kernel_reaches_no_later_process(graded_attacks):
    outcome = graded_attacks[0]
    flags = {(f.code, f.cell) for f in outcome.flags}
    # The kernel found the reference (its check passed) but the grader's own check did not.
    assert ("verification_failed", "ch02_softmax_test") in flags
    for path in STASH:
        assert not Path(path).exists(), f"{path} outlived the learner's sandbox"


def test_classmates_work_is_out_of_reach(graded_attacks):
    outcome = graded_attacks[0]
    nb = nbformat.reads(outcome.notebook, as_version=4)
    cell = nb.cells[cell_index(nb, "ch02_causal_mask_test")]
    assert any(o.output_type == "error" for o in cell.outputs), "the classmate attack scored"


def test_no_submission_or_host_folder_changes(graded_attacks):
    _, before, after, watched = graded_attacks
    assert before == after
    for folder, digest in watched.items():
        assert not set(_digest(Path(folder))) - set(digest), f"{folder} gained files"
