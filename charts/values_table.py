#!/usr/bin/env python3
"""Write the values table of charts/preemptguard/README.md from values.schema.json and values.yaml.

    charts/values_table.py            rewrite the table between the README's markers
    charts/values_table.py --check    exit 1 when the README's table is out of date (a test runs this)

Objects whose schema lists their properties, and whose default is not empty, are flattened to dotted keys;
every other value is one row.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parent / "preemptguard"
START, END = "<!-- values-table:start -->", "<!-- values-table:end -->"
MAX_DEFAULT = 60


def rows(schema: dict[str, Any], values: Any, prefix: str = "") -> list[tuple[str, str, str, str]]:
    found = []
    for key, prop in schema.get("properties", {}).items():
        name = f"{prefix}{key}"
        value = values.get(key) if isinstance(values, dict) else None
        if prop.get("properties") and prop.get("additionalProperties") is False and value:
            found.extend(rows(prop, value, f"{name}."))
            continue
        if key == "global" and not prefix:
            continue  # Helm's own key for parent charts
        found.append((name, type_of(prop), default_of(value), describe(prop)))
    return found


def type_of(prop: dict[str, Any]) -> str:
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {prop.get('items', {}).get('type', 'any')}"
    return "map of string" if kind == "object" and isinstance(prop.get("additionalProperties"), dict) else str(kind)


def default_of(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return f"`{text}`" if len(text) <= MAX_DEFAULT else "see `values.yaml`"


def describe(prop: dict[str, Any]) -> str:
    return str(prop.get("description", "")).replace("|", "\\|").replace("<", "&lt;")


def table() -> str:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    lines = ["| Key | Type | Default | Description |", "|---|---|---|---|"]
    lines += [f"| `{key}` | {kind} | {default} | {text} |" for key, kind, default, text in rows(schema, values)]
    return "\n".join(lines)


def render(readme: str) -> str:
    head, found, rest = readme.partition(START)
    if not found or END not in rest:
        raise SystemExit(f"{CHART / 'README.md'}: markers {START} and {END} are missing")
    return f"{head}{START}\n{table()}\n{END}{rest.partition(END)[2]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that the README is up to date")
    args = parser.parse_args(argv)
    path = CHART / "README.md"
    current = path.read_text()
    wanted = render(current)
    if args.check:
        if current != wanted:
            print(f"{path} is out of date: run charts/values_table.py", file=sys.stderr)
            return 1
        return 0
    path.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
