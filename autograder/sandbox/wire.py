"""The wire between the grader and a learner's sandboxed process.

A message is one frame: a 4-byte length, a 4-byte JSON length, a JSON header, then binary blobs
(``"blobs": [sizes]`` in the header). Values travel as JSON trees in which arrays and tensors
are replaced by the index of a blob that holds their ``.npy`` bytes, read back with
``allow_pickle=False``. Nothing is ever unpickled, so a learner's process can send numbers and
text, never code or objects that run when they are read.

Both sides import this module: the grader as ``autograder.sandbox.wire``, the learner's process
from the worker's own folder. It needs only the standard library and NumPy; torch is used when
a tensor travels, and imported only then.

Tree forms (everything else is a JSON scalar):

* ``{"$float": "nan" | "inf" | "-inf"}``: floats JSON cannot write;
* ``{"$array": i}`` / ``{"$scalar": i}``: a NumPy array / scalar in blob ``i``;
* ``{"$tensor": i, "dtype": name, "grad": bool}``: a torch tensor (its values in blob ``i``;
  bfloat16 travels as float32);
* ``{"$dtype": name}``: a torch dtype;
* ``{"$list": [...]}``, ``{"$tuple": [...]}``, ``{"$dict": {str: ...}}``;
* ``{"$handle": n, ...}``: an object that stays in the learner's process (see
  :class:`Codec.encode_object`);
* ``{"$build": {...}}``: a model the learner's process builds from allowed code and weights.
"""

from __future__ import annotations

import io
import json
import math
import struct
import sys
from collections.abc import Callable
from typing import Any, BinaryIO

import numpy as np

MAX_FRAME = 256 * 1024 * 1024
MAX_DEPTH = 64
# dtypes a tensor may have on the wire (torch name -> NumPy dtype of its blob)
TENSOR_DTYPES = {
    "float64": "float64", "float32": "float32", "float16": "float16", "bfloat16": "float32",
    "int64": "int64", "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8",
    "bool": "bool", "complex64": "complex64", "complex128": "complex128",
}


class WireError(ValueError):
    """A frame or tree that breaks the format (too large, too deep, unknown form)."""


# ----------------------------------------------------------------------------- frames


def write_frame(stream: BinaryIO, header: dict[str, Any], blobs: list[bytes]) -> None:
    """Write one message and flush."""
    header = {**header, "blobs": [len(b) for b in blobs]}
    text = json.dumps(header, allow_nan=False).encode()
    body = struct.pack(">I", len(text)) + text + b"".join(blobs)
    if len(body) > MAX_FRAME:
        raise WireError(f"a message of {len(body)} bytes is larger than {MAX_FRAME}")
    stream.write(struct.pack(">I", len(body)) + body)
    stream.flush()


def parse_frame(body: bytes) -> tuple[dict[str, Any], list[bytes]]:
    """Split a frame body (without its outer length) into its header and blobs.

    Raises:
        WireError: the body does not hold a well-formed frame.
    """
    if len(body) < 4:
        raise WireError("a frame shorter than its header length")
    (size,) = struct.unpack(">I", body[:4])
    try:
        header = json.loads(body[4: 4 + size])
    except (ValueError, RecursionError) as exc:
        raise WireError(f"a frame header that is not JSON ({type(exc).__name__})") from None
    sizes = header.get("blobs") if isinstance(header, dict) else None
    if not isinstance(sizes, list) or not all(isinstance(n, int) and n >= 0 for n in sizes):
        raise WireError("a frame header without a valid list of blob sizes")
    blobs, offset = [], 4 + size
    for n in sizes:
        blobs.append(body[offset: offset + n])
        offset += n
    if offset != len(body):
        raise WireError("a frame whose blobs do not add up to its length")
    return header, blobs


def read_frame(stream: BinaryIO) -> tuple[dict[str, Any], list[bytes]] | None:
    """Read one frame from a blocking stream; None at end of file."""
    head = stream.read(4)
    if len(head) < 4:
        return None
    (size,) = struct.unpack(">I", head)
    if size > MAX_FRAME:
        raise WireError(f"a frame of {size} bytes is larger than {MAX_FRAME}")
    return parse_frame(stream.read(size))


# ----------------------------------------------------------------------------- values


def _torch() -> Any:
    """The torch module when it is already imported (a tensor can exist only then)."""
    return sys.modules.get("torch")


def is_tensor(value: Any) -> bool:
    torch = _torch()
    return torch is not None and isinstance(value, torch.Tensor)


def _npy(array: np.ndarray, blobs: list[bytes]) -> int:
    if array.dtype.hasobject:
        raise TypeError("an array of Python objects")
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    blobs.append(buffer.getvalue())
    return len(blobs) - 1


def _load(blobs: list[bytes], index: Any) -> np.ndarray:
    if not isinstance(index, int) or not 0 <= index < len(blobs):
        raise WireError(f"a reference to blob {index!r}, which the frame does not have")
    try:
        return np.load(io.BytesIO(blobs[index]), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise WireError(f"a blob that is not .npy data ({exc})") from None


class Codec:
    """Turns values into trees and back. Subclasses decide what happens to other objects:
    :meth:`encode_object` (default: refuse) and :meth:`decode_handle` / :meth:`decode_build`
    (default: refuse)."""

    def encode(self, value: Any, blobs: list[bytes], depth: int = 0) -> Any:
        """The tree of ``value``; arrays and tensors go to ``blobs``.

        Raises:
            TypeError: a value the wire does not carry and :meth:`encode_object` refuses.
        """
        if depth > MAX_DEPTH:
            raise TypeError(f"a value nested more than {MAX_DEPTH} levels deep")
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else {"$float": repr(value)}
        if isinstance(value, np.ndarray):
            return {"$array": _npy(value, blobs)}
        if isinstance(value, np.generic):
            return {"$scalar": _npy(np.asarray(value), blobs)}
        if is_tensor(value):
            return self.encode_tensor(value, blobs)
        torch = _torch()
        if torch is not None and isinstance(value, torch.dtype):
            return {"$dtype": str(value).removeprefix("torch.")}
        if isinstance(value, (list, tuple)):
            items = [self.encode(v, blobs, depth + 1) for v in value]
            return {"$tuple": items} if isinstance(value, tuple) else {"$list": items}
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return {"$dict": {k: self.encode(v, blobs, depth + 1) for k, v in value.items()}}
        return self.encode_object(value, blobs)

    def encode_tensor(self, tensor: Any, blobs: list[bytes]) -> dict[str, Any]:
        dtype = str(tensor.dtype).removeprefix("torch.")
        if dtype not in TENSOR_DTYPES:
            raise TypeError(f"a tensor of dtype {dtype}")
        data = tensor.detach().cpu()
        if dtype == "bfloat16":
            data = data.float()
        return {"$tensor": _npy(data.resolve_conj().resolve_neg().numpy(), blobs),
                "dtype": dtype, "grad": bool(tensor.requires_grad)}

    def encode_object(self, value: Any, blobs: list[bytes]) -> Any:
        raise TypeError(f"a value of type {type(value).__qualname__}")

    def decode(self, tree: Any, blobs: list[bytes], depth: int = 0) -> Any:
        """The value of ``tree``.

        Raises:
            WireError: a malformed tree.
        """
        if depth > MAX_DEPTH:
            raise WireError(f"a tree nested more than {MAX_DEPTH} levels deep")
        if tree is None or isinstance(tree, (bool, int, float, str)):
            return tree
        if isinstance(tree, list):
            raise WireError("a bare JSON list (lists travel as {'$list': ...})")
        if not isinstance(tree, dict) or len(tree) == 0:
            raise WireError(f"a tree node of type {type(tree).__name__}")
        if "$float" in tree:
            if tree["$float"] not in ("nan", "inf", "-inf"):
                raise WireError(f"the float {tree['$float']!r}")
            return float(tree["$float"])
        if "$array" in tree:
            return _load(blobs, tree["$array"])
        if "$scalar" in tree:
            return _load(blobs, tree["$scalar"])[()]
        if "$tensor" in tree:
            return self.decode_tensor(tree, blobs)
        if "$dtype" in tree:
            return self.decode_dtype(tree["$dtype"])
        if "$list" in tree or "$tuple" in tree or "$dict" in tree:
            return self.decode_container(tree, blobs, depth)
        if "$handle" in tree:
            return self.decode_handle(tree)
        if "$build" in tree:
            return self.decode_build(tree["$build"], blobs)
        raise WireError(f"an unknown tree node with keys {sorted(tree)[:5]}")

    def decode_container(self, tree: dict[str, Any], blobs: list[bytes], depth: int) -> Any:
        """The list, tuple or dict of a ``$list``, ``$tuple`` or ``$dict`` node."""
        if "$list" in tree or "$tuple" in tree:
            items = tree.get("$list", tree.get("$tuple"))
            if not isinstance(items, list):
                raise WireError("a list node without a JSON list")
            values = [self.decode(v, blobs, depth + 1) for v in items]
            return values if "$list" in tree else tuple(values)
        items = tree["$dict"]
        if not isinstance(items, dict):
            raise WireError("a dict node without a JSON object")
        return {str(k): self.decode(v, blobs, depth + 1) for k, v in items.items()}

    def decode_tensor(self, tree: dict[str, Any], blobs: list[bytes]) -> Any:
        import torch

        dtype = tree.get("dtype")
        if dtype not in TENSOR_DTYPES:
            raise WireError(f"a tensor of dtype {dtype!r}")
        array = _load(blobs, tree["$tensor"])
        if array.dtype != np.dtype(TENSOR_DTYPES[dtype]):
            raise WireError(f"a {dtype} tensor stored as {array.dtype}")
        tensor = torch.from_numpy(array.copy())
        return tensor.to(torch.bfloat16) if dtype == "bfloat16" else tensor

    def decode_dtype(self, name: Any) -> Any:
        import torch

        if name not in TENSOR_DTYPES:
            raise WireError(f"the dtype {name!r}")
        return getattr(torch, name)

    def decode_handle(self, tree: dict[str, Any]) -> Any:
        raise WireError("a handle where none can be")

    def decode_build(self, recipe: Any, blobs: list[bytes]) -> Any:
        raise WireError("a model to build where none can be")


def tensors_in(value: Any) -> list[Any]:
    """The tensors inside ``value`` (lists, tuples, dicts), in the order :class:`Codec`
    writes them."""
    return _leaves(value, is_tensor)


def inputs_in(value: Any) -> list[Any]:
    """The tensors, then the NumPy arrays, inside a call's arguments ``value``: how both ends
    number the arguments that a call may change in place."""
    return tensors_in(value) + _leaves(value, lambda leaf: isinstance(leaf, np.ndarray))


def _leaves(value: Any, wanted: Callable[[Any], bool]) -> list[Any]:
    """The values inside ``value`` (lists, tuples, dicts) that are ``wanted``, in order."""
    if wanted(value):
        return [value]
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in _leaves(v, wanted)]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v, wanted)]
    return []


def replace_tensors(value: Any, new: list[Any]) -> Any:
    """``value`` with its tensors replaced, in :func:`tensors_in` order, by ``new`` (consumed)."""
    if is_tensor(value):
        return new.pop(0)
    if isinstance(value, tuple):
        return tuple(replace_tensors(v, new) for v in value)
    if isinstance(value, list):
        return [replace_tensors(v, new) for v in value]
    if isinstance(value, dict):
        return {k: replace_tensors(v, new) for k, v in value.items()}
    return value
