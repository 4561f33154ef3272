"""Domain errors. The CLI turns every Mm2specError into a message and exit code 1, never a traceback."""

from __future__ import annotations


class Mm2specError(Exception):
    """Base of every error mm2spec reports to a user."""
