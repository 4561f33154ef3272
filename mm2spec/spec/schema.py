"""The JSON Schema of a DR spec (``schemas/dr-spec.schema.json``), and its errors said so a person can act.

jsonschema's own messages repeat the offending instance and the schema fragment
(``'x' is not valid under any of the given schemas``); each error is rewritten here into what is
wrong at that place and, where there is one, what to write instead. Values are echoed only where
they cannot be secrets (``mm2spec.spec.secrets.hides_value``).
"""

from __future__ import annotations

import difflib
import json
import re
from functools import lru_cache
from typing import Any, Protocol

import jsonschema

from mm2spec.resources import schema_path
from mm2spec.spec.document import printable
from mm2spec.spec.secrets import MASKED, hides_value, holds_secret, redact

SCHEMA_PATH = schema_path("dr-spec.schema.json")


class Report(Protocol):
    """Records one problem at ``path`` (JSON Pointer parts) of the checked document; with ``key`` the
    position is that of the last part's key rather than of its value."""

    def __call__(self, path: list, message: str, hint: str = "", key: bool = False) -> None: ...


@lru_cache(maxsize=1)
def schema() -> dict:
    """The DR spec's JSON Schema, read once."""
    return json.loads(SCHEMA_PATH.read_text())


def _is_integer(_checker, value: Any) -> bool:
    """JSON Schema counts 2.0 as an integer; Kafka does not (``tasks.max=2.0`` fails to parse)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _whole_pattern(validator, pattern: str, instance: Any, _schema: dict):
    """``pattern`` as ECMA-262 reads it: Python's ``$`` also matches before a final newline, which
    would let ``"name\\n"`` through and into a file name."""
    if not isinstance(instance, str):
        return
    match = _compiled(pattern).search(instance)
    if match is None or (pattern.endswith("$") and match.end() != len(instance)):
        yield jsonschema.ValidationError(f"does not match {pattern}")


@lru_cache(maxsize=64)
def _compiled(pattern: str) -> re.Pattern:
    return re.compile(pattern)


@lru_cache(maxsize=1)
def _validator() -> jsonschema.protocols.Validator:
    base = jsonschema.validators.validator_for(schema())
    base.check_schema(schema())
    cls = jsonschema.validators.extend(base, {"pattern": _whole_pattern},
                                       type_checker=base.TYPE_CHECKER.redefine("integer", _is_integer))
    return cls(schema())


def check(data: Any, report: Report) -> None:
    """Report every way the plain document ``data`` breaks the schema."""
    for error in _validator().iter_errors(data):
        _describe(error, report)


_JSON_TYPES = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
               float: "a number", type(None): "null"}


def _type_name(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


SHOWN_CHARS = 80
"""Longest value echoed in a message: enough to recognise it, short enough for one line."""
SUGGESTED_KEYS = 64
"""Longest unknown key that gets a "did you mean": a misspelt field name is short, and the cost of
comparing grows with the key's length."""


def show(value: Any, path: list) -> str:
    """``value`` as a message may echo it: hidden under ``security`` and sensitive keys or when it holds a
    secret, quoted with control characters escaped, and cut to ``SHOWN_CHARS``."""
    if hides_value(path):
        return "(value hidden)"
    if holds_secret(value):
        # An address keeps its user and host (``mm2:(sensitive)@broker-1:9092``): the message still
        # says which entry is wrong. A private key is hidden whole.
        value = redact(value)
        if value == MASKED:
            return "(value hidden)"
    if isinstance(value, (dict, list)):
        return _type_name(value)
    text = f'"{printable(value)}"' if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 3] + "..."


def _suggestion(key: str, allowed: list[str]) -> str:
    close = difflib.get_close_matches(key, allowed, n=1) if len(key) <= SUGGESTED_KEYS else []
    return f'did you mean "{close[0]}"?' if close else ("allowed: " + ", ".join(allowed) if allowed else "")


def _describe(error: jsonschema.ValidationError, report: Report) -> None:
    path = list(error.absolute_path)
    kind = error.validator
    if list(error.relative_schema_path)[-2:-1] == ["propertyNames"]:
        kind = "propertyNames"  # the name's own check failed (pattern, length): said at the key
    if kind == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extras = [k for k in error.instance if k not in error.schema.get("properties", {})]
        for key in extras:
            # A field of the spec itself (not a free-form config map): the spec has passwordSecret instead.
            if re.search(r"passw", key, re.IGNORECASE):
                report(path + [key], "a password is written inline",
                       "set passwordSecret to the name of an environment variable or Pulumi secret "
                       "that holds it; the spec never holds the password", key=True)
                continue
            report(path + [key], f"unknown field {show(key, [])}", _suggestion(key, allowed), key=True)
    elif kind == "required":
        missing = re.match(r"'([^']+)'", error.message)
        field = missing.group(1) if missing else "?"
        report(path, f'missing required field "{field}"')
    elif kind == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        report(path, f"expected {expected}, got {_type_name(error.instance)}")
    elif kind == "enum":
        options = ", ".join(str(v) for v in error.validator_value)
        report(path, f"{show(error.instance, path)} is not one of: {options}")
    elif kind == "const":
        report(path, f"must be {json.dumps(error.validator_value)}, got {show(error.instance, path)}")
    elif kind == "pattern":
        _pattern_problem(path, error, report)
    elif kind == "propertyNames":
        bad = error.instance if isinstance(error.instance, str) else "?"
        report(path + [bad], f'invalid name {show(bad, [])}: use letters, digits, "_" and "-" (at most 63)', key=True)
    elif kind == "minItems":
        n = error.validator_value
        report(path, f"must have at least {n} item{'s' if n != 1 else ''}")
    elif kind == "minProperties" and path == ["clusters"]:
        report(path, "at least two clusters are needed: a source and a target")
    elif kind == "minLength":
        report(path, "must not be empty")
    elif kind in ("minimum", "maximum"):
        word = "at least" if kind == "minimum" else "at most"
        report(path, f"must be {word} {error.validator_value}, got {show(error.instance, path)}")
    else:
        report(path, f"invalid value ({kind})")


def _pattern_problem(path: list, error: jsonschema.ValidationError, report: Report) -> None:
    """A value that does not match its field's pattern, said in the field's own terms where it has them."""
    field = path[-1] if path else ""
    if field == "passwordSecret":
        report(path, "passwordSecret must be the name of a secret, not a password",
               "use an environment variable or Pulumi secret name such as PRIMARY_MM2_PASSWORD")
    elif field == "master":
        report(path, f"{show(error.instance, path)} is not a Spark master",
               "use local[N], local[*], spark://host:port or k8s://...")
    elif field == "triggerInterval":
        report(path, f"{show(error.instance, path)} is not an interval", "write e.g. '1 second' or '500 milliseconds'")
    elif field == "principal":
        report(path, f"{show(error.instance, path)} is not a principal", "write e.g. User:mm2")
    else:
        report(path, f"{show(error.instance, path)} does not match {error.validator_value}")
