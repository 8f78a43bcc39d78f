"""Code as written: the form copy detection compares where an exercise dictates its code.

Where an exercise's text dictates its code line by line (the exercises of
:data:`autograder.copies.detect.DICTATED`), learners who follow it write the course's
answer token for token once names are set aside, so the normalised form
(:mod:`autograder.copies.normalise`) is no evidence there. What a copy keeps and such
honest work does not have is what normalising sets aside: the source's docstrings and
comments, its type hints and its names. :func:`written` reads code that way:

* names, keywords, numbers and operators as written (type hints are names and operators);
* strings, docstrings included, and comments word by word, so that a docstring with one line
  changed still shares the others;
* the ends of statements and the blocks (``;``, ``{``, ``}``) as in the normalised form;
  line breaks inside brackets and spaces are not read, since a formatter gives everyone the
  same.

Its units are those of :func:`autograder.copies.normalise.normalise` (the whole cell, each
top-level definition and each method but a constructor), in the order written. Code that
does not parse is read as one unit.
"""

from __future__ import annotations

import ast
import re
import textwrap
import tokenize

from autograder.copies.normalise import MAX_CHARS, Token, Unit, definitions, positioned
from autograder.grade.audit import parse_cell

_WORD = re.compile(r"\w+")
_LAYOUT = {tokenize.NEWLINE: ";", tokenize.INDENT: "{", tokenize.DEDENT: "}"}
# Tokens read word by word: the text of strings and comments.
_TEXT = frozenset({tokenize.STRING, tokenize.COMMENT} | {
    getattr(tokenize, name) for name in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END")
    if hasattr(tokenize, name)})
# A string's prefix (r, b, f, ...): not a word of its text.
_PREFIX = re.compile(r"[A-Za-z]*(?=['\"])")


def tokens(text: str) -> tuple[Token, ...]:
    """The words of ``text`` as written (see the module's docstring), with their offsets."""
    found: list[Token] = []
    for token, start, end in positioned(text):
        if token.type not in _TEXT:
            found.append(Token(_LAYOUT.get(token.type, token.string), start, end))
            continue
        prefix = _PREFIX.match(token.string) if token.type == tokenize.STRING else None
        skip = prefix.end() if prefix else 0
        found += [Token(m.group(), start + m.start(), start + m.end())
                  for m in _WORD.finditer(token.string, skip)]
    return tuple(found)


def _definition(name: str, node: ast.AST, lines: list[str]) -> Unit:
    """The unit of one definition: its lines (decorators included), dedented."""
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    last = node.end_lineno or node.lineno
    text = textwrap.dedent("".join(lines[first - 1:last]))
    return Unit(name, text, tokens(text), (first, last))


def written(code: str) -> list[Unit]:
    """The units of ``code`` (a cell or a file) as written: the whole first (named after its
    definition when it is just one), then each definition and method in the order written;
    ``[]`` when nothing is left (an empty cell)."""
    code = code[:MAX_CHARS]
    whole = Unit("", code, tokens(code), (1, max(1, code.count("\n") + 1)))
    if not whole.tokens:
        return []
    tree, _ = parse_cell(code)
    if not isinstance(tree, ast.Module):
        return [whole]
    lines = code.splitlines(keepends=True)
    units = [whole]
    for name, node in definitions(tree):
        unit = _definition(name, node, lines)
        if unit.words == whole.words:  # a cell that is one definition is that unit
            units[0] = unit
        else:
            units.append(unit)
    return units
