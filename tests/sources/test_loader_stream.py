"""Streamed snapshots: item by item, equal to reading the whole document, gzip, and errors as before."""

from __future__ import annotations

import gzip
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from webhook.cluster.model import Pod
from webhook.errors import SnapshotError
from webhook.sources import jsonstream
from webhook.sources.docparts import DOCUMENT, ITEM, ITEMS, Part
from webhook.sources.jsonstream import JsonSyntaxError, json_parts
from webhook.sources.loader import load_snapshot, parse_documents
from webhook.sources.yamlstream import SnapshotLoader, yaml_parts


def _pod(name: str, node: str = "n1", cpu: str = "250m") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns", "labels": {"app": "x"}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Running", "startTime": "2025-06-02T09:30:00Z"}}


NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}}}


def cluster(pods: int = 30) -> dict[str, Any]:
    """A kubectl List: "kind" after "items", as kubectl's sorted keys put it."""
    return {"apiVersion": "v1", "items": [NODE, *(_pod(f"p{i}") for i in range(pods))], "kind": "List",
            "metadata": {"resourceVersion": ""}}


def parts_of_json(text: str) -> list[Part]:
    return list(json_parts(io.BytesIO(text.encode())))


def items_of(parts: list[Part]) -> list[object]:
    return [value for kind, _, value in parts if kind == ITEM]


# ---- JSON: item by item, equal to orjson on the whole text --------------------------------------------------

@pytest.mark.parametrize("indent", [None, 2, 4, "\t"])
@pytest.mark.parametrize("chunk", [7, 64, 1 << 20])
def test_json_items_equal_the_whole_document(monkeypatch: pytest.MonkeyPatch, indent: int | str | None,
                                             chunk: int) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK_BYTES", chunk)
    document = cluster()
    document["items"].append({"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "}\n{ \"x\": [1, 2]"}})
    text = json.dumps(document, indent=indent, sort_keys=True)
    parts = parts_of_json(text)
    assert [kind for kind, _, _ in parts] == [ITEMS, *[ITEM] * len(document["items"]), DOCUMENT]
    assert items_of(parts) == orjson.loads(text)["items"]
    assert parts[-1] == (DOCUMENT, None, {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}})


def test_kubectl_indented_items_are_parsed_by_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    text = json.dumps(cluster(10), indent=4)
    expected = orjson.loads(text)["items"]
    texts = counted_orjson(monkeypatch)
    parts = parts_of_json(text)
    # The items of one buffer (the whole text here) go to orjson at once: one call, not one per item.
    assert len(texts) == 1 and items_of(parts) == expected


def counted_orjson(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts the stream hands to orjson from now on."""
    texts: list[str] = []
    original = jsonstream.orjson.loads

    def counting(text: str) -> object:
        texts.append(text)
        return original(text)

    monkeypatch.setattr(jsonstream.orjson, "loads", counting)
    return texts


def test_the_items_of_each_chunk_are_parsed_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK_BYTES", 1024)
    text = json.dumps(cluster(200), indent=4)
    expected = orjson.loads(text)["items"]
    texts = counted_orjson(monkeypatch)
    assert items_of(parts_of_json(text)) == expected
    assert len(text) // 1024 - 2 <= len(texts) <= len(text) // 1024 + 2


@pytest.mark.parametrize("window", [8, 300, 1 << 16])
@pytest.mark.parametrize("chunk", [7, 1 << 20])
def test_items_longer_or_shorter_than_the_batch_window(monkeypatch: pytest.MonkeyPatch, window: int,
                                                      chunk: int) -> None:
    monkeypatch.setattr(jsonstream, "BATCH_CHARS", window)
    monkeypatch.setattr(jsonstream, "CHUNK_BYTES", chunk)
    document = cluster(40)
    document["items"].insert(7, {"kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"k": "x" * 2000}})
    text = json.dumps(document, indent=4)
    expected = orjson.loads(text)["items"]
    texts = counted_orjson(monkeypatch)
    assert items_of(parts_of_json(text)) == expected
    assert all(t.startswith("[") for t in texts)  # every item in a batch, the big one too
    if window == 1 << 16 and chunk == 1 << 20:
        assert len(texts) == 1


@pytest.mark.parametrize("chunk", [16, 1 << 20])
def test_a_false_end_marker_falls_back_to_one_item_then_the_scanner(monkeypatch: pytest.MonkeyPatch,
                                                                     chunk: int) -> None:
    # The last "\n  }" closes an inner object that another "}" follows on the same line: the batch up to it is no
    # array; the first item alone, up to its own marker, is; the second alone is not, and the scanner reads it.
    monkeypatch.setattr(jsonstream, "CHUNK_BYTES", chunk)
    text = '{"items": [\n  {\n    "kind": "Namespace"\n  },\n  {\n    "a": {"x": 1\n  }}\n], "kind": "List"}'
    expected = orjson.loads(text)["items"]
    texts = counted_orjson(monkeypatch)
    assert items_of(parts_of_json(text)) == expected
    assert texts[-1] == '{\n    "a": {"x": 1\n  }'  # the second item's false marker: the scanner read it
    first = '{\n    "kind": "Namespace"\n  }'
    assert first in texts or f"[{first}]" in texts  # the first item by its marker (alone, or a batch of one)


def test_an_item_that_is_not_indented_like_kubectl_falls_back_to_the_scanner() -> None:
    # Starts on its own line, ends inline: the end marker is found at the next item's end, where orjson fails.
    text = ('{"items": [\n  {"kind": "Namespace", "metadata": {"name": "a"}},\n'
            '  {"kind": "Namespace",\n  "x": 1\n  }\n]}')
    assert items_of(parts_of_json(text)) == orjson.loads(text)["items"]


def test_items_are_handed_over_before_the_rest_of_the_file_is_read() -> None:
    text = json.dumps(cluster(20_000), indent=4).encode()
    stream = io.BytesIO(text)
    parts = json_parts(stream)
    assert next(parts)[0] == ITEMS
    assert next(parts)[0] == ITEM
    assert stream.tell() <= jsonstream.CHUNK_BYTES < len(text) / 4


@pytest.mark.parametrize("text", ['{"items": [1, 2', '{"items": [] "kind": "List"}', '{"a": NaN}', '{"a": 1e400}',
                                  '{"a": 1} {"b": 2}', '{"items": [{"a": 1},]}', "{'a': 1}", '{"a": 1,}'])
def test_what_orjson_refuses_is_a_syntax_error(text: str) -> None:
    with pytest.raises(JsonSyntaxError):
        parts_of_json(text)


def test_numbers_read_as_orjson_reads_them() -> None:
    text = '{"items": [{"a": 18446744073709551616, "b": -9223372036854775808, "c": 1.5, "d": 1E2}]}'
    assert items_of(parts_of_json(text)) == [orjson.loads(text)["items"][0]]
    compact = text.replace(" ", "")  # not indented: the standard scanner, held to the same numbers
    assert items_of(parts_of_json(compact)) == [orjson.loads(text)["items"][0]]


def test_a_later_items_key_wins() -> None:
    text = json.dumps({"items": [_pod("a")], "kind": "List"})[:-1] + ', "items": [' + json.dumps(_pod("b")) + "]}"
    objects = parse_documents(text, "dup.json")
    assert [o.name for o in objects if isinstance(o, Pod)] == ["b"]
    replaced = json.dumps({"items": [_pod("a")], "kind": "List"})[:-1] + ', "items": null}'
    assert parse_documents(replaced, "dup.json") == []


def test_a_document_that_is_no_list_ignores_its_items() -> None:
    # A streamed item that does not convert is no error when the document turns out not to be a List.
    broken = dict(_pod("bad"), spec={"priority": "high"})
    text = json.dumps({"items": [broken, NODE], "kind": "Namespace", "metadata": {"name": "ns"}})
    counts: Counter[str] = Counter()
    (namespace,) = parse_documents(text, "ns.json", counts)
    assert namespace.name == "ns" and counts == Counter({"Namespace": 1})


# ---- YAML: item by item, equal to yaml.load_all ----------------------------------------------------------------

YAML_STREAM = """\
apiVersion: v1
kind: List
items:
- &first {kind: Namespace, metadata: {name: a, labels: &labels {team: x}}}
- kind: Namespace
  metadata: {name: b, labels: *labels}
- <<: *first
  metadata: {name: c}
- !!map {kind: Node, metadata: {name: n1}}
metadata: {}
---
- just a list
--- !!map
kind: PodList
items: [{kind: Pod, metadata: {name: p}}]
---
kind: List
items: !!seq [{kind: Namespace, metadata: {name: d}}]
...
"""


def test_yaml_documents_equal_yaml_load_all() -> None:
    expected = list(yaml.load_all(YAML_STREAM, Loader=SnapshotLoader))
    documents: list[object] = []
    items: list[object] | None = None
    for kind, _, value in yaml_parts(io.StringIO(YAML_STREAM)):
        if kind == ITEMS:
            items = []
        elif kind == ITEM:
            assert items is not None
            items.append(value)
        elif kind == DOCUMENT:
            documents.append(value if items is None else {**value, "items": items})  # type: ignore[dict-item]
            items = None
    assert documents == expected
    assert [len(d["items"]) if isinstance(d, dict) else None for d in documents] == [4, None, 1, 1]


class _CountingText(io.StringIO):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.read_chars = 0

    def read(self, size: int | None = -1, /) -> str:
        data = super().read(size)
        self.read_chars += len(data)
        return data


def test_yaml_items_are_handed_over_before_the_rest_of_the_file_is_read() -> None:
    text = yaml.dump(cluster(5_000), Dumper=yaml.CSafeDumper)  # the C emitter: the pure one takes seconds
    stream = _CountingText(text)
    parts = yaml_parts(stream)
    assert next(parts)[0] == ITEMS
    assert next(parts)[0] == ITEM
    assert stream.read_chars < len(text) / 4


# ---- files: gzip, progress, errors -----------------------------------------------------------------------------

@pytest.mark.parametrize("form", ["json", "yaml"])
def test_gzip_files_load_like_plain_ones(tmp_path: Path, form: str) -> None:
    text = json.dumps(cluster(), indent=4) if form == "json" else yaml.safe_dump(cluster())
    plain = tmp_path / f"cluster.{form}"
    plain.write_text(text)
    packed = tmp_path / f"cluster.{form}.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    assert load_snapshot(packed).pods == load_snapshot(plain).pods
    assert len(load_snapshot(packed).pods) == 30


def test_a_truncated_gzip_file_cannot_be_read(tmp_path: Path) -> None:
    packed = tmp_path / "cluster.json.gz"
    packed.write_bytes(gzip.compress(json.dumps(cluster()).encode())[:-20])
    with pytest.raises(SnapshotError, match=r"cluster\.json\.gz: cannot read snapshot"):
        load_snapshot(packed)


def test_progress_reports_bytes_read_of_the_file_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK_BYTES", 4096)
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(cluster(3000), indent=4))
    reports: list[tuple[int, int]] = []
    load_snapshot(path, progress=lambda done, total: reports.append((done, total)))
    assert len(reports) >= 3
    assert {total for _, total in reports} == {path.stat().st_size}
    assert [done for done, _ in reports] == sorted(done for done, _ in reports)
    assert 0 < reports[-1][0] <= path.stat().st_size


def test_invalid_json_is_read_as_yaml_and_names_document_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{\n  "kind": "List",\n  "items": [\n    {"kind": "Pod",, "metadata": {}}\n  ]\n}\n')
    with pytest.raises(SnapshotError, match=r"broken\.json: document 0, line 4: invalid YAML"):
        load_snapshot(path)


def test_a_syntax_error_wins_over_an_earlier_object_error(tmp_path: Path) -> None:
    bad = dict(_pod("bad"), spec={"priority": "high"})
    path = tmp_path / "both.yaml"
    path.write_text(yaml.safe_dump_all([{"kind": "List", "items": [bad]}, NODE]) + "---\nkind: [\n")
    with pytest.raises(SnapshotError, match=r"both\.yaml: document 2, line \d+: invalid YAML"):
        load_snapshot(path)
    path.write_text(yaml.safe_dump_all([{"kind": "List", "items": [bad]}, NODE]))
    with pytest.raises(SnapshotError, match=r"both\.yaml: document 0 \(Pod bad\): spec\.priority"):
        load_snapshot(path)


def test_a_json_object_error_names_the_document_and_the_object(tmp_path: Path) -> None:
    bad = _pod("web-0", cpu="four")
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"items": [NODE, bad], "kind": "List"}, indent=4))
    with pytest.raises(SnapshotError, match=r"cluster\.json: document 0 \(Pod web-0\): spec\.containers\[0\]"):
        load_snapshot(path)
