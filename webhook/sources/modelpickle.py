"""The slim model as a pickle: each frozen model object as its class and field values, rebuilt by ``rebuild``
alone, and an unpickler that resolves only the classes it is told.

Two readers use it: the snapshot cache (``snapshot_cache``, which allows the index's classes too) and the
conversion worker (``conversion_worker``, whose converted objects come back to the loader this way). Pickle,
because it restores the sharing of equal values (150,000 pods point at a few thousand label maps and request
sets) at C speed; restricted, because a pickle can only run the callables it names (see snapshot_cache's
docstring for why that makes a forged file harmless).
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable
from fractions import Fraction
from typing import Any, ClassVar

from webhook.cluster import devices, model, volumes
from webhook.cluster.building import builder
from webhook.cluster.model import FrozenMap
from webhook.cluster.quantity import Quantity


def _frozen_model_classes() -> dict[type, tuple[str, ...]]:
    """The model's frozen dataclasses (and ``Quantity``) with the fields their constructor takes, in order."""
    classes: dict[type, tuple[str, ...]] = {}
    for value in [*vars(model).values(), *vars(volumes).values(), *vars(devices).values(), Quantity]:
        if isinstance(value, type) and dataclasses.is_dataclass(value):
            # (``builder`` below refuses a class whose __init__ does more than set every field)
            classes[value] = tuple(f.name for f in dataclasses.fields(value))
    return classes


FIELDS = _frozen_model_classes()


def _defaults(cls: type) -> tuple[Any, ...]:
    """The default object of each field that has one, in field order: the fields after the last one without a
    default (or with a ``default_factory``, which has no one object) may be left out of a pickled object."""
    defaults: list[Any] = []
    for f in dataclasses.fields(cls):
        if f.default is dataclasses.MISSING:
            defaults.clear()  # a field without one: only the fields after it may be left out
        else:
            defaults.append(f.default)
    return tuple(defaults)


DEFAULTS = {cls: _defaults(cls) for cls in FIELDS}


# Each class built as its own ``__init__`` would, without a call per field (webhook.cluster.building: a cached load
# of 15,000 nodes set 36 slots per pod through descriptor calls, 1.2 s of 2.8 s).
_BUILDERS: dict[type, Callable[..., Any]] = {cls: builder(cls) for cls in FIELDS}


def rebuild(cls: type, values: tuple[Any, ...]) -> Any:
    """A model object from its class and field values, trailing defaults left out (the only callable a model
    pickle names besides the classes)."""
    return _BUILDERS[cls](*values)  # KeyError for any other class, TypeError for too many values: refused


def qualified(cls: Any) -> tuple[str, str]:
    return cls.__module__, cls.__qualname__


# What a pickle of model objects may name: the model classes, FrozenMap, Fraction and ``rebuild``.
MODEL_NAMES: dict[tuple[str, str], Any] = {qualified(cls): cls for cls in [*FIELDS, FrozenMap, Fraction]}
MODEL_NAMES[qualified(rebuild)] = rebuild


class ModelPickler(pickle.Pickler):
    """The frozen model objects as (class, field values), rebuilt by ``rebuild``."""

    def reducer_override(self, obj: Any) -> Any:
        fields = FIELDS.get(type(obj))
        if fields is not None:
            values = [getattr(obj, name) for name in fields]
            # Leave out the trailing fields that hold their default object itself (most of a pod's 36 do): one
            # opcode less each to read back. An equal but other object is kept, so sharing is as it was.
            defaults, end = DEFAULTS[type(obj)], len(values)
            first_default = end - len(defaults)
            while end > first_default and values[end - 1] is defaults[end - 1 - first_default]:
                end -= 1
            return rebuild, (type(obj), tuple(values[:end]))
        if type(obj) is FrozenMap:
            return FrozenMap, (dict(obj),)
        return NotImplemented


class RestrictedUnpickler(pickle.Unpickler):
    """Resolves the names of ``allowed`` and nothing else."""

    allowed: ClassVar[dict[tuple[str, str], Any]] = MODEL_NAMES
    what: ClassVar[str] = "a pickle of model objects"

    def find_class(self, module: str, name: str) -> Any:
        found = self.allowed.get((module, name))
        if found is None:
            raise pickle.UnpicklingError(f"{module}.{name} is not part of {self.what}")
        return found
