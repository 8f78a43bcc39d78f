"""How a learner disguises code they copy, for copy detection's calibration and tests.

Each form takes the source of a definition (or a cell) and returns what a copier would paste:
:func:`reformatted` drops docstrings and comments and lays the code out anew, :func:`renamed`
also gives every local name and argument but ``self`` a new name, and :func:`padded` pastes
that after a helper of the copier's own and follows it with a print, in one longer cell.
:data:`FORMS` names them all, the copy as it is included.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable


class _Renamer(ast.NodeTransformer):
    """Renames every local name and argument (not ``self``) as a copier would."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def _new(self, name: str) -> str:
        if name == "self":
            return name
        return self.names.setdefault(name, f"my_{name}_{len(self.names)}")

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self._new(node.arg)
        return node

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if isinstance(node.ctx, ast.Store) or node.id in self.names:
            node.id = self._new(node.id)
        return node


def reformatted(code: str) -> str:
    """Docstrings and comments gone, laid out by ast.unparse with two-space indents."""
    tree = ast.parse(code)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(
                getattr(body[0], "value", None), ast.Constant):
            node.body = body[1:] or [ast.Pass()]
    return re.sub(r"^((?:    )+)", lambda m: "  " * (len(m.group(1)) // 4),
                  ast.unparse(tree), flags=re.M)


def renamed(code: str) -> str:
    """:func:`reformatted`, with every local name and argument renamed."""
    tree = ast.parse(reformatted(code))
    _Renamer().visit(tree)
    return ast.unparse(tree)


def padded(code: str) -> str:
    """:func:`renamed`, pasted after a helper of the copier's own and followed by a print."""
    return ("def _my_helper(values):\n    total = 0\n    for value in values:\n"
            "        total += value\n    return total\n\n\n" + renamed(code)
            + "\n\nprint('done', _my_helper([1, 2, 3]))\n")


FORMS: dict[str, Callable[[str], str]] = {
    "verbatim": lambda code: code, "reformatted": reformatted, "renamed": renamed,
    "in a longer cell": padded}
