"""Learner modules seen from the grader: :class:`RemoteModule`, a real ``nn.Module`` that mirrors
one that lives in a learner's process (see :mod:`autograder.sandbox.client`).

The mirror has the learner's sub-modules (named like the learner's classes, and deriving from
the torch.nn class the learner's derives from, such as ``nn.Dropout``), parameters and buffers
(names, shapes, dtypes, values, and the sharing between them), training flags, plain attributes
(``p``, ``h``, ``config``) and public methods. Calls run in the learner's process; a backward
pass asks that process for the gradients (:func:`autograder.sandbox.client.Peer.invoke`).
``train``/``eval``, a change of dtype and ``load_state_dict`` go to the learner's module, and the
mirror is read again afterwards.

It imports torch, so it is loaded only when a learner's code hands back a module.
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from autograder.sandbox.learner_errors import rebuild_exception

if TYPE_CHECKING:
    # Only named in annotations: the peer module imports this one when a module comes back.
    from autograder.sandbox.client import Peer


class _Remote:
    """Where a mirrored module lives: the process, the root's handle, the path below it."""

    def __init__(self, process: Peer, handle: int, path: str, type_name: str,
                 attributes: dict[str, Any], methods: list[str]) -> None:
        self.process, self.handle, self.path = process, handle, path
        self.type_name, self.attributes, self.methods = type_name, attributes, methods
        self.root: RemoteModule | None = None

    def target(self, attr: str | None = None) -> dict[str, Any]:
        target = {"handle": self.handle, "path": self.path}
        if attr:
            target["attr"] = attr
        return target


def _torch_base(type_name: str, mro: list[str]) -> type | None:
    """The torch.nn class a learner's module is (or derives from), resolved in the grader."""
    for name in [type_name, *mro]:
        module, _, qualname = name.rpartition(".")
        if not module.startswith("torch.nn."):
            continue
        try:
            klass = getattr(importlib.import_module(module), qualname)
        except (ImportError, AttributeError):
            continue
        if isinstance(klass, type) and issubclass(klass, torch.nn.Module) and (
                klass is not torch.nn.Module):
            return klass
    return None


@functools.cache
def _mirror_class(type_name: str, mro: tuple[str, ...]) -> type:
    base = _torch_base(type_name, list(mro))
    bases = (RemoteModule,) if base is None else (RemoteModule, base)
    module, _, short = type_name.rpartition(".")
    # Named as in the learner's process, so messages name the class as a local check does.
    return type(short, bases, {"__module__": module[:120] or "learner", "__qualname__": short})


class RemoteModule(nn.Module):
    """A learner's ``nn.Module`` seen from the grader (see the module docstring).

    Build one with :meth:`attach`. Its class is named like the learner's (and derives from the
    torch.nn class the learner's derives from, such as ``nn.Dropout``), so messages and
    ``isinstance`` checks read naturally.
    """

    _remote: _Remote

    @classmethod
    def attach(cls, process: Peer, handle: int) -> RemoteModule:
        """Mirror the learner's module held under ``handle``."""
        description = _request_value(process, {"op": "describe", "target": {"handle": handle}})
        nodes = _build_tree(process, handle, description)
        root = nodes[""]
        _load_values(process, root, description)
        return root

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        remote = self._remote
        return remote.process.invoke(remote.target(), args, kwargs,
                                     f"{type(self).__name__}.forward",
                                     list(self.named_parameters()))

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            pass
        remote = self.__dict__.get("_remote")
        if remote is not None and name in remote.attributes:
            return remote.attributes[name]
        if remote is not None and name in remote.methods:
            return functools.partial(self._method, name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def _method(self, name: str, *args: Any, **kwargs: Any) -> Any:
        remote = self._remote
        return remote.process.invoke(remote.target(name), args, kwargs,
                                     f"{type(self).__name__}.{name}",
                                     list(self.named_parameters()))

    def __repr__(self) -> str:
        return f"<your {type(self).__name__}>"

    def train(self, mode: bool = True) -> RemoteModule:
        remote = self._remote
        _request_value(remote.process, {"op": "module", "target": remote.target(),
                                        "action": "train", "mode": bool(mode)})
        for module in self.modules():  # the learner's module set its own children's flags
            module.training = bool(mode)
        return self

    def to(self, *args: Any, **kwargs: Any) -> RemoteModule:
        device, dtype, _, _ = torch._C._nn._parse_to(*args, **kwargs)
        if device is not None and torch.device(device).type != "cpu":
            raise RuntimeError("the grader runs learner modules on the CPU")
        if dtype is not None:
            remote = self._remote
            _request_value(remote.process, {"op": "module", "target": remote.target(),
                                            "action": "to",
                                            "dtype": str(dtype).removeprefix("torch.")})
            self.refresh()
        return self

    def double(self) -> RemoteModule:
        return self.to(_dtype("float64"))

    def float(self) -> RemoteModule:
        return self.to(_dtype("float32"))

    def half(self) -> RemoteModule:
        return self.to(_dtype("float16"))

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        from torch.nn.modules.module import _IncompatibleKeys

        remote = self._remote
        blobs: list[bytes] = []
        state = remote.process.codec.encode(dict(state_dict), blobs)
        reply, reply_blobs = remote.process.request(
            {"op": "module", "target": remote.target(), "action": "load_state_dict",
             "state": state, "strict": bool(strict)}, blobs)
        if "error" in reply:
            raise rebuild_exception(reply)
        keys = remote.process.codec.decode(reply["value"], reply_blobs)
        self.refresh()
        return _IncompatibleKeys(list(keys["missing"]), list(keys["unexpected"]))

    def remote_seed(self, seed: int) -> None:
        """Seed the random generators of the learner's process."""
        self._remote.process.seed(seed)

    def refresh(self) -> None:
        """Read the structure and values again after the learner's module changed."""
        root = self._remote.root
        remote = root._remote
        description = _request_value(remote.process, {"op": "describe",
                                                      "target": remote.target()})
        if _structure(description) != _structure(root._description):
            _build_tree(remote.process, remote.handle, description, root=root)
        _load_values(remote.process, root, description)


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def _request_value(process: Peer, header: dict[str, Any]) -> Any:
    reply, blobs = process.request(header)
    if "error" in reply:
        raise rebuild_exception(reply)
    return process.codec.decode(reply["value"], blobs) if "value" in reply else None


def _structure(description: dict[str, Any]) -> Any:
    return ([(n["path"], n["id"], n["type"]) for n in description["nodes"]],
            [tuple(p[:3]) for p in description["parameters"]],
            [tuple(b[:3]) for b in description["buffers"]])


def _build_tree(process: Peer, handle: int, description: dict[str, Any],
                root: RemoteModule | None = None) -> dict[str, RemoteModule]:
    """Local mirror nodes by path, sharing nodes and tensors the way the learner's module
    shares them."""
    nodes: dict[str, RemoteModule] = {}
    by_id: dict[int, RemoteModule] = {}
    for node in description["nodes"]:
        path = node["path"]
        if node["id"] in by_id:
            module = by_id[node["id"]]
        else:
            klass = _mirror_class(node["type"], tuple(node["mro"]))
            if path == "" and root is not None:
                module = root
                root.__class__ = klass
                for store in (module._modules, module._parameters, module._buffers):
                    store.clear()
                module._non_persistent_buffers_set.clear()
            else:
                module = klass.__new__(klass)
                torch.nn.Module.__init__(module)
            module._remote = _Remote(process, handle, path, node["type"], node["attributes"],
                                     node["methods"])
            module.training = node["training"]
            by_id[node["id"]] = module
        nodes[path] = module
        if path:
            parent, _, name = path.rpartition(".")
            nodes[parent]._modules[name] = module
    tensors: dict[int, Any] = {}
    for name, key, shape, dtype, requires_grad in description["parameters"]:
        owner, _, leaf = name.rpartition(".")
        if key not in tensors:
            tensors[key] = torch.nn.Parameter(torch.zeros(shape, dtype=_dtype(dtype)),
                                              requires_grad=requires_grad)
        nodes[owner]._parameters[leaf] = tensors[key]
    for name, key, shape, dtype, persistent in description["buffers"]:
        owner, _, leaf = name.rpartition(".")
        tensors.setdefault(key, torch.zeros(shape, dtype=_dtype(dtype)))
        nodes[owner]._buffers[leaf] = tensors[key]
        if not persistent:
            nodes[owner]._non_persistent_buffers_set.add(leaf)
    for module in by_id.values():
        module._remote.root = nodes[""]
    nodes[""]._description = description
    nodes[""]._tensors = tensors
    return nodes


def _load_values(process: Peer, root: RemoteModule,
                 description: dict[str, Any]) -> None:
    values = _request_value(process, {"op": "state", "target": root._remote.target()})
    with torch.no_grad():
        for key, tensor in root._tensors.items():
            new = values.get(str(key))
            if new is not None:
                tensor.data = new
    root._description = description
