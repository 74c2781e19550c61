"""Compact copies of what a compiled structure keeps for the estimate path (compiled.py's cache).

``pack`` copies a structure's derived objects (the folded and reduced programs, the metric
categories, the periodic window: every class marked ``packable``) with each integer array, and
each float array of whole numbers (ranks), in the smallest of int8/int16/int32 that holds its
values, and each list of ints (the loop's program, closed.py) as such an array; ``unpack``
copies them back with the original dtypes and lists. A value is packed only when its round trip
is exact bit for bit, so every number computed from an unpacked copy is the one computed from
the original. Both make new objects: a structure in use elsewhere (another thread) never changes.
Fields a class names in ``_VOLATILE`` (caches of its other fields) are left out of a packed copy.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

import numpy as np

T = TypeVar("T")
PACKABLE: set[type] = set()
_SMALL = (np.int8, np.int16, np.int32)
_MIN = 64  # arrays and lists shorter than this stay as they are
ARRAY_OVERHEAD = 112  # bytes of an ndarray object besides its data (sys.getsizeof of an empty one)
INT_ITEM = 36  # bytes per element of a list of ints: the pointer and an int object (28 bytes)


def packable(cls: type[T]) -> type[T]:
    PACKABLE.add(cls)
    return cls


class _Ints:
    """An array (or a list of ints) held in a smaller integer dtype."""

    __slots__ = ("a", "dtype", "as_list")

    def __init__(self, a: np.ndarray, dtype: np.dtype, as_list: bool):
        self.a, self.dtype, self.as_list = a, dtype, as_list

    def restore(self) -> Any:
        full = self.a.astype(self.dtype)
        return full.tolist() if self.as_list else full


def _shrink(a: np.ndarray, as_list: bool = False) -> Any:
    if a.size < _MIN or a.dtype.kind not in "if" or a.dtype.itemsize <= 1:
        return a
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        return a
    lo, hi = a.min(), a.max()
    for t in _SMALL:
        info = np.iinfo(t)
        if info.min <= lo and hi <= info.max and np.dtype(t).itemsize < a.dtype.itemsize:
            small = a.astype(t)
            back = small.astype(a.dtype)
            if a.dtype.kind == "f" and not np.array_equal(back.view(np.uint8), a.view(np.uint8)):
                return a  # not whole numbers (or a −0.0): kept as it is
            return _Ints(small, a.dtype, as_list)
    return a


def pack(x: Any) -> Any:
    t = type(x)
    if t is np.ndarray:
        return _shrink(x)
    if t is list:
        if len(x) >= _MIN and type(x[0]) is int:
            a = np.asarray(x)
            if a.dtype.kind == "i":
                return _shrink(a, as_list=True)
        return x
    if t is tuple:
        return tuple(pack(v) for v in x)
    if t is dict:
        return {k: pack(v) for k, v in x.items()}
    if t in PACKABLE:
        return _copy(x, pack)
    return x


def unpack(x: Any) -> Any:
    t = type(x)
    if t is _Ints:
        return x.restore()
    if t is tuple:
        return tuple(unpack(v) for v in x)
    if t is dict:
        return {k: unpack(v) for k, v in x.items()}
    if t in PACKABLE:
        return _copy(x, unpack)
    return x


def _slots(cls: type) -> list[str]:
    return [s for c in cls.__mro__ for s in c.__dict__.get("__slots__", ())]


def _copy(obj: Any, f: Callable[[Any], Any]) -> Any:
    cls = type(obj)
    new = object.__new__(cls)
    volatile = getattr(cls, "_VOLATILE", ())
    for name in _slots(cls):
        if hasattr(obj, name):
            setattr(new, name, None if name in volatile else f(getattr(obj, name)))
    if hasattr(obj, "__dict__"):
        new.__dict__.update({k: f(v) for k, v in vars(obj).items()})
    return new


def held_bytes(x: Any, seen: set[int] | None = None) -> int:
    """Bytes held by a (packed or live) derived structure: array data exactly, a list of ints
    at ``INT_ITEM`` per element, objects and containers at a few pointers each."""
    seen = set() if seen is None else seen
    if id(x) in seen:
        return 0
    seen.add(id(x))
    t = type(x)
    if t is np.ndarray:
        return x.nbytes + ARRAY_OVERHEAD
    if t is _Ints:
        return x.a.nbytes + ARRAY_OVERHEAD + 64
    if t is list:
        if x and type(x[0]) is int:
            return 56 + INT_ITEM * len(x)
        return 56 + 8 * len(x) + sum(held_bytes(v, seen) for v in x)
    if t is tuple:
        return 40 + 8 * len(x) + sum(held_bytes(v, seen) for v in x)
    if t is dict:
        return 64 + 16 * len(x) + sum(held_bytes(v, seen) for v in x.values())
    if t in PACKABLE:
        names = _slots(t)
        n = sum(held_bytes(getattr(x, k), seen) for k in names if hasattr(x, k))
        if hasattr(x, "__dict__"):
            n += sum(held_bytes(v, seen) for v in vars(x).values())
        return 56 + 8 * len(names) + n
    return 32
