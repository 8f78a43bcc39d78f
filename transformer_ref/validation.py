"""Small input checks shared by the NumPy reference (and usable by the PyTorch code).

Every check raises an error whose message starts with the name of the calling function and says
what was expected, what was given and, where it helps, how to fix it, for example::

    scaled_dot_product_attention: q has last dimension 8 but k has 6; q and k must share d_k

The shape checks only read ``.shape`` and ``.ndim``, so they accept NumPy arrays and torch
tensors alike. :func:`require_array` and :func:`require_mask` return NumPy arrays.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(int(n) for n in x.shape)


def require_array(x: ArrayLike, name: str, where: str) -> np.ndarray:
    """Return ``x`` as a floating-point NumPy array.

    Floating dtypes are kept as they are (float32 stays float32); booleans and integers become
    float64. Anything else (strings, objects, complex numbers) raises ``TypeError``.
    """
    array = np.asarray(x)
    if np.issubdtype(array.dtype, np.floating):
        return array
    if np.issubdtype(array.dtype, np.integer) or array.dtype == np.bool_:
        return array.astype(np.float64)
    raise TypeError(
        f"{where}: {name} must be an array of real numbers, got dtype {array.dtype}; "
        f"pass a NumPy array of floats"
    )


def require_int(value: Any, name: str, where: str, minimum: int | None = None) -> int:
    """Return ``value`` as a Python int, checking that it is an integer ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{where}: {name} must be an integer, got {value!r} ({type(value).__name__})"
        )
    if minimum is not None and value < minimum:
        raise ValueError(f"{where}: {name} must be at least {minimum}, got {value}")
    return int(value)


def require_even(value: int, name: str, where: str) -> None:
    """Check that ``value`` is even (sine/cosine pairs need an even model width)."""
    if value % 2 != 0:
        raise ValueError(
            f"{where}: {name} must be even (dimensions come in sine/cosine pairs), got {value}"
        )


def require_divisible(value: int, divisor: int, name: str, divisor_name: str, where: str) -> None:
    """Check that ``divisor`` divides ``value``, e.g. ``d_model`` by ``num_heads``."""
    if divisor <= 0:
        raise ValueError(f"{where}: {divisor_name} must be positive, got {divisor}")
    if value % divisor != 0:
        raise ValueError(
            f"{where}: {name}={value} is not divisible by {divisor_name}={divisor}; "
            f"choose {divisor_name} so that {name} splits into equal parts"
        )


def require_ndim(x: Any, min_ndim: int, name: str, where: str, layout: str) -> None:
    """Check that ``x`` has at least ``min_ndim`` axes; ``layout`` describes the expected shape."""
    if x.ndim < min_ndim:
        raise ValueError(
            f"{where}: {name} must have shape {layout} (at least {min_ndim} dimensions), "
            f"got shape {_shape(x)}"
        )


def require_same_last_dim(a: Any, b: Any, name_a: str, name_b: str, where: str, why: str) -> None:
    """Check that ``a`` and ``b`` agree in their last axis; ``why`` names the shared size."""
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(
            f"{where}: {name_a} has last dimension {a.shape[-1]} but {name_b} has "
            f"{b.shape[-1]}; {why}"
        )


def require_same_axis(
    a: Any, b: Any, axis: int, name_a: str, name_b: str, where: str, why: str
) -> None:
    """Check that ``a.shape[axis] == b.shape[axis]``, e.g. as many keys as values."""
    if a.shape[axis] != b.shape[axis]:
        raise ValueError(
            f"{where}: {name_a} has size {a.shape[axis]} on axis {axis} but {name_b} has "
            f"{b.shape[axis]}; {why}"
        )


def require_matmul(x: Any, W: Any, name_x: str, name_W: str, where: str) -> None:
    """Check that ``W`` is a matrix that can multiply ``x`` from the right (``x @ W``)."""
    if W.ndim != 2:
        raise ValueError(f"{where}: {name_W} must be a matrix (d_in, d_out), got shape {_shape(W)}")
    if x.shape[-1] != W.shape[0]:
        raise ValueError(
            f"{where}: {name_x} has last dimension {x.shape[-1]} but {name_W} has "
            f"{W.shape[0]} rows; {name_W} must have shape ({x.shape[-1]}, d_out) "
            f"to compute {name_x} @ {name_W}"
        )


def require_vector(v: Any, size: int, name: str, where: str) -> None:
    """Check that ``v`` has shape ``(size,)`` (a bias, gain or shift)."""
    if _shape(v) != (size,):
        raise ValueError(f"{where}: {name} must have shape ({size},), got shape {_shape(v)}")


def require_broadcastable(shapes: Mapping[str, Sequence[int]], where: str) -> tuple[int, ...]:
    """Return the broadcast of several batch shapes, or explain which ones clash."""
    try:
        return tuple(np.broadcast_shapes(*(tuple(s) for s in shapes.values())))
    except ValueError:
        listed = ", ".join(f"{name} {tuple(s)}" for name, s in shapes.items())
        raise ValueError(
            f"{where}: the leading (batch) dimensions do not broadcast: {listed}; "
            f"use equal batch shapes or size-1 axes"
        ) from None


def require_keys(params: Mapping[str, Any], keys: Iterable[str], name: str, where: str) -> None:
    """Check that the dictionary ``params`` holds every key in ``keys``."""
    if not isinstance(params, Mapping):
        raise TypeError(f"{where}: {name} must be a dict, got {type(params).__name__}")
    keys = tuple(keys)
    missing = [key for key in keys if key not in params]
    if missing:
        raise ValueError(
            f"{where}: {name} is missing the key(s) {', '.join(missing)}; "
            f"expected keys {', '.join(keys)}"
        )


def require_mask(mask: ArrayLike, target_shape: Sequence[int], where: str) -> np.ndarray:
    """Return ``mask`` as a boolean array, checking it broadcasts to ``target_shape``.

    ``True`` (or 1) marks a key position that a query may attend to. Additive masks
    (0 / -inf) are rejected, because their zeros mean the opposite.
    """
    array = np.asarray(mask)
    if array.dtype != np.bool_:
        if not (np.issubdtype(array.dtype, np.number) and np.isin(array, (0, 1)).all()):
            raise ValueError(
                f"{where}: mask must be boolean or 0/1 (True = may attend), got dtype "
                f"{array.dtype} with other values; additive masks (0 / -inf) are not supported"
            )
        array = array != 0
    target = tuple(target_shape)
    try:
        np.broadcast_to(array, target)
    except ValueError:
        raise ValueError(
            f"{where}: mask of shape {array.shape} cannot broadcast to the attention scores "
            f"of shape {target} (..., n_q, n_k)"
        ) from None
    return array
