"""cli: the ``mm2spec`` command line. Flags -> one call -> exit code; no logic lives here.

One module per command family registers its subcommands (``add_parsers``) and holds their handlers:

- ``spec``: validate, render, promote
- ``plan``: the plan of a spec against the live clusters
- ``mirror``: the Spark mirroring job in the foreground, or detached (start, stop, status)
- ``playbook``: playbook run, verify, failover
- ``drill``: a DR drill and its report
- ``dev``: local clusters and demo data
- ``init``: a new DR-spec repository (spec, Pulumi project and stacks, program, README)
- ``error_report``: an error as the text line or the JSON entries a command prints

Handlers print what the call returned; this module turns every ``Mm2specError`` into its message
(``error_report``) and exit 1. Each handler imports the libraries its command needs when it runs (``pip install mm2spec``
has no pyspark, pulumi or matplotlib): a module that is missing is reported with the pip extra that
installs it (``mm2spec.components.module_missing``, one table for every command), exit 1.

Exit codes: 0 success; 1 invalid input, a usage error (an unknown or misspelt flag) or a failure;
2 only from ``--detailed-exitcode`` (plan, promote) and ``--check`` (playbooks): changes present.
No command prints a traceback for a user error; set MM2SPEC_DEBUG=1 to see one for internal errors.
Every parser is a ``Parser``: no abbreviated flags (``--baselin`` is not ``--baseline``), and a
usage error prints the usage of the (sub)command it is in.

May import every other layer; nothing imports ``cli``. The only layer that prints.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import NoReturn

from mm2spec import __version__
from mm2spec.cli import dev, drill, init, mirror, plan, playbook, spec
from mm2spec.cli.error_report import error_text, report
from mm2spec.components import module_missing
from mm2spec.errors import Mm2specError

FAMILIES = (init, spec, plan, mirror, playbook, drill, dev)


USAGE_ERROR = 1
"""A usage error's exit code. argparse's own, 2, means "changes present" to ``--detailed-exitcode`` and
to the CI workflow ``init`` writes: a misspelt flag must never read as a plan with changes."""


class Parser(argparse.ArgumentParser):
    """The parser of ``mm2spec`` and of each (sub)command (``add_parser`` makes its own kind)."""

    def __init__(self, *args, **kwargs):
        # An abbreviation is a guess: --baselin taken for --baseline today is a different flag tomorrow.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        parsed, extras = super().parse_known_args(args, namespace)
        # The innermost subcommand returns first; its parser is the one whose usage an error shows.
        if not hasattr(parsed, "_parser"):
            parsed._parser = self
        return parsed, extras

    def parse_args(self, args=None, namespace=None):
        parsed, extras = self.parse_known_args(args, namespace)
        parser = vars(parsed).pop("_parser", self)
        if extras:
            parser.error(f"unrecognized arguments: {' '.join(extras)}")
        # A command whose flags must agree with each other says how (set_defaults(usage_problem=...)).
        usage_problem = vars(parsed).pop("usage_problem", None)
        problem = usage_problem(parsed) if usage_problem else None
        if problem:
            parser.error(problem)
        return parsed

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message}\n")


def build_parser() -> Parser:
    parser = Parser(prog="mm2spec", description="Declarative Kafka disaster recovery with MirrorMaker 2.")
    parser.add_argument("--version", action="version", version=f"mm2spec {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    for family in FAMILIES:
        family.add_parsers(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        if exc.code == USAGE_ERROR:  # printed by Parser.error; callers in-process get the code like any other
            return USAGE_ERROR
        raise  # --help, --version
    as_json = getattr(args, "format", None) == "json"
    try:
        try:
            return args.func(args)
        except ModuleNotFoundError as exc:
            # Commands import their libraries when they run: a missing one is an extra to install.
            # One of mm2spec's own modules missing is a broken install or a bug: an internal error.
            if (exc.name or "").partition(".")[0] == "mm2spec":
                raise
            raise module_missing(exc.name or "?") from None
    except Mm2specError as exc:
        report(exc, error_text(exc), as_json)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # noqa: BLE001 - an internal error: say so briefly, never dump a traceback by default
        if os.environ.get("MM2SPEC_DEBUG"):
            traceback.print_exc()
        report(exc, f"internal error: {type(exc).__name__}: {exc} (set MM2SPEC_DEBUG=1 for details)", as_json)
        return 1


if __name__ == "__main__":
    sys.exit(main())
