"""What a streaming reader of a snapshot hands the loader: the parts of each document, a few at a time.

A ``kubectl get -o json|yaml`` List is one document with every object in ``items``; the readers
(``jsonstream``, ``yamlstream``) give its items one by one, so the loader converts each into the slim model and
drops it, and the document itself never exists as Python objects (docs/interfaces.md §1). A document is:

- ``ITEMS`` when a top-level ``items`` sequence starts (the items before it, under an earlier ``items`` key, are
  forgotten: a later key wins, as in a dict);
- ``ITEM`` for each element of that sequence (``key`` is its index, ``value`` the element);
- ``OFFLOADED`` for several elements in a row handed to the loader's conversion worker unparsed (``value`` an
  ``Offloaded``, the worker's handle): only from a JSON reader given an ``offload`` callback
  (webhook/sources/conversion_worker.py). How many elements that was is known to the worker only: with such a
  reader the ``key`` of ``ITEM`` and ``OFFLOADED`` parts counts the elements the reader parsed itself before;
- ``NO_ITEMS`` when a later, non-sequence ``items`` key replaces the streamed one;
- ``DOCUMENT`` last, with the rest of the document (``value``: the mapping without the streamed ``items``, or the
  whole document when nothing was streamed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol

ITEMS: Final = 0
ITEM: Final = 1
NO_ITEMS: Final = 2
DOCUMENT: Final = 3
OFFLOADED: Final = 4

# (kind, item index or None, value)
Part = tuple[int, int | None, object]


@dataclass(frozen=True, slots=True)
class Offloaded:
    """Items the conversion worker converts: its handle for them."""

    handle: object


class ByteStream(Protocol):
    """What a reader reads from: a binary file, plain or gzip-compressed."""

    def read(self, size: int = -1, /) -> bytes: ...


class TextStream(Protocol):
    """A decoded file (what pyyaml's parser reads)."""

    def read(self, size: int = -1, /) -> str: ...
