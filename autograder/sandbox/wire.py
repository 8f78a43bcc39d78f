"""The frames that the grader and the sandboxed worker exchange (never pickles).

A frame is a 4-byte length, then a 4-byte JSON length, the JSON header (with ``"blobs":
[sizes]``) and the binary blobs one after the other. Values travel as JSON trees whose arrays
are ``.npy`` blobs (:func:`encode`, :func:`decode`).

Both sides use this module: the grader imports it as :mod:`autograder.sandbox.wire`, and the
worker, which runs as a script without the ``autograder`` package, loads it from its own
folder. So it imports only the standard library and NumPy.
"""

from __future__ import annotations

import io
import json
import struct
from typing import Any, BinaryIO

import numpy as np

MAX_FRAME = 256 * 1024 * 1024


def write_frame(stream: BinaryIO, header: dict[str, Any], blobs: list[bytes]) -> None:
    """One message: 4-byte length, then 4-byte JSON length, the JSON header (with
    ``"blobs": [sizes]``) and the binary blobs one after the other."""
    header = {**header, "blobs": [len(b) for b in blobs]}
    text = json.dumps(header).encode()
    body = struct.pack(">I", len(text)) + text + b"".join(blobs)
    stream.write(struct.pack(">I", len(body)) + body)
    stream.flush()


def parse_frame(body: bytes) -> tuple[dict[str, Any], list[bytes]]:
    """Split a frame body (without its outer length) into its header and blobs."""
    (size,) = struct.unpack(">I", body[:4])
    header = json.loads(body[4: 4 + size])
    blobs, offset = [], 4 + size
    for n in header["blobs"]:
        blobs.append(body[offset: offset + n])
        offset += n
    return header, blobs


def encode(value: Any, blobs: list[bytes]) -> Any:
    """A JSON-able tree for ``value``; arrays go to ``blobs`` as ``.npy`` bytes.

    Raises:
        TypeError: a type the protocol does not carry (objects, functions, object arrays).
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if array.dtype.hasobject:
            raise TypeError("an array of Python objects")
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=False)
        blobs.append(buffer.getvalue())
        key = "$array" if isinstance(value, np.ndarray) else "$scalar"
        return {key: len(blobs) - 1}
    if isinstance(value, (list, tuple)):
        items = [encode(v, blobs) for v in value]
        return {"$tuple": items} if isinstance(value, tuple) else {"$list": items}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"$dict": {k: encode(v, blobs) for k, v in value.items()}}
    raise TypeError(f"a value of type {type(value).__qualname__}")


def decode(tree: Any, blobs: list[bytes]) -> Any:
    """The inverse of :func:`encode`; arrays are read with ``allow_pickle=False``."""
    if not isinstance(tree, dict):
        return tree
    if "$array" in tree or "$scalar" in tree:
        array = np.load(io.BytesIO(blobs[tree.get("$array", tree.get("$scalar"))]),
                        allow_pickle=False)
        return array if "$array" in tree else array[()]
    if "$tuple" in tree:
        return tuple(decode(v, blobs) for v in tree["$tuple"])
    if "$list" in tree:
        return [decode(v, blobs) for v in tree["$list"]]
    return {k: decode(v, blobs) for k, v in tree["$dict"].items()}


def read_frame(stream: BinaryIO) -> tuple[dict[str, Any], list[bytes]] | None:
    """Read one frame from a blocking stream; None at end of file."""
    head = stream.read(4)
    if len(head) < 4:
        return None
    (size,) = struct.unpack(">I", head)
    if size > MAX_FRAME:
        raise ValueError(f"frame of {size} bytes is larger than {MAX_FRAME}")
    return parse_frame(stream.read(size))
