"""Stream a YAML snapshot (``kubectl get -o yaml``, or a multi-document stream) document by document, and the
``items`` of a top-level mapping item by item (webhook/sources/docparts.py).

libyaml (pyyaml's C parser, when installed) turns the text into events; the nodes are composed from those
events by pyyaml's own composer (yaml/composer.py (Composer.compose_node)), one item at a time instead of one
document at a time, and constructed by the safe constructor exactly as ``yaml.load_all`` would. On the 500-node
dump of bench/snapshot.py this takes 12 s of CPU and 18 MiB, where loading the whole document took 26 s and
1 GB: the garbage collector no longer walks a growing document on every collection.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.events import (
    Event,
    MappingEndEvent,
    MappingStartEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import MappingNode, Node, ScalarNode

from webhook.sources.docparts import DOCUMENT, ITEM, ITEMS, NO_ITEMS, Part, TextStream

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MAP_TAGS = (None, "!", "tag:yaml.org,2002:map")
_SEQ_TAGS = (None, "!", "tag:yaml.org,2002:seq")
_STR_TAG = "tag:yaml.org,2002:str"


class SnapshotLoader(_BaseLoader):  # type: ignore[valid-type,misc]
    """Safe YAML without timestamp resolution: an unquoted time stays a string, as in Kubernetes' YAML-to-JSON."""


SnapshotLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}


class _StreamingLoader(SnapshotLoader):
    """``SnapshotLoader`` whose nodes are composed in Python from the parser's events, a subtree at a time."""

    compose_node = Composer.compose_node
    compose_scalar_node = Composer.compose_scalar_node
    compose_sequence_node = Composer.compose_sequence_node
    compose_mapping_node = Composer.compose_mapping_node

    def __init__(self, stream: TextStream) -> None:
        super().__init__(stream)
        self.anchors: dict[str, Node] = {}

    def node(self) -> Node:
        """The next node, composed as the root of its own subtree (no parent, no index)."""
        node = self.compose_node(None, None)  # type: ignore[arg-type]
        assert node is not None
        return node

    def value(self, node: Node) -> Any:
        return self.construct_document(node)


def _plain(event: Event, tags: tuple[str | None, ...]) -> bool:
    """A collection without an anchor or an explicit tag: its parts can be constructed on their own."""
    return getattr(event, "anchor", None) is None and getattr(event, "tag", None) in tags


def yaml_parts(stream: TextStream) -> Iterator[Part]:
    """The parts of every document in ``stream``; ``yaml.YAMLError`` (with its mark) on malformed YAML."""
    loader = _StreamingLoader(stream)
    try:
        loader.get_event()  # STREAM-START
        while not loader.check_event(StreamEndEvent):
            loader.get_event()  # DOCUMENT-START
            event = loader.peek_event()
            if isinstance(event, MappingStartEvent) and _plain(event, _MAP_TAGS):
                yield from _mapping_parts(loader)
            else:
                yield DOCUMENT, None, loader.value(loader.node())
            loader.get_event()  # DOCUMENT-END
            loader.anchors = {}
        loader.get_event()  # STREAM-END
    finally:
        loader.dispose()


def _mapping_parts(loader: _StreamingLoader) -> Iterator[Part]:
    """A top-level mapping: its ``items`` sequence element by element, then the other fields as one mapping."""
    start = loader.get_event()
    pairs: list[tuple[Node, Node]] = []
    streamed = False
    while not loader.check_event(MappingEndEvent):
        key = loader.node()
        is_items = _is_items_key(key)
        event = loader.peek_event()
        if is_items and isinstance(event, SequenceStartEvent) and _plain(event, _SEQ_TAGS):
            pairs = [(k, v) for k, v in pairs if not _is_items_key(k)]
            streamed = True
            yield ITEMS, None, None
            loader.get_event()
            index = 0
            while not loader.check_event(SequenceEndEvent):
                yield ITEM, index, loader.value(loader.node())
                index += 1
            loader.get_event()
            continue
        if is_items and streamed:
            streamed = False
            yield NO_ITEMS, None, None
        pairs.append((key, loader.node()))
    end = loader.get_event()
    rest = MappingNode("tag:yaml.org,2002:map", pairs, start.start_mark, end.end_mark, flow_style=start.flow_style)
    yield DOCUMENT, None, loader.value(rest)


def _is_items_key(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.tag == _STR_TAG and node.value == "items"
