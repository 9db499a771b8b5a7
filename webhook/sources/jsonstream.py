"""Stream a JSON snapshot (``kubectl get -o json``) item by item, never holding the document as Python objects.

The text is decoded in bounded chunks. The top-level object's fields are read with the standard library's C
scanner (``json.JSONDecoder.raw_decode``, which parses one value and says where it ends); the elements of its
``items`` array are yielded one at a time (webhook/sources/docparts.py).

Most items are parsed by orjson on bounded slices: kubectl indents its output (``json.MarshalIndent``), so an
item that starts on its own line at some indentation ends at a line holding only that indentation and ``}`` (a
raw newline never occurs inside a JSON string, so this marker is structural). The items of the text read so far
are parsed at once: from the next item's start to the *last* marker in the next ``BATCH_CHARS`` (``str.rfind``,
which reads back over one item, not forward over every item), the slice is wrapped in ``[``/``]`` and parsed by one
``orjson.loads`` into the list of those items. JSON reads left to right with one token of lookahead, so if the
wrapped slice is an array, its elements are exactly the items the whole text holds there; a wrong guess can only
fail. Then one item is tried alone (its first marker), and when that fails too, that item and the rest go
through the standard scanner. On the 5,000-node dump of bench/snapshot.py orjson on one-item slices parsed the
items in 4.1 s of CPU, the standard scanner alone in 5.8 s, ijson's C backend (an extra dependency) in 5.1 s,
and orjson on the whole 560 MB document in 8.1 s with a 2.5 GB peak; on the 15,000-node dump, finding each
item's end forward took as long as a third of the parse, and a call per item most of the rest of its overhead.

Given an ``offload`` callback (the loader's conversion worker, webhook/sources/conversion_worker.py), a batch is
first offered to it unparsed: when taken, it is skipped here and handed over as one ``OFFLOADED`` part, and the
worker parses it with the same orjson call. How many items it holds is known there only (counting the item ends
here cost half a parse: the marker is mostly spaces), so an ``ITEM``'s index then counts the items read here.

Both parsers are held to orjson's reading of a whole document, which the loader used before: a number that is
infinite as a double, and ``NaN``/``Infinity``, are syntax errors; integers beyond 64 bits read as floats. Any
syntax error raises ``JsonSyntaxError``; the loader then reads the file as YAML, as it did with text that was not
strict JSON, so malformed files keep their YAML error messages.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Iterator

import orjson

from webhook.sources.docparts import DOCUMENT, ITEM, ITEMS, NO_ITEMS, OFFLOADED, ByteStream, Offloaded, Part

CHUNK_BYTES = 1 << 20
# How much text one orjson call parses into items at most (unless one item is longer): a few dozen kubectl
# items, so the parsed dicts alive at once stay a few hundred KB, not a chunk's worth.
BATCH_CHARS = 1 << 16
# How far past an item's start the end marker is looked for before the item goes to the standard scanner.
MARKER_LOOKAHEAD = 16 * CHUNK_BYTES
# A parse error this close to the end of the buffer may only mean the value continues in the next chunk.
TRUNCATION_MARGIN = 16
_WHITESPACE = " \t\n\r"
_INT64_MIN, _UINT64_MAX = -(1 << 63), (1 << 64) - 1
# (a batch's text, how many items were read here before it) -> a handle, or None: parse it here
Offload = Callable[[str, int], object | None]


class JsonSyntaxError(ValueError):
    """The text is not one strict JSON object."""


def _int_as_orjson(text: str) -> int | float:
    value = int(text)
    return value if _INT64_MIN <= value <= _UINT64_MAX else float(value)


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise JsonSyntaxError(f"number {text} is infinite as a double")
    return value


def _no_constant(name: str) -> object:
    raise JsonSyntaxError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_int=_int_as_orjson, parse_float=_finite_float, parse_constant=_no_constant)


class _TextBuffer:
    """Decoded text of a binary stream, read in chunks; ``buf[pos:]`` is what is left to parse."""

    def __init__(self, stream: ByteStream) -> None:
        self.stream = stream
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.buf = ""
        self.pos = 0
        self.eof = False

    def more(self) -> bool:
        """Append the next chunk; False at the end. Parsed text is dropped, except the current line."""
        if self.eof:
            return False
        data = self.stream.read(CHUNK_BYTES)
        self.eof = not data
        added = self.decoder.decode(data, final=self.eof)
        keep = self.buf.rfind("\n", 0, self.pos)
        keep = self.pos if keep < 0 else keep
        self.buf = self.buf[keep:] + added
        self.pos -= keep
        return bool(data)

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end), without consuming it."""
        while True:
            buf, pos = self.buf, self.pos
            while pos < len(buf) and buf[pos] in _WHITESPACE:
                pos += 1
            self.pos = pos
            if pos < len(buf):
                return buf[pos]
            if not self.more():
                return ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise JsonSyntaxError(f"expected {char!r}")
        self.pos += 1

    def value(self) -> object:
        """The next JSON value (standard scanner), reading more text while it may be cut by the chunk end."""
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                truncated = exc.pos >= len(self.buf) - TRUNCATION_MARGIN or exc.msg.startswith("Unterminated")
                if truncated and self.more():
                    continue
                raise JsonSyntaxError(exc.msg) from exc
            except ValueError as exc:  # a parse hook refused a number or a constant
                raise JsonSyntaxError(str(exc)) from exc
            if end < len(self.buf) or not self.more():  # a number at the end of the buffer may go on
                self.pos = end
                return value


class _ItemReader:
    """The elements of the ``items`` array: by orjson on marker-bounded slices while that works (several items
    at once, then one), else by the standard scanner."""

    def __init__(self, text: _TextBuffer, offload: Offload | None) -> None:
        self.text = text
        self.offload = offload
        self.by_marker = True
        self.batched = True

    def items(self, index: int) -> list[object] | Offloaded:
        """The next item (``index``), or the next several; at least one."""
        text = self.text
        if self.batched:
            found = self._batch(index)
            if found is not None:
                return found
            self.batched = False  # one item at a time from here on, so a bad guess is paid once
        if self.by_marker:
            item = self._by_marker()
            if item is not _NOT_FOUND:
                return [item]
            self.by_marker = False  # the output is not indented like kubectl's: the scanner from here on
        return [text.value()]

    def _indent_marker(self) -> str | None:
        """``"\n" + indent + "}"``, the end of an item that starts at ``pos`` on its own line; None otherwise."""
        text = self.text
        line_start = text.buf.rfind("\n", 0, text.pos) + 1
        indent = text.buf[line_start:text.pos]
        if not line_start or text.buf[text.pos] != "{" or indent.strip(" \t"):
            return None
        return "\n" + indent + "}"

    def _batch(self, index: int) -> list[object] | Offloaded | None:
        text = self.text
        marker = self._indent_marker()
        if marker is None:
            return None
        while True:
            window = text.pos + BATCH_CHARS
            end = text.buf.rfind(marker, text.pos, window)
            if end < 0:  # no item ends in the window: the first end after it (an item longer than the window)
                end = text.buf.find(marker, window - len(marker))
            if end >= 0:
                break
            if len(text.buf) - text.pos > MARKER_LOOKAHEAD or not text.more():
                return None
        start, end = text.pos, end + len(marker)
        if self.offload is not None:
            handle = self.offload(text.buf[start:end], index)
            if handle is not None:
                text.pos = end
                return Offloaded(handle)
        try:
            values = orjson.loads("[" + text.buf[start:end] + "]")
        except orjson.JSONDecodeError:
            return None
        if not values:  # only whitespace between (cannot be: the slice starts with "{"); never return no item
            return None
        text.pos = end
        return values

    def _by_marker(self) -> object:
        text = self.text
        marker = self._indent_marker()
        if marker is None:
            return _NOT_FOUND
        end = text.buf.find(marker, text.pos)
        while end < 0:
            searched = len(text.buf) - text.pos
            if searched > MARKER_LOOKAHEAD or not text.more():
                return _NOT_FOUND
            end = text.buf.find(marker, text.pos + max(0, searched - len(marker)))  # ``more`` moved the text
        start, end = text.pos, end + len(marker)
        try:
            value = orjson.loads(text.buf[start:end])
        except orjson.JSONDecodeError:
            return _NOT_FOUND
        text.pos = end
        return value


_NOT_FOUND = object()


def json_parts(stream: ByteStream, offload: Offload | None = None) -> Iterator[Part]:
    """The parts of the one JSON object in ``stream``; ``JsonSyntaxError`` when it is not exactly that.

    A top-level array is parsed and handed over empty: it is no Kubernetes object, whatever it holds. ``offload``:
    see the module docstring.
    """
    text = _TextBuffer(stream)
    if text.peek() == "[":
        for _ in _items(text, None):
            pass
        if text.peek():
            raise JsonSyntaxError("text after the top-level array")
        yield DOCUMENT, None, []
        return
    text.expect("{")
    fields: dict[str, object] = {}
    streamed = False
    if text.peek() == "}":
        text.pos += 1
    else:
        while True:
            if text.peek() != '"':
                raise JsonSyntaxError("expected a field name")
            key = text.value()
            assert isinstance(key, str)
            text.expect(":")
            if key == "items" and text.peek() == "[":
                fields.pop("items", None)
                streamed = True
                yield ITEMS, None, None
                yield from _items(text, offload)
            else:
                if key == "items" and streamed:
                    streamed = False
                    yield NO_ITEMS, None, None
                fields[key] = text.value()
            if text.peek() == "}":
                text.pos += 1
                break
            text.expect(",")
    if text.peek():
        raise JsonSyntaxError("text after the top-level object")
    yield DOCUMENT, None, fields


def _items(text: _TextBuffer, offload: Offload | None) -> Iterator[Part]:
    text.expect("[")
    if text.peek() == "]":
        text.pos += 1
        return
    reader = _ItemReader(text, offload)
    index = 0
    while True:
        if not text.peek():
            raise JsonSyntaxError("the items array is not closed")
        found = reader.items(index)
        if isinstance(found, Offloaded):
            yield OFFLOADED, index, found
        else:
            for item in found:
                yield ITEM, index, item
                index += 1
        char = text.peek()
        text.pos += 1
        if char == "]":
            return
        if char != ",":
            raise JsonSyntaxError("expected ',' or ']' in items")
