"""The one wrapper around confluent-kafka's AdminClient.

Every admin call mm2spec makes goes through ``KafkaAdmin``: futures are resolved here, calls are
batched (one DescribeConfigs for all topics, read without synonyms through ``mm2spec.live.wire``,
one DescribeAcls per principal) and chunked so no request
exceeds what a broker accepts (mm2spec.mm2.retry), retriable errors are retried there too, failures
become ``KafkaOperationFailed`` naming the cluster and resource, and secrets never reach a message.
Clients are created per ``KafkaAdmin`` and never stored in state (Pulumi pickles providers).
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Collection, Iterable, Mapping

from confluent_kafka import KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AclBinding as KAclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)

from mm2spec.errors import ClusterUnreachable, KafkaOperationFailed, SecretMissing, TlsInvalid
from mm2spec.live import KAFKA_REQUEST_TIMEOUT_S
from mm2spec.live.types import LiveTopic
from mm2spec.live.wire import (ConfigsResult, Sasl, TopicLayout, WireConnection, WireUnavailable, api_versions_request,
                               describe_configs_request, finalized_metadata_version, metadata_request,
                               parse_describe_configs, parse_metadata)
from mm2spec.mm2.tls import ClientTls, java_properties
from mm2spec.mm2.retry import (IDEMPOTENT_RETRIABLE, MAX_ACLS_PER_CREATE, MAX_RESOURCES_PER_DESCRIBE,
                               MAX_TOPICS_PER_DELETE, RETRY_DEADLINE_S, acl_filters_per_delete, chunks, is_retriable, retry_call)
from mm2spec.mm2.versions import Version, metadata_version_release
from mm2spec.mm2.versions import show as show_version
from mm2spec.spec.model import AclBinding, Cluster

_QUIET = logging.getLogger("mm2spec.librdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False

# KRaft brokers apply metadata (new topics, partitions, ACLs) asynchronously, typically within
# 100 ms: polling at this interval returns soon after the broker's view catches up.
PROPAGATION_POLL_S = 0.1
# A write of ACL bindings on at most this many resources reads back only those resources (one
# DescribeAcls each, sent at once), not every binding of the principal: a literal ACL resource is one
# topic, and reading all of a principal's bindings after each such create would make a stack's create
# quadratic in its topics (tens of thousands of bindings read thousands of times). The creates of a
# few dozen such resources go to the cluster together (``provision.acl``), so their reads do too.
ACL_READ_BY_RESOURCE_MAX = 64
# A delete reads per resource only this many: its filters per DeleteAcls follow the bindings it read
# (``acl_filters_per_delete``: the controller tests each filter against every binding of the
# cluster), and at most 8 resources' filters (6 operations each) are few whatever the cluster holds.
ACL_DELETE_BY_RESOURCE_MAX = 8
# A broker creates a new partition's log (a folder, preallocated index files) before it serves it:
# milliseconds on an idle machine; 50 ms each leaves room for two cores at a load of 50.
PARTITION_LOG_S = 0.05
# A bulk call that fails for thousands of resources names this many in its error (the rest counted).
_FAILURES_SHOWN = 10
WIRE_CONNECTIONS = 4
"""Connections one read of many topics' configs is spread over (``topic_configs``). A broker answers
a connection's requests one at a time, on one of its request handler threads (``num.io.threads``, 8
by default), so on one connection the others idle while 10,000 topics' configs take the broker a
CPU-second. A two-core dev broker gains a fifth; a broker with cores to spare, more
(benchmarks/README.md, plan_1000_topics.py)."""
TOPICS_PER_CONNECTION = 500
"""A read opens a connection per this many topics, up to ``WIRE_CONNECTIONS``: each costs a login
(a SCRAM exchange), worth it only for requests that take a while to answer."""

# librdkafka's BROKER resource type has the wire code of Kafka's CLUSTER resource (4).
_RESOURCE_TYPES = {"TOPIC": ResourceType.TOPIC, "GROUP": ResourceType.GROUP, "CLUSTER": ResourceType.BROKER,
                   "TRANSACTIONAL_ID": ResourceType.TRANSACTIONAL_ID}
_RESOURCE_NAMES = {v: k for k, v in _RESOURCE_TYPES.items()}
_PATTERNS = {"LITERAL": ResourcePatternType.LITERAL, "PREFIXED": ResourcePatternType.PREFIXED}
#: The source of a config set on the topic itself. Read once: an Enum member's ``.value`` is a
#: property lookup, and a plan over 10,000 topics compares it for every one of their 340,000 entries.
_DYNAMIC_TOPIC_CONFIG = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
_NO_PRINCIPAL = "User:mm2spec-authorizer-probe"
"""A principal no binding names: asking for its ACLs tells whether an authorizer answers, cheaply."""


SecretLookup = Callable[[str], "str | None"]

API_VERSIONS_TIMEOUT_S = 10.0
"""A broker answers ApiVersions at once, before authentication; longer means it is not there."""
TLS_PROBE_TIMEOUT_S = 5.0
"""A TLS handshake and an ApiVersions answer take milliseconds: a bad certificate or CA is known
well within this, long before librdkafka would give up with "all brokers down"."""

# One ClientTls per cluster, identity and secret lookup, and one probe per cluster: converting a JKS
# store starts keytool, and every producer, consumer and admin client of a command asks for settings.
_TLS_LOCK = threading.Lock()
_TLS: dict[tuple, ClientTls] = {}
_PROBED: set[tuple] = set()

__all__ = ["API_VERSIONS_TIMEOUT_S", "BrokerVersion", "KafkaAdmin", "SecretLookup", "api_versions_request",
           "client_config", "client_tls", "env_secrets", "finalized_metadata_version", "retrying"]


@dataclass(frozen=True)
class BrokerVersion:
    """A cluster's version as ``KafkaAdmin.broker_version`` read it."""

    release: Version | None
    """The release of its finalized ``metadata.version``, e.g. (4, 3); None: unknown."""
    shown: str
    """What the plan shows, e.g. ``4.3, metadata.version level 30``, or why it is unknown."""


def env_secrets(name: str) -> str | None:
    """Default secret lookup: an environment variable of that name."""
    return os.environ.get(name)


def client_tls(cluster: Cluster, secrets: SecretLookup = env_secrets, admin: bool = True) -> ClientTls | None:
    """The cluster's TLS settings for mm2spec's own clients (``security.protocol`` SSL or SASL_SSL),
    checked offline (files, forms, expiry, passwords) the first time: ``TlsInvalid`` names the
    cluster and the cause. None without TLS. ``admin``: the ``tls.admin`` certificate when set."""
    if not cluster.security.uses_tls:
        return None
    props = tuple(java_properties(cluster.tls, admin=admin))
    names = tuple(n for n in (cluster.tls.secret_names if cluster.tls else ()))
    key = (cluster.alias, props, tuple((n, secrets(n)) for n in names))
    with _TLS_LOCK:
        found = _TLS.get(key)
        if found is None:
            found = ClientTls(dict(props), secrets, where=f'cluster "{cluster.alias}"')
            found.check()
            _TLS[key] = found
    return found


def probe_tls(cluster: Cluster, tls: ClientTls) -> None:
    """Before any client talks to a TLS cluster, once a process: a TLS handshake and an ApiVersions
    request to the first bootstrap server that accepts a connection. A certificate or CA that does not
    fit is a ``TlsInvalid`` naming the cluster and the cause within ``TLS_PROBE_TIMEOUT_S``; a server
    that is not there is left to the client, which reports it as unreachable."""
    key = (cluster.alias, cluster.bootstrap, id(tls))
    if key in _PROBED:
        return
    context = tls.ssl_context()
    for server in cluster.bootstrap_servers:
        host, _, port = server.rpartition(":")
        try:
            with WireConnection(host.strip("[]"), int(port), TLS_PROBE_TIMEOUT_S, context, tls_errors=True,
                                where=tls.where, with_certificate=tls.has_identity) as conn:
                conn.api_versions()
                if not cluster.security.uses_sasl and not conn.answers_unauthenticated():
                    raise TlsInvalid(f"{tls.where}: {server} is a SASL listener (it answers nothing before SASL "
                                     f"authentication): set security.protocol SASL_SSL with saslMechanism, username "
                                     f"and passwordSecret, or use the cluster's SSL listener")
        except (WireUnavailable, ValueError):
            continue
        _PROBED.add(key)
        return


def client_config(cluster: Cluster, secrets: SecretLookup = env_secrets, admin: bool = True) -> dict:
    """librdkafka settings for a cluster, with the password looked up by its secret name and the
    TLS settings of ``mm2spec.mm2.tls`` (probed once: ``probe_tls``).

    With ``admin`` (the default, for plan and provisioning) the cluster's ``security.admin``
    credentials and ``tls.admin`` certificate are used when the spec sets them.
    """
    config: dict = {"bootstrap.servers": cluster.bootstrap, "logger": _QUIET}
    security = cluster.security.as_admin() if admin else cluster.security
    if security.protocol != "PLAINTEXT":
        config["security.protocol"] = security.protocol
    if security.uses_sasl and security.sasl_mechanism:
        config["sasl.mechanism"] = security.sasl_mechanism
        if security.username:
            config["sasl.username"] = security.username
        if security.password_secret:
            password = secrets(security.password_secret)
            if password is None:
                raise SecretMissing(
                    f'cluster "{cluster.alias}": the secret {security.password_secret} is not set '
                    f"(export {security.password_secret}=... or set it as a Pulumi secret)")
            config["sasl.password"] = password
    tls = client_tls(cluster, secrets, admin)
    if tls is not None:
        probe_tls(cluster, tls)
        config.update(tls.librdkafka())
    return config


def _describe_failure(exc: BaseException) -> str:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        error: KafkaError = exc.args[0]
        return f"{error.name()}: {error.str()}"
    return str(exc)


def retrying(call, what: str, cluster: Cluster, unknown_topic_ok: bool = False):
    """``call()``, retried while it fails with a retriable Kafka error (a group coordinator still
    loading, a partition leader moving right after a start: mm2spec.mm2.retry); a failure that
    remains names the cluster and the operation."""
    try:
        return retry_call(call, unknown_topic_ok)
    except KafkaException as exc:
        raise KafkaOperationFailed(f'cluster "{cluster.alias}": {what}: {_describe_failure(exc)}') from None


class KafkaAdmin:
    """Admin operations on one cluster."""

    def __init__(self, cluster: Cluster, secrets: SecretLookup = env_secrets, timeout: float = KAFKA_REQUEST_TIMEOUT_S):
        self.cluster = cluster
        self.timeout = timeout
        self._secrets = secrets
        self._client = AdminClient(client_config(cluster, secrets))

    # -------------------------------------------------------------------------------- reading
    def _metadata(self):
        try:
            return self._client.list_topics(timeout=self.timeout)
        except KafkaException as exc:
            raise ClusterUnreachable(
                f'cluster "{self.cluster.alias}" ({self.cluster.bootstrap}) is unreachable: '
                f"{_describe_failure(exc)}") from None

    def _brokers(self) -> list[int]:
        """The brokers' IDs, from one DescribeCluster: unlike a metadata listing, its cost does not
        grow with the cluster's topics (a listing of 10,000 topics takes about a second)."""
        try:
            description = self._client.describe_cluster(request_timeout=self.timeout).result()
        except KafkaException as exc:
            raise ClusterUnreachable(
                f'cluster "{self.cluster.alias}" ({self.cluster.bootstrap}) is unreachable: '
                f"{_describe_failure(exc)}") from None
        return sorted(node.id for node in description.nodes)

    def ping(self) -> None:
        """Raise ClusterUnreachable unless the cluster answers."""
        self._brokers()

    def topics(self, names: Iterable[str] | None = None, with_configs: bool = True,
               include_internal: bool = False) -> dict[str, LiveTopic]:
        """Live topics (all, or those of ``names`` that exist), with one batched DescribeConfigs.

        Named topics are described by name (a full metadata listing can lag behind a topic created
        a moment ago by the same client): with their configs, both at once over the wire (Metadata,
        ``_named_topics``; DescribeConfigs, ``_answered_topic_configs``), else one DescribeTopics.
        """
        found: dict[str, tuple[int, int]] = {}
        configs: dict[str, dict[str, str]] = {}
        if names is not None and with_configs:
            # Both reads at once: at 10,000 topics each takes seconds on a busy host.
            wanted = sorted(set(names))
            with ThreadPoolExecutor(max_workers=1) as pool:
                answered = pool.submit(self._answered_topic_configs, wanted)
                found = self._named_topics(wanted)
                configs = answered.result()
            # Asked again, with retries and errors: a topic whose configs failed or that was created
            # between the two reads (one that does not exist is no error, and not asked again).
            unread = [name for name in found if name not in configs]
            configs.update(self.topic_configs(unread) if unread else {})
            return {name: LiveTopic(name, parts, rf, configs[name]) for name, (parts, rf) in found.items()}
        if names is not None:
            found = self._describe_topics(sorted(set(names)))
        else:
            for name, topic in self._metadata().topics.items():
                if not include_internal and name.startswith("__"):
                    continue
                if topic.error is not None and topic.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue
                replicas = max((len(p.replicas) for p in topic.partitions.values()), default=0)
                found[name] = (len(topic.partitions), replicas)
        configs = self.topic_configs(list(found)) if with_configs and found else {}
        return {name: LiveTopic(name, parts, rf, configs.get(name, {})) for name, (parts, rf) in found.items()}

    def _describe_topics(self, names: list[str]) -> dict[str, tuple[int, int]]:
        if not names:
            return {}
        self.ping()  # an unreachable cluster is reported as such, not as N failed topics
        found = {}
        futures = {}
        for chunk in chunks(names, budget=MAX_RESOURCES_PER_DESCRIBE):  # every request sent, then the answers read
            futures.update(self._client.describe_topics(TopicCollection(chunk), request_timeout=self.timeout))
        for name, future in futures.items():
            try:
                description = future.result()
            except KafkaException as exc:
                error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
                if error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue
                description = retrying(lambda: self._describe_topic(name), f"describe topic {name}", self.cluster)
                if description is None:
                    continue
            replicas = max((len(p.replicas) for p in description.partitions), default=0)
            found[name] = (len(description.partitions), replicas)
        return found

    def _named_topics(self, names: list[str]) -> dict[str, tuple[int, int]]:
        """``_describe_topics`` over the wire: a Metadata request per ``MAX_RESOURCES_PER_DESCRIBE``
        topics, pipelined on one connection (at 10,000 topics under a tenth of the AdminClient's time
        and CPU: ``mm2spec.live.wire``). A topic the broker answers with an error other than "does not exist"
        is described again through the AdminClient (``_describe_topic``: retried while retriable,
        else the failure named); where the wire cannot go, the AdminClient describes them all."""
        if not names:
            return {}
        try:
            with self._wire_connection() as conn:
                answers: dict[str, TopicLayout] = {}
                requests = [lambda cid, batch=batch: metadata_request(cid, batch)
                            for batch in chunks(names, budget=MAX_RESOURCES_PER_DESCRIBE)]
                for body in conn.requests(requests):
                    answers.update(parse_metadata(body))
        except (OSError, struct.error, IndexError, UnicodeDecodeError, WireUnavailable):  # a cut-off or garbled answer
            return self._describe_topics(names)
        found = {}
        for name in names:
            answer = answers.get(name)
            if answer is not None and not answer.error_code:
                found[name] = (answer.partitions, answer.replicas)
            elif answer is None or answer.error_code != KafkaError.UNKNOWN_TOPIC_OR_PART:
                description = retrying(lambda: self._describe_topic(name), f"describe topic {name}", self.cluster)
                if description is not None:
                    found[name] = (len(description.partitions),
                                   max((len(p.replicas) for p in description.partitions), default=0))
        return found

    def _describe_topic(self, name: str):
        """One topic's description, None if it does not exist (the retry of a failed bulk describe)."""
        future = self._client.describe_topics(TopicCollection([name]), request_timeout=self.timeout)[name]
        try:
            return future.result()
        except KafkaException as exc:
            if exc.args and isinstance(exc.args[0], KafkaError) and exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return None
            raise

    def topic_configs(self, names: list[str]) -> dict[str, dict[str, str]]:
        """The configs set on each named topic (broker defaults left out), by name.

        Read over the wire without synonyms (``mm2spec.live.wire``: a tenth of the client's CPU at
        10,000 topics), at most ``MAX_RESOURCES_PER_DESCRIBE`` topics a request, the requests spread
        over up to ``WIRE_CONNECTIONS`` connections; topics
        the broker answered with an error are asked again, while the error is retriable
        (``mm2spec.mm2.retry``); one that remains fails naming the cluster and the topic. Where the
        wire path cannot go (a SASL mechanism it does not speak, a TLS or login failure), the
        AdminClient reads them, with its own errors."""
        names = list(dict.fromkeys(names))
        if not names:
            return {}
        try:
            return self._wire_topic_configs(names)
        except WireUnavailable:
            return self._client_topic_configs(names)

    def _answered_topic_configs(self, names: list[str]) -> dict[str, dict[str, str]]:
        """The configs of those of ``names`` the broker answers for at once (one read over the
        wire, no retry, no error for a topic; nothing where the wire cannot go)."""
        try:
            return self._wire_topic_configs(list(dict.fromkeys(names)), strict=False)
        except WireUnavailable:
            return {}

    def _wire_connection(self, first: int = 0) -> WireConnection:
        """An authenticated connection to a bootstrap server that answers, trying them from the
        ``first``-th on, so a read's connections spread over them (any broker answers DescribeConfigs
        of topics)."""
        config = client_config(self.cluster, self._secrets)
        sasl = None
        if self.cluster.security.uses_sasl:
            sasl = Sasl(config.get("sasl.mechanism") or "", config.get("sasl.username") or "", config.get("sasl.password") or "")
        tls = client_tls(self.cluster, self._secrets)
        context = tls.ssl_context() if tls is not None else None
        failure = "no bootstrap server"
        servers = list(self.cluster.bootstrap_servers)
        first %= max(len(servers), 1)
        for server in servers[first:] + servers[:first]:
            host, _, port = server.rpartition(":")
            try:
                return WireConnection(host.strip("[]"), int(port), self.timeout, context, sasl)
            except (WireUnavailable, ValueError) as exc:
                failure = str(exc)
        raise WireUnavailable(failure)

    def _wire_describe(self, names: list[str]) -> dict[str, ConfigsResult]:
        """The broker's DescribeConfigs answer for each of ``names`` (errors included): requests of at
        most ``MAX_RESOURCES_PER_DESCRIBE`` topics, spread over a connection per
        ``TOPICS_PER_CONNECTION`` topics (at most ``WIRE_CONNECTIONS``) read at once, each pipelining
        its requests. Any failure of any connection is a ``WireUnavailable``."""
        count = max(1, min(WIRE_CONNECTIONS, len(names) // TOPICS_PER_CONNECTION))
        # Two requests a connection at least: the broker answers the next while this side parses the last.
        size = MAX_RESOURCES_PER_DESCRIBE if count == 1 else min(MAX_RESOURCES_PER_DESCRIBE, -(-len(names) // (2 * count)))
        batches = list(chunks(names, budget=size))

        def read(index: int) -> dict[str, ConfigsResult]:
            answers: dict[str, ConfigsResult] = {}
            try:
                with self._wire_connection(index) as conn:
                    requests = [lambda cid, batch=batch: describe_configs_request(cid, batch) for batch in batches[index::count]]
                    for body in conn.requests(requests):
                        answers.update(parse_describe_configs(body))
            except (OSError, struct.error, IndexError, UnicodeDecodeError) as exc:  # a cut-off or garbled answer
                raise WireUnavailable(f"{type(exc).__name__} reading DescribeConfigs") from None
            return answers

        if count == 1:
            return read(0)
        answers: dict[str, ConfigsResult] = {}
        with ThreadPoolExecutor(max_workers=count, thread_name_prefix="mm2spec-wire") as pool:
            for part in pool.map(read, range(count)):
                answers.update(part)
        return answers

    def _wire_topic_configs(self, names: list[str], strict: bool = True) -> dict[str, dict[str, str]]:
        result: dict[str, dict[str, str]] = {}
        pending = names

        def describe() -> None:
            nonlocal pending
            answers = self._wire_describe(pending)
            failed = []
            for name in pending:
                answer = answers.get(name)
                if answer is None or answer.error_code:
                    failed.append(name)
                else:
                    result[name] = answer.configs
            pending = failed
            if failed and strict:  # retry_call asks again while the first failure is retriable
                first = answers.get(failed[0])
                code = first.error_code if first is not None else KafkaError.UNKNOWN
                message = (first.error_message if first is not None else None) or "no answer for the topic"
                raise KafkaException(KafkaError(code, message))

        try:
            retry_call(describe)
        except KafkaException as exc:
            more = f" (and {len(pending) - 1} more topics)" if len(pending) > 1 else ""
            raise KafkaOperationFailed(f'cluster "{self.cluster.alias}": describe configs of topic {pending[0]}{more}: '
                                       f"{_describe_failure(exc)}") from None
        return result

    def _client_topic_configs(self, names: list[str]) -> dict[str, dict[str, str]]:
        """``topic_configs`` through the AdminClient (librdkafka asks with synonyms)."""
        resources = [ConfigResource(ResourceType.TOPIC, name) for name in names]
        result: dict[str, dict[str, str]] = {}
        futures = {}
        for chunk in chunks(resources, budget=MAX_RESOURCES_PER_DESCRIBE):
            futures.update(self._client.describe_configs(chunk, request_timeout=self.timeout))
        for resource, future in futures.items():
            try:
                entries = future.result()
            except KafkaException:  # asked again alone: retried if retriable, else the error named
                entries = retrying(lambda: self._topic_config_entries(resource.name),
                                   f"describe configs of topic {resource.name}", self.cluster)
            # Only what was set on the topic: broker defaults must never show as drift.
            result[resource.name] = {
                key: entry.value for key, entry in entries.items()
                if entry.source == _DYNAMIC_TOPIC_CONFIG and not entry.is_sensitive
            }
        return result

    def _topic_config_entries(self, name: str) -> dict:
        resource = ConfigResource(ResourceType.TOPIC, name)
        return self._client.describe_configs([resource], request_timeout=self.timeout)[resource].result()

    def default_replication_factor(self) -> int | None:
        """The brokers' default.replication.factor, which a replication factor of -1 resolves to."""
        brokers = self._brokers()
        if not brokers:
            return None
        broker = str(brokers[0])
        resource = ConfigResource(ResourceType.BROKER, broker)
        try:
            entries = self._client.describe_configs([resource], request_timeout=self.timeout)[resource].result()
        except KafkaException:
            return None  # not allowed to describe the broker: the plan shows "broker default"
        entry = entries.get("default.replication.factor")
        return int(entry.value) if entry is not None and entry.value is not None else None

    def broker_version(self) -> BrokerVersion:
        """The release whose features the cluster runs with: its finalized ``metadata.version``, from
        one ApiVersions request to a bootstrap server (confluent-kafka exposes neither ApiVersions
        nor the features; the request is answered before any authentication). Unknown, with the
        reason, when the cluster has no ``metadata.version`` (ZooKeeper mode, before 4.0) or the
        request fails: never an error, a version rule is then not checked."""
        host, _, port = self.cluster.bootstrap_servers[0].rpartition(":")
        tls = client_tls(self.cluster, self._secrets)
        try:
            with WireConnection(host.strip("[]"), int(port), min(self.timeout, API_VERSIONS_TIMEOUT_S),
                                tls.ssl_context() if tls is not None else None) as conn:
                level = finalized_metadata_version(conn.api_versions())
        except (OSError, ValueError, IndexError, struct.error, WireUnavailable) as exc:  # IndexError: cut off
            return BrokerVersion(None, f"unknown (ApiVersions to {self.cluster.bootstrap_servers[0]} failed: {exc})")
        release = metadata_version_release(level) if level is not None else None
        if release is None:
            return BrokerVersion(None, "unknown (no KRaft metadata.version: a ZooKeeper cluster, before 4.0)")
        return BrokerVersion(release, f"{show_version(release)}, metadata.version level {level}")

    def end_offsets(self, topic: str, partitions: int) -> list[int]:
        """The latest offset of each partition (ListOffsets, answered by the partition leaders)."""
        return self._offsets(topic, partitions, OffsetSpec.latest(), "end offsets")

    def log_starts(self, topic: str, partitions: int) -> list[int]:
        """The log-start offset of each partition (ListOffsets earliest): records below it were
        deleted (retention, DeleteRecords)."""
        return self._offsets(topic, partitions, OffsetSpec.earliest(), "log-start offsets")

    def _offsets(self, topic: str, partitions: int, spec: OffsetSpec, what: str) -> list[int]:
        def read() -> list[int]:
            request = {TopicPartition(topic, p): spec for p in range(partitions)}
            result = [0] * partitions
            for tp, future in self._client.list_offsets(request, request_timeout=self.timeout).items():
                result[tp.partition] = future.result().offset
            return result

        return retrying(read, f"{what} of {topic}", self.cluster, unknown_topic_ok=True)

    def topic_ids(self, names: Iterable[str]) -> dict[str, str]:
        """The topic ID of each named topic that exists (DescribeTopics), as text: a topic deleted
        and created again under the same name gets a new one."""
        wanted = sorted(set(names))
        found: dict[str, str] = {}
        if not wanted:
            return found
        for chunk in chunks(wanted, budget=MAX_RESOURCES_PER_DESCRIBE):
            futures = self._client.describe_topics(TopicCollection(chunk), request_timeout=self.timeout)
            for name, future in futures.items():
                try:
                    description = future.result()
                except KafkaException:  # asked again alone: retried if retriable, None if absent
                    description = retrying(lambda name=name: self._describe_topic(name), f"describe topic {name}",
                                           self.cluster)
                if description is not None and description.topic_id is not None:
                    found[name] = str(description.topic_id)
        return found

    def groups(self) -> list[str]:
        listing = retrying(lambda: self._client.list_consumer_groups(request_timeout=self.timeout).result(),
                           "list groups", self.cluster)
        return sorted(g.group_id for g in listing.valid)

    def acls(self, principal: str, resource_type: str | None = None, resource_name: str | None = None,
             pattern_type: str | None = None) -> set[AclBinding]:
        """Every ALLOW/DENY binding of ``principal`` on this cluster, in one DescribeAcls; optionally
        only those on one resource (type, name and pattern type as in ``AclBinding``)."""
        return self._acls_answer(self._acls_request(principal, resource_type, resource_name, pattern_type), principal)

    def _acls_request(self, principal: str, resource_type: str | None = None, resource_name: str | None = None,
                      pattern_type: str | None = None) -> Future:
        """A DescribeAcls sent (``acls``' query), for ``_acls_answer``: several go out at once."""
        query = AclBindingFilter(_RESOURCE_TYPES[resource_type] if resource_type else ResourceType.ANY,
                                 resource_name,
                                 _PATTERNS[pattern_type] if pattern_type else ResourcePatternType.ANY,
                                 principal, None, AclOperation.ANY, AclPermissionType.ANY)
        return self._client.describe_acls(query, request_timeout=self.timeout)

    def _acls_answer(self, request: Future, principal: str) -> set[AclBinding]:
        try:
            found = request.result()
        except KafkaException as exc:
            failure = _describe_failure(exc)
            if "SECURITY_DISABLED" in failure or "No Authorizer" in failure:
                return set()
            raise KafkaOperationFailed(f'cluster "{self.cluster.alias}": describe ACLs of {principal}: {failure}') from None
        return {self._from_kafka(b) for b in found if b.restype in _RESOURCE_NAMES}

    def authorizer_enabled(self) -> bool:
        # A filter that matches no binding: the answer says whether an authorizer is there without
        # carrying every binding of the cluster (30,000 at the scale target).
        query = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, _NO_PRINCIPAL, None,
                                 AclOperation.ANY, AclPermissionType.ANY)
        try:
            self._client.describe_acls(query, request_timeout=self.timeout).result()
        except KafkaException as exc:
            if "SECURITY_DISABLED" in _describe_failure(exc):
                return False
            raise KafkaOperationFailed(f'cluster "{self.cluster.alias}": describe ACLs: {_describe_failure(exc)}') from None
        return True

    def _from_kafka(self, binding: KAclBinding) -> AclBinding:
        return AclBinding(cluster=self.cluster.alias, principal=binding.principal,
                          resource_type=_RESOURCE_NAMES[binding.restype], resource_name=binding.name,
                          pattern_type=binding.resource_pattern_type.name, operation=binding.operation.name,
                          permission=binding.permission_type.name, host=binding.host)

    # -------------------------------------------------------------------------------- writing
    def _resolve(self, futures: Mapping, what: str, tolerate: tuple[int, ...] = (),
                 retriable: Collection[str] | None = None) -> set:
        """Wait for every future; the keys that succeeded. Failures (but those in ``tolerate``) are
        raised together, at most ``_FAILURES_SHOWN`` named; with ``retriable`` (more error names to
        retry, see ``mm2spec.mm2.retry.is_retriable``), a retriable failure is raised as it is, for
        ``retry_call`` to send the request again."""
        failures, done, again = [], set(), None
        for key, future in futures.items():
            try:
                future.result()
                done.add(key)
            except KafkaException as exc:
                error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
                if error is not None and error.code() in tolerate:
                    continue
                if retriable is not None and again is None and is_retriable(exc, also=retriable):
                    again = exc
                failures.append(f"{getattr(key, 'name', key)}: {_describe_failure(exc)}")
        if again is not None:
            raise again
        if failures:
            more = f"; and {len(failures) - _FAILURES_SHOWN} more" if len(failures) > _FAILURES_SHOWN else ""
            raise KafkaOperationFailed(f'cluster "{self.cluster.alias}": {what} failed: '
                                       + "; ".join(failures[:_FAILURES_SHOWN]) + more)
        return done

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str],
                     exist_ok: bool = False) -> bool:
        """Create a topic; False if it already existed (only with ``exist_ok``, else that fails).

        Returns once the broker serves the topic's partitions: KRaft brokers learn new topics
        asynchronously, so a plan or a consumer right after creation could otherwise miss it.
        """
        return name in self.create_topics([NewTopic(name, num_partitions=partitions,
                                                    replication_factor=replication_factor, config=dict(configs))],
                                          exist_ok=exist_ok)

    def create_topics(self, topics: Iterable[NewTopic], exist_ok: bool = False) -> set[str]:
        """Create many topics in as few CreateTopics requests as the broker accepts (chunked by the
        metadata records each writes); the names created (with ``exist_ok``, those that existed are
        left out). Returns once the broker serves every created topic's partitions."""
        topics = list(topics)
        wanted = {t.topic: t.num_partitions for t in topics}
        tolerate = (KafkaError.TOPIC_ALREADY_EXISTS,) if exist_ok else ()
        created: set[str] = set()
        for chunk in chunks(topics, weight=lambda t: 1 + max(t.num_partitions, 1) + len(t.config or {})):
            futures = self._client.create_topics(chunk, operation_timeout=self.timeout, request_timeout=self.timeout)
            done = self._resolve(futures, "create topics" if len(chunk) > 1 else f"create topic {chunk[0].topic}",
                                 tolerate)
            # Chunk by chunk: a broker publishes what it learnt only once it has created every new
            # partition's log, so one wait for 30,000 partitions would see no progress for minutes.
            self._wait_for_partitions({name: wanted[name] for name in done})
            created |= done
        return created

    def _wait_for_partitions(self, wanted: Mapping[str, int]) -> None:
        """Return once the broker serves every partition of ``wanted``. Asks the broker (DescribeTopics),
        not librdkafka's metadata cache, which may already know a topic from the CreateTopics response
        while the broker's own view still lags. Gives up after ``timeout`` plus ``PARTITION_LOG_S`` per
        partition without progress."""
        allowance = self.timeout + PARTITION_LOG_S * sum(wanted.values())
        deadline = time.monotonic() + allowance
        pending = dict(wanted)
        while pending:
            found = self._describe_topics(sorted(pending))
            still = {name: n for name, n in pending.items() if found.get(name, (0, 0))[0] < n}
            if len(still) < len(pending):
                deadline = time.monotonic() + allowance
            pending = still
            if not pending:
                return
            if time.monotonic() > deadline:
                raise KafkaOperationFailed(f'cluster "{self.cluster.alias}": {len(pending)} topic(s) were created but '
                                           f"their partitions made no progress to available in {allowance:.0f}s "
                                           f"(e.g. {min(pending)})")
            time.sleep(PROPAGATION_POLL_S)

    def grow_partitions(self, name: str, total: int) -> None:
        self._resolve(self._client.create_partitions([NewPartitions(name, total)], request_timeout=self.timeout),
                      f"add partitions to topic {name}")
        self._wait_for_partitions({name: total})

    def alter_topic_configs(self, name: str, set_configs: Mapping[str, str], delete: Iterable[str] = ()) -> None:
        """Incremental alter: SET what changed, DELETE (back to default) what the spec no longer sets."""
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in set_configs.items()]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
        if not entries:
            return
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        self._resolve(self._client.incremental_alter_configs([resource], request_timeout=self.timeout),
                      f"alter configs of topic {name}")

    def delete_topic(self, name: str) -> None:
        self.delete_topics([name])

    def delete_topics(self, names: Iterable[str]) -> None:
        """Delete topics in one DeleteTopics request per ``MAX_TOPICS_PER_DELETE``; one already gone
        is no error. Returns once the controller accepted them (brokers may list them a while)."""
        for chunk in chunks(list(names), budget=MAX_TOPICS_PER_DELETE):
            what = f"delete topic {chunk[0]}" if len(chunk) == 1 else "delete topics"
            self._resolve(self._client.delete_topics(chunk, operation_timeout=self.timeout, request_timeout=self.timeout),
                          what, tolerate=(KafkaError.UNKNOWN_TOPIC_OR_PART,))

    def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        """Create bindings, ``MAX_ACLS_PER_CREATE`` per request, each request sent again while it
        fails retriably or times out (a binding that exists is no error); returns once the broker's
        view shows them (KRaft propagates ACLs asynchronously, so a describe right after the write
        could still miss them)."""
        bindings = list(bindings)
        for chunk in chunks(bindings, budget=MAX_ACLS_PER_CREATE):
            self._acl_request(self._client.create_acls, [self._to_kafka(b) for b in chunk], "create ACLs")
        if bindings:
            self._wait_for_acls(bindings, present=True)

    def delete_acls(self, bindings: Iterable[AclBinding]) -> None:
        """Delete bindings; returns once the broker's view no longer shows them.

        Only those the broker still shows are sent (one DescribeAcls per principal first), so a
        delete stopped half-way (a ``pulumi destroy`` interrupted) finishes when run again, sending
        only what is left; a binding already gone is no error. A resource whose every operation
        for the principal goes is deleted with one filter for all its operations
        (``_delete_filters``). The controller tests each filter against every binding of the
        cluster, so a request holds fewer filters the more bindings there are, counted again
        after each request (``acl_filters_per_delete``), and is sent again while it fails
        retriably or times out."""
        bindings = list(bindings)
        if not bindings:
            return
        live = self.live_acls(bindings, by_resource=ACL_DELETE_BY_RESOURCE_MAX)
        present = [b for b in bindings if b.key[1:] in live[b.principal]]
        remaining = sum(len(keys) for keys in live.values())
        filters = self._delete_filters(present, live)
        while filters:
            size = acl_filters_per_delete(remaining)
            chunk, filters = filters[:size], filters[size:]
            self._acl_request(self._client.delete_acls, [f for f, _count in chunk], "delete ACLs")
            remaining -= sum(count for _f, count in chunk)
        if present:
            self._wait_for_acls(present, present=False)

    @classmethod
    def _delete_filters(cls, present: list[AclBinding],
                        live: Mapping[str, set[tuple]]) -> list[tuple[AclBindingFilter, int]]:
        """The DeleteAcls filters for ``present`` (with how many bindings each deletes): one with
        operation ANY for a resource, principal, host and permission whose live bindings all go
        (a regex statement's topics: six bindings each on a target), else one per binding."""
        def group(key: tuple) -> tuple:  # a binding's key (without the cluster) but its operation
            principal, resource_type, name, pattern, _operation, permission, host = key
            return principal, resource_type, name, pattern, permission, host

        live_ops: dict[tuple, int] = {}
        for keys in live.values():
            for key in keys:
                live_ops[group(key)] = live_ops.get(group(key), 0) + 1
        going: dict[tuple, list[AclBinding]] = {}
        for b in present:
            going.setdefault(group(b.key[1:]), []).append(b)
        filters: list[tuple[AclBindingFilter, int]] = []
        for key, members in going.items():
            if len(members) > 1 and len(members) == live_ops.get(key):
                principal, resource_type, name, pattern, permission, host = key
                filters.append((AclBindingFilter(_RESOURCE_TYPES[resource_type], name, _PATTERNS[pattern], principal, host,
                                                 AclOperation.ANY, AclPermissionType[permission]), len(members)))
            else:
                filters += [(cls._to_filter(b), 1) for b in members]
        return filters

    def _acl_request(self, send, items: list, what: str) -> None:
        """One CreateAcls or DeleteAcls request (``send``) for ``items``, sent again while any of them
        fails with a retriable error or a timeout (``IDEMPOTENT_RETRIABLE``: both requests may be
        repeated); a failure that remains names the cluster and the first bindings."""
        def call() -> None:
            self._resolve(send(items, request_timeout=self.timeout), what, retriable=IDEMPOTENT_RETRIABLE)

        try:
            retry_call(call, also=IDEMPOTENT_RETRIABLE)
        except KafkaException as exc:
            first = getattr(items[0], "name", items[0])
            raise KafkaOperationFailed(f'cluster "{self.cluster.alias}": {what} failed for {len(items)} binding(s) '
                                       f"(e.g. {first}) after retrying for {RETRY_DEADLINE_S:.0f}s: "
                                       f"{_describe_failure(exc)}") from None

    def live_acls(self, bindings: list[AclBinding], by_resource: int = ACL_READ_BY_RESOURCE_MAX) -> dict[str, set[tuple]]:
        """The live bindings (keys without the cluster alias) of the principals of ``bindings``: of
        the resources they are on if those are at most ``by_resource``, one DescribeAcls
        each, all sent at once: every operation, host and permission of the principal there), else
        all of each principal's (one DescribeAcls each)."""
        resources = {(b.principal, b.resource_type, b.resource_name, b.pattern_type) for b in bindings}
        live: dict[str, set[tuple]] = {b.principal: set() for b in bindings}
        if len(resources) <= by_resource:
            asked = [(resource[0], self._acls_request(*resource)) for resource in sorted(resources)]
        else:
            asked = [(principal, self._acls_request(principal)) for principal in live]
        for principal, request in asked:
            live[principal] |= {b.key[1:] for b in self._acls_answer(request, principal)}
        return live

    def _wait_for_acls(self, bindings: list[AclBinding], present: bool) -> None:
        by_principal: dict[str, set[tuple]] = {}
        for b in bindings:
            by_principal.setdefault(b.principal, set()).add(b.key[1:])  # without the cluster alias
        deadline = time.monotonic() + self.timeout
        for principal, wanted in by_principal.items():
            mine = [b for b in bindings if b.principal == principal]
            while True:
                live = self.live_acls(mine)[principal]  # one DescribeAcls per poll (per resource if few)
                pending = wanted - live if present else wanted & live
                if not pending:
                    break
                # Polled again: only what is still pending (per resource once those are few).
                wanted, mine = pending, [b for b in mine if b.key[1:] in pending]
                if time.monotonic() > deadline:
                    state = "appear" if present else "disappear"
                    raise KafkaOperationFailed(f'cluster "{self.cluster.alias}": {len(pending)} ACL binding(s) of '
                                               f"{principal} did not {state} within {self.timeout:.0f}s")
                time.sleep(PROPAGATION_POLL_S)

    @staticmethod
    def _to_kafka(b: AclBinding) -> KAclBinding:
        return KAclBinding(_RESOURCE_TYPES[b.resource_type], b.resource_name, _PATTERNS[b.pattern_type],
                           b.principal, b.host, AclOperation[b.operation], AclPermissionType[b.permission])

    @staticmethod
    def _to_filter(b: AclBinding) -> AclBindingFilter:
        return AclBindingFilter(_RESOURCE_TYPES[b.resource_type], b.resource_name, _PATTERNS[b.pattern_type],
                                b.principal, b.host, AclOperation[b.operation], AclPermissionType[b.permission])
