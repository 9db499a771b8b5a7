"""``-o jsonpath=TEMPLATE`` and ``-o custom-columns=SPEC``, with kubectl's syntax and printing.

kubectl's JSONPath (k8s.io/client-go/util/jsonpath) is a template: text printed as it is, ``{EXPRESSION}``
replaced by what the expression finds (several results separated by a space; maps and lists as compact JSON,
strings as they are), ``{"\\n"}`` a quoted literal, and ``{range EXPRESSION}...{end}`` repeating its body for
each result. The expressions themselves (``.results[*].pod``, ``[?(@.outcome=="Preempts")]``, ``..name``,
slices, unions) are evaluated by jsonpath-ng's extended parser, a kept library, instead of a parser of our own;
this module only adds the template layer around it. Missing keys print nothing, as kubectl's default
``--allow-missing-template-keys=true`` does.

``custom-columns`` (kubectl's ``printers/customcolumn.go``): ``HEADER:EXPRESSION`` pairs separated by commas,
each expression "relaxed" (``.pod``, ``pod`` or ``{.pod}``); one row per item — here per previewed pod, the
``results`` of the PreemptionPreview — the results of one cell joined by ``,``, ``<none>`` when there is none.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from jsonpath_ng.exceptions import JsonPathLexerError, JsonPathParserError
from jsonpath_ng.ext import parse as parse_jsonpath

from webhook.errors import InvalidInput

NONE = "<none>"


class TemplateError(InvalidInput):
    """A template kubectl would refuse to parse (a usage error)."""


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Field:
    expression: Any  # a compiled jsonpath-ng expression; None: the current object ({@}, {.} or {$})


@dataclass(frozen=True, slots=True)
class Range:
    expression: Any
    body: tuple[Text | Field | Range, ...]


Node = Text | Field | Range


# ---- parsing -------------------------------------------------------------------------------------
def _actions(template: str) -> Iterator[tuple[bool, str]]:
    """(is_action, text) pieces; braces inside quotes do not end an action."""
    i = 0
    while i < len(template):
        start = template.find("{", i)
        if start < 0:
            yield False, template[i:]
            return
        if start > i:
            yield False, template[i:start]
        j, quote = start + 1, ""
        while j < len(template):
            char = template[j]
            if quote:
                if char == "\\":
                    j += 1
                elif char == quote:
                    quote = ""
            elif char in "\"'":
                quote = char
            elif char == "}":
                break
            j += 1
        if j >= len(template):
            raise TemplateError(f"unclosed action in {template!r}")
        yield True, template[start + 1:j].strip()
        i = j + 1


def compile_expression(text: str) -> Any:
    """kubectl's relative expression (``.a.b``, ``['a']``, ``..a``, ``@``, ``$``) as a jsonpath-ng expression."""
    if text in ("", "@", ".", "$"):
        return None
    path = "$" + text.lstrip("@") if text[0] in ".[@" else text
    try:
        return parse_jsonpath(path)
    except (JsonPathLexerError, JsonPathParserError, Exception) as exc:  # the library raises plain Exceptions too
        raise TemplateError(f"{text}: {exc}") from exc


def _literal(text: str) -> str | None:
    """A quoted string literal (``"\\n"``: Go's escapes, which JSON's are for what templates use); None when
    ``text`` is not one."""
    if len(text) < 2 or text[0] != text[-1] or text[0] not in "\"'":
        return None
    if text[0] == "'":
        return text[1:-1]
    try:
        return str(json.loads(text))
    except ValueError as exc:
        raise TemplateError(f"invalid string literal {text}: {exc}") from exc


def parse_template(template: str) -> tuple[Node, ...]:
    """The template as nodes; ``{range}`` without ``{end}`` (or the reverse) is an error, as in kubectl."""
    stack: list[tuple[Any, list[Node]]] = [(None, [])]
    for is_action, text in _actions(template):
        body = stack[-1][1]
        if not is_action:
            body.append(Text(text))
        elif text == "end":
            if len(stack) == 1:
                raise TemplateError("not in range, nothing to end")
            expression, inner = stack.pop()
            stack[-1][1].append(Range(expression, tuple(inner)))
        elif text.startswith("range ") or text == "range":
            stack.append((compile_expression(text[len("range"):].strip()), []))
        elif (literal := _literal(text)) is not None:
            body.append(Text(literal))
        else:
            body.append(Field(compile_expression(text)))
    if len(stack) != 1:
        raise TemplateError("unclosed range: {range} needs an {end}")
    return tuple(stack[0][1])


# ---- evaluation ----------------------------------------------------------------------------------
def find(expression: Any, data: object) -> list[object]:
    return [data] if expression is None else [match.value for match in expression.find(data)]


def go_text(value: object) -> str:
    """How kubectl prints one result: maps and lists as compact JSON (keys sorted, HTML escaped, as Go's
    ``json.Marshal``), strings as they are, ``null`` for nil, ``true``/``false``."""
    if isinstance(value, dict | list):
        text = json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
        return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def go_sprint(value: object) -> str:
    """Go's ``fmt.Sprint`` of a JSON value, what a custom column prints: ``map[k:v ...]`` (keys sorted),
    ``[a b]``, ``<nil>``."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_sprint(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_sprint(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    return go_text(value)


def execute(nodes: Sequence[Node], data: object) -> str:
    out: list[str] = []
    for node in nodes:
        if isinstance(node, Text):
            out.append(node.text)
        elif isinstance(node, Field):
            out.append(" ".join(go_text(v) for v in find(node.expression, data)))
        else:
            for item in _range_items(find(node.expression, data)):
                out.append(execute(node.body, item))
    return "".join(out)


def _range_items(found: list[object]) -> list[object]:
    """``{range .results[*]}`` iterates the matches; ``{range .results}`` the elements of the one list found."""
    if len(found) == 1 and isinstance(found[0], list):
        return list(found[0])
    return found


def render_jsonpath(template: str, document: object) -> str:
    return execute(parse_template(template), document)


# ---- custom-columns ------------------------------------------------------------------------------
_RELAXED = re.compile(r"^\{\.?([^{}]+)\}$|^\.?([^{}]+)$")  # kubectl's jsonRegexp


def parse_custom_columns(spec: str) -> list[tuple[str, Any]]:
    """``HEADER:EXPRESSION,...`` -> (header, compiled expression), with kubectl's error for a bad column."""
    if not spec:
        raise TemplateError("custom-columns format specified but no custom columns given")
    columns = []
    for part in spec.split(","):
        header, colon, expression = part.partition(":")
        if not colon:
            raise TemplateError(f"unexpected custom-columns spec: {part}, expected <header>:<json-path-expr>")
        match = _RELAXED.match(expression)
        if not match:
            raise TemplateError("unexpected path string, expected a 'name1.name2' or '.name1.name2' or "
                                "'{name1.name2}' or '{.name1.name2}'")
        columns.append((header, compile_expression("." + (match[1] or match[2]))))
    return columns


def custom_column_rows(spec: str, items: Sequence[object]) -> tuple[list[str], list[list[str]]]:
    columns = parse_custom_columns(spec)
    rows = []
    for item in items:
        row = []
        for _, expression in columns:
            values = find(expression, item)
            row.append(",".join(go_sprint(v) for v in values) if values else NONE)
        rows.append(row)
    return [header for header, _ in columns], rows
