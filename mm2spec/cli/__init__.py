"""cli: the ``mm2spec`` command line. Flags -> one call -> exit code; no logic lives here.

One module per command family registers its subcommands (``add_parsers``) and holds their
handlers: ``spec`` (validate, render, promote), ``plan``, ``mirror``, ``dev`` (local clusters and
demo data). Handlers print what the call returned; this module turns every ``Mm2specError`` into
its message and exit 1.

Exit codes: 0 success; 1 invalid input or failure; 2 (``--detailed-exitcode``) changes present.
No command prints a traceback for a user error; set MM2SPEC_DEBUG=1 to see one for internal errors.

May import every other layer; nothing imports ``cli``. The only layer that prints.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from mm2spec import __version__
from mm2spec.cli import dev, mirror, plan, spec
from mm2spec.errors import Mm2specError, SpecInvalid, SpecSyntaxError

FAMILIES = (spec, plan, mirror, dev)


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
    try:
        return args.func(args)
    except Mm2specError as exc:
        # Spec problems already read FILE:LINE:COL: ...; other errors get an "error:" prefix.
        located = isinstance(exc, (SpecInvalid, SpecSyntaxError))
        print(str(exc) if located else f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # an internal error: say so briefly, never dump a traceback by default
        if os.environ.get("MM2SPEC_DEBUG"):
            traceback.print_exc()
        print(f"internal error: {type(exc).__name__}: {exc} (set MM2SPEC_DEBUG=1 for details)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
