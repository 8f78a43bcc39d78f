"""The learner's side of grading: run the solution cells, then answer the grader's requests.

(Part of the sandbox worker: runs inside the learner's sandbox, after the worker has loaded the
exercise's allowed building blocks and dropped its privileges.)

Requests (``header["op"]``) and what they do:

``call``      call a name the solution cells define, or an object by handle (optionally one of
              its attributes: ``"attr"``), with decoded arguments; with ``"record"`` the call is
              kept for a later ``backward`` (tensors marked ``"grad"`` become leaves that
              require grad, and the parameters of the module called are tracked too)
``backward``  gradients of a recorded call for given output cotangents: one per recorded input
              tensor and one per parameter of the module, by name
``describe``  the structure of a module: sub-modules, their types, parameters, buffers, simple
              attributes and public methods
``state``     the values of a module's parameters and buffers
``module``    ``train``/``eval``, a change of dtype, or ``load_state_dict`` on a module
``seed``      seed torch, NumPy and ``random``
``release``   forget handles and recorded calls

Every reply says what the learner's code tried to import from the course (``"blocked"``) and,
for calls, which array or tensor arguments it changed in place (``"changed"``). An exception in
learner code is a reply (``"error"``, ``"message"``, ``"where"``: the learner's own line), never
a crash of this process.
"""

from __future__ import annotations

import random
import traceback
from collections.abc import Callable
from typing import Any, BinaryIO

import numpy as np

if __package__:  # imported as autograder.sandbox.serve: a learner's kernel (remote_check)
    from autograder.sandbox import wire
else:  # loaded by the sandbox worker from this folder, without the autograder package
    import wire

LEARNER_FILE = "<cell "
# Attributes of a module sent with its structure: small plain values only.
ATTRIBUTE_TYPES = (bool, int, float, str, type(None))
MAX_ATTRIBUTE_ITEMS = 64
# Recorded calls kept for a backward pass; older ones are forgotten.
MAX_RECORDED = 32


def learner_line(exc: BaseException) -> dict[str, Any] | None:
    """The innermost frame of ``exc``'s traceback that runs a solution cell: the cell's name,
    the line number and the line's text."""
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename.startswith(LEARNER_FILE):
            found = frame
    if found is None:
        return None
    return {"cell": found.filename[len(LEARNER_FILE):-1], "line": found.lineno,
            "text": (found.line or "").strip()[:200], "function": found.name}


def error_reply(exc: BaseException,
                locate: Callable[[BaseException], dict[str, Any] | None] = learner_line,
                ) -> dict[str, Any]:
    return {"error": type(exc).__name__, "message": str(exc)[:2000], "where": locate(exc)}


class LearnerCodec(wire.Codec):
    """Objects that cannot travel stay here: the grader gets a handle and a description."""

    def __init__(self, server: Server) -> None:
        self.server = server

    def encode_object(self, value: Any, blobs: list[bytes]) -> Any:
        return self.server.handle_tree(value)

    def decode_handle(self, tree: dict[str, Any]) -> Any:
        return self.server.object(tree["$handle"])

    def decode_build(self, recipe: Any, blobs: list[bytes]) -> Any:
        return self.server.build(recipe, blobs)


class Server:
    """Answers the grader's requests on ``inp``/``out`` until the grader closes ``inp``."""

    def __init__(self, namespace: dict[str, Any], attempts: list[str],
                 builders: dict[str, Callable[..., Any]],
                 locate: Callable[[BaseException], dict[str, Any] | None] = learner_line,
                 ) -> None:
        self.namespace = namespace
        self.locate = locate  # the learner's failing line of an exception
        self.attempts = attempts  # imports of the course the learner's code tried
        self.builders = builders  # "module:function" -> callable, for models the grader sends
        self.codec = LearnerCodec(self)
        self.objects: dict[int, Any] = {}
        self.handles: dict[int, int] = {}  # id(object) -> handle
        self.recorded: dict[int, tuple[list[Any], list[Any], list[tuple[str, Any]]]] = {}
        self.counter = 0

    # ------------------------------------------------------------------ handles

    def handle_tree(self, value: Any) -> dict[str, Any]:
        key = id(value)
        if key not in self.handles:
            self.counter += 1
            self.handles[key] = self.counter
            self.objects[self.counter] = value
        kind = "object"
        torch = wire._torch()
        if torch is not None and isinstance(value, torch.nn.Module):
            kind = "module"
        elif isinstance(value, type):
            kind = "class"
        elif callable(value):
            kind = "callable"
        return {"$handle": self.handles[key], "kind": kind,
                "type": f"{type(value).__module__}.{type(value).__qualname__}",
                "repr": _short_repr(value)}

    def object(self, handle: Any) -> Any:
        if handle not in self.objects:
            raise wire.WireError(f"the handle {handle!r}, which this process does not hold")
        return self.objects[handle]

    def build(self, recipe: Any, blobs: list[bytes]) -> Any:
        """A model the grader sends: ``builder(*args, **kwargs)``, in ``dtype``, with the given
        weights loaded, in eval or train mode."""
        if not isinstance(recipe, dict) or recipe.get("builder") not in self.builders:
            raise wire.WireError(f"a model built by {recipe!r}, which is not allowed here")
        builder = self.builders[recipe["builder"]]
        args = self.codec.decode(recipe.get("args", {"$list": []}), blobs)
        kwargs = self.codec.decode(recipe.get("kwargs", {"$dict": {}}), blobs)
        state = self.codec.decode(recipe.get("state", {"$dict": {}}), blobs)
        model = builder(*args, **kwargs)
        dtype = recipe.get("dtype")
        if dtype is not None:
            model.to(self.codec.decode_dtype(dtype))
        if state:
            model.load_state_dict(state)
        model.train(bool(recipe.get("training", False)))
        return model

    # ------------------------------------------------------------------ requests

    def serve(self, inp: BinaryIO, out: BinaryIO) -> None:
        while (frame := wire.read_frame(inp)) is not None:
            wire.write_frame(out, *self.reply(*frame))

    def reply(self, header: dict[str, Any], blobs: list[bytes],
              passthrough: tuple[type[BaseException], ...] = ()
              ) -> tuple[dict[str, Any], list[bytes]]:
        """The reply to one request and its blobs. An exception of learner code becomes an
        error reply, except those of ``passthrough`` (a learner's interrupt in a kernel)."""
        start = len(self.attempts)
        reply_blobs: list[bytes] = []
        try:
            reply = self.answer(header, blobs, reply_blobs)
        except passthrough:
            raise
        except wire.WireError as exc:
            reply, reply_blobs = {"protocol": str(exc)}, []
        except BaseException as exc:  # noqa: BLE001 - learner code may raise anything
            reply, reply_blobs = error_reply(exc, self.locate), []
        reply["blocked"] = self.attempts[start:]
        return reply, reply_blobs

    def answer(self, header: dict[str, Any], blobs: list[bytes],
               out: list[bytes]) -> dict[str, Any]:
        op = header.get("op")
        if op == "call":
            return self.call(header, blobs, out)
        if op == "backward":
            return self.backward(header, blobs, out)
        if op == "describe":
            return {"value": self.codec.encode(describe_module(self.module(header)), out)}
        if op == "state":
            return {"value": self.codec.encode(module_state(self.module(header)), out)}
        if op == "module":
            return self.module_action(header, blobs)
        if op == "seed":
            seed = int(header["seed"])
            random.seed(seed)
            np.random.seed(seed % 2**32)
            torch = wire._torch()
            if torch is not None:
                torch.manual_seed(seed)
            return {}
        if op == "release":
            for handle in header.get("handles", []):
                obj = self.objects.pop(handle, None)
                self.handles.pop(id(obj), None)
            for call in header.get("calls", []):
                self.recorded.pop(call, None)
            return {}
        raise wire.WireError(f"the request {op!r}")

    def target(self, header: dict[str, Any]) -> Any:
        spec = header.get("target")
        if isinstance(spec, dict) and "name" in spec:
            if spec["name"] not in self.namespace:
                raise NameError(f"name {spec['name']!r} is not defined by the solution cells")
            target = self.namespace[spec["name"]]
        elif isinstance(spec, dict) and "handle" in spec:
            target = self.object(spec["handle"])
        else:
            raise wire.WireError(f"the target {spec!r}")
        for name in (spec.get("path") or "").split(".") if spec.get("path") else []:
            target = getattr(target, name) if not name.isdigit() else target[int(name)]
        if spec.get("attr"):
            target = getattr(target, spec["attr"])
        return target

    def module(self, header: dict[str, Any]) -> Any:
        torch = wire._torch()
        module = self.target(header)
        if torch is None or not isinstance(module, torch.nn.Module):
            raise wire.WireError("a module request for an object that is not a module")
        return module

    def call(self, header: dict[str, Any], blobs: list[bytes],
             out: list[bytes]) -> dict[str, Any]:
        fn = self.target(header)
        args = self.codec.decode(header.get("args", {"$list": []}), blobs)
        kwargs = self.codec.decode(header.get("kwargs", {"$dict": {}}), blobs)
        if not callable(fn):
            raise TypeError(f"{_short_repr(fn)} is not callable")
        inputs = wire.inputs_in((args, kwargs))
        before = [_copy(v) for v in inputs]
        torch = wire._torch()
        record = bool(header.get("record")) and torch is not None
        if torch is None:
            value = fn(*args, **kwargs)
        else:
            leaves = []
            if record:
                marks = iter(header.get("grad", []))
                for tensor in wire.tensors_in((args, kwargs)):
                    if next(marks, False) and tensor.is_floating_point():
                        tensor.requires_grad_(True)
                        leaves.append(tensor)
            grad_enabled = bool(header.get("grad_enabled", record))
            with torch.set_grad_enabled(grad_enabled):
                value = fn(*args, **kwargs)
        reply: dict[str, Any] = {"value": self.codec.encode(value, out)}
        changed = [i for i, (old, new) in enumerate(zip(before, inputs, strict=True))
                   if not _same(old, new)]
        if changed:
            reply["changed"] = {str(i): self.codec.encode(inputs[i], out) for i in changed}
        if record:
            outputs = [t for t in wire.tensors_in(value) if t.requires_grad]
            params = _parameters_of(fn)
            self.counter += 1
            self.recorded[self.counter] = (outputs, leaves, params)
            for old in sorted(self.recorded)[:-MAX_RECORDED]:
                del self.recorded[old]
            reply["call"] = self.counter
            reply["grad_outputs"] = [t.requires_grad for t in wire.tensors_in(value)]
        return reply

    def backward(self, header: dict[str, Any], blobs: list[bytes],
                 out: list[bytes]) -> dict[str, Any]:
        import torch

        call = header.get("call")
        if call not in self.recorded:
            raise wire.WireError(f"a backward pass of call {call!r}, which was not recorded")
        outputs, leaves, params = self.recorded.pop(call)
        cotangents = self.codec.decode(header["cotangents"], blobs)
        wanted = leaves + [p for _, p in params]
        pairs = [(o, c) for o, c in zip(outputs, cotangents, strict=True) if c is not None]
        grads: list[Any] = [None] * len(wanted)
        if pairs and wanted:
            grads = list(torch.autograd.grad([o for o, _ in pairs], wanted,
                                             [c.to(o.dtype) for o, c in pairs],
                                             allow_unused=True))
        return {"value": self.codec.encode({
            "inputs": grads[: len(leaves)],
            "parameters": {name: g for (name, _), g in zip(params, grads[len(leaves):],
                                                            strict=True)},
        }, out)}

    def module_action(self, header: dict[str, Any], blobs: list[bytes]) -> dict[str, Any]:
        module = self.module(header)
        action = header.get("action")
        if action == "train":
            module.train(bool(header.get("mode", True)))
        elif action == "to":
            module.to(self.codec.decode_dtype(header.get("dtype")))
        elif action == "load_state_dict":
            state = self.codec.decode(header["state"], blobs)
            result = module.load_state_dict(state, strict=bool(header.get("strict", True)))
            return {"value": {"$dict": {
                "missing": {"$list": list(result.missing_keys)},
                "unexpected": {"$list": list(result.unexpected_keys)}}}}
        else:
            raise wire.WireError(f"the module action {action!r}")
        return {}


# ----------------------------------------------------------------------------- modules


def _short_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a learner's __repr__ may fail
        text = f"<{type(value).__qualname__}>"
    return text if len(text) <= 80 else text[:77] + "..."


def _qualified(klass: type) -> str:
    return f"{klass.__module__}.{klass.__qualname__}"


def _attributes(module: Any) -> dict[str, Any]:
    """The plain values a module holds (``p`` of a dropout, ``h`` of an attention layer,
    ``config`` of a model): what checks may read without calling learner code."""
    found = {}
    for name, value in vars(module).items():
        if name.startswith("_") or name == "training":
            continue
        if _plain(value):
            found[name] = value
        if len(found) >= MAX_ATTRIBUTE_ITEMS:
            break
    return found


def _plain(value: Any, depth: int = 0) -> bool:
    if isinstance(value, ATTRIBUTE_TYPES):
        return True
    if depth < 2 and isinstance(value, (list, tuple)) and len(value) <= MAX_ATTRIBUTE_ITEMS:
        return all(_plain(v, depth + 1) for v in value)
    if depth < 2 and isinstance(value, dict) and len(value) <= MAX_ATTRIBUTE_ITEMS:
        return all(isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items())
    return False


def _methods(module: Any) -> list[str]:
    """Public methods the learner's classes define (``forward``, ``encode``, ...)."""
    import torch

    names = set()
    for klass in type(module).__mro__:
        if klass is torch.nn.Module or not issubclass(klass, torch.nn.Module):
            break
        names |= {n for n, v in vars(klass).items() if callable(v) and not n.startswith("_")}
    return sorted(names)


def describe_module(module: Any) -> dict[str, Any]:
    """The structure of ``module`` as plain values (see :mod:`autograder.sandbox.client`)."""
    nodes = []
    for path, sub in module.named_modules(remove_duplicate=False):
        nodes.append({
            "path": path, "id": id(sub), "type": _qualified(type(sub)),
            "mro": [_qualified(k) for k in type(sub).__mro__[1:]],
            "training": bool(sub.training), "attributes": _attributes(sub),
            "methods": _methods(sub),
        })
    persistent = set(module.state_dict().keys())
    return {
        "nodes": nodes,
        "parameters": [[name, id(p), list(p.shape), str(p.dtype).removeprefix("torch."),
                        bool(p.requires_grad)]
                       for name, p in module.named_parameters(remove_duplicate=False)],
        "buffers": [[name, id(b), list(b.shape), str(b.dtype).removeprefix("torch."),
                     name in persistent]
                    for name, b in module.named_buffers(remove_duplicate=False)],
    }


def module_state(module: Any) -> dict[str, Any]:
    """Parameters and buffers by id (shared tensors travel once)."""
    state = {}
    for _, tensor in [*module.named_parameters(remove_duplicate=False),
                      *module.named_buffers(remove_duplicate=False)]:
        state[str(id(tensor))] = tensor.detach()
    return state


def _parameters_of(fn: Any) -> list[tuple[str, Any]]:
    """The named parameters of the module ``fn`` is (or whose bound method it is)."""
    import torch

    owner = getattr(fn, "__self__", fn)
    if isinstance(owner, torch.nn.Module):
        return [(n, p) for n, p in owner.named_parameters() if p.requires_grad]
    return []


def _copy(value: Any) -> Any:
    return value.copy() if isinstance(value, np.ndarray) else value.detach().clone()


def _same(old: Any, new: Any) -> bool:
    if isinstance(old, np.ndarray):
        return old.shape == new.shape and np.array_equal(old, new, equal_nan=True)
    import torch

    return old.shape == new.shape and bool(torch.equal(old, new.detach()))
