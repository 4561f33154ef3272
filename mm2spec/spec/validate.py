"""Validation of a DR spec: JSON Schema plus semantic rules, every error at once, each with its place.

Each problem is a ``Diagnostic`` printed as ``FILE:LINE:COL: /json/pointer: message``. The position
is where the offending value was written, in the base document or in the environment overlay that
set it. Values are echoed only where they cannot be secrets.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

import jsonschema

from mm2spec.spec.document import Mapping, Node, Position, Scalar, locate, pointer, to_plain
from mm2spec.errors import SpecInvalid, UnknownEnvironment
from mm2spec.spec.overlay import item_name, merge
from mm2spec.spec.patterns import java_regex_error

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "dr-spec.schema.json"

_SENSITIVE_KEY = re.compile(r"pass|secret|jaas|token|credential|private|sasl", re.IGNORECASE)
_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?):([0-9]{1,5})$")
# Keys under free-form maps whose values hold credentials; only config-provider references are allowed.
_PASSWORD_PROPERTY = re.compile(r"(password|jaas\.config|secret|token)$", re.IGNORECASE)
_PROVIDER_REF = re.compile(r"\$\{[A-Za-z0-9_.-]+:[^}]*\}")


@dataclass(frozen=True, order=True)
class Diagnostic:
    """One problem in a spec: where it was written, which value, what is wrong and what to do."""

    file: str
    line: int
    column: int
    pointer: str
    message: str
    hint: str = ""
    env: str | None = None

    @classmethod
    def at(cls, pos: Position, path: Iterable, message: str, hint: str = "") -> "Diagnostic":
        return cls(pos.file, pos.line, pos.column, pointer(list(path)), message, hint)

    def __str__(self) -> str:
        where = f"environment {self.env}: " if self.env else ""
        text = f"{self.file}:{self.line}:{self.column}: {self.pointer}: {where}{self.message}"
        return f"{text} ({self.hint})" if self.hint else text

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "column": self.column, "pointer": self.pointer,
                "message": self.message, "hint": self.hint, "environment": self.env}


@lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


@lru_cache(maxsize=1)
def _validator() -> jsonschema.protocols.Validator:
    cls = jsonschema.validators.validator_for(schema())
    cls.check_schema(schema())
    return cls(schema())


def environments(root: Node) -> list[str]:
    """Names of the environments the spec defines, in file order."""
    envs = root.entries.get("environments") if isinstance(root, Mapping) else None
    return list(envs.entries) if isinstance(envs, Mapping) else []


def resolve(root: Node, env: str | None) -> Node:
    """The document for ``env``: the base with the environment's overlay merged in (no ``environments``)."""
    assert isinstance(root, Mapping)
    base = Mapping({k: v for k, v in root.entries.items() if k != "environments"}, root.pos,
                   {k: p for k, p in root.key_pos.items() if k != "environments"})
    if env is None:
        return base
    known = environments(root)
    if env not in known:
        listed = ", ".join(known) if known else "none"
        raise UnknownEnvironment(f'unknown environment "{env}": the spec defines {listed}')
    overlay = root.entries["environments"].entries[env]
    merged = merge(base, overlay) if isinstance(overlay, Mapping) else base
    return merged


def validate(root: Node, env: str | None = None, all_environments: bool = False) -> list[Diagnostic]:
    """All problems of the spec for ``env`` (or of the base and, with ``all_environments``, every environment)."""
    problems: list[Diagnostic] = []
    problems += _check_environments_block(root)
    targets: list[str | None] = [env] if env is not None else [None]
    if env is None and all_environments:
        targets += environments(root)
    # An error the base has shows up in every environment at the same place: it is the base's and
    # is reported once, untagged. Errors only an environment has say which environment.
    base_problems = _problems(resolve(root, None))
    for name in targets:
        if name is None:
            problems += base_problems
        else:
            problems += [d if d in base_problems else dataclasses.replace(d, env=name)
                         for d in _problems(resolve(root, name))]
    return sorted(set(problems))


def _problems(doc: Node) -> list[Diagnostic]:
    return _schema_problems(doc) + _semantic_problems(doc)


def _check_environments_block(root: Node) -> list[Diagnostic]:
    problems = []
    envs = root.entries.get("environments") if isinstance(root, Mapping) else None
    if isinstance(envs, Mapping):
        for name, overlay in envs.entries.items():
            if isinstance(overlay, Mapping) and "environments" in overlay.entries:
                problems.append(Diagnostic.at(overlay.key_pos["environments"], ["environments", name, "environments"],
                                              "an environment overlay cannot define environments"))
    return problems


# ---------------------------------------------------------------------------------------- schema

def _is_sensitive(path: list) -> bool:
    return any(isinstance(p, str) and (_SENSITIVE_KEY.search(p) or p == "security") for p in path)


def _show(value: Any, path: list) -> str:
    if _is_sensitive(path):
        return "(value hidden)"
    text = json.dumps(value) if not isinstance(value, str) else f'"{value}"'
    return text if len(text) <= 80 else text[:77] + "..."


_JSON_TYPES = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
               float: "a number", type(None): "null"}


def _type_name(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _schema_problems(doc: Node) -> list[Diagnostic]:
    plain = to_plain(doc)
    problems = []
    for error in _validator().iter_errors(plain):
        problems += _describe(error, doc)
    return problems


def _describe(error: jsonschema.ValidationError, doc: Node) -> list[Diagnostic]:
    path = list(error.absolute_path)
    kind = error.validator
    here = locate(doc, path)
    if kind == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extras = [k for k in error.instance if k not in error.schema.get("properties", {})]
        out = []
        for key in extras:
            key_pos = locate(doc, path + [key], key=True)
            if re.search(r"passw", key, re.IGNORECASE):
                out.append(Diagnostic.at(key_pos, path + [key], "a password is written inline",
                                         "set passwordSecret to the name of an environment variable or Pulumi secret "
                                         "that holds it; the spec never holds the password"))
                continue
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f'did you mean "{close[0]}"?' if close else ("allowed: " + ", ".join(allowed) if allowed else "")
            out.append(Diagnostic.at(key_pos, path + [key], f'unknown field "{key}"', hint))
        return out
    if kind == "required":
        missing = re.match(r"'([^']+)'", error.message)
        field = missing.group(1) if missing else "?"
        return [Diagnostic.at(here, path, f'missing required field "{field}"')]
    if kind == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        return [Diagnostic.at(here, path, f"expected {expected}, got {_type_name(error.instance)}")]
    if kind == "enum":
        options = ", ".join(str(v) for v in error.validator_value)
        return [Diagnostic.at(here, path, f"{_show(error.instance, path)} is not one of: {options}")]
    if kind == "const":
        return [Diagnostic.at(here, path, f"must be {json.dumps(error.validator_value)}, got {_show(error.instance, path)}")]
    if kind == "pattern":
        return [_pattern_problem(here, path, error)]
    if kind == "propertyNames":
        bad = error.instance if isinstance(error.instance, str) else "?"
        return [Diagnostic.at(locate(doc, path + [bad], key=True), path + [bad],
                              f'invalid name "{bad}": use letters, digits, "_" and "-" (at most 63)')]
    if kind == "minItems":
        n = error.validator_value
        return [Diagnostic.at(here, path, f"must have at least {n} item{'s' if n != 1 else ''}")]
    if kind == "minProperties" and path == ["clusters"]:
        return [Diagnostic.at(here, path, "at least two clusters are needed: a source and a target")]
    if kind == "minLength":
        return [Diagnostic.at(here, path, "must not be empty")]
    if kind in ("minimum", "maximum"):
        word = "at least" if kind == "minimum" else "at most"
        return [Diagnostic.at(here, path, f"must be {word} {error.validator_value}, got {_show(error.instance, path)}")]
    message = error.message if not _is_sensitive(path) else f"invalid value ({kind})"
    return [Diagnostic.at(here, path, message)]


def _pattern_problem(here: Position, path: list, error: jsonschema.ValidationError) -> Diagnostic:
    field = path[-1] if path else ""
    if field == "passwordSecret":
        return Diagnostic.at(here, path, "passwordSecret must be the name of a secret, not a password",
                             "use an environment variable or Pulumi secret name such as PRIMARY_MM2_PASSWORD")
    if field == "master":
        return Diagnostic.at(here, path, f"{_show(error.instance, path)} is not a Spark master",
                             "use local[N], local[*], spark://host:port or k8s://...")
    if field == "triggerInterval":
        return Diagnostic.at(here, path, f"{_show(error.instance, path)} is not an interval",
                             "write e.g. '1 second' or '500 milliseconds'")
    if field == "principal":
        return Diagnostic.at(here, path, f"{_show(error.instance, path)} is not a principal", "write e.g. User:mm2")
    return Diagnostic.at(here, path, f"{_show(error.instance, path)} does not match {error.validator_value}")


# -------------------------------------------------------------------------------------- semantic

def _semantic_problems(doc: Node) -> list[Diagnostic]:
    data = to_plain(doc)
    problems: list[Diagnostic] = []

    def report(path: list, message: str, hint: str = "", key: bool = False) -> None:
        problems.append(Diagnostic.at(locate(doc, path, key=key), path, message, hint))

    clusters = data.get("clusters") if isinstance(data.get("clusters"), dict) else {}
    for alias, cluster in clusters.items():
        if not isinstance(cluster, dict):
            continue
        for i, server in enumerate(cluster.get("bootstrapServers") or []):
            if isinstance(server, str) and not _valid_host_port(server):
                report(["clusters", alias, "bootstrapServers", i], f'"{server}" is not host:port',
                       "write each bootstrap server as host:port, e.g. broker-1:9092")
        security = cluster.get("security")
        if isinstance(security, dict) and str(security.get("protocol", "")).startswith("SASL"):
            mechanism = security.get("saslMechanism")
            if mechanism is None:
                report(["clusters", alias, "security"], f"{security['protocol']} needs saslMechanism",
                       "set saslMechanism, e.g. SCRAM-SHA-512")
            if mechanism not in ("GSSAPI", "OAUTHBEARER"):
                for needed in ("username", "passwordSecret"):
                    if not security.get(needed):
                        report(["clusters", alias, "security"], f"SASL authentication needs {needed}",
                               "set username, and passwordSecret to the name of the secret holding the password")
        _inline_password_problems(cluster.get("config"), ["clusters", alias, "config"], report)

    mirrors = data.get("mirrors") if isinstance(data.get("mirrors"), list) else []
    seen: dict[str, int] = {}
    identity_edges: list[tuple[str, str, int]] = []
    for i, mirror in enumerate(mirrors):
        if not isinstance(mirror, dict):
            continue
        source, target = mirror.get("source"), mirror.get("target")
        for role, alias in (("source", source), ("target", target)):
            if isinstance(alias, str) and alias not in clusters:
                defined = ", ".join(clusters) or "none"
                report(["mirrors", i, role], f'{role} cluster "{alias}" is not defined',
                       f"define it under clusters; defined: {defined}")
        if isinstance(source, str) and source == target:
            report(["mirrors", i, "target"], f'source and target are the same cluster "{source}"',
                   "a mirror copies between two different clusters")
        name = mirror.get("name") or (f"{source}-to-{target}" if source and target else None)
        if isinstance(name, str):
            if name in seen:
                where = ["mirrors", i, "name"] if "name" in mirror else ["mirrors", i]
                report(where, f'duplicate mirror name "{name}" (also mirrors/{seen[name]})',
                       "give each flow a unique name")
            else:
                seen[name] = i
        for field in ("topics", "topicsExclude", "groups", "groupsExclude"):
            for j, pattern in enumerate(mirror.get(field) or []):
                if not isinstance(pattern, str):
                    continue
                why = java_regex_error(pattern)
                if why:
                    report(["mirrors", i, field, j], f'invalid Java regex "{pattern}": {why}')
                elif "," in pattern:
                    report(["mirrors", i, field, j], f'pattern "{pattern}" contains a comma',
                           "MM2 splits topics and groups on commas: write one pattern per list item")
        tasks = mirror.get("tasksMax")
        if isinstance(tasks, int) and not isinstance(tasks, bool) and tasks < 1:
            report(["mirrors", i, "tasksMax"], f"tasksMax must be at least 1, got {tasks}",
                   "aim for as many tasks as CPU cores in the Connect cluster")
        if mirror.get("replicationPolicy") == "identity" and isinstance(source, str) and isinstance(target, str):
            identity_edges.append((source, target, i))
        for free_map in ("producerOverrides", "consumerOverrides", "config"):
            _inline_password_problems(mirror.get(free_map), ["mirrors", i, free_map], report)

    for cycle_index, cycle in _identity_cycles(identity_edges):
        report(["mirrors", cycle_index, "replicationPolicy"],
               f"identity replication in a cycle ({' -> '.join(cycle)}): MM2 cannot tell mirrored records "
               "from local ones and would copy them back and forth forever",
               "set replicationPolicy: default for active-active flows")

    connect = data.get("connect") if isinstance(data.get("connect"), dict) else {}
    alias = connect.get("cluster")
    if isinstance(alias, str) and alias not in clusters:
        report(["connect", "cluster"], f'connect cluster "{alias}" is not defined',
               f"use one of: {', '.join(clusters) or 'none'}")
    prefix = connect.get("internalTopicPrefix")
    if isinstance(prefix, str) and not prefix.startswith("__"):
        report(["connect", "internalTopicPrefix"], f'"{prefix}" does not start with "__"',
               "Connect's internal topics must start with __ so MM2's default excludes never mirror them")
    _inline_password_problems(connect.get("config"), ["connect", "config"], report)
    spark = data.get("spark") if isinstance(data.get("spark"), dict) else {}
    _inline_password_problems(spark.get("config"), ["spark", "config"], report)
    return problems


def _valid_host_port(server: str) -> bool:
    match = _HOST_PORT.match(server)
    return bool(match) and 0 < int(match.group(3)) < 65536


def _inline_password_problems(props: Any, path: list, report) -> None:
    if not isinstance(props, dict):
        return
    for key, value in props.items():
        if _PASSWORD_PROPERTY.search(str(key)) and isinstance(value, str):
            if "jaas" in key.lower():
                has_literal_password = re.search(r'password\s*=\s*"(?!\$\{)', value) is not None
            else:
                has_literal_password = not _PROVIDER_REF.fullmatch(value.strip())
            if has_literal_password:
                report(path + [key], "a password is written inline",
                       "reference it through a config provider, e.g. ${env:NAME}, so only its name is in the spec",
                       key=True)


def _identity_cycles(edges: list[tuple[str, str, int]]) -> list[tuple[int, list[str]]]:
    """Cycles in the flow graph of identity mirrors; each reported once at the mirror that closes it."""
    graph: dict[str, list[tuple[str, int]]] = {}
    for source, target, index in edges:
        graph.setdefault(source, []).append((target, index))
    found: list[tuple[int, list[str]]] = []
    reported: set[frozenset] = set()

    def walk(node: str, path: list[str], indexes: list[int]) -> None:
        for nxt, index in graph.get(node, []):
            if nxt in path:
                start = path.index(nxt)
                members = frozenset(indexes[start:] + [index])
                if members not in reported:
                    reported.add(members)
                    found.append((max(members), path[start:] + [nxt]))
            else:
                walk(nxt, path + [nxt], indexes + [index])

    for start in sorted(graph):
        walk(start, [start], [])
    return found
