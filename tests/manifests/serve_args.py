"""Parse a container's ``serve`` arguments with the server's own parser.

``--client-ca`` and ``--client-cn`` (docs/interfaces.md §7) are being added to the server separately; until its parser
knows them they are checked by name only, and from then on they are parsed like every other flag.
"""

from __future__ import annotations

import argparse

from webhook.cli import build_parser
from webhook.server.command import add_serve_arguments

CLIENT_AUTH_FLAGS = ("--client-ca", "--client-cn")


def server_knows(flag: str) -> bool:
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    return flag in parser._option_string_actions


def parse_serve_args(arguments: list[str]) -> tuple[argparse.Namespace, dict[str, list[str]]]:
    """The parsed arguments, and the client-auth flags the parser does not know yet (flag -> values)."""
    pending: dict[str, list[str]] = {}
    kept = []
    for argument in arguments:
        flag, _, value = argument.partition("=")
        if flag in CLIENT_AUTH_FLAGS and not server_knows(flag):
            assert value, f"{flag} must be written {flag}=VALUE"
            pending.setdefault(flag, []).append(value)
        else:
            kept.append(argument)
    return build_parser().parse_args(kept), pending
