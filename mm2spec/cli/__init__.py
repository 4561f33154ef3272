"""cli: the ``mm2spec`` command line. Flags -> one call -> exit code; no logic lives here.

One module per command family registers its subcommands (``add_parsers``) and holds their handlers:

- ``spec``: validate, render, promote
- ``plan``: the plan of a spec against the live clusters
- ``mirror``: the Spark mirroring job in the foreground, or detached (start, stop, status)
- ``playbook``: playbook run, verify, failover
- ``drill``: a DR drill and its report
- ``dev``: local clusters and demo data
- ``init``: a new DR-spec repository (spec, Pulumi project and stacks, program, README)

Handlers print what the call returned; this module turns every ``Mm2specError`` into its message
and exit 1. Each handler imports the libraries its command needs when it runs (``pip install mm2spec``
has no pyspark, pulumi or matplotlib): a module that is missing is reported with the pip extra that
installs it (``mm2spec.components.module_missing``, one table for every command), exit 1.

Exit codes: 0 success; 1 invalid input or failure; 2 (``--detailed-exitcode``) changes present.
No command prints a traceback for a user error; set MM2SPEC_DEBUG=1 to see one for internal errors.

May import every other layer; nothing imports ``cli``. The only layer that prints.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

from mm2spec import __version__
from mm2spec.cli import dev, drill, init, mirror, plan, playbook, spec
from mm2spec.components import module_missing
from mm2spec.errors import Mm2specError, PlaybookInvalid, SpecInvalid, SpecSyntaxError

FAMILIES = (init, spec, plan, mirror, playbook, drill, dev)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mm2spec", description="Declarative Kafka disaster recovery with MirrorMaker 2.")
    parser.add_argument("--version", action="version", version=f"mm2spec {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    for family in FAMILIES:
        family.add_parsers(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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
        # Spec problems already read FILE:LINE:COL: ...; other errors get an "error:" prefix.
        located = isinstance(exc, (SpecInvalid, SpecSyntaxError, PlaybookInvalid))
        _report(exc, str(exc) if located else f"error: {exc}", as_json)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # noqa: BLE001 - an internal error: say so briefly, never dump a traceback by default
        if os.environ.get("MM2SPEC_DEBUG"):
            traceback.print_exc()
        _report(exc, f"internal error: {type(exc).__name__}: {exc} (set MM2SPEC_DEBUG=1 for details)", as_json)
        return 1


def _report(exc: Exception, text: str, as_json: bool) -> None:
    """The error as text on stderr, or, for ``--format json``, as the JSON document a caller parses
    (``{"valid": false, "errors": [...]}`` whatever failed: a syntax error, an unknown env, a missing file)."""
    if as_json:
        print(json.dumps({"valid": False, "errors": _error_entries(exc, text)}, indent=2))
    else:
        print(text, file=sys.stderr)


def _error_entries(exc: Exception, text: str) -> list[dict]:
    if isinstance(exc, SpecInvalid):
        return [d.to_json() for d in exc.diagnostics]
    pos = getattr(exc, "pos", None) if isinstance(exc, SpecSyntaxError) else None
    return [{"file": pos and pos.file, "line": pos and pos.line, "column": pos and pos.column, "pointer": None,
             "message": exc.message if pos else text, "hint": "", "environment": None}]


if __name__ == "__main__":
    sys.exit(main())
