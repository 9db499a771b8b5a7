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
from typing import Any, ClassVar, cast

from webhook.cluster import devices, model, volumes
from webhook.cluster.model import FrozenMap
from webhook.cluster.quantity import Quantity


def _frozen_model_classes() -> dict[type, tuple[str, ...]]:
    """The model's frozen dataclasses (and ``Quantity``) with the fields their constructor takes, in order."""
    classes: dict[type, tuple[str, ...]] = {}
    for value in [*vars(model).values(), *vars(volumes).values(), *vars(devices).values(), Quantity]:
        if isinstance(value, type) and dataclasses.is_dataclass(value):
            fields = dataclasses.fields(value)
            assert all(f.init for f in fields), value  # rebuilt by calling the class with every field
            classes[value] = tuple(f.name for f in fields)
    return classes


FIELDS = _frozen_model_classes()


def _maker(cls: type, fields: tuple[str, ...]) -> Callable[..., Any]:
    """``cls(*values)`` without the dataclass ``__init__``: each slot set through its descriptor. A frozen
    ``__init__`` calls ``object.__setattr__`` per field, which made building 150,000 pods most of a cached load
    (0.7 s; 0.4 s this way). Generated as dataclasses generates ``__init__``; only for classes whose ``__init__``
    does nothing else (no ``__post_init__``), so the objects are the same."""
    assert not hasattr(cls, "__post_init__"), cls
    setters = {f"s{i}": cls.__dict__[name].__set__ for i, name in enumerate(fields)}
    params = ", ".join(f"v{i}" for i in range(len(fields)))
    body = "".join(f"    s{i}(o, v{i})\n" for i in range(len(fields)))
    namespace: dict[str, Any] = {"new": object.__new__, "cls": cls, **setters}
    exec(f"def make({params}):\n    o = new(cls)\n{body}    return o\n", namespace)  # our own text, no input
    return cast(Callable[..., Any], namespace["make"])


_MAKERS = {cls: _maker(cls, fields) for cls, fields in FIELDS.items()}


def rebuild(cls: type, values: tuple[Any, ...]) -> Any:
    """A model object from its class and field values (the only callable a model pickle names besides the
    classes)."""
    return _MAKERS[cls](*values)  # KeyError for any other class: the pickle is refused


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
            return rebuild, (type(obj), tuple([getattr(obj, name) for name in fields]))
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
