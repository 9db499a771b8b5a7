"""building.py: a builder returns the very object the class's own ``__init__`` does (the same class, equal field
values, the default objects themselves, a fresh value from each default factory, frozen), takes the same arguments,
and refuses what it cannot build that way."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from webhook.cluster import devices, model, volumes
from webhook.cluster.building import builder
from webhook.cluster.model import EMPTY_LABELS, NO_RESOURCES, Pod, ResourceQuota
from webhook.cluster.quantity import Quantity

CLASSES = sorted({value for module in (model, volumes, devices) for value in vars(module).values()
                  if isinstance(value, type) and dataclasses.is_dataclass(value)} | {Quantity},
                 key=lambda cls: cls.__qualname__)


def values(cls: type, *, every: bool) -> dict[str, Any]:
    """A value of its own for each field (every one, or only those without a default): the model checks no types."""
    return {f.name: f"{cls.__qualname__}.{f.name}" for f in dataclasses.fields(cls)
            if every or (f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)}


def field_values(obj: Any) -> list[Any]:
    return [getattr(obj, f.name) for f in dataclasses.fields(obj)]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__qualname__)
def test_a_built_object_is_the_one_its_class_makes(cls: type) -> None:
    build = builder(cls)
    for given in (values(cls, every=True), values(cls, every=False)):
        built, made = build(**given), cls(**given)
        assert type(built) is cls
        assert built == made and repr(built) == repr(made)
        assert [type(v) for v in field_values(built)] == [type(v) for v in field_values(made)]
        assert build(*given.values()) == made  # positionally too
        assert not hasattr(built, "__dict__")
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(built, dataclasses.fields(cls)[0].name, "changed")


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__qualname__)
def test_a_default_is_the_default_object_itself(cls: type) -> None:
    built = builder(cls)(**values(cls, every=False))
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            assert getattr(built, f.name) is f.default, f.name


def test_the_pod_a_reader_builds() -> None:
    pod = builder(Pod)(name="web-0", namespace="shop", node_name="node-1", priority=7)
    assert pod == Pod(name="web-0", namespace="shop", node_name="node-1", priority=7)
    assert hash(pod) == hash(Pod(name="web-0", namespace="shop", node_name="node-1", priority=7))
    assert pod.labels is EMPTY_LABELS and pod.requests is NO_RESOURCES and pod.key == "shop/web-0"


def test_a_default_factory_gives_each_object_its_own_value() -> None:
    build = builder(ResourceQuota)
    first, second = build(**values(ResourceQuota, every=False)), build(**values(ResourceQuota, every=False))
    assert first.hard == {} and first.used == {}
    assert first.hard is not second.hard and first.used is not second.used


def test_the_arguments_are_checked_as_the_class_checks_them() -> None:
    build = builder(Pod)
    with pytest.raises(TypeError, match="namespace"):
        build(name="a")
    with pytest.raises(TypeError, match="nmae"):
        build(nmae="a", namespace="b")
    with pytest.raises(TypeError):
        build(*range(len(dataclasses.fields(Pod)) + 1))


@dataclasses.dataclass(frozen=True)
class WithoutSlots:
    name: str


@dataclasses.dataclass(frozen=True, slots=True)
class WithPostInit:
    name: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.name.lower())


@dataclasses.dataclass(frozen=True, slots=True)
class WithKeywordOnly:
    name: str
    size: int = dataclasses.field(default=0, kw_only=True)


@pytest.mark.parametrize("cls", [WithoutSlots, WithPostInit, WithKeywordOnly], ids=lambda cls: cls.__name__)
def test_a_class_whose_init_does_more_has_no_builder(cls: type) -> None:
    with pytest.raises(TypeError, match=cls.__qualname__):
        builder(cls)
