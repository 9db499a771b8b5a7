"""The /preview request body (docs/interfaces.md §3) is parsed at the HTTP edge, every field checked."""

from __future__ import annotations

import pytest

from webhook.errors import InvalidInput
from webhook.server.handlers import parse_preview_request


def test_preview_request_parsing() -> None:
    request = parse_preview_request({"pod": {"kind": "Pod", "metadata": {"namespace": "own"}}})
    assert (request.namespace, request.replicas, request.priority_class) == ("own", None, None)
    request = parse_preview_request({"pod": {"kind": "Deployment"}, "namespace": "team-a", "replicas": 3,
                                     "priorityClassName": "high"})
    assert (request.namespace, request.replicas, request.priority_class) == ("team-a", 3, "high")
    assert parse_preview_request({"pod": {}, "namespace": None}).namespace == "default"
    for body, message in [({"pod": {}, "replicas": 1.5}, "replicas"), ({"pod": {}, "replicas": 10**6}, "at most"),
                          ({"pod": None}, "pod is required"), ({"pod": {}, "extra": 1}, "unknown field 'extra'")]:
        with pytest.raises(InvalidInput, match=message):
            parse_preview_request(body)
