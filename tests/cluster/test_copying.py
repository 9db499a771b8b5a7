"""webhook/cluster/copying.py: replace_fields behaves like dataclasses.replace."""

from __future__ import annotations

import dataclasses

import pytest

from webhook.cluster.copying import replace_fields
from webhook.cluster.model import Pod, Resources


def test_replace_fields_copies_every_field_and_changes_the_given_ones() -> None:
    pod = Pod("web", "team-a", uid="u", priority=5, requests=Resources(milli_cpu=100))
    copy = replace_fields(pod, name="web-0", priority=7)
    assert copy == dataclasses.replace(pod, name="web-0", priority=7)
    assert (pod.name, pod.priority) == ("web", 5)
    with pytest.raises(TypeError, match="Pod has no field 'nmae'"):
        replace_fields(pod, nmae="x")


@dataclasses.dataclass(frozen=True)
class Checked:
    value: int

    def __post_init__(self) -> None:
        if self.value < 0:
            raise ValueError("negative")


def test_a_dataclass_with_post_init_goes_through_its_init() -> None:
    assert replace_fields(Checked(1), value=2) == Checked(2)
    with pytest.raises(ValueError, match="negative"):
        replace_fields(Checked(1), value=-1)
