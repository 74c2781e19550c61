"""Compact copies of what a compiled structure keeps for the estimate path (compiled.py's cache).

``pack`` copies a structure's derived objects (the folded and reduced programs, the metric
categories, the periodic window: every class marked ``packable``) with each integer array, and
each float array of whole numbers (ranks), in the smallest of int8/int16/int32 that holds its
values, and each list of ints (the loop's program, closed.py) as such an array; ``squeeze``
compresses a packed copy further where the cache is short of room (zlib level 1, 1-D integer
arrays as the differences of consecutive values: a program's input indices rise by about one per
entry; about 20× smaller on a pp=64 DualPipe structure, ~40 ms, where compiling it again takes
0.5 s and more); ``unpack`` copies either back with the original dtypes and lists. A value is packed only when its round trip
is exact bit for bit, so every number computed from an unpacked copy is the one computed from
the original. Both make new objects: a structure in use elsewhere (another thread) never changes.
Fields a class names in ``_VOLATILE`` (caches of its other fields) are left out of a packed copy.
"""

from __future__ import annotations

import zlib
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
    """An array (or a list of ints) held in a smaller integer dtype (``a``), or once squeezed
    compressed (``z``), as the running differences of its values when ``delta`` (restored
    exactly: integer sums)."""

    __slots__ = ("a", "z", "shape", "dtype", "as_list", "delta")

    def __init__(self, a: np.ndarray | None, dtype: np.dtype, as_list: bool):
        self.a: np.ndarray | None = a
        self.z: tuple[bytes, np.dtype] | None = None
        self.shape: tuple[int, ...] | None = None if a is None else a.shape
        self.dtype, self.as_list, self.delta = dtype, as_list, False

    def _packed(self) -> tuple[bytes, np.dtype]:
        assert self.z is not None  # every _Ints holds either ``a`` or ``z``
        return self.z

    @property
    def small(self) -> np.dtype:
        """The dtype held (before compression)."""
        return self.a.dtype if self.a is not None else self._packed()[1]

    @property
    def nbytes(self) -> int:
        return self.a.nbytes if self.a is not None else len(self._packed()[0])

    def squeezed(self) -> "_Ints":
        """A compressed copy (zlib level 1), of the differences when they fit a small dtype."""
        if self.a is None:
            return self
        new, a = _Ints(None, self.dtype, self.as_list), self.a
        new.shape = a.shape
        if a.dtype.kind == "i" and a.ndim == 1:
            d = np.diff(a.astype(np.int64), prepend=0)  # exact: differences of int32-range values fit int64
            t = _fit(d.min(), d.max(), 8)
            if t is not None:
                a, new.delta = d.astype(t), True
        new.z = (zlib.compress(a.tobytes(), 1), a.dtype)
        return new

    def restore(self) -> Any:
        if self.a is not None:
            full = self.a.astype(self.dtype)
        else:
            data, small_dtype = self._packed()
            small = np.frombuffer(zlib.decompress(data), dtype=small_dtype)
            full = (np.cumsum(small, dtype=np.int64) if self.delta else small).astype(self.dtype).reshape(self.shape)
        return full.tolist() if self.as_list else full


def _fit(lo, hi, itemsize: int):
    """The smallest of int8/int16/int32 narrower than ``itemsize`` that holds [lo, hi], or None."""
    for t in _SMALL:
        info = np.iinfo(t)
        if info.min <= lo and hi <= info.max and np.dtype(t).itemsize < itemsize:
            return t
    return None


def _shrink(a: np.ndarray, as_list: bool = False) -> Any:
    if a.size < _MIN or a.dtype.kind not in "if" or a.dtype.itemsize <= 1:
        return a
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        return a
    t = _fit(a.min(), a.max(), a.dtype.itemsize)
    if t is None:
        return a
    small = a.astype(t)
    if a.dtype.kind == "f" and not np.array_equal(small.astype(a.dtype).view(np.uint8), a.view(np.uint8)):
        return a  # not whole numbers (or a −0.0): kept as it is
    return _Ints(small, a.dtype, as_list)


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


def squeeze(x: Any) -> Any:
    """A packed copy with every small array compressed (``_Ints.squeezed``): ~20× smaller on a
    pp=64 DualPipe structure, ~40 ms to make and ~15 ms to unpack."""
    t = type(x)
    if t is _Ints:
        return x.squeezed()
    if t is tuple:
        return tuple(squeeze(v) for v in x)
    if t is dict:
        return {k: squeeze(v) for k, v in x.items()}
    if t in PACKABLE:
        return _copy(x, squeeze)
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
        return x.nbytes + ARRAY_OVERHEAD + 64
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
