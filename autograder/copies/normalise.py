"""Code in the form copy detection compares: what copying changes is taken out first.

Someone who copies code usually changes what does not matter to Python: names, comments,
docstrings, type hints, layout and the order of definitions. :func:`normalise` undoes all of
that with Python's :mod:`ast`:

* docstrings and other bare strings, comments, imports, type annotations and argument checks
  (asserts, an ``if`` that only raises, a call of a ``require_*`` or ``check_*`` helper) are
  dropped;
* equivalent spellings of one operation are written one way, and assignments a function never
  reads are dropped (:mod:`autograder.copies.canonical`);
* the names the code binds (parameters, locals, loop and comprehension variables, the
  functions and classes it defines, attributes it assigns such as ``self.norm1`` and its
  methods wherever they are called, such as ``self._split_heads``) become
  placeholders ``v1, v2, ...`` numbered in order of appearance; names it only uses (``np``,
  ``torch.cat``, ``softmax`` from an earlier cell, keyword arguments of calls) are kept, since
  they say *what* the code does;
* top-level definitions, and the methods of each class, are sorted by their shape (their
  syntax tree with every name blanked), so that their order does not matter;
* :func:`ast.unparse` writes the result in one layout.

The result is split into :class:`Unit` s: the whole cell, each top-level function or class, and
each method of a class, so that a definition pasted into a longer cell is still compared on
its own. Each unit carries its tokens (:class:`Token`), the words that fingerprinting reads:
every placeholder reads as ``V`` (like copydetect's own filter, so renumbering cannot hide a
copy), every string as ``S``.

Code that does not parse (or is too large for the parser) is still compared: its comments and
blank lines are dropped and its names all read as ``V``, as one unit.
"""

from __future__ import annotations

import ast
import io
import keyword
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

from autograder.copies.canonical import canonical
from autograder.grade.audit import parse_cell

# A placeholder for a name the code binds.
PLACEHOLDER = re.compile(r"v\d+")
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_BODIES = ("body", "orelse", "finalbody")


@dataclass(frozen=True)
class Token:
    """One word of a unit as fingerprinting reads it, and where it stands in the unit's text.

    Attributes:
        word: the token, ``V`` for a placeholder, ``S`` for a string.
        start, end: character offsets in :attr:`Unit.text`.
    """

    word: str
    start: int
    end: int


@dataclass(frozen=True)
class Unit:
    """A piece of code to compare: a whole cell or file, or one definition in it.

    Attributes:
        name: ``""`` for the whole cell, else the definition's original name
            (``"DecoderLayer"``, ``"DecoderLayer.forward"``).
        text: the normalised source.
        tokens: the words of ``text`` that fingerprinting reads.
        lines: the first and last line (from 1) of the unit in the code it comes from.
    """

    name: str
    text: str
    tokens: tuple[Token, ...]
    lines: tuple[int, int]

    @cached_property
    def words(self) -> tuple[str, ...]:
        return tuple(t.word for t in self.tokens)


# ----------------------------------------------------------------------------- stripping


class _Strip(ast.NodeTransformer):
    """Drops docstrings and other bare strings, imports and type annotations, remembering the
    names that dropped checks bound (``k = require_int(beam_size, ...)``: ``k`` is still the
    code's own name)."""

    def __init__(self) -> None:
        self.bound: set[str] = set()

    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        for name in _BODIES:
            body = getattr(node, name, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                kept = [s for s in body if not _is_noise(s)]
                self.bound |= {n.id for s in body if isinstance(s, ast.Assign) and s not in kept
                               for t in s.targets for n in ast.walk(t)
                               if isinstance(n, ast.Name)}
                setattr(node, name, kept or [ast.Pass()])
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.annotation = None
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.returns = None
        return self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815 (the visitor's naming)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST | None:
        if node.value is None:
            return None
        return ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node)


def _is_noise(statement: ast.stmt) -> bool:
    """Docstrings, bare strings and ``...`` used as comments, imports, and argument checks
    that a copier adds or leaves out at will: asserts, an ``if`` that only raises, a call of a
    checking helper (``require_ndim(q, 2, ...)``, ``x = require_array(x, ...)``)."""
    if isinstance(statement, (ast.Import, ast.ImportFrom)) or is_check(statement):
        return True
    return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str | type(Ellipsis)))


# Names of the helpers that check arguments (the course's ``require_*``, a learner's own).
_CHECKERS = ("require", "check", "validate", "_require", "_check", "_validate")


def is_check(statement: ast.stmt) -> bool:
    """An argument check: an assert, an ``if`` that only raises, or a call of a checking
    helper (``require_ndim(q, 2, ...)``, ``x = require_array(x, ...)``)."""
    if isinstance(statement, ast.Assert):
        return True
    if isinstance(statement, ast.If) and not statement.orelse and all(
            isinstance(s, ast.Raise) for s in statement.body):
        return True
    call = getattr(statement, "value", None)
    if not (isinstance(statement, ast.Expr | ast.Assign) and isinstance(call, ast.Call)):
        return False
    name = getattr(call.func, "id", getattr(call.func, "attr", ""))
    return name.startswith(_CHECKERS)


# ----------------------------------------------------------------------------- ordering


def _shape(node: ast.AST) -> str:
    """The syntax tree of ``node`` with every name left out: a key that ignores naming."""
    return " ".join(type(child).__name__ + (repr(child.value) if isinstance(child, ast.Constant)
                                            else "") for child in ast.walk(node))


def _sorted_body(body: list[ast.stmt]) -> list[ast.stmt]:
    """Other statements in their order, then the definitions sorted by shape."""
    definitions = sorted((s for s in body if isinstance(s, _DEFINITIONS)), key=_shape)
    return [s for s in body if not isinstance(s, _DEFINITIONS)] + definitions


def _sort_definitions(tree: ast.Module) -> None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            node.body = _sorted_body(node.body)
    tree.body = _sorted_body(tree.body)


# ----------------------------------------------------------------------------- renaming


def _bound_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """The names ``tree`` binds, and the attributes it assigns (``x.attr = ...``) or defines
    (its methods)."""
    names: set[str] = set()
    attributes: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, _DEFINITIONS):
            # A method is called as an attribute (``self._split_heads(x)``).
            names.add(node.name)
            attributes.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            attributes.add(node.attr)
    return names, attributes


class _Rename(ast.NodeVisitor):
    """Replaces bound names and assigned attributes by ``v1, v2, ...`` in order of appearance
    (fields in source order: a definition's name, then its arguments, then its body),
    remembering each change so that :meth:`undo` restores the tree."""

    def __init__(self, names: set[str], attributes: set[str]) -> None:
        self.names, self.attributes = names, attributes
        self.given: dict[str, str] = {}
        self.changed: list[tuple[ast.AST, str, str]] = []

    def _rename(self, node: ast.AST, field: str, key: str) -> None:
        self.changed.append((node, field, getattr(node, field)))
        setattr(node, field, self.given.setdefault(key, f"v{len(self.given) + 1}"))

    def undo(self) -> None:
        for node, field, old in reversed(self.changed):
            setattr(node, field, old)
        self.changed.clear()

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.names:
            self._rename(node, "id", node.id)

    def visit_arg(self, node: ast.arg) -> None:
        self._rename(node, "arg", node.arg)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.visit(node.value)
        if node.attr in self.attributes:
            self._rename(node, "attr", "." + node.attr)

    def _visit_definition(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
                          ) -> None:
        self._rename(node, "name", node.name)
        self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _visit_definition  # noqa: N815

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self._rename(node, "name", node.name)
        self.generic_visit(node)


def _renamed(tree: ast.AST, attributes: set[str], bound: set[str]) -> str:
    """The source of ``tree`` with its bound names, ``bound`` and ``attributes`` replaced by
    placeholders (``tree`` itself is left as it was: the units of one cell share their
    nodes)."""
    names, _ = _bound_names(tree)
    renamer = _Rename(names | bound, attributes)
    renamer.visit(tree)
    try:
        return ast.unparse(tree)
    finally:
        renamer.undo()


# ----------------------------------------------------------------------------- tokens

# Token kinds that carry nothing: layout inside a statement and the ends of the text.
_SKIPPED = frozenset({tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER})
# Longest code read: a learner's cell is a few hundred lines.
MAX_CHARS = 200_000


def _token_word(token: tokenize.TokenInfo, names_are_placeholders: bool) -> str:
    if token.type == tokenize.STRING or token.type in _FSTRING_PARTS:
        return "S"
    if token.type == tokenize.NAME and not keyword.iskeyword(token.string) and (
            names_are_placeholders or PLACEHOLDER.fullmatch(token.string)):
        return "V"
    if token.type == tokenize.NEWLINE:
        return ";"
    if token.type == tokenize.INDENT:
        return "{"
    if token.type == tokenize.DEDENT:
        return "}"
    return token.string


_FSTRING_PARTS = frozenset(getattr(tokenize, name) for name in
                           ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END")
                           if hasattr(tokenize, name))


def positioned(text: str) -> Iterator[tuple[tokenize.TokenInfo, int, int]]:
    """Python's tokens of ``text`` (comments included, :data:`_SKIPPED` and a repeated end of
    statement left out) with their start and end as character offsets; the tokens read before
    a tokenising error, so that broken code is compared too."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    previous = None
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in _SKIPPED or (token.type == tokenize.NEWLINE and not token.string
                                          and previous == tokenize.NEWLINE):
                continue
            start = starts[token.start[0] - 1] + token.start[1] if token.start[0] else 0
            end = starts[token.end[0] - 1] + token.end[1] if token.end[0] else 0
            previous = token.type
            yield token, start, end
    except (tokenize.TokenError, SyntaxError, IndexError):
        return


def tokens(text: str, *, names_are_placeholders: bool = False) -> tuple[Token, ...]:
    """The words of ``text`` as fingerprinting reads them (see :func:`_token_word`).

    Args:
        names_are_placeholders: every name reads ``V`` (for code that could not be
            normalised), not only the placeholders.
    """
    return tuple(Token(_token_word(token, names_are_placeholders), start, end)
                 for token, start, end in positioned(text) if token.type != tokenize.COMMENT)


# ----------------------------------------------------------------------------- units


def _unit(name: str, tree: ast.AST, lines: tuple[int, int], attributes: set[str],
          bound: set[str]) -> Unit:
    text = _renamed(tree, attributes, bound)
    return Unit(name, text, tokens(text), lines)


def definitions(tree: ast.Module) -> Iterator[tuple[str, ast.AST]]:
    """``(name, node)`` of each top-level definition and of each method of a class but its
    constructor: an exercise's constructor is mostly dictated by the attributes that the
    exercise names, so on its own it says nothing (it still counts in its class)."""
    for node in tree.body:
        if isinstance(node, _DEFINITIONS):
            yield node.name, node
        if isinstance(node, ast.ClassDef):
            for method in node.body:
                if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef) and (
                        method.name != "__init__"):
                    yield f"{node.name}.{method.name}", method


def _without_comments(code: str) -> str:
    """``code`` without comments and blank lines, for code that does not parse."""
    kept = []
    for line in code.splitlines():
        stripped = line.split("#", 1)[0].rstrip() if "#" in line else line.rstrip()
        if stripped.strip():
            kept.append(stripped)
    return "\n".join(kept)


def normalise(code: str) -> list[Unit]:
    """The units of ``code`` (a cell or a file), normalised: the whole first (named after its
    definition when it is just one), then each definition and method in the normal order;
    ``[]`` when nothing is left (an empty cell, only comments and docstrings).

    Code that does not parse gives one unit, its text without comments and blank lines, whose
    names all read ``V``.
    """
    code = code[:MAX_CHARS]
    whole = (1, max(1, code.count("\n") + 1))
    tree, _ = parse_cell(code)
    if not isinstance(tree, ast.Module):
        text = _without_comments(code)
        found = tokens(text, names_are_placeholders=True)
        return [Unit("", text, found, whole)] if found else []
    strip = _Strip()
    tree = canonical(strip.visit(tree))
    tree.body = [s for s in tree.body if not isinstance(s, ast.Pass)]
    if not tree.body:
        return []
    _sort_definitions(tree)
    # The attributes of the whole cell, so that a method alone still calls its class's helpers
    # by placeholders.
    _, attributes = _bound_names(tree)
    units = [_unit("", tree, whole, attributes, strip.bound)]
    for name, node in definitions(tree):
        unit = _unit(name, node, (node.lineno, node.end_lineno or node.lineno), attributes,
                     strip.bound)
        if unit.text == units[0].text:  # a cell that is one definition is that unit
            units[0] = unit
        else:
            units.append(unit)
    return units
