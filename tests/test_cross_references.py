"""Cross-references in the chapters' prose run against the learner's own code.

When the text of one chapter names a function or class of another chapter with a call
(`` chapter 7's `EncoderLayer(d_model, h, d_ff, dropout)` ``, `` `residual(...)` from chapter 8 ``)
or an argument (`` (`norm_first=True`, chapter 7) ``), a learner who uses their own version of
that name must be able to make the call. The learner's version is what the chapter's released
notebook defines (the stub's signature is the exercise's) or imports there; every keyword the
prose names must be one of its parameters, and it must take that many positional arguments.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(p.name for p in (ROOT / "notebooks").iterdir() if re.match(r"ch\d\d_", p.name))
SPAN = re.compile(r"`([^`\n]+)`")
CHAPTER_AFTER = re.compile(r"^[\s,(]*(?:from|of|in)?\s*chapter (\d+)\b(?!'s)")
CHAPTER_BEFORE = re.compile(r"chapter (\d+)'s\s*$")


@dataclass(frozen=True)
class Signature:
    """What a callable accepts: its parameter names (``self`` dropped) and how many of them
    may be given by position (None: any number, ``*args``); ``any_keyword`` for ``**kwargs``."""

    names: tuple[str, ...]
    positional: int | None
    any_keyword: bool


def signature_of_ast(node: ast.FunctionDef | ast.ClassDef) -> Signature | None:
    """The signature of a function, or of a class's ``__init__`` (None for a class without)."""
    if isinstance(node, ast.ClassDef):
        inits = [n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
        if not inits:
            return None
        node = inits[0]
    args = node.args
    positional = [a.arg for a in args.posonlyargs + args.args if a.arg != "self"]
    names = tuple(positional + [a.arg for a in args.kwonlyargs])
    return Signature(names, None if args.vararg else len(positional), args.kwarg is not None)


def signature_of_object(obj: object) -> Signature:
    """The signature of an imported callable (a class: its constructor)."""
    params = list(inspect.signature(obj).parameters.values())
    kinds = inspect.Parameter
    positional = [p for p in params if p.kind in (kinds.POSITIONAL_ONLY,
                                                 kinds.POSITIONAL_OR_KEYWORD)]
    return Signature(
        tuple(p.name for p in params if p.kind not in (kinds.VAR_POSITIONAL, kinds.VAR_KEYWORD)),
        None if any(p.kind == kinds.VAR_POSITIONAL for p in params) else len(positional),
        any(p.kind == kinds.VAR_KEYWORD for p in params),
    )


def notebook_cells(chapter: str) -> list[dict]:
    """The cells of a chapter's released (learner) notebook."""
    path = ROOT / "notebooks" / chapter / f"{chapter}.ipynb"
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


@cache
def learner_names(number: int) -> dict[str, Signature | None]:
    """Every top-level function and class chapter ``number``'s notebook defines or imports."""
    (chapter,) = [c for c in CHAPTERS if c.startswith(f"ch{number:02d}_")]
    found: dict[str, Signature | None] = {}
    for cell in notebook_cells(chapter):
        if cell["cell_type"] != "code":
            continue
        try:
            tree = ast.parse("".join(cell["source"]))
        except SyntaxError:  # a cell with IPython magics defines nothing the prose names
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                found[node.name] = signature_of_ast(node)
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    obj = getattr(importlib.import_module(node.module), alias.name)
                    found[alias.asname or alias.name] = (
                        signature_of_object(obj) if callable(obj) else None)
    return found


def problems_of_reference(span: str, number: int) -> list[str]:
    """Why the snippet ``span``, attributed to chapter ``number``, fails for a learner."""
    names = learner_names(number)
    keyword = re.fullmatch(r"(\w+)=\S+", span)
    if keyword:
        if not any(s and (keyword[1] in s.names or s.any_keyword) for s in names.values()):
            return [f"`{span}`: nothing in chapter {number} takes `{keyword[1]}`"]
        return []
    call = re.fullmatch(r"(\w+)(\(.*\))?", span)
    if not call:
        return []
    if call[1] not in names:
        return [f"`{span}`: chapter {number} neither defines nor imports `{call[1]}`"]
    signature = names[call[1]]
    if not call[2] or signature is None or "..." in call[2]:
        return []
    parsed = ast.parse(span, mode="eval").body
    assert isinstance(parsed, ast.Call)
    found = []
    unknown = [k.arg for k in parsed.keywords
               if k.arg is not None and k.arg not in signature.names]
    if unknown and not signature.any_keyword:
        found.append(f"`{span}`: chapter {number}'s `{call[1]}` has no {unknown}")
    if signature.positional is not None and len(parsed.args) > signature.positional:
        found.append(f"`{span}`: chapter {number}'s `{call[1]}` takes "
                     f"{signature.positional} positional arguments")
    return found


def cross_references(text: str) -> list[tuple[str, int]]:
    """The code spans of ``text`` attributed to a chapter: ``(span, chapter number)``."""
    found = []
    for match in SPAN.finditer(text):
        after = CHAPTER_AFTER.match(text[match.end():])
        before = CHAPTER_BEFORE.search(text[:match.start()])
        if after or before:
            found.append((match[1], int((after or before)[1])))
    return found


def chapter_problems(chapter: str) -> list[str]:
    """Every cross-reference of a chapter's prose that a learner's own code cannot run."""
    problems = []
    for index, cell in enumerate(notebook_cells(chapter)):
        if cell["cell_type"] == "markdown":
            for span, number in cross_references("".join(cell["source"])):
                problems += [f"cell {index}: {p}" for p in problems_of_reference(span, number)]
    return problems


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_cross_reference_runs_against_the_learner_s_code(chapter):
    assert chapter_problems(chapter) == []


@pytest.mark.parametrize("text", [
    "pre-LN (`norm_first=True`, chapter 7), which trains reliably",
    "`residual(x, sublayer, norm, dropout, norm_first=True)` from chapter 7 does one of them.",
    "chapter 7's `EncoderLayer(d_model, h, d_ff, dropout, norm_first=True)` *is* a block",
    "chapter 7's `EncoderLayer(d_model, h, d_ff, dropout, 0.1, 0.2)` has too many",
])
def test_a_reference_to_an_argument_the_earlier_exercise_lacks_is_found(text):
    (reference,) = cross_references(text)
    assert problems_of_reference(*reference)


@pytest.mark.parametrize("text", [
    "`residual(x, sublayer, norm, dropout, norm_first=True)` from chapter 8 does one of them.",
    "chapter 7's `EncoderLayer(d_model, h, d_ff, dropout)` is the block",
    "pre-LN (`norm_first=True`, chapter 8)",
])
def test_a_reference_the_earlier_exercise_supports_passes(text):
    (reference,) = cross_references(text)
    assert problems_of_reference(*reference) == []
