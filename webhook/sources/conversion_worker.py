"""A big JSON snapshot converted on two CPUs: the loader's reader hands some batches of items, as text, to a child
process that parses and converts them and sends the model objects back as a pickle.

Why: at 15,000 nodes (1.6 GB of ``kubectl get -o json``, 450,000 pods) a load spent 3.2 s parsing and 12.5 s
converting items into the model (bench/snapshot.py's dump), all of it under one GIL on a 2-CPU machine. A second
process is the only way to a second CPU for that pure-Python work; the objects come back through
``modelpickle`` (0.8 s to rebuild half of them, against 7.9 s to parse and convert that half).

Why it cannot change an answer. The reader (``jsonstream``) still reads the whole text and bounds each batch as it
does alone; a batch it offers is the very slice it would have parsed with one orjson call, parsed here with the
same call (when the two parse, their items are the same values; the reader goes on from the same place). When
the worker cannot parse a slice or goes away, the loader reads the whole file again on one CPU, whose path alone
decides everything; so the worker can only make a load faster. The loader asks for every answer before it trusts
a syntax error of its own or an error in an object (``finish``): the serial path might have read that text
otherwise. How many items a slice holds is known here only; an error message's item index is the items the
reader parsed before the batch plus those of the earlier batches of the same ``items`` array, all of which
passed through here in order; the loader, for an item of its own after batches, adds their counts (``result``).

The wire: the child's stdin and stdout (``worker_command``: this interpreter running ``main``), frames of a 4-byte
length and a body. A request is a JSON header line ``[where, items array, items the reader parsed in that array
before, reset]`` and the slice's UTF-8. The answers are one stream of model pickles, the first naming the child's
``webhook`` package (the loader refuses a child that imported another copy); the pickler's memo lives across
answers, so the objects of one answer may point at those of earlier ones, and is reset on both sides every
``MEMO_ANSWERS`` requests (``reset``), so neither side holds more than a window of them for the memo. The values
the reader shares (label maps, request sets) are shared again as they arrive (``_AnswerUnpickler``).
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import io
import logging
import math
import os
import select
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import orjson

from webhook.cluster.model import ClusterObject, FrozenMap, NodeImage
from webhook.cluster.resources import Resources
from webhook.cluster.sharing import shared
from webhook.errors import PreemptGuardError, SnapshotError
from webhook.sources.converting import convert_all
from webhook.sources.modelpickle import MODEL_NAMES, ModelPickler, RestrictedUnpickler, qualified, rebuild

log = logging.getLogger(__name__)

# Batches sent and not yet answered: enough to keep the worker busy while the loader converts the batches it keeps.
IN_FLIGHT = 8
# Requests between two resets of the pickle memo (a batch is a few dozen items); a memo holds every object it saw.
MEMO_ANSWERS = 256
READ_BYTES = 1 << 20
PIPE_BYTES = 1 << 20
_LENGTH = 4
_PARSED, _UNPARSED = "parsed", "unparsed"


class ConversionWorkerFailed(PreemptGuardError):
    """The worker could not convert a batch as the loader alone would have, or went away: read on one CPU."""


@dataclass(frozen=True, slots=True)
class Converted:
    """One batch's objects, the kinds of its items up to its first error, that error's message, how many items."""

    objects: list[ClusterObject]
    kinds: Counter[str]
    error: str | None
    count: int


def available_cpus(cpu_max: Path = Path("/sys/fs/cgroup/cpu.max")) -> int:
    """CPUs this process may run on: its affinity, bounded by a cgroup v2 CPU quota (a container's limit)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    with contextlib.suppress(OSError, ValueError):
        quota, period = cpu_max.read_text(encoding="ascii").split()[:2]
        if quota != "max":
            cpus = min(cpus, max(1, math.ceil(int(quota) / int(period))))
    return cpus


def package_root() -> str:
    """The directory of the ``webhook`` package this module belongs to."""
    return str(Path(__file__).resolve().parents[1])


def worker_command() -> list[str]:
    """This interpreter running ``main``; the ``webhook`` package's directory is put last on its path (not first
    through PYTHONPATH, where an installed package's site-packages would shadow the standard library), so it is
    found there unless another copy comes first, which the greeting then refuses."""
    root = str(Path(package_root()).parent)
    return [sys.executable, "-c",
            f"import sys; sys.path.append({root!r}); from webhook.sources.conversion_worker import main; main()"]


def _frame(body: bytes) -> bytes:
    return len(body).to_bytes(_LENGTH, "big") + body


class _Answer:
    """The file an unpickler reads: the current answer's bytes (its stream of pickles spans the answers)."""

    def __init__(self) -> None:
        self.bytes = io.BytesIO()

    def read(self, size: int = -1) -> bytes:
        return self.bytes.read(size)

    def readinto(self, buffer: Any) -> int:
        return self.bytes.readinto(buffer)

    def readline(self, size: int = -1) -> bytes:
        return self.bytes.readline(size)


def _shared_frozen_map(items: dict[str, str]) -> FrozenMap:
    return shared(FrozenMap(items))


def _rebuild_shared(cls: type, values: tuple[Any, ...]) -> Any:
    built = rebuild(cls, values)
    return shared(built) if cls in _SHARED_CLASSES else built


# The values the reader shares (``sharing.shared``) that a pickle rebuilds afresh in each memo window: shared again
# as they arrive, with the loader's own (at 450,000 pods 155,000 label maps and 69,000 request sets fewer, 50 MB).
_SHARED_CLASSES = frozenset({Resources, NodeImage})


class _AnswerUnpickler(RestrictedUnpickler):
    allowed = {**MODEL_NAMES, qualified(FrozenMap): _shared_frozen_map, qualified(rebuild): _rebuild_shared}
    what = "a conversion worker's answer"


class ConversionWorker:
    """The loader's side of one worker process (started by ``start``; a context manager that stops it)."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        # Requests are written without blocking, whatever the pipe takes now, the rest when it drains: the worker
        # may be blocked writing an answer (a full pipe) while the loader, busy with its own batches, does not
        # read yet; a blocking write would then wait for ever. (Not a writer thread: it would get the GIL from
        # the converting loader only every switch interval, 5 ms, and starve the worker.)
        self._out = process.stdin.fileno()
        self._in = process.stdout.fileno()
        os.set_blocking(self._out, False)
        for fd in (self._out, self._in):
            with contextlib.suppress(OSError, AttributeError):  # Linux only; the default 64 KiB works too
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        self._outgoing = bytearray()
        self._received = bytearray()
        self._answer = _Answer()
        self._unpickler = _AnswerUnpickler(self._answer)
        self._greeted = False
        self._sent = 0
        self._answered = 0
        self._answers: dict[object, Converted] = {}
        self.unparsed: str | None = None  # why the first batch the worker could not parse failed

    @classmethod
    def start(cls) -> ConversionWorker | None:
        """A running worker, or None (logged) when none can be started here."""
        if not sys.executable:
            return None  # an embedded interpreter: nothing to start a worker with
        try:
            process = subprocess.Popen(worker_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)
        except OSError as exc:
            log.info("snapshot: no conversion worker (%s); converting on one CPU", exc)
            return None
        return cls(process)

    def __enter__(self) -> ConversionWorker:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def offer(self, where: str, items_array: int, read_before: int, text: str) -> int | None:
        """Send a batch of items of the ``items_array``-th items array (``read_before``: how many of its items the
        reader parsed itself before) unless the worker has enough to do; the handle of its answer, or None: the
        caller converts the batch itself."""
        self._exchange(wait=False)
        if self._sent - self._answered >= IN_FLIGHT:
            return None
        reset = not self._sent % MEMO_ANSWERS
        self._outgoing += _frame(orjson.dumps([where, items_array, read_before, reset]) + b"\n"
                                 + text.encode("utf-8"))
        self._sent += 1
        self._exchange(wait=False)
        return self._sent - 1

    def result(self, handle: object) -> Converted:
        """The answer to the batch ``handle`` (kept until ``close``); ``ConversionWorkerFailed`` when the worker
        could not parse it."""
        while handle not in self._answers:
            if self.unparsed is not None:
                raise ConversionWorkerFailed(self.unparsed)
            self._exchange(wait=True)
        return self._answers[handle]

    def finish(self) -> None:
        """Wait for every answer; ``ConversionWorkerFailed`` when any batch could not be parsed there."""
        while self._answered < self._sent and self.unparsed is None:
            self._exchange(wait=True)
        if self.unparsed is not None:
            raise ConversionWorkerFailed(self.unparsed)

    def close(self) -> None:
        """Stop the worker: at the end of its requests when every answer came, at once otherwise."""
        if self._answered < self._sent or self.unparsed is not None:
            self.process.kill()
        for stream in (self.process.stdin, self.process.stdout):  # the worker ends at the end of its stdin
            with contextlib.suppress(OSError):
                assert stream is not None
                stream.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._answers.clear()

    def _exchange(self, wait: bool) -> None:
        """Write what the pipe takes of the requests and take every answer the worker has sent; with ``wait``,
        wait for one more answer first."""
        answered = self._answered
        while True:
            waiting = wait and self._answered == answered
            writable = [self._out] if self._outgoing else []
            readable, writable, _ = select.select([self._in], writable, [], None if waiting else 0)
            if writable:
                try:
                    del self._outgoing[:os.write(self._out, self._outgoing)]
                except BlockingIOError:
                    pass
                except OSError as exc:  # EPIPE: it went away
                    raise ConversionWorkerFailed(f"{self._gone()}: {exc}") from exc
            if readable:
                data = os.read(self._in, READ_BYTES)
                if not data:
                    raise ConversionWorkerFailed(self._gone())
                self._received += data
                self._take_answers()
            elif not waiting and not (writable and self._outgoing):
                return

    def _gone(self) -> str:
        """Why the worker's pipes closed: its exit status (it has closed them, so it is exiting)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        return f"the conversion worker exited ({self.process.returncode})"

    def _take_answers(self) -> None:
        received = self._received
        start = 0
        while len(received) - start >= _LENGTH:
            size = int.from_bytes(received[start:start + _LENGTH], "big")
            end = start + _LENGTH + size
            if len(received) < end:
                break
            self._take(bytes(received[start + _LENGTH:end]))
            start = end
        del received[:start]

    def _take(self, body: bytes) -> None:
        if body[:1] == b"\x01":
            # A new unpickler, not ``memo.clear()``: CPython's C unpickler keeps counting memo indices after
            # that (memo_len), the pickler's clear_memo starts them at 0 again.
            self._unpickler = _AnswerUnpickler(self._answer)
        self._answer.bytes = io.BytesIO(body[1:])
        try:
            answer = self._unpickler.load()
        except Exception as exc:  # a broken stream: whatever the unpickler raises
            raise ConversionWorkerFailed(f"unreadable answer: {type(exc).__name__}: {exc}") from exc
        if not self._greeted:
            if answer != ("webhook", package_root()):
                raise ConversionWorkerFailed(f"the worker imported another webhook package: {answer!r}")
            self._greeted = True
            return
        status, objects, kinds, error, count = answer
        if status == _PARSED:
            self._answers[self._answered] = Converted(objects, Counter(kinds), error, count)
        elif self.unparsed is None:
            self.unparsed = f"batch {self._answered}: {error}"
        self._answered += 1


# ---- the worker process ------------------------------------------------------------------------------------
def convert_batch(where: str, first: int, text: bytes) -> tuple[str, list[ClusterObject], dict[str, int],
                                                                 str | None, int]:
    """(status, objects, kinds, error, count) of one batch (its first item is item ``first``): the items parsed as
    the reader parses a batch, each converted as the loader converts an item of a List (up to the first error)."""
    try:
        values = orjson.loads(b"[" + text + b"]")
    except orjson.JSONDecodeError as exc:
        return _UNPARSED, [], {}, f"not a JSON array of items: {exc}", 0
    objects: list[ClusterObject] = []
    kinds: Counter[str] = Counter()
    for index, value in enumerate(values, first):
        try:
            objects.extend(convert_all(value, where, f"{where}, items[{index}]", kinds))
        except SnapshotError as exc:
            return _PARSED, objects, dict(kinds), str(exc), len(values)
    return _PARSED, objects, dict(kinds), None, len(values)


def _read_exact(stream: IO[bytes], size: int) -> bytes | None:
    data = stream.read(size)
    return data if len(data) == size else None


def main() -> None:
    gc.disable()  # a million objects and no cycle: a collection would only walk them (as the loader does)
    # Ctrl-C in a terminal reaches the whole process group: the loader stops this process, which ends quietly at
    # the end of its stdin whatever happens to the loader.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sink = io.BytesIO()
    pickler = ModelPickler(sink, protocol=5)

    def answer(value: object, reset: bool) -> None:
        if reset:
            pickler.clear_memo()
        sink.seek(0)
        sink.truncate()
        pickler.dump(value)
        stdout.write(_frame((b"\x01" if reset else b"\x00") + sink.getvalue()))
        stdout.flush()

    answer(("webhook", package_root()), True)
    array, offloaded_before = -1, 0  # the items array of the last batch, and how many items its batches held
    while (length := _read_exact(stdin, _LENGTH)) is not None:
        body = _read_exact(stdin, int.from_bytes(length, "big"))
        if body is None:
            break
        header, _, text = body.partition(b"\n")
        where, items_array, read_before, reset = orjson.loads(header)
        if items_array != array:
            array, offloaded_before = items_array, 0
        converted = convert_batch(where, read_before + offloaded_before, text)
        offloaded_before += converted[-1]
        answer(converted, reset)

