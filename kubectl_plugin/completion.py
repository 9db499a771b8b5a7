"""Shell completion in Cobra's protocol, the one kubectl speaks to plugins (kubectl 1.26 and later).

For ``kubectl preempt-preview <TAB>`` kubectl runs ``kubectl_complete-preempt_preview`` with the words typed
after the plugin's name, the last one being the word to complete (empty after a space), and reads one candidate
per line (``value<TAB>description``) then a last line ``:<directive>``. ``kubectl-preempt_preview __complete
WORDS...`` answers the same, for the scripts of ``kubectl preempt-preview completion bash|zsh``.

Values that live in the cluster (``--priority-class``, ``-n``, the NAME of TYPE/NAME) are listed from the API
server of the kubeconfig (``--kubeconfig``, ``--context`` and ``-n`` as typed) when it answers within
``CLUSTER_SECONDS``; otherwise there are none. A TAB never waits longer, and never prints an error.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubectl_plugin.inputs import RESOURCE_TYPES, resource_type
from kubectl_plugin.options import SHELLS, build_parser
from webhook.errors import InvalidInput

# Cobra's ShellCompDirective bits (spf13/cobra, completions.go).
DEFAULT, ERROR, NO_SPACE, NO_FILE_COMP, FILTER_FILE_EXT, FILTER_DIRS = 0, 1, 2, 4, 8, 16
CLUSTER_SECONDS = 2.0
LIST_LIMIT = "500"  # one page of a list is plenty to choose from
MANIFEST_EXTENSIONS = ("json", "yaml", "yml")  # kubectl's -f: MarkFlagFilename("json", "yaml", "yml")
OUTPUT_HELP = {
    "table": "pods, then victims, as tables (the default)",
    "wide": "the tables with priorities, candidate and tied nodes, and the expected delay",
    "json": "the PreemptionPreview as JSON",
    "yaml": "the PreemptionPreview as YAML",
    "name": "pod/NAME for each previewed pod",
    "jsonpath=": "kubectl's JSONPath template over the PreemptionPreview",
    "custom-columns=": "HEADER:.field,... with one row per previewed pod",
}
COMPLETION_HELP = "Print the shell completion script for kubectl-preempt_preview (bash or zsh)"
EXPOSURE_HELP = "Which of a namespace's running pods could be preempted, and by which PriorityClasses"


@dataclass(frozen=True, slots=True)
class Completions:
    candidates: tuple[str, ...] = ()  # "value" or "value\tdescription"
    directive: int = NO_FILE_COMP

    def text(self, *, descriptions: bool = True) -> str:
        lines = [c if descriptions else c.partition("\t")[0] for c in self.candidates]
        return "".join(f"{line}\n" for line in lines) + f":{self.directive}\n"


def matching(candidates: Iterable[str], prefix: str) -> tuple[str, ...]:
    return tuple(c for c in candidates if c.partition("\t")[0].startswith(prefix))


@dataclass(frozen=True, slots=True)
class Flag:
    names: tuple[str, ...]  # ("-f", "--filename")
    dest: str
    help: str
    takes_value: bool
    repeatable: bool


def plugin_flags() -> list[Flag]:
    """The flags of ``build_parser``: what completion offers is what the command accepts."""
    return [Flag(tuple(a.option_strings), a.dest, " ".join((a.help or "").split()), a.nargs != 0,
                 a.default == [] and a.nargs != 0)
            for a in build_parser()._actions if a.option_strings]


@dataclass(slots=True)
class Typed:
    """What the words before the one being completed say."""

    values: dict[str, str] = field(default_factory=dict)  # flag dest -> its (last) value
    seen: set[str] = field(default_factory=set)  # flag dests given
    positionals: list[str] = field(default_factory=list)
    pending: Flag | None = None  # the flag whose value is the word being completed
    end_of_flags: bool = False  # after "--"


def read_words(words: Sequence[str], flags: Sequence[Flag]) -> Typed:
    """pflag's reading: ``--flag value``, ``--flag=value``, ``-o value``, ``-ovalue``, and ``--`` ending flags."""
    by_name = {name: flag for flag in flags for name in flag.names}
    typed = Typed()
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if typed.end_of_flags or word == "-" or not word.startswith("-"):
            typed.positionals.append(word)
            continue
        if word == "--":
            typed.end_of_flags = True
            continue
        name, equals, value = word.partition("=")
        flag = by_name.get(name)
        if flag is None and not name.startswith("--") and name[:2] in by_name:  # -ojson
            flag, equals, value = by_name[name[:2]], "=", word[2:]
        if flag is None:
            continue
        typed.seen.add(flag.dest)
        if flag.takes_value and not equals:
            if index == len(words):
                typed.pending = flag
                break
            value, index = words[index], index + 1
        if flag.takes_value:
            typed.values[flag.dest] = value
    return typed


def complete(words: Sequence[str], *, environ: Mapping[str, str]) -> Completions:
    """The completions of the last of ``words`` (the words after ``kubectl preempt-preview``)."""
    *before, current = words or [""]
    flags = plugin_flags()
    typed = read_words(before, flags)
    if typed.pending is not None:
        return complete_value(typed.pending, current, typed, environ)
    if current.startswith("-") and not typed.end_of_flags:
        name, equals, value = current.partition("=")
        if equals:  # --flag=<TAB>: the value alone, as Cobra answers (the shell keeps the "--flag=")
            flag = next((f for f in flags if name in f.names and f.takes_value), None)
            return complete_value(flag, value, typed, environ) if flag else Completions()
        offered = [flag for flag in flags if flag.repeatable or flag.dest not in typed.seen]  # as Cobra does
        return Completions(tuple(f"{name}\t{flag.help}" for flag in offered for name in flag.names
                                 if name.startswith(current)))
    return complete_positional(current, typed, environ)


def complete_value(flag: Flag, current: str, typed: Typed, environ: Mapping[str, str]) -> Completions:
    dest = flag.dest
    if dest == "output":
        return Completions(matching((f"{name}\t{text}" for name, text in OUTPUT_HELP.items()), current))
    if dest in ("filename", "snapshot"):
        return Completions(MANIFEST_EXTENSIONS, FILTER_FILE_EXT)
    if dest in ("kubeconfig", "certificate_authority"):
        return Completions(directive=DEFAULT)  # any file
    if dest == "context":
        return Completions(matching(kubeconfig_contexts(typed, environ), current))
    if dest == "namespace":
        return Completions(matching(from_cluster(typed, environ, lambda _: "/api/v1/namespaces", _name), current))
    if dest == "priority_class":
        found = from_cluster(typed, environ, lambda _: "/apis/scheduling.k8s.io/v1/priorityclasses", _priority_class)
        return Completions(matching(found, current))
    return Completions()


def complete_positional(current: str, typed: Typed, environ: Mapping[str, str]) -> Completions:
    """``completion bash|zsh``; else ``TYPE/NAME`` (or ``TYPE NAME``) unless ``-f`` is given."""
    words = typed.positionals
    if words[:1] == ["completion"]:
        return Completions(matching(SHELLS, current) if len(words) == 1 else ())
    if words[:1] == ["exposure"]:
        return Completions()
    if "filename" in typed.seen:
        return Completions()
    if "/" in current or len(words) == 1:
        kind, _, name = current.partition("/") if "/" in current else (words[0], "", current)
        prefix = f"{kind}/" if "/" in current else ""
        try:
            resource = resource_type(kind)
        except InvalidInput:
            return Completions()
        if len(words) > (0 if prefix else 1):
            return Completions()
        names = from_cluster(typed, environ, resource.collection_path, _name)
        return Completions(tuple(prefix + n for n in names if n.startswith(name)))
    if words:
        return Completions()
    # The first word: a TYPE and its "/" with no space after it, as the NAME follows; or the completion command.
    types = [f"{r.kind.lower()}/" for r in RESOURCE_TYPES]
    if current and _is_type(current):
        types.append(f"{current}/")  # deploy, sts, deployments.apps: the spelling typed
    candidates = [*dict.fromkeys(t for t in types if t.startswith(current))]
    if "completion".startswith(current):
        candidates.append(f"completion\t{COMPLETION_HELP}")
    if "exposure".startswith(current):
        candidates.append(f"exposure\t{EXPOSURE_HELP}")
    # One directive for all: no space after a TYPE/ wins (a chosen "completion" then needs the space typed).
    no_space = NO_SPACE if any(c.endswith("/") for c in candidates) else 0
    return Completions(tuple(candidates), NO_FILE_COMP | no_space)


def _is_type(text: str) -> bool:
    try:
        resource_type(text)
    except InvalidInput:
        return False
    return True


# ---- values from the kubeconfig and the cluster -----------------------------------------------------
def kubeconfig_contexts(typed: Typed, environ: Mapping[str, str]) -> list[str]:
    import yaml

    from kubectl_plugin.sources.kube_api import kubeconfig_paths

    names: list[str] = []
    try:
        for path in kubeconfig_paths(typed.values.get("kubeconfig"), environ):
            with open(path, encoding="utf-8") as stream:
                config = yaml.safe_load(stream) or {}
            names += [str(c["name"]) for c in config.get("contexts") or [] if isinstance(c, dict) and c.get("name")]
    except Exception:  # an unreadable kubeconfig offers nothing; the command itself will say why
        return []
    return list(dict.fromkeys(names))


def from_cluster(typed: Typed, environ: Mapping[str, str], path: Callable[[str], str],
                 describe: Callable[[Mapping[str, Any]], str]) -> list[str]:
    """``describe(item)`` for the items of ``GET path(namespace)``, or nothing unless the API server answers
    within ``CLUSTER_SECONDS`` (or ``--request-timeout``, when shorter)."""
    from kubectl_plugin.sources.http import RequestTimeout

    try:  # the Kubernetes client loads (a second or so) before the clock starts: the bound is the cluster's
        from webhook.kubeapi import load_client_library

        load_client_library()
    except ImportError:
        return []
    try:
        seconds = RequestTimeout.parse(typed.values.get("request_timeout", "")).seconds or CLUSTER_SECONDS
    except ValueError:
        seconds = CLUSTER_SECONDS
    seconds = min(seconds, CLUSTER_SECONDS)
    try:
        return asyncio.run(asyncio.wait_for(_list(typed, environ, path, describe, seconds), seconds))
    except Exception:  # unreachable, slow, forbidden or not configured: no candidates
        return []


async def _list(typed: Typed, environ: Mapping[str, str], path: Callable[[str], str],
                describe: Callable[[Mapping[str, Any]], str], seconds: float) -> list[str]:
    from kubectl_plugin.sources import kube_api
    from kubectl_plugin.sources.http import SECOND, RequestTimeout

    cluster = await kube_api.connect(kubeconfig=typed.values.get("kubeconfig"), context=typed.values.get("context"),
                                     environ=environ, timeout=RequestTimeout(int(seconds * SECOND)))
    try:
        document = await cluster.get(path(typed.values.get("namespace") or cluster.namespace),
                                     query=[("limit", LIST_LIMIT)])
    finally:
        await cluster.close()
    return [describe(item) for item in document.get("items") or [] if isinstance(item, dict)]


def _name(item: Mapping[str, Any]) -> str:
    return str((item.get("metadata") or {}).get("name") or "")


def _priority_class(item: Mapping[str, Any]) -> str:
    details = [f"value {item.get('value')}"]
    if item.get("globalDefault"):
        details.append("global default")
    if item.get("preemptionPolicy") == "Never":
        details.append("preemptionPolicy Never")
    return f"{_name(item)}\t{', '.join(details)}"


# ---- entry points -------------------------------------------------------------------------------------
def print_completions(words: Sequence[str], *, descriptions: bool = True) -> int:
    """Cobra's ``__complete`` (``__completeNoDesc`` without descriptions): candidates and directive on stdout,
    nothing on stderr, exit status 0."""
    logging.getLogger().addHandler(logging.NullHandler())
    warnings.simplefilter("ignore")
    try:
        answer = complete(words, environ=os.environ)
    except Exception:
        answer = Completions(directive=ERROR)
    sys.stdout.write(answer.text(descriptions=descriptions))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``kubectl_complete-preempt_preview WORDS...``: what kubectl runs to complete ``kubectl preempt-preview``."""
    return print_completions(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    raise SystemExit(main())
