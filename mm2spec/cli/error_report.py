"""How the CLI shows an error: one line of text on stderr, or entries of the JSON document a caller parses."""

from __future__ import annotations

import json
import sys

from mm2spec.errors import PlaybookInvalid, SpecInvalid, SpecSyntaxError


def error_text(exc: Exception, file: str | None = None) -> str:
    """Spec problems already read FILE:LINE:COL: ...; other errors get an "error:" prefix and, when the
    error is about ``file`` and does not name it first, the file's name."""
    if isinstance(exc, (SpecInvalid, SpecSyntaxError, PlaybookInvalid)):
        return str(exc)
    message = str(exc)
    if file is not None and not message.startswith(f"{file}:"):
        message = f"{file}: {message}"
    return f"error: {message}"


def error_entries(exc: Exception, text: str, file: str | None = None) -> list[dict]:
    """The error as ``Diagnostic.to_json`` entries: one per problem of an invalid spec, else one whose
    place is what the error knows of it (``file``, or a syntax error's position)."""
    if isinstance(exc, SpecInvalid):
        return [d.to_json() for d in exc.diagnostics]
    pos = getattr(exc, "pos", None) if isinstance(exc, SpecSyntaxError) else None
    return [{"file": pos.file if pos else file, "line": pos and pos.line, "column": pos and pos.column, "pointer": None,
             "message": exc.message if pos else text, "hint": "", "environment": None}]


def report(exc: Exception, text: str, as_json: bool) -> None:
    """The error as text on stderr, or, for ``--format json``, as the JSON document a caller parses
    (``{"valid": false, "errors": [...]}`` whatever failed: a syntax error, an unknown env, a missing file)."""
    if as_json:
        print(json.dumps({"valid": False, "errors": error_entries(exc, text)}, indent=2))
    else:
        print(text, file=sys.stderr)
