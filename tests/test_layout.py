"""The layout of the course's packages: no import cycles, no private name lent across modules.

Every ``import`` of ``autograder`` and ``transformer_ref`` is read from the syntax tree, those
inside functions included, so that a cycle cannot hide behind an import made late. Imports
under ``if TYPE_CHECKING:`` are left out: they name types for annotations and never run.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("autograder", "transformer_ref")


@dataclass(frozen=True)
class Imported:
    """One name one module takes from another: ``module`` (the module that holds ``name``, or
    the module imported itself when ``name`` is None) and the line of the import."""

    module: str
    name: str | None
    line: int


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of :data:`PACKAGES`."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """The ids of the nodes under an ``if TYPE_CHECKING:``."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(inner) for child in node.body for inner in ast.walk(child)}
    return skipped


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = base[:len(base) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports(module: str, path: Path) -> list[Imported]:
    """What ``module`` imports of :data:`PACKAGES`, at any depth of its code."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _type_checking_nodes(tree)
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [Imported(a.name, None, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, path, node)
            found += [Imported(source, a.name, node.lineno) for a in node.names]
    return [i for i in found if i.module.split(".")[0] in PACKAGES]


def _home(imported: Imported, known: dict[str, Path]) -> str:
    """The module an import depends on: a submodule when the name is one, else the nearest
    module that holds the name."""
    if imported.name is not None and f"{imported.module}.{imported.name}" in known:
        return f"{imported.module}.{imported.name}"
    module = imported.module
    while module not in known and "." in module:
        module = module.rsplit(".", 1)[0]
    return module


def graph() -> dict[str, set[str]]:
    """Module -> the modules of :data:`PACKAGES` it imports."""
    known = modules()
    return {module: {_home(i, known) for i in imports(module, path)} - {module}
            for module, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, children = work[-1]
            child = next((c for c in children if c in edges), None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = stack[stack.index(node):]
                    del stack[stack.index(node):]
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                work.append((child, iter(sorted(edges[child]))))
            elif child in stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_import_cycles():
    assert cycles(graph()) == []


def test_cycles_are_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_private_name_imported_across_modules():
    known = modules()
    lent = [f"{module}:{i.line} imports {i.name} from {i.module}"
            for module, path in known.items() for i in imports(module, path)
            if i.name is not None and i.name.startswith("_") and _home(i, known) != module]
    assert lent == []


# The grading side's subsystems: each public function that works on a course takes it first.
GRADING_SIDE = ("autograder.steps", "autograder.collect", "autograder.grade", "autograder.copies",
                "autograder.nbgrader_hooks")
# The steps of a course, each of which must take the course (nothing falls back to this
# repository's own course when it is given none).
STEPS = {
    "autograder.steps.release": ("chapters_in", "generate", "release", "ensure_recorded",
                                 "register_assignments"),
    "autograder.steps.exchange": ("release_to_exchange", "release_feedback"),
    "autograder.steps.feedback": ("generate_feedback",),
    "autograder.steps.report": ("export_csv",),
    "autograder.collect.sources": ("collect",),
    "autograder.grade.learner": ("grade_learner",),
    "autograder.grade.store": ("store_outcome",),
    "autograder.grade.run": ("autograde",),
    "autograder.copies.detect": ("check_chapter", "after_grading", "course_sources"),
    "autograder.steps.view": ("chapter_states", "plan_view", "release_problems", "view_folder",
                              "refresh_view", "check_class_release", "chapters_to_close"),
    "autograder.deadlines": ("close_chapter", "extend", "set_late_policy", "late_policy",
                             "due_dates", "extensions", "deadline", "sealed_for", "lateness"),
    "autograder.flags": ("write_flags", "read_flags"),
    "autograder.grade.gradebook": ("open_gradebook", "ensure_chapter", "register_students",
                                   "forget_ungraded", "save_grades", "read_scores"),
}


def _first_parameters(path: Path) -> dict[str, tuple[str, bool]]:
    """Public top-level function -> (the annotation of its first parameter, whether any
    parameter is annotated ``Course``)."""
    found = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            params = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            annotations = [ast.unparse(p.annotation) if p.annotation else "" for p in params]
            found[node.name] = (annotations[0] if annotations else "", "Course" in annotations)
    return found


def test_every_step_takes_the_course_first():
    known = modules()
    late = [f"{module}.{name}" for module, path in known.items() if module.startswith(GRADING_SIDE)
            for name, (first, takes) in _first_parameters(path).items()
            if takes and first != "Course"]
    missing = [f"{module}.{name}" for module, names in STEPS.items() for name in names
               if _first_parameters(known[module]).get(name, ("", False))[0] != "Course"]
    assert (late, missing) == ([], [])


def _defaults_to_root(path: Path) -> list[str]:
    """Functions of ``path`` with a parameter whose default is ``ROOT``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef):
            defaults = [*node.args.defaults, *node.args.kw_defaults]
            if any(isinstance(d, ast.Name) and d.id == "ROOT" for d in defaults if d):
                found.append(node.name)
    return found


def test_no_function_falls_back_to_this_repositorys_course():
    """A missing course must fail loudly, not act on the repository's own course folder: only
    the command line's options default to this repository, once."""
    known = modules()
    quiet = [f"{module}.{name}" for module, path in known.items()
             if module.startswith((*GRADING_SIDE, "autograder.course", "autograder.flags",
                                   "autograder.deadlines"))
             for name in _defaults_to_root(path)]
    assert quiet == []
