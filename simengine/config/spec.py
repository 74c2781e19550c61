"""The base of every user-facing spec (model, system, strategy): frozen, no unknown keys, and a
number is never a boolean.

pydantic's lax mode reads ``true`` as 1 for an int field and as 1.0 for a float field
(pydantic docs, "Conversion Table": bool → int/float allowed in lax mode), so
``--set strategy.tp=true`` or ``"micro_batch_size": false`` in a JSON file used to build a layout
the user never wrote. Strict mode would also refuse ``4.0`` for an int from JSON, which the
studio's number widgets and hand-written files send, so only booleans are turned away: a boolean
(Python's or numpy's) given to a number field (int or float, or a list or tuple of them) that does
not take one is handed to the field as the text ``"true"``/``"false"``, which the field's own
validator refuses with its own location and message (so the studio shows the error under that
field, and the CLI names it). A guarded field must not also take text (checked when the class is
made), or it would keep that text.
"""

from __future__ import annotations

import types
import typing
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, model_validator


def _leaves(annotation: Any):
    """The types a field's annotation is made of, through unions and Annotated (a list's element
    type is not entered: ``_element``)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, typing.Annotated):
        for a in typing.get_args(annotation):
            yield from _leaves(a)
    else:
        yield annotation


def _takes_bool(annotation: Any) -> bool:
    """Whether ``annotation`` admits a boolean: bool itself, a Literal holding one, or Any."""
    return any(a is bool or a is Any or (typing.get_origin(a) is typing.Literal
                                          and any(isinstance(v, bool) for v in typing.get_args(a)))
               for a in _leaves(annotation))


def _numeric(annotation: Any) -> bool:
    """Whether ``annotation`` admits an int or a float (where lax mode would read a boolean)."""
    return any(a in (int, float) for a in _leaves(annotation))


def _admits_str(annotation: Any) -> bool:
    return any(a is str for a in _leaves(annotation))


def _element(annotation: Any) -> Any | None:
    """The element type of a list field (``list[int]``, ``list[int] | None``, Annotated), else None."""
    for a in _leaves(annotation):
        if typing.get_origin(a) is list:
            args = typing.get_args(a)
            return args[0] if args else None
    return None


# Python's and numpy's booleans (a numpy.bool_ is no int subclass, but pydantic reads it as one)
_BOOLS = frozenset({bool, np.bool_})


def _as_text(value: Any) -> Any:
    return ("true" if value else "false") if type(value) in _BOOLS else value


class Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        scalars, lists = set(), set()
        for name, field in cls.model_fields.items():
            if _takes_bool(field.annotation):
                continue
            el = _element(field.annotation)
            if el is None and _numeric(field.annotation):
                scalars.add(name)
            elif el is not None and _numeric(el) and not _takes_bool(el):
                lists.add(name)
            else:
                continue
            # a guarded number that also took text would take the "true" handed to it
            if _admits_str(field.annotation if el is None else el):
                raise TypeError(f"{cls.__name__}.{name}: a number field that also takes text cannot be guarded (config/spec.py)")
        cls._no_bool = frozenset(scalars)
        cls._no_bool_lists = frozenset(lists)

    _no_bool: typing.ClassVar[frozenset[str]] = frozenset()
    _no_bool_lists: typing.ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _no_bool_numbers(cls, data: Any) -> Any:
        """A boolean where the field takes none reaches the field as text (module docstring)."""
        if not isinstance(data, dict):
            return data
        numbers, lists = cls._no_bool, cls._no_bool_lists
        bad = []
        for k, v in data.items():   # one set lookup per value: a spec has many boolean flags, few lists
            if type(v) in _BOOLS:
                if k in numbers:
                    bad.append(k)
            elif k in lists and isinstance(v, (list, tuple)) and any(type(x) in _BOOLS for x in v):
                bad.append(k)
        if not bad:
            return data
        data = dict(data)
        for k in bad:
            v = data[k]
            data[k] = [_as_text(x) for x in v] if isinstance(v, (list, tuple)) else _as_text(v)
        return data
