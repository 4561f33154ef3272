"""The command modules the CLI registers besides validate/render/plan.

Each entry is an ``add_parser(subparsers)`` function that adds one subcommand with ``func=`` set.
"""

from __future__ import annotations

from mm2spec import mirror
from mm2spec.dev import commands as dev

ADDERS: list = [dev.add_parser, mirror.add_parser]
