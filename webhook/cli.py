"""``preempt-guard``: the program. It dispatches ``serve`` (``webhook.server.command``), ``demo``
(``webhook.server.demo``), ``certs`` (``webhook.certs.command``) and ``verify`` (``webhook.verify.command``); each
of those modules holds its subcommand's flags and work.

Errors end the process with one line on stderr and the exit code of the ``PreemptGuardError`` tree.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from webhook.certs import command as certs_command
from webhook.errors import PreemptGuardError
from webhook.server import command as serve_command
from webhook.server import demo
from webhook.verify import command as verify_command
from webhook.version import package_version

PROG = "preempt-guard"
EXIT_BROKEN_PIPE = 141  # what a shell reports for a command ended by SIGPIPE, as `yes | head` does

RUN = {"serve": serve_command.run_serve, "demo": demo.run, "certs": certs_command.run, "verify": verify_command.run}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Priority admission webhook and preemption predictor.")
    parser.add_argument("--version", action="version", version=f"{PROG} {package_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve_command.add_serve_arguments(commands.add_parser("serve", help="serve the admission webhook over HTTPS"))
    demo.add_demo_arguments(commands.add_parser(
        "demo", help="serve a snapshot on 127.0.0.1 and send it pod manifests as the kube-apiserver would"))
    certs_command.add_arguments(
        commands.add_parser("certs", help="create or rotate the webhook's TLS certificates"))
    verify_command.add_arguments(
        commands.add_parser("verify", help="hold the prediction against a real kube-scheduler on a snapshot"))
    return parser


def one_line(message: object) -> str:
    return " ".join(str(message).split())


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        return RUN[args.command](args)
    except BrokenPipeError:  # e.g. `preempt-guard demo | head -1`: the reader left, nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except PreemptGuardError as exc:
        print(f"{PROG}: error: {one_line(exc)}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        print(f"{PROG}: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
