"""What a piece of the course reaches: the one selection of course modules that the grader's
allow-lists and the learner's view of a class share.

* The verifier (:mod:`autograder.grade.verify`) gives a learner process the modules an
  exercise allows and everything they import (:func:`closure`), and proves that none of them is
  the module of a reference graded there (:func:`reference_module`).
* The learner's view (:mod:`autograder.steps.view`) holds the modules the released
  chapters' notebooks use (:func:`notebook_modules`) and everything they import, minus the
  references of chapters that are still open.

Modules are found by reading their syntax trees (imports anywhere in a module, also inside
functions, but not under ``TYPE_CHECKING``). The modules that gather names from others
(``transformer_ref.modules``, ``transformer_ref.np_attention``, ...) load them lazily, so that
importing one name does not import the rest: a notebook's ``from transformer_ref.modules
import Decoder`` reaches the module that defines ``Decoder``, not every model module.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import types
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nbformat import NotebookNode

    from autograder.exercises.registry import Exercise

# The course's own packages (``solutions`` is what a learner's code may try to import).
COURSE_PACKAGES = ("transformer_ref", "autograder", "solutions")


def module_file(module: str) -> Path:
    """The source file of a course module.

    Raises:
        ValueError: no such module.
    """
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ValueError(f"the course module {module!r} cannot be found")
    return Path(spec.origin)


def is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def imported_course_modules(module: str, at_import: bool = False) -> set[str]:
    """The course modules that ``module`` imports at run time (not under TYPE_CHECKING); with
    ``at_import``, only those it imports when it is loaded (not inside its functions)."""
    tree = ast.parse(module_file(module).read_text(encoding="utf-8"))
    found: set[str] = set()

    def visit(nodes: Iterable[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if at_import and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)
                if node.module.split(".")[0] in COURSE_PACKAGES:
                    # A gathering module lends its names: the one that defines each is needed.
                    found.update(_defining(node.module, a.name) for a in node.names)
            for child in ("body", "orelse", "finalbody", "handlers"):
                visit(getattr(node, child, []) or [])

    visit(tree.body)
    return {m for m in found if m.split(".")[0] in COURSE_PACKAGES and is_module(m)}


def closure(modules: Iterable[str], at_import: bool = False) -> set[str]:
    """``modules`` and every course module they import, directly or not (packages' own
    ``__init__`` modules aside); with ``at_import``, only what loading them imports."""
    todo, seen = list(modules), set()
    while todo:
        module = todo.pop()
        if module in seen or module.split(".")[0] not in COURSE_PACKAGES:
            continue
        seen.add(module)
        todo += sorted(imported_course_modules(module, at_import) - seen)
    return {m for m in seen if m.count(".") >= 1}


def reference_module(exercise: Exercise) -> str:
    """The module that holds ``exercise``'s reference (``"transformer_ref.numpy.heads"``)."""
    return exercise.reference.partition(":")[0]


def answer_modules(exercise: Exercise) -> tuple[str, ...]:
    """Every course module that computes ``exercise``'s answer: its reference's, then the
    others the registry names (``Exercise.answered_by``)."""
    return (reference_module(exercise), *exercise.answered_by)


def defining_module(module: str, attribute: str) -> str:
    """The module that defines ``module.attribute``: for a function or class, the module that
    wrote it (a gathering module only lends it); for a module, that module; for a constant,
    ``module`` itself."""
    try:
        value = getattr(importlib.import_module(module), attribute)
    except AttributeError:  # a submodule not imported yet: from transformer_ref.data import vocab
        value = importlib.import_module(f"{module}.{attribute}")
    if isinstance(value, types.ModuleType):
        return value.__name__
    if isinstance(value, (type, types.FunctionType)) and is_module(value.__module__):
        return value.__module__
    return module


def _defining(module: str, attribute: str) -> str:
    try:
        return defining_module(module, attribute)
    except (ImportError, AttributeError):  # not importable here: the closure leaves it out
        return module


def setup_import_nodes(nb: NotebookNode) -> list[ast.Import | ast.ImportFrom]:
    """The absolute imports of a notebook's ordinary code cells (not nbgrader's), without
    IPython magics and shell escapes."""
    from autograder.notebook import nbgrader_metadata

    nodes = []
    for cell in nb.cells:
        if cell.cell_type != "code" or nbgrader_metadata(cell):
            continue
        tree = _parse(cell.source)
        nodes += [n for n in (tree.body if tree else [])
                  if isinstance(n, (ast.Import, ast.ImportFrom))
                  and (isinstance(n, ast.Import) or n.level == 0)]
    return nodes


def _parse(source: str) -> ast.Module | None:
    code = "\n".join(line for line in source.splitlines()
                     if not line.lstrip().startswith(("%", "!")))
    try:
        return ast.parse(code)
    except SyntaxError:
        return None


def notebook_modules(nb: NotebookNode) -> set[str]:
    """The course modules a notebook's own cells use: each module its setup imports from, the
    module that defines each name it imports, and, for a module imported under a name
    (``import transformer_ref.modules as ref``), the module of each ``ref.NAME`` its cells
    read."""
    found: set[str] = set()
    aliases: dict[str, str] = {}
    for node in setup_import_nodes(nb):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in COURSE_PACKAGES:
                    found.add(alias.name)
                    aliases[alias.asname or alias.name] = alias.name
            continue
        module = node.module or ""
        if module.split(".")[0] not in COURSE_PACKAGES:
            continue
        found.add(module)
        for alias in node.names:
            defining = defining_module(module, alias.name)
            found.add(defining)
            if defining != module and is_module(f"{module}.{alias.name}"):
                aliases[alias.asname or alias.name] = defining
    return found | _attribute_modules(nb, aliases)


def _attribute_modules(nb: NotebookNode, aliases: dict[str, str]) -> set[str]:
    """The defining modules of every ``alias.NAME`` that the notebook's code cells read."""
    found = set()
    for cell in nb.cells:
        tree = _parse(cell.source) if cell.cell_type == "code" else None
        for node in ast.walk(tree) if tree else ():
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases):
                module = aliases[node.value.id]
                if hasattr(importlib.import_module(module), node.attr):
                    found.add(defining_module(module, node.attr))
    return found
