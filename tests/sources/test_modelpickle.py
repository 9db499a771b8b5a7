"""modelpickle.py: every frozen model class comes back from its pickle equal to the object built by its own
``__init__``, of that very class, with the default objects themselves where the original held them; the trailing
defaults are left out of the pickle; a forged pickle's extra values are refused."""

from __future__ import annotations

import dataclasses
import io
import pickle
from typing import Any

import pytest

from webhook.cluster.model import EMPTY_LABELS, NO_RESOURCES, FrozenMap, Pod, Resources
from webhook.sources.modelpickle import DEFAULTS, FIELDS, ModelPickler, RestrictedUnpickler, rebuild

CLASSES = sorted(FIELDS, key=lambda cls: cls.__qualname__)


def round_trip(value: Any) -> Any:
    buffer = io.BytesIO()
    ModelPickler(buffer, protocol=5).dump(value)
    return RestrictedUnpickler(io.BytesIO(buffer.getvalue())).load()


def every_field_set(cls: type) -> Any:
    """An object whose every field holds a value of its own (no default): the frozen model checks no types."""
    return cls(**{f.name: f"{cls.__qualname__}.{f.name}" for f in dataclasses.fields(cls)})


def only_required_fields(cls: type) -> Any:
    return cls(**{f.name: f"{cls.__qualname__}.{f.name}" for f in dataclasses.fields(cls)
                  if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING})


def hash_or_none(value: Any) -> int | None:
    """The hash, or None for the one class holding dicts (ResourceQuota's hard and used)."""
    try:
        return hash(value)
    except TypeError:
        return None


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__qualname__)
def test_every_model_class_comes_back_equal_and_of_its_own_class(cls: type) -> None:
    for original in (every_field_set(cls), only_required_fields(cls)):
        copy = round_trip(original)
        assert type(copy) is cls
        assert copy == original and hash_or_none(copy) == hash_or_none(original)
        assert [getattr(copy, f.name) for f in dataclasses.fields(cls)] == [
            getattr(original, f.name) for f in dataclasses.fields(cls)]
        assert not hasattr(copy, "__dict__")
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(copy, dataclasses.fields(cls)[0].name, "changed")


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__qualname__)
def test_a_default_comes_back_as_the_default_object_itself(cls: type) -> None:
    copy = round_trip(only_required_fields(cls))
    fields = dataclasses.fields(cls)
    for field, default in zip(fields[len(fields) - len(DEFAULTS[cls]):], DEFAULTS[cls], strict=True):
        assert getattr(copy, field.name) is default, field.name


def test_the_trailing_defaults_are_left_out_of_the_pickle() -> None:
    pickler = ModelPickler(io.BytesIO())
    assert pickler.reducer_override(Pod(name="a", namespace="b")) == (rebuild, (Pod, ("a", "b")))
    # A default in the middle is kept (the values are positional); the last value set ends the tuple.
    _, (_, values) = pickler.reducer_override(Pod(name="a", namespace="b", node_name="n"))
    assert values == ("a", "b", "", EMPTY_LABELS, "n") and values[3] is EMPTY_LABELS
    # An equal but other object is not the default: kept, so the copy holds an equal object, as the original.
    other_empty = FrozenMap({})
    _, (_, values) = pickler.reducer_override(Pod(name="a", namespace="b", claims=None,
                                                   controller_selector=None, labels=other_empty))
    assert values == ("a", "b", "", other_empty)
    copy = round_trip(Pod(name="a", namespace="b", labels=other_empty))
    assert copy.labels == EMPTY_LABELS and copy.labels is not EMPTY_LABELS
    assert pickler.reducer_override(Resources()) == (rebuild, (Resources, ()))


def test_shared_values_stay_shared() -> None:
    requests = Resources(milli_cpu=500, memory=1 << 30)
    labels = FrozenMap({"app": "web"})
    pods = [Pod(name=f"p{i}", namespace="n", labels=labels, requests=requests) for i in range(3)]
    copies = round_trip(pods)
    assert copies == pods
    assert len({id(p.labels) for p in copies}) == 1 and len({id(p.requests) for p in copies}) == 1
    assert round_trip(Pod(name="a", namespace="b")).requests is NO_RESOURCES


def test_a_forged_pickle_with_more_values_than_fields_is_refused() -> None:
    too_many = tuple(range(len(FIELDS[Resources]) + 1))

    class Forged:
        def __reduce__(self) -> tuple[Any, ...]:
            return rebuild, (Resources, too_many)

    with pytest.raises(TypeError):
        RestrictedUnpickler(io.BytesIO(pickle.dumps(Forged(), protocol=5))).load()
