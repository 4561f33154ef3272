"""The semantic rules of a DR spec: what the JSON Schema cannot say, one function per spec section.

Each rule reads the plain document (``to_plain``) and reports through ``Report`` (see
``mm2spec.spec.schema``); it skips whatever has the wrong shape, since the schema reports that.
``check`` runs them in the order of the spec's sections.
"""

from __future__ import annotations

import math
import re
from typing import Any

from mm2spec.mm2.policy import SEPARATOR_DEFAULT, TOPIC_NAME_MAX, probe_topic, target_topic
from mm2spec.mm2.selection import never_replicated
from mm2spec.spec.patterns import NameSelector, java_regex_error
from mm2spec.mm2 import defaults, spark_modes
from mm2spec.mm2.engine_facts import DEFAULT_ENGINE, ENGINE_FACTS
from mm2spec.mm2.tls import store_type
from mm2spec.spec.schema import Report, show
from mm2spec.spec.secrets import holds_secret, inline_secret, is_sensitive_key

_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?):([0-9]{1,5})$")


def check(data: Any, report: Report) -> None:
    """Report every semantic problem of the plain document ``data``."""
    if not isinstance(data, dict):
        return
    for rule in (check_metadata, check_clusters, check_mirrors, check_probe_topics, check_identity_cycles, check_connect,
                 check_spark, check_secret_values):
        rule(data, report)


def _section(data: dict, name: str, kind: type) -> Any:
    """``data[name]`` when it has the shape the schema wants, else an empty one."""
    value = data.get(name)
    return value if isinstance(value, kind) else kind()


def _strings(data: dict, name: str) -> list[tuple[int, str]]:
    """(index, item) of the strings in the list ``data[name]``; nothing when it is not a list (a string
    where a list belongs is the schema's one error, not one error per character)."""
    return [(i, item) for i, item in enumerate(_section(data, name, list)) if isinstance(item, str)]


def check_metadata(data: dict, report: Report) -> None:
    """Labels are free-form, so they are where a secret could be pasted: none inline."""
    metadata = _section(data, "metadata", dict)
    _check_inline_secrets(metadata.get("labels"), ["metadata", "labels"], report)


def check_clusters(data: dict, report: Report) -> None:
    """Bootstrap servers are host:port; SASL has a mechanism and credentials; no inline passwords."""
    for alias, cluster in _section(data, "clusters", dict).items():
        if not isinstance(cluster, dict):
            continue
        for i, server in _strings(cluster, "bootstrapServers"):
            if holds_secret(server):  # user:password@host:port, with or without a scheme
                report(["clusters", alias, "bootstrapServers", i], f"{show(server, [])} holds credentials",
                       "write host:port only; the user goes in security.username and the password's secret "
                       "name in security.passwordSecret")
            elif not _valid_host_port(server):
                report(["clusters", alias, "bootstrapServers", i], f"{show(server, [])} is not host:port",
                       "write each bootstrap server as host:port, e.g. broker-1:9092")
        security = cluster.get("security")
        if isinstance(security, dict) and security.get("protocol") in ("SASL_PLAINTEXT", "SASL_SSL"):
            mechanism = security.get("saslMechanism")
            if mechanism is None:
                report(["clusters", alias, "security"], f"{security['protocol']} needs saslMechanism",
                       "set saslMechanism, e.g. SCRAM-SHA-512")
            if mechanism not in ("GSSAPI", "OAUTHBEARER"):  # these authenticate without a password
                for needed in ("username", "passwordSecret"):
                    if not security.get(needed):
                        report(["clusters", alias, "security"], f"SASL authentication needs {needed}",
                               "set username, and passwordSecret to the name of the secret holding the password")
        _check_tls(cluster, ["clusters", alias], report)
        _check_inline_secrets(cluster.get("config"), ["clusters", alias, "config"], report)


def _check_tls(cluster: dict, where: list, report: Report) -> None:
    """``tls`` only with a TLS protocol, and each store's type known (given, or from its file name)."""
    tls = cluster.get("tls")
    if not isinstance(tls, dict):
        return
    security = cluster.get("security") if isinstance(cluster.get("security"), dict) else {}
    protocol = security.get("protocol", "PLAINTEXT")
    if isinstance(protocol, str) and not protocol.endswith("SSL"):
        report([*where, "tls"], f"tls is set but security.protocol is {protocol}",
               "set security.protocol to SSL (TLS, with a client certificate for mutual TLS) or SASL_SSL")
    stores = [(["truststore"], tls.get("truststore")), (["keystore"], tls.get("keystore"))]
    if isinstance(tls.get("admin"), dict):
        stores.append((["admin", "keystore"], tls["admin"].get("keystore")))
    for path, store in stores:
        if isinstance(store, dict) and isinstance(store.get("path"), str) and not store_type(store["path"], store.get("type")):
            report([*where, "tls", *path, "type"], f"the type of store {show(store['path'], [])} is not known",
                   "set type: JKS or PKCS12 (a .jks, .p12 or .pfx file name says it)")


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
                report(["mirrors", i, role], f"{role} cluster {show(alias, [])} is not defined",
                       f"define it under clusters; defined: {listed(clusters)}")
        if isinstance(source, str) and source == target:
            report(["mirrors", i, "target"], f"source and target are the same cluster {show(source, [])}",
                   "a mirror copies between two different clusters")
        name = mirror.get("name") or (f"{source}-to-{target}" if source and target else None)
        if isinstance(name, str):
            if name in seen:
                where = ["mirrors", i, "name"] if "name" in mirror else ["mirrors", i]
                report(where, f"duplicate mirror name {show(name, [])} (also mirrors/{seen[name]})",
                       "give each flow a unique name")
            else:
                seen[name] = i
        for field in ("topics", "topicsExclude", "groups", "groupsExclude"):
            for j, pattern in _strings(mirror, field):
                why = java_regex_error(pattern)
                if why:
                    report(["mirrors", i, field, j], f"invalid Java regex {show(pattern, [])}: {why}")
                elif "," in pattern:
                    report(["mirrors", i, field, j], f"pattern {show(pattern, [])} contains a comma",
                           "MM2 splits topics and groups on commas: write one pattern per list item")
        tasks = mirror.get("tasksMax")
        if isinstance(tasks, int) and not isinstance(tasks, bool) and tasks < 1:
            report(["mirrors", i, "tasksMax"], f"tasksMax must be at least 1, got {tasks}",
                   "aim for as many tasks as CPU cores in the Connect cluster")
        for free_map in ("producerOverrides", "consumerOverrides", "config"):
            _check_inline_secrets(mirror.get(free_map), ["mirrors", i, free_map], report)
        _check_objectives(mirror, ["mirrors", i, "objectives"], report)


def check_probe_topics(data: dict, report: Report) -> None:
    """Each flow's probe topic (``policy.probe_topic``) is one its mirror can carry: no exclude of the
    spec, no rule of MM2's (internal topics, cycles) matches it, and its copy's name is not too long;
    no group exclude matches its probe group (``policy.probe_group``, the same name)."""
    for i, mirror in enumerate(_section(data, "mirrors", list)):
        if not isinstance(mirror, dict) or not all(isinstance(mirror.get(k), str) for k in ("source", "target")):
            continue
        source, target = mirror["source"], mirror["target"]
        name = mirror.get("name") or f"{source}-to-{target}"
        separator = mirror.get("separator") if isinstance(mirror.get("separator"), str) else SEPARATOR_DEFAULT
        identity = mirror.get("replicationPolicy") == "identity"
        if not isinstance(name, str) or not separator:
            continue
        probe = probe_topic(name)
        where = ["mirrors", i, "name"] if "name" in mirror else ["mirrors", i]
        blocked = _excluding(mirror, "topicsExclude", probe)
        if blocked is not None:
            report(["mirrors", i, "topicsExclude", blocked[0]], f"pattern {show(blocked[1], [])} excludes the flow's "
                   f"probe topic {probe}, which the mirror always carries (the drill writes there, never into your "
                   "topics)", "narrow the pattern, or rename the flow")
        blocked_group = _excluding(mirror, "groupsExclude", probe) if _strings(mirror, "groups") else None
        if blocked_group is not None:
            report(["mirrors", i, "groupsExclude", blocked_group[0]], f"pattern {show(blocked_group[1], [])} excludes "
                   f"the flow's probe group {probe}, which the mirror always checkpoints (the drill's group)",
                   "narrow the pattern, or rename the flow")
        never = NameSelector(never_replicated(identity=identity, target_alias=target, separator=separator))
        if blocked is None and never.matches(probe):
            report(where, f"MM2 would never mirror the flow's probe topic {probe} (an internal topic's name, or a cycle "
                          f"through {target} with separator {show(separator, [])})", "rename the flow")
        remote = target_topic(source, probe, identity=identity, separator=separator)
        if len(remote) > TOPIC_NAME_MAX:
            report(where, f"the probe topic's copy {remote[:40]}... is {len(remote)} characters long: Kafka allows "
                          f"{TOPIC_NAME_MAX}", "give the flow a shorter name")


def _excluding(mirror: dict, field: str, name: str) -> tuple[int, str] | None:
    """(index, pattern) of the first valid pattern of ``mirror[field]`` matching ``name``; None if none."""
    return next(((j, p) for j, p in _strings(mirror, field) if not java_regex_error(p) and NameSelector([p]).matches(name)),
                None)


def _check_objectives(mirror: dict, path: list, report: Report) -> None:
    """An objective is a number of seconds a mirror can meet: above zero and finite (YAML's ``.nan``
    and ``.inf`` are numbers to the schema, but no alert or check can compare against them)."""
    objectives = mirror.get("objectives")
    if not isinstance(objectives, dict):
        return
    for name in ("rpoSeconds", "checkpointAgeSeconds"):
        value = objectives.get(name)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue  # absent, or the schema's "expected number"
        if not math.isfinite(value):
            report(path + [name], f"{name} must be a finite number of seconds, got {show(value, [])}",
                   "write the seconds the objective allows, e.g. 10")
        elif value <= 0:
            report(path + [name], f"{name} must be greater than 0, got {show(value, [])}",
                   "an objective of 0 seconds or less can never be met: write the seconds it allows, e.g. 10, "
                   "or remove it")


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
        report(["connect", "cluster"], f"connect cluster {show(alias, [])} is not defined",
               f"use one of: {listed(clusters)}")
    prefix = connect.get("internalTopicPrefix")
    if isinstance(prefix, str) and not prefix.startswith("__"):
        report(["connect", "internalTopicPrefix"], f'{show(prefix, [])} does not start with "__"',
               "Connect's internal topics must start with __ so MM2's default excludes never mirror them")
    _check_inline_secrets(connect.get("config"), ["connect", "config"], report)


def check_spark(data: dict, report: Report) -> None:
    """No inline passwords in the Spark config; a Kubernetes master names what the SparkApplication needs."""
    spark = _section(data, "spark", dict)
    _check_inline_secrets(spark.get("config"), ["spark", "config"], report)
    if isinstance(spark.get("master"), str) and spark["master"].startswith("k8s://"):
        _check_kubernetes(spark, report)
    engine = data.get("engine", DEFAULT_ENGINE)
    facts = ENGINE_FACTS.get(engine) if isinstance(engine, str) else None
    if facts is not None and facts.runs_spark_job:
        _check_spark_mode(data, spark, report)


def _check_spark_mode(data: dict, spark: dict, report: Report) -> None:
    """What ``spark.mode`` needs (``mm2.spark_modes``), each problem at the field to change."""
    mode = spark.get("mode", defaults.SPARK_MODE_DEFAULT)
    mirrors = [m for m in _section(data, "mirrors", list) if isinstance(m, dict)]
    flows = []
    for mirror in mirrors:
        tasks = mirror.get("tasksMax", 1)
        flows.append((str(mirror.get("name") or f"{mirror.get('source')}-to-{mirror.get('target')}"),
                      tasks if isinstance(tasks, int) and tasks >= 1 else 1))
    master = spark.get("master", "local[*]")
    slots = spark_modes.local_slots(master) if isinstance(master, str) else None
    executors = spark.get("executors") or {}
    if slots is None and isinstance(executors, dict):
        instances, cores = executors.get("instances"), executors.get("cores")
        if isinstance(instances, int) and isinstance(cores, int):
            slots = instances * cores
    max_offsets = spark.get("maxOffsetsPerTrigger")
    problems = spark_modes.mode_problems(
        mode, source=_text(spark, "source", defaults.SPARK_SOURCE_DEFAULT),
        max_offsets_per_trigger=max_offsets if isinstance(max_offsets, int) else None,
        batch_duration=_text(spark, "realTimeBatchDuration", defaults.SPARK_REALTIME_BATCH_DURATION_DEFAULT),
        flows=flows, slots=slots)
    for problem in problems:
        if problem.where == "slots":
            where = ["spark", "master"] if spark_modes.local_slots(str(master)) is not None else ["spark", "executors"]
        elif problem.where == "batchDuration":
            where = ["spark", "realTimeBatchDuration"]
        else:
            where = ["spark", problem.where]
        report(where if _has(data, where) else ["spark", "mode"], problem.message)


def _text(section: dict, name: str, default: str) -> str:
    """``section[name]`` when it is a string, else ``default``: another type is the schema's one error
    (and a mapping there could hold a secret that a message would echo)."""
    value = section.get(name, default)
    return value if isinstance(value, str) else default


def _has(data: Any, path: list) -> bool:
    """Whether the document has a value at ``path``."""
    for key in path:
        if isinstance(data, dict) and key in data:
            data = data[key]
        elif isinstance(data, list) and isinstance(key, int) and key < len(data):
            data = data[key]
        else:
            return False
    return True


def _check_kubernetes(spark: dict, report: Report) -> None:
    """The SparkApplication needs a namespace and an image; checkpoints must outlive the driver pod."""
    k8s = spark.get("kubernetes")
    if k8s is None or isinstance(k8s, dict):
        missing = [field for field in ("namespace", "image") if not (k8s or {}).get(field)]
        if missing:
            report(["spark", "kubernetes"] if k8s is not None else ["spark", "master"],
                   f"a k8s:// master needs spark.kubernetes.{' and spark.kubernetes.'.join(missing)}",
                   "name the namespace the SparkApplication goes to and the job's image, "
                   "built from the Dockerfile that render writes")
    location = spark.get("checkpointLocation")
    if not (isinstance(location, str) and "://" in location):
        report(["spark", "checkpointLocation"] if location is not None else ["spark", "master"],
               "on Kubernetes the checkpoints must outlive the driver pod, which restarts with an empty disk",
               "set spark.checkpointLocation to shared storage, e.g. s3a://bucket/mm2spec/payments-dr")


def check_secret_values(data: dict, report: Report) -> None:
    """A private key or a URL with a password is a secret wherever it is written (values under
    sensitive keys are the other rules' and the schema's)."""
    def walk(value: Any, path: list) -> None:
        if isinstance(value, dict):
            for key, child in value.items():
                if not is_sensitive_key(key):
                    walk(child, path + [key])
        elif isinstance(value, list):
            for i, child in enumerate(value):
                walk(child, path + [i])
        elif holds_secret(value) and not _is_bootstrap_server(path):  # check_clusters says more there
            report(path, "a secret is written inline (a private key, or a password in a URL or an address)",
                   "keep it in a secret store and reference it, e.g. ${env:NAME} or a file location")

    walk(data, [])


def _is_bootstrap_server(path: list) -> bool:
    return len(path) == 4 and path[0] == "clusters" and path[2] == "bootstrapServers"


LISTED_NAMES = 10
"""Defined names a hint lists: enough to spot a typo, not a page of text for a spec with many clusters."""


def listed(names: dict | list) -> str:
    """The first ``LISTED_NAMES`` names, for a hint."""
    shown = ", ".join(show(name, [])[1:-1] for name in list(names)[:LISTED_NAMES]) or "none"
    return shown + (f" and {len(names) - LISTED_NAMES} more" if len(names) > LISTED_NAMES else "")


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
    """One cycle for each set of clusters that identity mirrors join in a cycle, reported at the
    mirror with the highest index in the set. Linear in the flows: the sets are the strongly
    connected components of the flow graph, so a full mesh is one error, not every cycle in it."""
    graph: dict[str, list[tuple[str, int]]] = {}
    for source, target, index in edges:
        if source != target:  # a flow onto its own cluster is reported by check_mirrors
            graph.setdefault(source, []).append((target, index))
            graph.setdefault(target, [])
    found = []
    for component in _strongly_connected(graph):
        if len(component) < 2:
            continue
        source, target, index = max(((s, t, i) for s in component for t, i in graph[s] if t in component),
                                    key=lambda edge: edge[2])
        cycle = [source] + _shortest_path(graph, target, source, component)
        first = cycle.index(min(cycle[:-1]))
        found.append((index, cycle[first:-1] + cycle[:first + 1]))
    return found


def _strongly_connected(graph: dict[str, list[tuple[str, int]]]) -> list[set[str]]:
    """Tarjan's strongly connected components, iteratively (a long chain of flows must not recurse)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for root in graph:
        if root in order:
            continue
        order[root] = low[root] = len(order)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(graph[root]))]
        while work:
            node, children = work[-1]
            for child, _ in children:
                if child not in order:
                    order[child] = low[child] = len(order)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                    break
                if child in on_stack:
                    low[node] = min(low[node], order[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == order[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    components.append(component)
    return components


def _shortest_path(graph: dict[str, list[tuple[str, int]]], start: str, goal: str, within: set[str]) -> list[str]:
    """Clusters from ``start`` to ``goal`` (both included) along flows inside ``within`` (breadth first)."""
    parent: dict[str, str | None] = {start: None}
    queue = [start]
    for node in queue:
        if node == goal:
            break
        for child, _ in graph[node]:
            if child in within and child not in parent:
                parent[child] = node
                queue.append(child)
    path: list[str] = []
    node: str | None = goal
    while node is not None:
        path.append(node)
        node = parent[node]
    return path[::-1]
