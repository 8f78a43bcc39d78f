"""Static audit of learner notebooks: code a human grader should look at.

:func:`audit_notebook` reads every code cell with Python's :mod:`ast` (after turning IPython
syntax such as ``!ls`` or ``%time`` into plain Python) and reports a :class:`Finding` for code
that could tamper with grading or reach outside the learner's folder:

============== =================================================================================
code           what it means
============== =================================================================================
monkeypatch    assigns or deletes an attribute of an imported module (``np.allclose = ...``),
               ``setattr`` on a module, edits ``builtins`` / ``sys.modules``, redefines ``check``
grader-access  imports autograder internals (anything but ``from autograder import check``)
reference      answers with the reference solution of an exercise graded in the notebook
               (imports it by name, or uses it in the cell that defines the same name)
import-trick   ``__import__``, ``importlib``, ``runpy`` or edits of ``sys.path``
dynamic-code   ``exec``, ``eval`` or ``compile``
file-access    absolute paths, ``..``, walking up with ``.parent``, ``os.chdir``
solution-access  names the solutions, the gradebook or other learners' submissions
secret         reads ``AUTOGRADER_SECRET``
process        subprocesses, ``os.system``, ``ctypes``, ``multiprocessing``
network        ``socket``, ``urllib``, ``http``, ``requests`` and friends
shell-escape   IPython shell commands and magics that run code outside the kernel's Python
introspection  trace or profile hooks, frames, ``gc`` object walks, ``__subclasses__`` or
               ``__globals__``: ways to reach objects (the reference) without naming them
oversized      a cell too long or too deeply nested to audit (its size is given); the rest of
               the notebook is audited as usual
============== =================================================================================

Findings come from the syntax tree only: imports, names, attribute access and calls, and string
constants where they are used as paths or names (``open("../x")``,
``os.environ["AUTOGRADER_SECRET"]``). Words in comments, docstrings and prose strings never
count: "I checked my solutions against the worked examples" is not an import. A cell that does
not parse cannot run, so it cannot do harm; its tokens are still read for ``import`` statements,
which are reported with a note. Cells longer than :data:`MAX_CELL_CHARS` or nested deeper than
:data:`MAX_DEPTH` are not parsed (Python's parser recurses on such input): they are reported as
``oversized`` with their size. Findings are for a human to judge: the audit never changes a
score, and one notebook that cannot be audited never stops the audit of the others.

``python -m autograder audit`` prints the findings of collected submissions or given files.
"""

from __future__ import annotations

import ast
import importlib
import io
import re
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

import transformer_ref
from autograder.course import CHAPTERS, Course
from autograder.exercises.registry import UnknownExerciseError, get_exercise
from autograder.notebook import cell_source, exercise_cells

MONKEYPATCH = "monkeypatch"
GRADER_ACCESS = "grader-access"
REFERENCE = "reference"
IMPORT_TRICK = "import-trick"
DYNAMIC_CODE = "dynamic-code"
FILE_ACCESS = "file-access"
SOLUTION_ACCESS = "solution-access"
SECRET = "secret"
PROCESS = "process"
NETWORK = "network"
SHELL = "shell-escape"
INTROSPECTION = "introspection"
OVERSIZED = "oversized"
UNREADABLE = "unreadable"

# A learner's cell is a few hundred lines; longer or deeper input is not parsed.
MAX_CELL_CHARS = 100_000
MAX_DEPTH = 100

PROCESS_MODULES = frozenset({"subprocess", "ctypes", "cffi", "pty", "multiprocessing", "pexpect",
                             "sh", "plumbum", "_posixsubprocess", "posix", "nt"})
NETWORK_MODULES = frozenset({"socket", "urllib", "urllib2", "urllib3", "http", "requests", "httpx",
                             "aiohttp", "ftplib", "smtplib", "telnetlib", "ssl", "xmlrpc",
                             "websocket", "websockets", "paramiko", "asyncssh", "poplib",
                             "imaplib", "socketserver"})
_OS_PROCESS = re.compile(r"os\.(system|popen|exec\w*|spawn\w*|fork\w*|posix_spawn\w*|kill\w*)$")
# Calls whose string arguments are paths.
_FILE_CALLS = frozenset({
    "open", "io.open", "os.open", "pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath",
    "os.listdir", "os.scandir", "os.walk", "os.stat", "os.remove", "os.unlink", "os.rename",
    "os.replace", "os.mkdir", "os.makedirs", "os.rmdir", "os.symlink", "os.link", "os.access",
    "os.path.exists", "os.path.isfile", "os.path.isdir", "os.path.join", "os.path.abspath",
    "os.path.realpath", "glob.glob", "glob.iglob", "shutil.copy", "shutil.copy2",
    "shutil.copyfile", "shutil.copytree", "shutil.move", "shutil.rmtree", "numpy.load",
    "numpy.loadtxt", "numpy.genfromtxt", "numpy.fromfile", "numpy.save", "numpy.savez",
    "numpy.memmap", "nbformat.read", "sqlite3.connect", "zipfile.ZipFile", "tarfile.open",
})
_CHDIR_CALLS = frozenset({"os.chdir", "os.fchdir", "os.chroot"})
_WALK_UP_SOURCES = ("Path", "PurePath", "cwd", "getcwd", "home", "resolve", "absolute")
_IMPORT_CALLS = frozenset({
    "__import__", "importlib.import_module", "importlib.__import__", "importlib.reload",
    "importlib.util.spec_from_file_location", "importlib.util.module_from_spec",
    "importlib.machinery.SourceFileLoader", "imp.load_source", "imp.load_module",
    "runpy.run_path", "runpy.run_module", "zipimport.zipimporter",
})
_DYNAMIC_CALLS = frozenset({"exec", "eval", "compile", "builtins.exec", "builtins.eval",
                            "builtins.compile"})
_INTROSPECTION_CALLS = frozenset({
    "sys.settrace", "sys.setprofile", "sys.gettrace", "sys.getprofile", "sys._getframe",
    "threading.settrace", "threading.setprofile", "inspect.currentframe", "inspect.stack",
    "inspect.getmembers", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
})
_INTROSPECTION_ATTRIBUTES = frozenset({"__subclasses__", "__globals__", "f_globals", "f_back",
                                       "f_locals", "tb_frame", "gi_frame"})
_SYS_PATH = frozenset({"sys.path", "sys.meta_path", "sys.path_hooks", "sys.modules"})
# Subscript stores into these (``sys.modules["numpy"] = ...``) change what every import sees.
_GLOBAL_STATE = ("sys.modules", "builtins", "os.environ", "autograder", "numpy",
                 "transformer_ref", "nbgrader")
# Names the graded test cells rely on; learner code has no reason to rebind them.
_GRADER_NAMES = frozenset({"check", "grade_function", "get_exercise"})
# Path parts that name the solutions, the gradebook or other learners' work.
_COURSE_FOLDERS = frozenset({"solution", "solutions", "source_with_tests", "autograded",
                             "submitted"})
_COURSE_FILES = re.compile(r"gradebook.*|.*\.db|nbgrader_config(\.py)?", re.IGNORECASE)
# A string that is one environment variable's name, as os.environ and os.getenv take it.
_SECRET_NAME = "AUTOGRADER_SECRET"
# Line magics that only time, configure or display: their argument (if any) is Python code
# (time/timeit) or harmless.
_CODE_MAGICS = frozenset({"time", "timeit", "prun", "capture"})
_HARMLESS_MAGICS = frozenset({"matplotlib", "config", "precision", "who", "whos", "who_ls",
                              "pinfo", "pinfo2", "psearch", "pdoc", "pdef", "psource", "pprint",
                              "autoreload", "xmode", "colors", "page", "history", "lsmagic",
                              "magic", "quickref", "doctest_mode", "reset", "reset_selective",
                              "html", "markdown", "latex", "svg", "javascript", "js",
                              "load_ext", "reload_ext", "unload_ext", "debug", "pdb", "tb"})


@dataclass(frozen=True)
class Finding:
    """One suspicious spot in a notebook.

    Attributes:
        cell: index of the cell in ``nb.cells`` (0-based).
        line: line inside the cell (1-based).
        code: the category, one of the constants of this module (e.g. ``"monkeypatch"``).
        reason: a sentence for the human reader.
    """

    cell: int
    line: int
    code: str
    reason: str

    def __str__(self) -> str:
        return f"cell {self.cell}, line {self.line}: [{self.code}] {self.reason}"


# ----------------------------------------------------------------------------- helpers


def dotted_name(node: ast.AST) -> str | None:
    """``"np.testing.assert_allclose"`` for a chain of attributes on a name, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _root(node: ast.AST) -> ast.AST:
    """The innermost value of a chain of attributes and subscripts."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node


def _strings(node: ast.AST) -> Iterator[ast.Constant]:
    """Every string constant inside ``node`` (f-string parts included)."""
    for child in ast.walk(node):
        if isinstance(child, ast.Constant) and isinstance(child.value, str):
            yield child


def _is_outside_path(text: str) -> bool:
    """True for absolute, home-relative or parent-relative paths."""
    text = text.strip()
    return (text.startswith(("/", "~", "\\")) or re.match(r"^[A-Za-z]:[/\\]", text) is not None
            or ".." in _path_parts(text))


def _path_parts(text: str) -> list[str]:
    return re.split(r"[/\\]", text.strip())


def _looks_like_path(text: str) -> bool:
    """A string written as a path (``"solutions/x.ipynb"``, ``"../x"``), not as prose: one
    word with a separator. Other strings count as paths only where a call takes a path."""
    return bool(text) and len(text) < 300 and not any(c.isspace() for c in text) and (
        "/" in text or "\\" in text)


def _course_part(text: str) -> str | None:
    """The part of a path that names the solutions, the gradebook or submissions, or None."""
    return next((part for part in _path_parts(text)
                 if part.lower() in _COURSE_FOLDERS or _COURSE_FILES.fullmatch(part)), None)


# Modules that gather the reference's parts under one name: the package and its gatherers.
REFERENCE_GATHERINGS = (transformer_ref.__name__,
                        *(module.__name__ for module in transformer_ref.GATHERING_MODULES))


def _exercise_references(exercise_ids: Iterable[str]) -> set[str]:
    """``"module.attribute"`` of the reference implementations of the exercises, under every
    name the course exports them (the defining module and the modules that gather them)."""
    names: set[str] = set()
    for exercise_id in exercise_ids:
        try:
            exercise = get_exercise(exercise_id)
        except UnknownExerciseError:
            continue
        names.add(exercise.reference.replace(":", "."))
        reference = exercise.load_reference()
        for module in REFERENCE_GATHERINGS:
            if getattr(importlib.import_module(module), exercise.defines, None) is reference:
                names.add(f"{module}.{exercise.defines}")
    return names


def _defined_names(tree: ast.AST) -> set[str]:
    """Functions, classes and names a cell defines or assigns at its top level."""
    names: set[str] = set()
    for node in getattr(tree, "body", []):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for target in targets for t in ast.walk(target)
                      if isinstance(t, ast.Name)}
    return names


# ----------------------------------------------------------------------------- the visitor


class _Auditor(ast.NodeVisitor):
    """Walks one cell; collects ``(line, code, reason)`` in ``self.found``."""

    def __init__(self, *, defined: set[str], reference_names: set[str],
                 imports: dict[str, str], line_offset: int = 0):
        # Names the cell defines or binds at its top level (the answers it gives).
        self.defined = defined
        self.reference_names = reference_names
        # Names bound by imports anywhere in the notebook: alias -> full dotted module path.
        self.imports = imports
        self.line_offset = line_offset
        self.found: list[tuple[int, str, str]] = []

    def add(self, node: ast.AST, code: str, reason: str) -> None:
        self.found.append((getattr(node, "lineno", 1) + self.line_offset, code, reason))

    def resolve(self, node: ast.AST) -> str | None:
        """The full dotted name of ``node``, with import aliases replaced by their modules."""
        name = dotted_name(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        if head in self.imports:
            head = self.imports[head]
        return f"{head}.{rest}" if rest else head

    def _imported_root(self, node: ast.AST) -> str | None:
        root = _root(node)
        if isinstance(root, ast.Name) and (root.id in self.imports or
                                           root.id in ("__builtins__", "builtins")):
            return self.imports.get(root.id, "builtins")
        return None

    # ---- imports

    def _check_module(self, node: ast.AST, module: str, names: list[str]) -> None:
        top = module.split(".")[0]
        if top in PROCESS_MODULES or (top == "os" and any(_OS_PROCESS.match(f"os.{n}")
                                                          for n in names)):
            self.add(node, PROCESS, f"imports {module}, which can run other programs")
        if top in NETWORK_MODULES:
            self.add(node, NETWORK, f"imports {module}, which can open network connections")
        if top in ("importlib", "imp", "runpy", "zipimport"):
            self.add(node, IMPORT_TRICK, f"imports {module}, which can load code by name or path")
        if top == "builtins":
            self.add(node, MONKEYPATCH, "imports builtins, whose functions every cell shares")
        if top == "autograder" and not (module == "autograder" and names == ["check"]):
            what = f"{module}.{'/'.join(names)}" if names else module
            self.add(node, GRADER_ACCESS, f"imports {what}; learner code only needs "
                                          "`from autograder import check` (in the test cells)")
        if top == "transformer_ref":
            self._check_reference(node, module, names)

    def _check_reference(self, node: ast.AST, module: str, names: list[str]) -> None:
        # Setup cells may import reference modules and earlier building blocks; importing
        # the reference of an exercise graded here, by name, is answering with it.
        graded = [f"{module}.{n}" for n in names if f"{module}.{n}" in self.reference_names]
        if graded:
            self.add(node, REFERENCE, f"imports {', '.join(graded)}, the reference solution "
                                      "of an exercise graded in this notebook")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(node, alias.name, [])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.add(node, IMPORT_TRICK, "relative import: notebooks are not packages")
        module = node.module or ""
        self._check_module(node, module, [a.name for a in node.names])

    # ---- assignments

    def _check_target(self, target: ast.AST, verb: str) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._check_target(element, verb)
            return
        if isinstance(target, ast.Starred):
            self._check_target(target.value, verb)
            return
        if isinstance(target, ast.Name):
            if target.id in _GRADER_NAMES:
                self.add(target, MONKEYPATCH, f"{verb} `{target.id}`, the name the graded test "
                                              "cells use")
            elif target.id == "__builtins__":
                self.add(target, MONKEYPATCH, f"{verb} __builtins__")
            return
        module = self._imported_root(target)
        name = self.resolve(target) or dotted_name(_root(target)) or "an object"
        if module is None:
            return
        if isinstance(target, ast.Attribute) and name in _SYS_PATH:
            self.add(target, IMPORT_TRICK if name != "sys.modules" else MONKEYPATCH,
                     f"{verb} {name}, which decides what later imports load")
        elif isinstance(target, ast.Attribute):
            self.add(target, MONKEYPATCH, f"{verb} {name}, an attribute of the imported module "
                                          f"{module}; this changes it for every later cell, the "
                                          "checks included")
        elif isinstance(target, ast.Subscript):
            container = self.resolve(target.value) or module
            if container in ("sys.path", "sys.meta_path"):
                self.add(target, IMPORT_TRICK, f"{verb} an entry of {container}")
            elif container.startswith(_GLOBAL_STATE) or container.endswith("__dict__"):
                self.add(target, MONKEYPATCH, f"{verb} an entry of {container}, which other "
                                              "modules read")

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_target(target, "assigns")
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target, "changes")
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target, "assigns")
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._check_target(target, "deletes")
        self.generic_visit(node)

    def _visit_definition(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
                          ) -> None:
        if node.name in _GRADER_NAMES:
            self.add(node, MONKEYPATCH, f"defines `{node.name}`, the name the graded test cells "
                                        "use")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._visit_definition(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._visit_definition(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._visit_definition(node)

    # ---- calls and names

    def visit_Call(self, node: ast.Call) -> None:
        name = self.resolve(node.func) or _ipython_method(node.func) or ""
        last = name.rsplit(".", 1)[-1]
        if name in ("setattr", "delattr", "builtins.setattr", "builtins.delattr") and node.args:
            module = self._imported_root(node.args[0])
            if module is not None:
                self.add(node, MONKEYPATCH, f"{last} on the imported module {module}")
        elif _OS_PROCESS.match(name):
            self.add(node, PROCESS, f"calls {name}, which runs another program")
        elif name in _IMPORT_CALLS:
            self.add(node, IMPORT_TRICK, f"calls {name}, which loads code by name or path")
        elif name in _INTROSPECTION_CALLS:
            self.add(node, INTROSPECTION, f"calls {name}, which reaches objects and frames "
                                          "that the notebook did not define")
        elif name in _DYNAMIC_CALLS:
            self.add(node, DYNAMIC_CODE, f"calls {last}, which runs code built from a string")
        elif name in _CHDIR_CALLS or name == "pathlib.Path.chdir":
            self.add(node, FILE_ACCESS, f"calls {name}: the notebook must stay in its folder")
        elif (name in _FILE_CALLS or last in ("Path", "PurePath")) and self._outside_arg(node):
            self.add(node, FILE_ACCESS, f"{name or last}() with a path outside the notebook's "
                                        f"folder ({self._outside_arg(node)!r})")
        elif name in _FILE_CALLS or last in ("Path", "PurePath"):
            self._check_path_arguments(node, name or last)
        elif name in ("os.getenv", "os.environ.get", "os.environ.pop", "os.putenv"):
            pass  # reported through the string constant when it names the secret
        elif name.endswith("get_ipython.system") or name.endswith("get_ipython.getoutput"):
            self.add(node, SHELL, "runs a shell command (`!` line)")
        elif name.endswith(("run_line_magic", "run_cell_magic")):
            self._visit_magic(node, cell_magic=name.endswith("run_cell_magic"))
            return
        self.generic_visit(node)

    def _check_path_arguments(self, node: ast.Call, called: str) -> None:
        # A single word is a path here (``open("gradebook.db")``), which it is not in prose.
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            for constant in _strings(arg):
                part = _course_part(constant.value)
                if part and not _looks_like_path(constant.value):
                    self.add(node, SOLUTION_ACCESS, f"{called}() opens {constant.value!r}: the "
                                                    "solutions, the gradebook and other "
                                                    "submissions are off limits")

    def _outside_arg(self, node: ast.Call) -> str | None:
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            for constant in _strings(arg):
                if _is_outside_path(constant.value):
                    return constant.value
        return None

    def _visit_magic(self, node: ast.Call, *, cell_magic: bool) -> None:
        args = [a.value if isinstance(a, ast.Constant) else None for a in node.args]
        magic = args[0] if args and isinstance(args[0], str) else "?"
        body = args[-1] if len(args) >= 2 and isinstance(args[-1], str) else ""
        if magic in _CODE_MAGICS:
            # The body is Python: audit it on the lines where it sits in the cell.
            offset = node.lineno - 1 + (1 if cell_magic else 0)
            self.found += _audit_python(body, self, offset)
        elif magic in ("cd", "bookmark", "pushd", "popd"):
            self.add(node, FILE_ACCESS, f"%{magic} changes the working directory")
        elif magic in ("writefile", "load", "run", "save", "notebook", "store", "env", "set_env"):
            self.add(node, FILE_ACCESS, f"%{magic} reads or writes files or the environment "
                                        f"({body.strip()[:60]!r})")
        elif magic not in _HARMLESS_MAGICS:
            self.add(node, SHELL, f"%{'%' if cell_magic else ''}{magic} runs code outside the "
                                  "kernel's Python")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = self.resolve(node)
        if name in self.reference_names and name.rsplit(".", 1)[-1] in self.defined:
            self.add(node, REFERENCE, f"uses {name}, the reference solution, in the cell that "
                                      f"defines {name.rsplit('.', 1)[-1]}")
        if name in _SYS_PATH and isinstance(node.ctx, ast.Load):
            self._check_sys_path_use(node, name)
        if node.attr in _INTROSPECTION_ATTRIBUTES:
            self.add(node, INTROSPECTION, f"uses .{node.attr}, which reaches objects the "
                                          "notebook did not define")
        if node.attr in ("parent", "parents") and self._from_path(node.value):
            self.add(node, FILE_ACCESS, "walks up from the notebook's folder with "
                                        f".{node.attr}")
        if (node.attr in ("load_reference", "reference") and isinstance(node.ctx, ast.Load)
                and ("autograder" in self.imports.values()
                     or self._mentions_autograder(node.value))):
            self.add(node, GRADER_ACCESS, f"reads .{node.attr} of a graded exercise")
        self.generic_visit(node)

    def _mentions_autograder(self, node: ast.AST) -> bool:
        return any(self.imports.get(n.id, "").startswith("autograder")
                   for n in ast.walk(node) if isinstance(n, ast.Name))

    def _check_sys_path_use(self, node: ast.Attribute, name: str) -> None:
        # Only reported when something is done with it (a method call or a store).
        parent = getattr(node, "_audit_parent", None)
        if isinstance(parent, ast.Attribute):
            self.add(node, IMPORT_TRICK if name != "sys.modules" else MONKEYPATCH,
                     f"uses {name}.{parent.attr}, which changes what later imports load")
        elif isinstance(parent, ast.Subscript) and name == "sys.modules":
            self.add(node, MONKEYPATCH, "reads sys.modules to reach a loaded module")

    def _from_path(self, node: ast.AST) -> bool:
        for child in ast.walk(node):
            if isinstance(child, ast.Call):
                called = dotted_name(child.func) or ""
                if called.rsplit(".", 1)[-1] in _WALK_UP_SOURCES:
                    return True
            if isinstance(child, ast.Name) and child.id == "__file__":
                return True
        return False

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "__builtins__" and isinstance(node.ctx, ast.Load):
            parent = getattr(node, "_audit_parent", None)
            if isinstance(parent, (ast.Attribute, ast.Subscript)):
                self.add(node, MONKEYPATCH, "reaches into __builtins__")

    def visit_BinOp(self, node: ast.BinOp) -> None:
        # ``folder / "solutions"``: a string divided into a path is a path part.
        if isinstance(node.op, ast.Div):
            for side in (node.left, node.right):
                if (isinstance(side, ast.Constant) and isinstance(side.value, str)
                        and _course_part(side.value) and not _looks_like_path(side.value)):
                    self.add(side, SOLUTION_ACCESS, f"joins {side.value!r} into a path: the "
                                                    "solutions, the gradebook and other "
                                                    "submissions are off limits")
        self.generic_visit(node)

    def visit_Expr(self, node: ast.Expr) -> None:
        # A string on its own is a docstring or a comment in disguise: prose, never a path.
        if not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, str):
            return
        text = node.value
        if text.strip() == _SECRET_NAME:
            self.add(node, SECRET, f"names {_SECRET_NAME}, the key of the hidden checks")
        if not _looks_like_path(text):
            return
        part = _course_part(text)
        if part:
            self.add(node, SOLUTION_ACCESS, f"names {part!r} in the path {text[:80]!r}: the "
                                            "solutions, the gradebook and other submissions "
                                            "are off limits")
        if ".." in _path_parts(text):
            self.add(node, FILE_ACCESS, f"path {text[:80]!r} leaves the notebook's folder")


def _ipython_method(func: ast.AST) -> str | None:
    """``"get_ipython.system"`` for ``get_ipython().system``, the form IPython syntax takes."""
    if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call)
            and dotted_name(func.value.func) == "get_ipython"):
        return f"get_ipython.{func.attr}"
    return None


def _link_parents(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            child._audit_parent = node  # type: ignore[attr-defined]


def _audit_python(code: str, like: _Auditor, offset: int) -> list[tuple[int, str, str]]:
    """Audit ``code`` with the settings of ``like``; lines shifted by ``offset``."""
    tree, oversized = parse_cell(code)
    if oversized:
        return [(offset + 1, OVERSIZED, oversized)]
    if tree is None:
        return _audit_tokens(code, like, offset)
    _link_parents(tree)
    auditor = _Auditor(defined=like.defined | _defined_names(tree),
                       reference_names=like.reference_names, imports=like.imports,
                       line_offset=offset)
    auditor.visit(tree)
    return auditor.found


def _ipython_to_python(code: str) -> str:
    """Turn IPython syntax (``!cmd``, ``%magic``, ``x?``) into plain Python calls.

    Line magics and shell escapes keep their line; a cell magic becomes one call on line 1.
    """
    # IPython is heavy: loaded only for a cell that does not parse as Python.
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(code)


def _audit_tokens(code: str, like: _Auditor, offset: int) -> list[tuple[int, str, str]]:
    """The import statements of a cell that does not parse, read from its tokens (so that
    comments and strings never count), audited as imports."""
    auditor = _Auditor(defined=set(), reference_names=like.reference_names,
                       imports=like.imports, line_offset=offset)
    for line, module, names in _token_imports(code):
        auditor._check_module(ast.Pass(lineno=line), module, names)
    return [(line, code_, f"{reason} (the cell does not parse; found in its import "
                          "statements)") for line, code_, reason in auditor.found]


def _token_imports(code: str) -> list[tuple[int, str, list[str]]]:
    """``(line, module, imported names)`` of each ``import`` / ``from ... import`` statement
    spelt by the tokens of ``code``, which need not parse."""
    words: list[tokenize.TokenInfo] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type in (tokenize.NAME, tokenize.OP, tokenize.NEWLINE):
                words.append(token)
    except (tokenize.TokenError, SyntaxError):
        pass  # keep the tokens read before the error
    found: list[tuple[int, str, list[str]]] = []
    i = 0

    def dotted(j: int) -> tuple[str, int]:
        parts = []
        while j < len(words) and (words[j].type == tokenize.NAME or words[j].string == "."):
            parts.append(words[j].string)
            j += 1
        return "".join(parts), j

    while i < len(words):
        token = words[i]
        if token.string == "from":
            module, i = dotted(i + 1)
            if i < len(words) and words[i].string == "import" and module:
                names, i = _imported_names(words, i + 1)
                found.append((token.start[0], module, names))
        elif token.string == "import":
            i += 1
            while i < len(words):
                module, i = dotted(i)
                if module:
                    found.append((token.start[0], module, []))
                if i < len(words) and words[i].string == "as":
                    i += 2
                if i < len(words) and words[i].string == ",":
                    i += 1
                    continue
                break
        else:
            i += 1
    return found


def _imported_names(words: list[tokenize.TokenInfo], i: int) -> tuple[list[str], int]:
    """The names after ``from x import``, and the index after them."""
    names = []
    while i < len(words) and words[i].type != tokenize.NEWLINE:
        if words[i].string == "as":
            i += 2
            continue
        if words[i].type == tokenize.NAME:
            names.append(words[i].string)
        i += 1
    return names, i


def _imports_of(trees: Iterable[ast.AST]) -> dict[str, str]:
    names: dict[str, str] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        names[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        names[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _depth(tree: ast.AST) -> int:
    """How deeply the nodes of ``tree`` nest (counted without recursion)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack += [(child, depth + 1) for child in ast.iter_child_nodes(node)]
    return deepest


def parse_cell(code: str) -> tuple[ast.AST | None, str | None]:
    """``(tree, None)`` for a cell that parses (IPython syntax translated first when needed),
    ``(None, None)`` for one that does not, and ``(None, reason)`` for one too large or too
    deeply nested to audit."""
    if len(code) > MAX_CELL_CHARS:
        return None, (f"the cell is {len(code):,} characters long, more than the "
                      f"{MAX_CELL_CHARS:,} the audit reads; not audited, for a human to look at")
    tree = None
    for ipython in (False, True):
        try:
            tree = ast.parse(_ipython_to_python(code) if ipython else code)
            break
        except (SyntaxError, ValueError, TypeError):  # ValueError: null bytes, lone surrogates
            continue
        except (RecursionError, MemoryError):
            return None, ("the cell nests too deeply for Python's parser (for example a "
                          "very long chain of operators); not audited, for a human to look at")
    if tree is not None and (depth := _depth(tree)) > MAX_DEPTH:
        return None, (f"the cell's code nests {depth:,} levels deep, more than the {MAX_DEPTH} "
                      "the audit walks (for example a very long chain of operators); not "
                      "audited, for a human to look at")
    return tree, None


# ----------------------------------------------------------------------------- public API


def audit_notebook(nb: Any, *, release: Any = None) -> list[Finding]:
    """Statically audit the code cells of a learner notebook.

    Args:
        nb: the notebook (an ``nbformat.NotebookNode`` or the equivalent plain dict).
        release: the released notebook of the chapter, optional. Cells whose source equals a
            released cell are the course's own code and are skipped; the chapter's exercises are
            taken from it when the learner deleted the test cells.

    Returns:
        The findings, ordered by cell and line; empty when nothing looks suspicious.

    Raises:
        TypeError: ``nb`` is not a notebook (no ``cells`` list).
    """
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise TypeError(f"audit_notebook expects a notebook (nbformat.read(...)), got "
                        f"{type(nb).__name__}; read the file with nbformat first")
    course_sources = set()
    if release is not None:
        course_sources = {cell_source(c).strip() for c in release.get("cells", [])
                          if c.get("cell_type") == "code"}
    exercise_ids = [e for _, e in exercise_cells(nb) + (exercise_cells(release) if release
                                                         else [])]
    names = _exercise_references(exercise_ids)
    code_cells = [(i, c) for i, c in enumerate(nb["cells"]) if c.get("cell_type") == "code"]
    trees = [t for _, c in code_cells if (t := parse_cell(cell_source(c))[0]) is not None]
    imports = _imports_of(trees)

    findings: dict[tuple[int, int, str], Finding] = {}
    for index, cell in code_cells:
        source = cell_source(cell)
        if not source.strip() or source.strip() in course_sources:
            continue
        auditor = _Auditor(defined=set(), reference_names=names, imports=imports)
        for line, code, reason in _audit_python(source, auditor, 0):
            # One finding per category and line: the first reason found is the most direct.
            findings.setdefault((index, line, code), Finding(index, line, code, reason))
    return [findings[key] for key in sorted(findings)]


def audit_file(path: str | Path, *, release: Any = None) -> list[Finding]:
    """:func:`audit_notebook` of the notebook file at ``path``.

    A file that is not a readable notebook gives one finding with code ``"unreadable"``.
    """
    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception as exc:  # any parse failure of a learner's file is a finding, not a crash
        return [Finding(-1, 0, UNREADABLE, f"not a readable notebook: {type(exc).__name__}: "
                                           f"{str(exc)[:200]}")]
    if not isinstance(nb.get("cells"), list):
        return [Finding(-1, 0, UNREADABLE, "not a readable notebook: it has no list of cells")]
    try:
        return audit_notebook(nb, release=release)
    except Exception as exc:  # a notebook the audit cannot read is reported, never fatal
        return [Finding(-1, 0, UNREADABLE, f"the audit could not read this notebook "
                                           f"({type(exc).__name__}: {str(exc)[:200]}); look at "
                                           "it by hand")]


# ----------------------------------------------------------------------------- collected work


def read_release(course: Course, chapter: str | None) -> Any:
    """The release notebook of ``chapter`` in ``course``; None when there is none to read."""
    if chapter is None:
        return None
    path = course.release_notebook(chapter)
    try:
        return nbformat.read(str(path), as_version=4) if path.is_file() else None
    except Exception:
        return None


def chapter_of(path: Path) -> str | None:
    """The chapter a notebook file belongs to, by its name or its folder's; or None."""
    for name in (path.stem, path.parent.name):
        if name in CHAPTERS:
            return name
    return None


def submitted_notebooks(course: Course, chapters: Iterable[str], student: str | None,
                        ) -> list[tuple[str, str, Path]]:
    """``(student, chapter, path)`` of every collected notebook of ``chapters`` (of
    ``student`` alone, when given), by student, chapter and path."""
    return sorted((name, chapter, notebook) for chapter in set(chapters)
                  for name in course.students("submitted", chapter) if student in (None, name)
                  for notebook in course.step_dir("submitted", name, chapter).glob("*.ipynb"))


def audit_submissions(
    course: Course, chapters: Iterable[str], student: str | None = None,
) -> list[tuple[str, str, Finding]]:
    """``(student, chapter, finding)`` for every collected submission of ``chapters``."""
    rows = []
    releases: dict[str, Any] = {}
    for learner, chapter, path in submitted_notebooks(course, chapters, student):
        if chapter not in releases:
            releases[chapter] = read_release(course, chapter)
        rows += [(learner, chapter, f) for f in audit_file(path, release=releases[chapter])]
    return rows


def format_rows(rows: list[tuple[str, str, Finding]]) -> list[str]:
    """Aligned lines ``student  chapter  cell  line  code  reason``."""
    header = ("student", "chapter", "cell", "line", "code", "reason")
    table = [header] + [(s, c, str(f.cell), str(f.line), f.code, f.reason) for s, c, f in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header) - 1)]
    return ["  ".join([*(v.ljust(w) for v, w in zip(row, widths, strict=False)), row[-1]])
            for row in table]
