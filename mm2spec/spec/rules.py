"""The semantic rules of a DR spec: what the JSON Schema cannot say, one function per spec section.

Each rule reads the plain document (``to_plain``) and reports through ``Report`` (see
``mm2spec.spec.schema``); it skips whatever has the wrong shape, since the schema reports that.
``check`` runs them in the order of the spec's sections.
"""

from __future__ import annotations

import re
from typing import Any

from mm2spec.spec.patterns import java_regex_error
from mm2spec.spec.schema import Report
from mm2spec.spec.secrets import inline_secret

_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?):([0-9]{1,5})$")


def check(data: Any, report: Report) -> None:
    """Report every semantic problem of the plain document ``data``."""
    if not isinstance(data, dict):
        return
    for rule in (check_clusters, check_mirrors, check_identity_cycles, check_connect, check_spark):
        rule(data, report)


def _section(data: dict, name: str, kind: type) -> Any:
    """``data[name]`` when it has the shape the schema wants, else an empty one."""
    value = data.get(name)
    return value if isinstance(value, kind) else kind()


def check_clusters(data: dict, report: Report) -> None:
    """Bootstrap servers are host:port; SASL has a mechanism and credentials; no inline passwords."""
    for alias, cluster in _section(data, "clusters", dict).items():
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
            if mechanism not in ("GSSAPI", "OAUTHBEARER"):  # these authenticate without a password
                for needed in ("username", "passwordSecret"):
                    if not security.get(needed):
                        report(["clusters", alias, "security"], f"SASL authentication needs {needed}",
                               "set username, and passwordSecret to the name of the secret holding the password")
        _check_inline_secrets(cluster.get("config"), ["clusters", alias, "config"], report)


def check_mirrors(data: dict, report: Report) -> None:
    """Each flow joins two different defined clusters, has a unique name, valid patterns, at least
    one task, and no inline passwords in its overrides."""
    clusters = _section(data, "clusters", dict)
    seen: dict[str, int] = {}
    for i, mirror in enumerate(_section(data, "mirrors", list)):
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
        for free_map in ("producerOverrides", "consumerOverrides", "config"):
            _check_inline_secrets(mirror.get(free_map), ["mirrors", i, free_map], report)


def check_identity_cycles(data: dict, report: Report) -> None:
    """Identity replication must not form a cycle: MM2 could not tell mirrored records from local ones."""
    edges = [(m["source"], m["target"], i) for i, m in enumerate(_section(data, "mirrors", list))
             if isinstance(m, dict) and m.get("replicationPolicy") == "identity"
             and isinstance(m.get("source"), str) and isinstance(m.get("target"), str)]
    for cycle_index, cycle in _identity_cycles(edges):
        report(["mirrors", cycle_index, "replicationPolicy"],
               f"identity replication in a cycle ({' -> '.join(cycle)}): MM2 cannot tell mirrored records "
               "from local ones and would copy them back and forth forever",
               "set replicationPolicy: default for active-active flows")


def check_connect(data: dict, report: Report) -> None:
    """Connect runs on a defined cluster, its internal topics start with __, no inline passwords."""
    clusters = _section(data, "clusters", dict)
    connect = _section(data, "connect", dict)
    alias = connect.get("cluster")
    if isinstance(alias, str) and alias not in clusters:
        report(["connect", "cluster"], f'connect cluster "{alias}" is not defined',
               f"use one of: {', '.join(clusters) or 'none'}")
    prefix = connect.get("internalTopicPrefix")
    if isinstance(prefix, str) and not prefix.startswith("__"):
        report(["connect", "internalTopicPrefix"], f'"{prefix}" does not start with "__"',
               "Connect's internal topics must start with __ so MM2's default excludes never mirror them")
    _check_inline_secrets(connect.get("config"), ["connect", "config"], report)


def check_spark(data: dict, report: Report) -> None:
    """No inline passwords in the Spark config."""
    _check_inline_secrets(_section(data, "spark", dict).get("config"), ["spark", "config"], report)


def _valid_host_port(server: str) -> bool:
    match = _HOST_PORT.match(server)
    return bool(match) and 0 < int(match.group(3)) < 65536


def _check_inline_secrets(props: Any, path: list, report: Report) -> None:
    """A free-form config map names its secrets through config providers, never holds them."""
    if not isinstance(props, dict):
        return
    for key, value in props.items():
        if inline_secret(str(key), value):
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
