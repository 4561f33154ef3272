"""The list of command modules the CLI registers besides validate/render.

Each entry is an ``add_parser(subparsers)`` function that adds one subcommand with ``func=`` set.
"""

from __future__ import annotations

ADDERS: list = []
