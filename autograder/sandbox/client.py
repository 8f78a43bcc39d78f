"""The grader's end of a learner's sandboxed process: proxies that look like the learner's code.

:class:`LearnerProcess` starts the process (see :mod:`autograder.sandbox.worker`, mode
``learner``), which runs the solution cells and then answers requests over the wire
(:mod:`autograder.sandbox.wire`); :class:`SocketPeer` is the same end for a learner's own kernel
that asked the class's checking service for a visible check. The checks never see the
learner's objects, only proxies:

* :class:`RemoteCallable` for a function or a class: calling it calls the learner's code in
  its process with the same arguments, sent as values;
* :class:`RemoteModule` for an ``nn.Module`` the learner's code built: a real ``nn.Module`` in
  the grader whose sub-modules, parameters and buffers mirror the learner's (names, shapes,
  values, sharing, training flags, the learner's class names), so that the checks can use
  ``state_dict``, ``load_state_dict``, ``named_parameters``, ``.double()``, ``.eval()``,
  ``model.generator.proj.weight`` and autograd as on a local module. Every call runs in the
  learner's process; a backward pass asks that process for the gradients of the inputs and
  parameters (:class:`_RemoteCall`).

What comes back is trusted as values only: numbers, arrays, tensors and text. A learner object
that cannot travel stays in its process and is named by a handle.
"""

from __future__ import annotations

import contextlib
import functools
import os
import select
import socket
import subprocess
import time
from typing import Any

import numpy as np

from autograder.sandbox import wire
from autograder.sandbox.launcher import kill
from autograder.sandbox.learner_errors import WorkerFailedError, rebuild_exception

# ----------------------------------------------------------------------------- the peers


class Peer:
    """The learner's end of the wire, seen from the checks: requests with deadlines, proxies,
    and what the learner's code tried to import. :class:`LearnerProcess` is a sandboxed
    process of the grader's; :class:`SocketPeer` a learner's own kernel that asked the class's
    checking service for a verdict (:mod:`autograder.hub.checking`).

    Args:
        call_timeout_s: the longest one request may take.
        deadline: ``time.monotonic()`` after which no request may run (the learner's grading
            deadline), or None.
        start_timeout_s: how long, from now, the peer may take to say what it defines.
    """

    def __init__(self, *, call_timeout_s: float, deadline: float | None = None,
                 start_timeout_s: float = 60.0) -> None:
        self.call_timeout_s, self.deadline = call_timeout_s, deadline
        self.codec = GraderCodec(self)
        self.failure: str | None = None
        self.blocked: list[str] = []
        self.header: dict[str, Any] = {}
        self.cells: list[dict[str, Any]] = []
        self.names: dict[str, str] = {}
        self._start_timeout_s = start_timeout_s
        self._start_deadline: float | None = time.monotonic() + start_timeout_s

    # ------------------------------------------------------------------ the transport

    def _reader(self) -> int:
        """The file descriptor replies arrive on."""
        raise NotImplementedError

    def _writer(self) -> Any:
        """The binary stream requests go to."""
        raise NotImplementedError

    def _ended(self) -> str:
        """Why the reader reached its end, for the failure message."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def wait_started(self) -> None:
        """Wait until the peer said what it defines (its first message: ``cells`` and
        ``names``, kept in ``header``); does nothing the second time.

        Raises:
            WorkerFailedError: the peer died, broke the protocol or took longer than
                ``start_timeout_s`` from its start.
        """
        if self._start_deadline is None:
            return
        # A peer that was ready in time has its report waiting: a moment is enough to read it
        # even when the grader comes back late.
        deadline = max(self._start_deadline, time.monotonic() + 0.1)
        self._start_deadline = None
        self.header, _ = self._receive(self._start_timeout_s, deadline)
        self.cells = self.header.get("cells", [])
        self.names = self.header.get("names", {})

    def _timeout(self, wanted: float) -> float:
        if self.deadline is None:
            return wanted
        return min(wanted, self.deadline - time.monotonic())

    def _receive(self, timeout_s: float, deadline: float | None = None,
                 ) -> tuple[dict[str, Any], list[bytes]]:
        """One message, which must arrive within ``timeout_s`` (from now, or by ``deadline``)."""
        if deadline is None:
            deadline = time.monotonic() + max(timeout_s, 0.0)
        size = int.from_bytes(self._read(4, deadline, timeout_s), "big")
        if size > wire.MAX_FRAME:
            self._fail(f"sent a message of {size} bytes, more than the limit")
        try:
            return wire.parse_frame(self._read(size, deadline, timeout_s))
        except wire.WireError as exc:
            self._fail(f"sent a malformed message ({exc})")

    def _read(self, n: int, deadline: float, timeout_s: float) -> bytes:
        fd = self._reader()
        chunks, missing = [], n
        while missing:
            left = deadline - time.monotonic()
            ready = select.select([fd], [], [], left)[0] if left > 0 else []
            if not ready:
                self._fail(f"did not answer within {max(timeout_s, 0):.0f} s (an endless loop, "
                           "a long sleep, or the learner's grading time ran out)")
            try:
                chunk = os.read(fd, missing)
            except ConnectionError:
                chunk = b""
            if not chunk:
                self._fail(self._ended())
            chunks.append(chunk)
            missing -= len(chunk)
        return b"".join(chunks)

    def _fail(self, what: str) -> None:
        self.failure = f"the sandboxed process that runs your solution {what}"
        self.close()
        raise WorkerFailedError(self.failure)

    def request(self, header: dict[str, Any], value_blobs: list[bytes] | None = None,
                ) -> tuple[dict[str, Any], list[bytes]]:
        """Send one request; return the reply and its blobs.

        Raises:
            WorkerFailedError: the peer is gone, timed out or broke the protocol.
        """
        if self.failure:
            raise WorkerFailedError(self.failure)
        self.wait_started()
        try:
            wire.write_frame(self._writer(), header, value_blobs or [])
        except OSError:
            self._fail("was gone before the request")
        reply, blobs = self._receive(self._timeout(self.call_timeout_s))
        self.blocked += [str(b) for b in reply.get("blocked", [])]
        if "protocol" in reply:
            self._fail(f"could not read the grader's request ({reply['protocol']})")
        return reply, blobs

    # ------------------------------------------------------------------ requests

    def proxy(self, name: str) -> RemoteCallable | None:
        """The learner's ``name`` (a function or a class) as a callable proxy; None when the
        solution cells do not define it."""
        self.wait_started()
        if name not in self.names:
            return None
        return RemoteCallable(self, {"name": name}, name)

    def seed(self, seed: int) -> None:
        """Seed torch, NumPy and ``random`` in the learner's process."""
        self.request({"op": "seed", "seed": int(seed)})

    def invoke(self, target: dict[str, Any], args: tuple[Any, ...], kwargs: dict[str, Any],
               name: str, parameters: list[tuple[str, Any]] = ()) -> Any:
        """Call ``target`` in the learner's process and return the decoded result.

        When autograd needs it (grad enabled, and an input or one of ``parameters`` requires
        grad), the call is recorded there and its outputs are connected to the inputs and
        ``parameters`` here through :class:`_RemoteCall`.
        """
        torch = wire._torch()
        tensors = wire.tensors_in((args, kwargs))
        grad = torch is not None and torch.is_grad_enabled() and (
            any(t.requires_grad for t in tensors) or any(p.requires_grad for _, p in parameters))
        header = {"op": "call", "target": target}
        if not grad:
            reply, blobs = self._call(header, args, kwargs, name, record=False)
            return self.codec.decode(reply["value"], blobs)
        call = _Call(self, header, args, kwargs, name, parameters)
        differentiable = [t for t in tensors if t.requires_grad]
        outputs = _remote_call().apply(call, *differentiable, *call.parameters)
        return wire.replace_tensors(call.value, list(outputs))

    def _call(self, header: dict[str, Any], args: tuple[Any, ...], kwargs: dict[str, Any],
              name: str, *, record: bool) -> tuple[dict[str, Any], list[bytes]]:
        blobs: list[bytes] = []
        try:
            header = {**header, "args": self.codec.encode(args, blobs),
                      "kwargs": self.codec.encode(kwargs, blobs)}
        except TypeError as exc:
            raise WorkerFailedError(f"the grader cannot send {exc} to your process; this "
                                    "exercise needs a human") from None
        if record:
            header["record"] = True
            header["grad"] = [bool(t.requires_grad) for t in wire.tensors_in((args, kwargs))]
        torch = wire._torch()
        header["grad_enabled"] = bool(record or (torch is not None and torch.is_grad_enabled()))
        reply, reply_blobs = self.request(header, blobs)
        if "error" in reply:
            raise rebuild_exception(reply)
        _mirror_changes(args, kwargs, reply.get("changed", {}), reply_blobs, self.codec)
        return reply, reply_blobs


class LearnerProcess(Peer):
    """A learner process of the grader's (see :mod:`autograder.sandbox.worker`, mode
    ``learner``), which runs the solution cells, reports them, then answers requests.

    Args:
        command: the sandbox command that starts the worker in ``learner`` mode.
        log: where its standard error goes.
        env: its environment.
        wait: wait here until the solution cells ran; False returns at once, so that the process
            starts while the grader does other work, and :meth:`wait_started` waits later.
        call_timeout_s, deadline, start_timeout_s: see :class:`Peer`; ``start_timeout_s`` is
            how long its solution cells may take to run.
    """

    def __init__(self, command: list[str], log: os.PathLike, *, env: dict[str, str],
                 call_timeout_s: float, deadline: float | None = None,
                 start_timeout_s: float = 60.0, wait: bool = True) -> None:
        super().__init__(call_timeout_s=call_timeout_s, deadline=deadline,
                         start_timeout_s=start_timeout_s)
        with open(log, "wb") as err:
            self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=err, env=env, start_new_session=True)
        if wait:
            self.wait_started()

    def _reader(self) -> int:
        assert self.process.stdout is not None
        return self.process.stdout.fileno()

    def _writer(self) -> Any:
        return self.process.stdin

    def _ended(self) -> str:
        self.process.wait(timeout=5)
        return (f"ended with exit status {self.process.returncode} (os._exit, sys.exit at top "
                "level, a crash, or the memory limit)")

    def close(self) -> None:
        if self.process.poll() is None:
            kill(self.process)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None and not stream.closed:
                stream.close()


class SocketPeer(Peer):
    """A learner's kernel on the other end of a connected socket: the checking service's view
    of the function it was asked to check (see :mod:`autograder.learner.remote_check`)."""

    def __init__(self, connection: socket.socket, *, call_timeout_s: float,
                 deadline: float | None = None, start_timeout_s: float = 10.0) -> None:
        super().__init__(call_timeout_s=call_timeout_s, deadline=deadline,
                         start_timeout_s=start_timeout_s)
        self.connection = connection
        self.stream = connection.makefile("wb")

    def _reader(self) -> int:
        return self.connection.fileno()

    def _writer(self) -> Any:
        return self.stream

    def _ended(self) -> str:
        return "closed the connection"

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.stream.close()
            self.connection.close()

    def _fail(self, what: str) -> None:
        self.failure = f"your kernel {what}"
        self.close()
        raise WorkerFailedError(self.failure)

    def send(self, header: dict[str, Any]) -> None:
        """A message that asks for no reply (the verdict)."""
        wire.write_frame(self.stream, header, [])


def _mirror_changes(args: tuple[Any, ...], kwargs: dict[str, Any], changed: dict[str, Any],
                    blobs: list[bytes], codec: wire.Codec) -> None:
    """Apply the learner's in-place edits of its arguments to the grader's copies, so that the
    checks can say "modified argument 1 in place"."""
    if not changed:
        return
    inputs = wire.inputs_in((args, kwargs))
    for position, tree in changed.items():
        original, new = inputs[int(position)], codec.decode(tree, blobs)
        if isinstance(original, np.ndarray) and isinstance(new, np.ndarray) and (
                new.shape == original.shape):
            np.copyto(original, new, casting="unsafe")
        elif wire.is_tensor(original) and wire.is_tensor(new) and new.shape == original.shape:
            import torch

            with torch.no_grad():
                original.copy_(new)


class GraderCodec(wire.Codec):
    """Proxies travel as their handles; models built for the learner travel as recipes."""

    def __init__(self, process: Peer) -> None:
        self.process = process

    def encode_object(self, value: Any, blobs: list[bytes]) -> Any:
        if isinstance(value, (RemoteCallable, RemoteObject)) and value.process is self.process:
            return {"$handle": value.handle}
        remote = getattr(value, "_remote", None)
        if remote is not None and getattr(remote, "process", None) is self.process:
            return {"$handle": remote.handle, "path": remote.path}
        recipe = getattr(value, "grading_recipe", None)
        if callable(recipe):
            spec = dict(recipe())
            for key in ("args", "kwargs", "state"):
                spec[key] = self.encode(spec.get(key, () if key == "args" else {}), blobs)
            if spec.get("dtype") is not None:
                spec["dtype"] = str(spec["dtype"]).removeprefix("torch.")
            return {"$build": spec}
        raise TypeError(f"a value of type {type(value).__qualname__}")

    def decode_handle(self, tree: dict[str, Any]) -> Any:
        handle, kind = tree.get("$handle"), tree.get("kind")
        if not isinstance(handle, int):
            raise wire.WireError(f"the handle {handle!r}")
        shown = str(tree.get("type", "object"))[:120]
        if kind == "module":
            from autograder.sandbox.remote_module import RemoteModule

            return RemoteModule.attach(self.process, handle)
        if kind in ("callable", "class"):
            return RemoteCallable(self.process, {"handle": handle}, shown.rsplit(".", 1)[-1])
        return RemoteObject(self.process, handle, shown, str(tree.get("repr", ""))[:120])


class RemoteObject:
    """A learner object that stays in its process (neither a value, a function nor a module)."""

    def __init__(self, process: Peer, handle: int, type_name: str, text: str) -> None:
        self.process, self.handle, self.type_name, self.text = process, handle, type_name, text

    def __repr__(self) -> str:
        return self.text or f"<{self.type_name}>"


class RemoteCallable:
    """A learner function or class. Calling it runs the learner's code in its process."""

    def __init__(self, process: Peer, target: dict[str, Any], name: str) -> None:
        self.process, self.target = process, target
        self.handle = target.get("handle")
        self.__name__ = self.__qualname__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.process.invoke(self.target, args, kwargs, self.__name__)

    def __getattr__(self, name: str) -> RemoteCallable:
        """A method of a learner's object that a call returned (``cache.reorder``), called in
        its process like the object itself."""
        if name.startswith("_") or "handle" not in self.target or "attr" in self.target:
            raise AttributeError(name)
        return RemoteCallable(self.process, {**self.target, "attr": name},
                              f"{self.__name__}.{name}")

    def __repr__(self) -> str:
        return f"<your {self.__name__}>"


# ----------------------------------------------------------------------------- autograd


class _Call:
    """One recorded call: its request, its result with the output tensors, and the parameters
    whose gradients the backward pass returns."""

    def __init__(self, process: Peer, header: dict[str, Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any], name: str, parameters: list[tuple[str, Any]]) -> None:
        self.process, self.header, self.args, self.kwargs = process, header, args, kwargs
        self.name = name
        self.named = [(n, p) for n, p in parameters if p.requires_grad]
        self.parameters = [p for _, p in self.named]
        self.value: Any = None
        self.id: int | None = None
        self.grad_outputs: list[bool] = []
        self.n_inputs = 0

    def run(self) -> list[Any]:
        reply, blobs = self.process._call(self.header, self.args, self.kwargs, self.name,
                                          record=True)
        self.value = self.process.codec.decode(reply["value"], blobs)
        self.id = reply.get("call")
        outputs = wire.tensors_in(self.value)
        self.grad_outputs = [bool(g) for g in reply.get("grad_outputs", [])]
        if len(self.grad_outputs) != len(outputs):
            raise WorkerFailedError("the sandboxed process that runs your solution answered a "
                                    "call with a result the grader cannot match")
        return outputs

    def backward(self, grads: tuple[Any, ...]) -> list[Any]:
        blobs: list[bytes] = []
        cotangents = [g if needed else None for g, needed in zip(grads, self.grad_outputs,
                                                                  strict=True)
                      if needed]
        header = {"op": "backward", "call": self.id,
                  "cotangents": self.process.codec.encode(cotangents, blobs)}
        reply, reply_blobs = self.process.request(header, blobs)
        if "error" in reply:
            raise rebuild_exception(reply)
        result = self.process.codec.decode(reply["value"], reply_blobs)
        by_name = result.get("parameters", {})
        return list(result.get("inputs", [])) + [by_name.get(n) for n, _ in self.named]


def _remote_call_function() -> type:
    # torch only when a check hands a learner's module a tensor: NumPy chapters never load it.
    import torch

    class RemoteCallFunction(torch.autograd.Function):
        """Connects a call in the learner's process to autograd in the grader's."""

        @staticmethod
        def forward(ctx: Any, call: _Call, *tensors: Any) -> tuple[Any, ...]:
            outputs = call.run()
            ctx.call = call
            ctx.n_inputs = len(tensors) - len(call.parameters)
            ctx.inputs = [(t.dtype, t.shape) for t in tensors]
            fixed = [t for t, g in zip(outputs, call.grad_outputs, strict=True)
                     if not (g and t.is_floating_point())]
            if fixed:
                ctx.mark_non_differentiable(*fixed)
            return tuple(outputs)

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
            returned = ctx.call.backward(grads)
            inputs = returned[: ctx.n_inputs] + [None] * (ctx.n_inputs - len(returned))
            params = returned[ctx.n_inputs:]
            out = []
            for got, (dtype, shape) in zip([*inputs, *params], ctx.inputs, strict=True):
                out.append(None if got is None else got.to(dtype).reshape(shape))
            return (None, *out)

    return RemoteCallFunction


@functools.cache
def _remote_call() -> type:
    return _remote_call_function()
