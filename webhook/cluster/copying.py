"""``replace_fields``: ``dataclasses.replace`` for the slotted, frozen model types, at about half the cost."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

_D = TypeVar("_D")
_INIT_FIELDS: dict[type, tuple[str, ...] | None] = {}
_set_field = object.__setattr__


def _init_fields(cls: type) -> tuple[str, ...] | None:
    """The field names of a dataclass that ``replace_fields`` may copy directly; None when it may not."""
    if cls not in _INIT_FIELDS:
        fields = dataclasses.fields(cls)
        plain = (not hasattr(cls, "__post_init__") and all(f.init for f in fields)
                 and all(f.name in getattr(cls, "__slots__", ()) for f in fields))
        _INIT_FIELDS[cls] = tuple(f.name for f in fields) if plain else None
    return _INIT_FIELDS[cls]


def replace_fields(obj: _D, **changes: Any) -> _D:
    """``dataclasses.replace`` for slotted dataclasses without ``__post_init__``, at about half the cost.

    The predictor copies a pod or a result a few times per prediction; the generic ``replace`` (keyword
    arguments through a frozen ``__init__``) was the largest single cost of predicting a pod that fits.
    Other dataclasses fall back to ``dataclasses.replace``.
    """
    cls = type(obj)
    names = _init_fields(cls)
    if names is None:
        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    for name in changes:
        if name not in names:
            raise TypeError(f"{cls.__name__} has no field {name!r}")
    new = object.__new__(cls)
    for name in names:
        _set_field(new, name, getattr(obj, name))
    for name, value in changes.items():
        _set_field(new, name, value)
    return new
