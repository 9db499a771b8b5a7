"""Printing a ``PreemptionPreview``: kubectl-style tables (default and ``-o wide``, ``--no-headers``), one
``pod/NAME`` per pod (``-o name``), or the document itself as JSON or YAML; colour only on a terminal without
``NO_COLOR``; progress on stderr for long runs on a terminal."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, TextIO

import yaml

from webhook.preemption.results import PENDING_OUTCOMES, Outcome
from webhook.tasks import cancel_and_wait

TABLES = ("table", "wide")
NONE = "<none>"
NOTHING = "No pods to preview.\n"

_RESET = "\033[0m"
_COLOURS: dict[str, str] = {
    Outcome.FITS: "\033[32m", Outcome.PREEMPTS: "\033[33m", Outcome.UNSCHEDULABLE: "\033[31m",
    Outcome.REJECTED: "\033[1;31m", Outcome.GATED: "\033[36m", Outcome.NOT_SCHEDULED: "\033[36m",
}
_RED = "\033[31m"


def colour_wanted(stream: TextIO, environ: Mapping[str, str]) -> bool:
    """Colour on a terminal, unless ``NO_COLOR`` is set to anything non-empty (no-color.org)."""
    return _is_tty(stream) and not environ.get("NO_COLOR") and environ.get("TERM") != "dumb"


def _is_tty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


# ---- documents ------------------------------------------------------------------------------------
def render(preview: Mapping[str, Any], output: str, *, colour: bool = False, no_headers: bool = False) -> str:
    """What goes to stdout."""
    if output.startswith("jsonpath="):
        from kubectl_plugin.templates import render_jsonpath

        return render_jsonpath(output.partition("=")[2], _plain(preview))
    if output.startswith("custom-columns="):
        from kubectl_plugin.templates import custom_column_rows

        results = _plain(preview.get("results") or [])
        header, rows = custom_column_rows(output.partition("=")[2], results if isinstance(results, list) else [])
        return "".join(f"{line}\n" for line in table(header, [[(c, "") for c in row] for row in rows], colour=False,
                                                       headers=not no_headers))
    if output == "json":
        return json.dumps(preview, indent=2) + "\n"
    if output == "yaml":
        return str(yaml.safe_dump(_plain(preview), sort_keys=False, default_flow_style=False, width=1 << 16))
    if output == "name":
        return "".join(f"{pod_name(r)}\n" for r in preview.get("results") or [])
    if no_headers:
        return format_rows(preview, wide=output == "wide", colour=colour)
    return format_tables(preview, wide=output == "wide", colour=colour)


def render_aside(preview: Mapping[str, Any], output: str, *, no_headers: bool = False) -> str:
    """What goes to stderr with it: with ``--no-headers`` the tables' rows stand alone on stdout, and the
    messages and summary line that end the tables go to stderr, where kubectl writes "No resources found"."""
    if output not in TABLES or not no_headers:
        return ""
    if not preview.get("results"):
        return NOTHING
    return "\n".join([*notes(preview, wide=output == "wide"), summary_line(preview)]) + "\n"


def pod_name(result: Mapping[str, Any]) -> str:
    """``pod/NAME``, as ``kubectl create --dry-run=client -o name`` prints a created pod."""
    return "pod/" + str(result.get("pod") or "").rpartition("/")[2]


def _plain(value: object) -> object:
    """Mappings and sequences as dict/list, so safe_dump accepts them."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


# ---- tables ---------------------------------------------------------------------------------------
Cell = tuple[str, str]  # (text, ANSI colour or "")


def table(header: Sequence[str], rows: Sequence[Sequence[Cell]], *, colour: bool, headers: bool = True) -> list[str]:
    """Columns three spaces apart, left-aligned, widths from the plain text (kubectl's printer); without
    ``headers`` the widths come from the rows alone, as kubectl's ``--no-headers`` aligns them."""
    widths = [len(h) if headers else 0 for h in header]
    for row in rows:
        for i, (text, _) in enumerate(row):
            widths[i] = max(widths[i], len(text))
    lines = ["   ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()] if headers else []
    for row in rows:
        cells = []
        for (text, style), width in zip(row, widths, strict=True):
            padded = text.ljust(width)
            cells.append(f"{style}{text}{_RESET}{padded[len(text):]}" if colour and style else padded)
        lines.append("   ".join(cells).rstrip())
    return lines


def _count_cell(value: object) -> Cell:
    number = int(value or 0)  # type: ignore[call-overload]
    return str(number), _RED if number else ""


def result_rows(results: Sequence[Mapping[str, Any]], *, wide: bool) -> tuple[list[str], list[list[Cell]]]:
    header = ["POD", "PRIORITY CLASS", "OUTCOME", "NODE", "VICTIMS", "PDB VIOLATIONS"]
    if wide:
        header += ["PRIORITY", "CANDIDATE NODES", "TIED NODES", "DELAY"]
    rows = []
    for r in results:
        outcome = str(r.get("outcome") or "")
        row: list[Cell] = [
            (str(r.get("pod") or ""), ""),
            (str(r.get("priorityClassName") or NONE), ""),
            (outcome, _COLOURS.get(outcome, "")),
            (str(r.get("node") or NONE), ""),
            (str(victim_count(r)), ""),
            _count_cell(r.get("pdbViolations")),
        ]
        if wide:
            priority = r.get("priority")
            tied = r.get("tiedNodes") or []
            row += [
                (NONE if priority is None else str(priority), ""),
                (str(r.get("candidateNodes") or 0), ""),
                (",".join(str(n) for n in tied) or NONE, ""),
                (f"{int(r.get('expectedDelaySeconds') or 0)}s", ""),
            ]
        rows.append(row)
    return header, rows


def score_rows(results: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[Cell]]]:
    """``-o wide``: why each ``Fits`` pod lands where it does: its best-scored nodes (``topNodes``) with the
    total and each Score plugin's weighted share, as kube-scheduler-simulator shows them."""
    header = ["POD", "NODE", "SCORE", "PLUGIN SCORES"]
    rows: list[list[Cell]] = []
    for r in results:
        for top in r.get("topNodes") or []:
            shares = ",".join(f"{name}={score}" for name, score in (top.get("scores") or {}).items())
            rows.append([(str(r.get("pod") or ""), ""), (str(top.get("node") or ""), ""),
                         (str(top.get("score") or 0), ""), (shares or NONE, "")])
    return header, rows


def other_tenant_victims(result: Mapping[str, Any]) -> tuple[int, int]:
    """(victims, PDB violations) of other tenants the webhook counted without naming (docs/interfaces.md §7)."""
    hidden = result.get("otherTenantVictims") or {}
    return int(hidden.get("count") or 0), int(hidden.get("pdbViolations") or 0)


def victim_count(result: Mapping[str, Any]) -> int:
    """Named victims, plus those /preview redacted (namespaces the caller may not list pods in) and those of
    other tenants the admission webhook only counted."""
    hidden = sum(int(h.get("count") or 0) for h in result.get("redactedVictims") or [])
    return len(result.get("victims") or []) + hidden + other_tenant_victims(result)[0]


def victim_rows(results: Sequence[Mapping[str, Any]], *, wide: bool) -> tuple[list[str], list[list[Cell]]]:
    """One row per victim, grouped by namespace (namespaces sorted; within one, the predictor's order);
    victims /preview redacted are one ``<N hidden>`` row per namespace; victims of other tenants one
    ``N pods of other tenants`` row per preempting pod, with no namespace."""
    header = ["NAMESPACE", "VICTIM", "NODE"] + (["PRIORITY"] if wide else []) + ["PDB VIOLATION", "PREEMPTED BY"]
    victims = [(v, str(r.get("pod") or "")) for r in results for v in r.get("victims") or []]
    rows = []
    for victim, preemptor in victims:
        violation = bool(victim.get("pdbViolation"))
        row: list[Cell] = [(str(victim.get("namespace") or ""), ""), (str(victim.get("name") or ""), ""),
                           (str(victim.get("node") or NONE), "")]
        if wide:
            row.append((str(victim.get("priority")), ""))
        row += [("yes" if violation else "no", _RED if violation else ""), (preemptor, "")]
        rows.append(row)
    for r in results:
        for hidden in r.get("redactedVictims") or []:
            violations = int(hidden.get("pdbViolations") or 0)
            row = [(str(hidden.get("namespace") or ""), ""), (f"<{int(hidden.get('count') or 0)} hidden>", ""),
                   (NONE, "")] + ([("<hidden>", "")] if wide else [])
            row += [(str(violations) if violations else "no", _RED if violations else ""),
                    (str(r.get("pod") or ""), "")]
            rows.append(row)
    rows.sort(key=lambda row: row[0][0])  # grouped by namespace; stable within one
    for r in results:
        count, violations = other_tenant_victims(r)
        if count:
            row = [(NONE, ""), (f"{_plural(count, 'pod')} of other tenants", ""), (str(r.get("node") or NONE), "")]
            row += [(NONE, "")] if wide else []
            row += [(str(violations) if violations else "no", _RED if violations else ""),
                    (str(r.get("pod") or ""), "")]
            rows.append(row)
    return header, rows


def summary_line(preview: Mapping[str, Any]) -> str:
    s: Mapping[str, Any] = preview.get("summary") or {}
    pods = int(s.get("pods") or 0)
    namespaces = list(s.get("namespacesAffected") or [])
    others = int(s.get("otherTenantVictims") or 0)
    where = f" in {_plural(len(namespaces), 'namespace')} ({', '.join(namespaces)})" if namespaces else ""
    if others:  # victims of other tenants the webhook counted without naming (docs/interfaces.md §7)
        where += f", {others} of them of other tenants" if namespaces else " of other tenants"
    return (f"{_plural(pods, 'pod')}: {int(s.get('fits') or 0)} fit, {int(s.get('preempting') or 0)} preempt, "
            f"{int(s.get('unschedulable') or 0)} unschedulable, {int(s.get('rejected') or 0)} rejected"
            f"{_not_tried(s)}; "
            f"{_plural(int(s.get('victims') or 0), 'victim')}{where}, "
            f"{_plural(int(s.get('pdbViolations') or 0), 'PDB violation')}")


def _not_tried(s: Mapping[str, Any]) -> str:
    """The pods kube-scheduler does not try now, named only when there are some (older answers carry no count)."""
    gated, other = int(s.get("gated") or 0), int(s.get("notScheduled") or 0)
    return (f", {gated} gated" if gated else "") + (f", {other} not scheduled (another scheduler)" if other else "")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def format_tables(preview: Mapping[str, Any], *, wide: bool, colour: bool = False) -> str:
    """The results table, the victims table (if any), the messages worth reading, and a summary line."""
    results: Sequence[Mapping[str, Any]] = preview.get("results") or []
    if not results:
        return NOTHING
    lines = table(*result_rows(results, wide=wide), colour=colour)
    header, rows = victim_rows(results, wide=wide)
    if rows:
        lines += ["", *table(header, rows, colour=colour)]
    header, rows = score_rows(results) if wide else ([], [])
    if rows:
        lines += ["", *table(header, rows, colour=colour)]
    messages = notes(preview, wide=wide)
    if messages:
        lines += ["", *messages]
    lines += ["", summary_line(preview)]
    return "\n".join(lines) + "\n"


def format_rows(preview: Mapping[str, Any], *, wide: bool, colour: bool = False) -> str:
    """``--no-headers``: the rows of both tables, the victims' after the pods', with no header and no blank line
    between them (``kubectl get pods,services --no-headers`` drops the separator with the headers)."""
    results: Sequence[Mapping[str, Any]] = preview.get("results") or []
    lines = table(*result_rows(results, wide=wide), colour=colour, headers=False)
    header, rows = victim_rows(results, wide=wide)
    lines += table(header, rows, colour=colour, headers=False)
    return "".join(f"{line}\n" for line in lines)


def notes(preview: Mapping[str, Any], *, wide: bool) -> list[str]:
    """``POD: message``: the message explains every outcome; by default only those where the pod would not run."""
    return [f"{r.get('pod')}: {r.get('message')}" for r in preview.get("results") or []
            if r.get("message") and (wide or r.get("outcome") in PENDING_OUTCOMES)]


# ---- progress -------------------------------------------------------------------------------------
class Progress:
    """``label 3/40 (2.1s)`` redrawn on one stderr line, only on a terminal and only once a run has taken
    longer than ``delay`` seconds (short runs print nothing); cleared when finished."""

    def __init__(self, stream: TextIO | None = None, *, enabled: bool = False, delay: float = 0.5,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.enabled = enabled and stream is not None
        self.delay = delay
        self.clock = clock
        self.label = ""
        self.total = 0
        self.done = 0
        self.started = 0.0
        self.drawn = False

    @classmethod
    def for_stream(cls, stream: TextIO) -> Progress:
        return cls(stream, enabled=_is_tty(stream))

    def start(self, total: int, label: str) -> None:
        self.total, self.done, self.label, self.started = total, 0, label, self.clock()

    def advance(self, n: int = 1) -> None:
        self.done += n
        self.draw()

    def draw(self) -> None:
        elapsed = self.clock() - self.started
        if not self.enabled or elapsed < self.delay or self.stream is None:
            return
        counts = f" {self.done}/{self.total}" if self.total else ""
        self.stream.write(f"\r{self.label}{counts} ({elapsed:.1f}s)\033[K")
        self.stream.flush()
        self.drawn = True

    def finish(self) -> None:
        if self.drawn and self.stream is not None:
            self.stream.write("\r\033[K")
            self.stream.flush()
        self.drawn = False

    @contextlib.asynccontextmanager
    async def running(self, label: str, interval: float = 0.1) -> AsyncIterator[None]:
        """Redraw the elapsed time while the body awaits work that reports no steps."""
        self.start(0, label)

        async def tick() -> None:
            while True:
                await asyncio.sleep(interval)
                self.draw()

        ticker = asyncio.create_task(tick()) if self.enabled else None
        try:
            yield
        finally:
            await cancel_and_wait(ticker)
            self.finish()

