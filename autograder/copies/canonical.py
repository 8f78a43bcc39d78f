"""One spelling for each operation: what a disguise rewrites, copy detection writes back.

A copier who knows Python rewrites an expression into an equivalent one in seconds; honest
learners also pick between these spellings, so none of them says anything about copying.
:func:`canonical` rewrites a syntax tree (in place) into one spelling of each:

* ``a / sqrt(b)``, ``a / b ** 0.5`` and ``a * b ** -0.5`` read ``a * b ** -0.5``
  (``math.sqrt``, ``np.sqrt``, ``torch.sqrt``: any call named ``sqrt`` reads ``b ** 0.5``);
* ``np.matmul(a, b)``, ``torch.matmul(a, b)`` and ``a.matmul(b)`` read ``a @ b``;
* a swap of two axes (``k.transpose(-2, -1)``, ``np.swapaxes(k, -1, -2)``,
  ``k.swapaxes(-2, -1)``, ``k.mT``) reads ``k.swapaxes(-2, -1)``, smaller axis first;
* ``x.size(d)`` reads ``x.shape[d]`` and ``x.size()`` reads ``x.shape``; ``x.view(...)``
  reads ``x.reshape(...)`` and ``x.contiguous()`` reads ``x``;
* a list built by a loop that only appends (``out = []`` then ``for t in it: out.append(e)``)
  reads as the comprehension ``out = [e for t in it]``;
* a method of the code's own that returns once, at its end, is inlined where its result is
  assigned or returned (``q = self._split_heads(x)`` reads as the method's body, its parameters
  assigned first), and a private one no longer called is dropped, so that a copy whose
  helpers were inlined by hand reads like its source;
* in a function, an assignment to a name that the function never reads (an unused counter, a
  leftover) is dropped.
"""

from __future__ import annotations

import ast
import copy

_SWAPS = ("transpose", "swapaxes", "swapdims")
_BODIES = ("body", "orelse", "finalbody")


def literal_number(node: ast.expr) -> int | float | None:
    """The value of a literal number (``-2`` included), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not (
            isinstance(node.value, bool)):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = literal_number(node.operand)
        return None if inner is None else -inner
    return None


def _called(node: ast.Call) -> str:
    """The name a call ends with: ``np.sqrt(x)`` -> ``sqrt``."""
    return getattr(node.func, "attr", getattr(node.func, "id", ""))


def _swap(array: ast.expr, axes: list[ast.expr]) -> ast.expr | None:
    """``array.swapaxes(a, b)`` with the smaller axis first, when both are literal."""
    found = [literal_number(a) for a in axes]
    if len(found) != 2 or not all(isinstance(a, int) for a in found):
        return None
    first, second = sorted(found)
    return ast.Call(ast.Attribute(array, "swapaxes", ast.Load()),
                    [ast.Constant(first), ast.Constant(second)], [])


class _Spelling(ast.NodeTransformer):
    """Rewrites expressions bottom up into the spellings of the module's docstring."""

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        value = literal_number(node)
        return ast.Constant(value) if value is not None else node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        right = node.right
        if isinstance(node.op, ast.Div) and isinstance(right, ast.BinOp) and isinstance(
                right.op, ast.Pow) and literal_number(right.right) is not None:
            power = ast.Constant(-literal_number(right.right))
            return ast.BinOp(node.left, ast.Mult(), ast.BinOp(right.left, ast.Pow(), power))
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if node.attr == "mT" and isinstance(node.ctx, ast.Load):
            return _swap(node.value, [ast.Constant(-2), ast.Constant(-1)]) or node
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        name, args = _called(node), node.args
        if node.keywords:
            return node
        method = isinstance(node.func, ast.Attribute)
        if name == "sqrt" and len(args) == 1:
            return ast.BinOp(args[0], ast.Pow(), ast.Constant(0.5))
        if name == "matmul" and len(args) == 2:
            return ast.BinOp(args[0], ast.MatMult(), args[1])
        if name == "matmul" and len(args) == 1 and method:
            return ast.BinOp(node.func.value, ast.MatMult(), args[0])
        if name in _SWAPS and method and len(args) == 2:
            return _swap(node.func.value, args) or node
        if name in _SWAPS and len(args) == 3:
            return _swap(args[0], args[1:]) or node
        if name == "contiguous" and method and not args:
            return node.func.value
        if name == "view" and method:
            node.func.attr = "reshape"
            return node
        if name == "size" and method and len(args) <= 1:
            shape = ast.Attribute(node.func.value, "shape", ast.Load())
            return ast.Subscript(shape, args[0], ast.Load()) if args else shape
        return node


def comprehension_of(first: ast.stmt, second: ast.stmt) -> ast.stmt | None:
    """``name = []`` followed by a loop that only appends to it, as one comprehension."""
    if not (isinstance(first, ast.Assign) and isinstance(first.value, ast.List)
            and not first.value.elts and len(first.targets) == 1
            and isinstance(first.targets[0], ast.Name) and isinstance(second, ast.For)
            and len(second.body) == 1 and not second.orelse):
        return None
    call = getattr(second.body[0], "value", None)
    if not (isinstance(second.body[0], ast.Expr) and isinstance(call, ast.Call)
            and _called(call) == "append" and isinstance(call.func, ast.Attribute)
            and getattr(call.func.value, "id", None) == first.targets[0].id
            and len(call.args) == 1 and not call.keywords):
        return None
    loop = ast.comprehension(second.target, second.iter, [], 0)
    return ast.Assign(first.targets, ast.ListComp(call.args[0], [loop]), lineno=first.lineno)


def _joined(body: list[ast.stmt]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for statement in body:
        joined = comprehension_of(out[-1], statement) if out else None
        if joined is None:
            out.append(statement)
        else:
            out[-1] = joined
    return out


def _unread(function: ast.AST) -> set[str]:
    """The names ``function`` assigns and never reads."""
    stored, read = set(), set()
    for node in ast.walk(function):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else stored).add(node.id)
    return stored - read


def _is_dead(statement: ast.stmt, unread: set[str]) -> bool:
    """An assignment whose every target is a name that is never read."""
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, ast.AugAssign | ast.AnnAssign):
        targets = [statement.target]
    else:
        return False
    return all(isinstance(t, ast.Name) and t.id in unread for t in targets)


def _blocks(node: ast.AST):
    """Every statement list under ``node`` (its own included), as ``(owner, field)``."""
    for child in ast.walk(node):
        for field in _BODIES:
            body = getattr(child, field, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                yield child, field


def definition_nodes(tree: ast.AST) -> list[ast.FunctionDef | ast.ClassDef]:
    """Every function and class ``tree`` defines, nested ones included."""
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef)]


def _returns_last(helper: ast.FunctionDef) -> bool:
    """Whether ``helper`` returns once, at its end (so its body can stand in a caller's)."""
    returns = [n for n in ast.walk(helper) if isinstance(n, ast.Return)]
    return bool(helper.body) and returns == [helper.body[-1]] and returns[0].value is not None


def _helper_called(statement: ast.stmt, helpers: dict[str, ast.FunctionDef], methods_only: bool
                   ) -> tuple[ast.FunctionDef, ast.Call] | None:
    """The helper that ``target = helper(...)`` or ``return helper(...)`` calls (a method
    called on ``self``, or unless ``methods_only`` a function), with all its arguments given
    by position."""
    call = getattr(statement, "value", None)
    if not isinstance(statement, ast.Assign | ast.Return) or not isinstance(call, ast.Call):
        return None
    func = call.func
    method = isinstance(func, ast.Attribute) and getattr(func.value, "id", "") == "self"
    name = func.attr if method else "" if methods_only else getattr(func, "id", "")
    helper = helpers.get(name)
    parameters = [a.arg for a in helper.args.args if a.arg != "self"] if helper else []
    if helper is None or call.keywords or len(parameters) != len(call.args):
        return None
    return helper, call


def _inlined(statement: ast.stmt, helpers: dict[str, ast.FunctionDef], methods_only: bool
             ) -> list[ast.stmt]:
    """``target = helper(args)`` as the helper's body with its parameters assigned first."""
    found = _helper_called(statement, helpers, methods_only)
    if found is None:
        return [statement]
    helper, call = found
    parameters = [a.arg for a in helper.args.args if a.arg != "self"]
    body = [s for s in copy.deepcopy(helper.body) if not (
        isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    result = body.pop().value
    given = [ast.Assign([ast.Name(p, ast.Store())], a) for p, a in zip(parameters, call.args,
                                                                        strict=True)]
    last = (ast.Return(result) if isinstance(statement, ast.Return)
            else ast.Assign(statement.targets, result))
    return given + body + [last]


def inline_helpers(tree: ast.Module, *, private_only: bool, methods_only: bool
                   ) -> ast.Module:
    """``tree`` (changed in place) with each helper that returns at its end (only those
    named ``_*`` when ``private_only``; only methods called on ``self`` when
    ``methods_only``) inlined where its result is assigned or returned, in every other
    function, and each private helper no longer called removed."""
    helpers = {n.name: n for n in definition_nodes(tree) if isinstance(n, ast.FunctionDef)
               and (n.name.startswith("_") or not private_only) and _returns_last(n)}
    inlined = set()
    for node in definition_nodes(tree):
        if isinstance(node, ast.FunctionDef):
            others = {name: helper for name, helper in helpers.items() if helper is not node}
            inlined |= {found[0].name for statement in node.body
                        if (found := _helper_called(statement, others, methods_only))}
            node.body = [s for statement in node.body
                         for s in _inlined(statement, others, methods_only)]
    called = {getattr(n.func, "attr", getattr(n.func, "id", "")) for n in ast.walk(tree)
              if isinstance(n, ast.Call)}
    for node in [tree, *definition_nodes(tree)]:
        node.body = [s for s in node.body if getattr(s, "name", None) not in inlined
                     or s.name in called or not s.name.startswith("_")]
    return ast.fix_missing_locations(tree)


def canonical(tree: ast.Module) -> ast.Module:
    """``tree`` (changed in place) in the spellings of the module's docstring."""
    # A reference pasted alone lacks its module's functions: only methods are inlined, a
    # class being pasted whole.
    tree = _Spelling().visit(inline_helpers(tree, private_only=False, methods_only=True))
    for owner, field in list(_blocks(tree)):
        setattr(owner, field, _joined(getattr(owner, field)))
    for function in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef
                                                              | ast.AsyncFunctionDef)]:
        unread = _unread(function)
        for owner, field in list(_blocks(function)):
            kept = [s for s in getattr(owner, field) if not _is_dead(s, unread)]
            setattr(owner, field, kept or [ast.Pass()])
    return ast.fix_missing_locations(tree)
