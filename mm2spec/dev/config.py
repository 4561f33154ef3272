"""Configuration files for the local dev clusters: pure functions, no processes, no network.

Everything here turns a small typed description (:class:`BrokerSpec`) into the text of a Kafka
properties file, so it can be unit-tested and read by a person who wants to know what runs.
"""

from __future__ import annotations

import base64
import hashlib
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

from mm2spec.dev.certs import ClusterCerts
from mm2spec.errors import DevError
from mm2spec.runtime.process import HOST


#: Fixed passwords of the secure dev clusters. They protect nothing (loopback only, printed in the
#: docs on purpose); they exist so that SASL/SCRAM and ACL code paths run for real.
ADMIN_USER = "admin"
ADMIN_PASSWORD = "admin-dev-password"
MM2_USER = "mm2"
MM2_PASSWORD = "mm2-dev-password"
SCRAM_MECHANISM = "SCRAM-SHA-512"

#: The secret names the example spec's ``passwordSecret`` fields use, set by ``dev up --secure``.
PASSWORD_ENV_VARS = ("PRIMARY_MM2_PASSWORD", "DR_MM2_PASSWORD")
#: The admin passwords' secret names of the SASL_SSL spec fragment (``spec_fragment``), set by ``dev up --tls``.
ADMIN_PASSWORD_ENV_VARS = ("PRIMARY_ADMIN_PASSWORD", "DR_ADMIN_PASSWORD")

#: The shapes of a TLS cluster's spec fragment: mTLS on the SSL listener, SCRAM on the SASL_SSL one.
SPEC_SHAPES = ("mtls", "sasl_ssl")

# Settings that make a one-node cluster usable: internal topics with one replica, no waiting for
# more group members before the first rebalance.
SINGLE_NODE_SETTINGS = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "1",
}


@dataclass(frozen=True)
class BrokerSpec:
    """One single-node KRaft cluster (broker and controller in one process) on loopback."""

    name: str
    """``primary`` or ``dr`` (any short word: it names folders, logs and state entries)."""
    port: int
    """The client listener port."""
    controller_port: int
    """The KRaft controller listener port (always PLAINTEXT)."""
    secure: bool = False
    """SASL_PLAINTEXT + SCRAM-SHA-512 on the client listener and the StandardAuthorizer."""
    proxied_port: int | None = None
    """A second client listener (``PROXIED``, same security) on this port, for a fault-injection
    proxy to forward to; None: no such listener."""
    proxy_port: int | None = None
    """The port of that proxy, which the ``PROXIED`` listener advertises: a client that bootstraps
    through the proxy keeps talking through it, so cutting the proxy cuts that client only."""
    tls: bool = False
    """TLS with the cluster's own CA (``certs_dir``): mTLS on the client listener (``SSL``, a client
    is ``User:CN=<name>``), SCRAM-SHA-512 on ``SASL_SSL`` at ``sasl_ssl_port``; the StandardAuthorizer."""
    sasl_ssl_port: int | None = None
    """With ``tls``: the ``SASL_SSL`` listener's port."""
    certs_dir: str | None = None
    """With ``tls``: the folder of the cluster's certificates (:class:`~mm2spec.dev.certs.ClusterCerts`)."""

    def __post_init__(self) -> None:
        if self.tls and self.secure:
            raise DevError(f"cluster {self.name!r}: secure (SASL_PLAINTEXT) and tls are two modes; choose one")
        if self.tls and (self.sasl_ssl_port is None or self.certs_dir is None):
            raise DevError(f"cluster {self.name!r}: a TLS cluster needs sasl_ssl_port and certs_dir")

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def sasl_ssl_bootstrap(self) -> str:
        """The SASL_SSL listener's address (DevError when the cluster is not TLS)."""
        if not self.tls:
            raise DevError(f"cluster {self.name!r} has no SASL_SSL listener (it was not started with --tls)")
        return f"{HOST}:{self.sasl_ssl_port}"

    @property
    def certs(self) -> ClusterCerts:
        """The cluster's certificates (DevError when the cluster is not TLS)."""
        if not self.tls or self.certs_dir is None:
            raise DevError(f"cluster {self.name!r} has no certificates (it was not started with --tls)")
        return ClusterCerts(self.name, Path(self.certs_dir))

    @property
    def proxied_bootstrap(self) -> str:
        """The address through the proxy (DevError when the cluster has no proxied listener)."""
        if self.proxy_port is None:
            raise DevError(f"cluster {self.name!r} has no proxied listener")
        return f"{HOST}:{self.proxy_port}"

    @property
    def security_protocol(self) -> str:
        """The client listener's protocol (with ``tls`` there is a second one, ``SASL_SSL``)."""
        if self.tls:
            return "SSL"
        return "SASL_PLAINTEXT" if self.secure else "PLAINTEXT"

    @property
    def ports(self) -> tuple[int, ...]:
        """The ports the broker itself listens on."""
        return tuple(self.port_roles())

    def port_roles(self) -> dict[int, str]:
        """Each port the broker listens on, with what it is for (``client``, ``controller``, ...)."""
        roles = {self.port: "client", self.controller_port: "controller"}
        if self.proxied_port is not None:
            roles[self.proxied_port] = "proxied client"
        if self.sasl_ssl_port is not None:
            roles[self.sasl_ssl_port] = "SASL_SSL client"
        return roles


def broker_properties(spec: BrokerSpec, log_dir: Path) -> str:
    """The ``server.properties`` of a combined broker+controller node for ``spec``."""
    if spec.tls:
        return _tls_broker_properties(spec, log_dir)
    listener = spec.security_protocol
    listeners = f"{listener}://{HOST}:{spec.port},CONTROLLER://{HOST}:{spec.controller_port}"
    advertised = listeners
    protocols = f"CONTROLLER:PLAINTEXT,{listener}:{listener}"
    if spec.proxied_port is not None:
        # The broker's own traffic stays on the direct listener; only clients of the proxy cross it.
        listeners += f",PROXIED://{HOST}:{spec.proxied_port}"
        advertised += f",PROXIED://{HOST}:{spec.proxy_port}"
        protocols += f",PROXIED:{listener}"
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        # A dynamic quorum (KIP-853) of one voter: what `StorageTool format --standalone` sets up.
        "controller.quorum.bootstrap.servers": f"{HOST}:{spec.controller_port}",
        "listeners": listeners,
        "advertised.listeners": advertised,
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": listener,
        "listener.security.protocol.map": protocols,
        "log.dirs": str(log_dir),
        **SINGLE_NODE_SETTINGS,
    }
    if spec.secure:
        props.update(
            {
                "sasl.enabled.mechanisms": SCRAM_MECHANISM,
                "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
                # The broker's own client side (inter-broker) logs in as the admin super user.
                f"listener.name.sasl_plaintext.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": _scram_jaas(
                    ADMIN_USER, ADMIN_PASSWORD
                ),
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                # The CONTROLLER listener stays PLAINTEXT (SCRAM cannot bootstrap a KRaft quorum), so
                # the broker reaches its own controller as User:ANONYMOUS, which must be allowed
                # CLUSTER_ACTION. Only the loopback controller port yields that principal.
                "super.users": f"User:{ADMIN_USER};User:ANONYMOUS",
                "allow.everyone.if.no.acl.found": "false",
            }
        )
    return _render(props, header=f"mm2spec dev cluster {spec.name!r} (generated; edits are overwritten)")


def _tls_broker_properties(spec: BrokerSpec, log_dir: Path) -> str:
    certs = spec.certs
    listeners = f"SSL://{HOST}:{spec.port},SASL_SSL://{HOST}:{spec.sasl_ssl_port},CONTROLLER://{HOST}:{spec.controller_port}"
    if spec.proxied_port is not None:
        raise DevError(f"cluster {spec.name!r}: a proxied listener is not offered with tls")
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": f"{HOST}:{spec.controller_port}",
        "listeners": listeners,
        "advertised.listeners": listeners,
        "controller.listener.names": "CONTROLLER",
        # The broker's own client side authenticates with its certificate (CN=broker-<name>, a super user).
        "inter.broker.listener.name": "SSL",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL",
        "log.dirs": str(log_dir),
        **SINGLE_NODE_SETTINGS,
        # One key and one CA for both listeners: PEM files, so no store password in this file.
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.broker_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.sasl_ssl.ssl.client.auth": "none",
        "sasl.enabled.mechanisms": SCRAM_MECHANISM,
        f"listener.name.sasl_ssl.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": _scram_jaas(ADMIN_USER, ADMIN_PASSWORD),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        # admin is a super user by either listener; ANONYMOUS is the broker reaching its own PLAINTEXT
        # controller, as with --secure. Principals keep Kafka's default mapping: the certificate's DN.
        "super.users": f"User:{ADMIN_USER};User:CN={ADMIN_USER};User:ANONYMOUS;{certs.broker_principal}",
        "allow.everyone.if.no.acl.found": "false",
        # Production's setting: a client's write never creates a topic. With it on, a Connect worker's
        # late status write re-created the internal topic `pulumi destroy` had just deleted.
        "auto.create.topics.enable": "false",
    }
    return _render(props, header=f"mm2spec dev cluster {spec.name!r} with TLS (generated; edits are overwritten)")


def format_args(spec: BrokerSpec, cluster_id: str, properties: Path) -> list[str]:
    """Arguments of ``kafka.tools.StorageTool`` that format a fresh node, with SCRAM users if secure."""
    args = ["format", "-t", cluster_id, "-c", str(properties), "--standalone"]
    if spec.secure or spec.tls:
        for user, password in ((ADMIN_USER, ADMIN_PASSWORD), (MM2_USER, MM2_PASSWORD)):
            args += ["--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={password}]"]
    return args


def new_cluster_id() -> str:
    """A random cluster id in Kafka's format (URL-safe base64 of 16 bytes, no padding)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):  # Kafka refuses ids that look like command-line flags
            return text


def fingerprint(text: str) -> str:
    """A short digest of a config file, to notice that a formatted node no longer matches it."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def client_config(spec: BrokerSpec, user: str = ADMIN_USER, listener: str | None = None) -> dict[str, str]:
    """librdkafka / confluent_kafka settings to reach ``spec`` as ``user`` (ignored if neither secure nor tls).

    On a TLS cluster ``listener`` picks the listener: None or ``ssl``, mTLS with ``user``'s certificate
    (``admin``, ``mm2``, ``intruder``); ``sasl_ssl``, SCRAM-SHA-512 over TLS (``admin``, ``mm2``)."""
    if spec.tls:
        return _tls_client_config(spec, user, listener)
    if listener is not None:
        raise DevError(f"cluster {spec.name!r} has one client listener; listener={listener!r} needs a --tls cluster")
    conf = {"bootstrap.servers": spec.bootstrap}
    if spec.secure:
        conf.update(
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": SCRAM_MECHANISM,
                "sasl.username": user,
                "sasl.password": password_of(user),
            }
        )
    return conf


def _tls_client_config(spec: BrokerSpec, user: str, listener: str | None) -> dict[str, str]:
    certs = spec.certs
    if listener in (None, "ssl"):
        return {
            "bootstrap.servers": spec.bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.location": str(certs.ca),
            "ssl.certificate.location": str(certs.certificate(user)),
            "ssl.key.location": str(certs.key(user)),
        }
    if listener == "sasl_ssl":
        return {
            "bootstrap.servers": spec.sasl_ssl_bootstrap,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(certs.ca),
            "sasl.mechanism": SCRAM_MECHANISM,
            "sasl.username": user,
            "sasl.password": password_of(user),
        }
    raise DevError(f"unknown listener {listener!r} of cluster {spec.name!r} (known: ssl, sasl_ssl)")


def java_client_properties(spec: BrokerSpec, user: str = ADMIN_USER) -> dict[str, str]:
    """Java client settings (Connect, MM2, perf tools) to reach ``spec`` as ``user`` (a TLS cluster:
    mTLS on its SSL listener, with ``user``'s PEM keystore)."""
    conf = {"bootstrap.servers": spec.bootstrap}
    if spec.tls:
        certs = spec.certs
        conf.update(
            {
                "security.protocol": "SSL",
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(certs.ca),
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(certs.keystore(user)),
            }
        )
    if spec.secure:
        conf.update(
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": SCRAM_MECHANISM,
                "sasl.jaas.config": _scram_jaas(user, password_of(user)),
            }
        )
    return conf


def password_of(user: str) -> str:
    passwords = {ADMIN_USER: ADMIN_PASSWORD, MM2_USER: MM2_PASSWORD}
    if user not in passwords:
        raise DevError(f"the dev clusters have no user {user!r} (known: {', '.join(passwords)})")
    return passwords[user]


def secure_env() -> dict[str, str]:
    """The environment variables the example spec's ``passwordSecret`` names resolve to in dev."""
    return {name: MM2_PASSWORD for name in PASSWORD_ENV_VARS}


def tls_env() -> dict[str, str]:
    """``secure_env`` and the admin passwords' secrets of the SASL_SSL spec fragments."""
    return {**secure_env(), **{name: ADMIN_PASSWORD for name in ADMIN_PASSWORD_ENV_VARS}}


def spec_fragment(spec: BrokerSpec, shape: str = "mtls") -> dict:
    """The spec's cluster entry for a TLS dev cluster, as the YAML would hold it (a plain dict).

    ``mtls``: the SSL listener, mm2 by its certificate and admin by its own; ``sasl_ssl``: the SASL_SSL
    listener, mm2 and admin by SCRAM-SHA-512 with their passwords in ``<CLUSTER>_MM2_PASSWORD`` /
    ``<CLUSTER>_ADMIN_PASSWORD`` (``tls_env``). Paths are absolute."""
    certs = spec.certs
    if shape == "mtls":
        return {
            "bootstrapServers": [spec.bootstrap],
            "security": {"protocol": "SSL", "principal": f"User:CN={MM2_USER}"},
            "tls": {
                "ca": str(certs.ca),
                "certificate": str(certs.certificate(MM2_USER)),
                "key": str(certs.key(MM2_USER)),
                "admin": {"certificate": str(certs.certificate(ADMIN_USER)), "key": str(certs.key(ADMIN_USER))},
            },
        }
    if shape == "sasl_ssl":
        prefix = spec.name.upper()
        return {
            "bootstrapServers": [spec.sasl_ssl_bootstrap],
            "security": {
                "protocol": "SASL_SSL",
                "saslMechanism": SCRAM_MECHANISM,
                "username": MM2_USER,
                "passwordSecret": f"{prefix}_MM2_PASSWORD",
                "admin": {"username": ADMIN_USER, "passwordSecret": f"{prefix}_ADMIN_PASSWORD"},
            },
            "tls": {"ca": str(certs.ca)},
        }
    raise DevError(f"unknown spec fragment shape {shape!r} (known: {', '.join(SPEC_SHAPES)})")


def connect_worker_properties(
    bootstrap: BrokerSpec, *, rest_port: int, group_id: str = "mm2spec-dev-connect", user: str = ADMIN_USER
) -> str:
    """A minimal distributed Connect worker config, for ``dev up`` without a rendered one and tests."""
    props = {
        **java_client_properties(bootstrap, user),
        "group.id": group_id,
        "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "header.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "config.storage.topic": f"{group_id}-configs",
        "offset.storage.topic": f"{group_id}-offsets",
        "status.storage.topic": f"{group_id}-status",
        # -1: the broker's default.replication.factor, as the rendered configs do.
        "config.storage.replication.factor": "-1",
        "offset.storage.replication.factor": "-1",
        "status.storage.replication.factor": "-1",
        "listeners": f"http://{HOST}:{rest_port}",
        "rest.advertised.host.name": HOST,
        "rest.advertised.port": str(rest_port),
        # Plugins sit on the classpath with ServiceLoader manifests; skip the slow reflective scan.
        "plugin.discovery": "service_load",
    }
    if bootstrap.secure or bootstrap.tls:
        # The worker's producers, consumers and admin client need the same credentials.
        for prefix in ("producer.", "consumer.", "admin."):
            for key, value in java_client_properties(bootstrap, user).items():
                if key != "bootstrap.servers":
                    props[prefix + key] = value
    return _render(props, header="minimal Kafka Connect worker for mm2spec dev (generated)")


def log4j2_properties() -> str:
    """Log4j 2 config for every Java process we start: INFO to stdout, which we send to a file."""
    return (
        "# mm2spec dev: Kafka's Java processes log to stdout, which mm2spec.dev redirects to a file.\n"
        "status = warn\n"
        "appender.out.type = Console\n"
        "appender.out.name = out\n"
        "appender.out.layout.type = PatternLayout\n"
        "appender.out.layout.pattern = [%d] %p %m (%c)%n\n"
        "rootLogger.level = INFO\n"
        "rootLogger.appenderRef.out.ref = out\n"
        # The worker's REST access log and Kafka's request logging are noise for a dev cluster.
        "logger.request.name = kafka.request.logger\n"
        "logger.request.level = WARN\n"
        "logger.reflections.name = org.reflections\n"
        "logger.reflections.level = ERROR\n"
    )


def read_properties(text: str) -> dict[str, str]:
    """Parse a Java properties file (comments, ``=``/``:``/space separators, continuation lines).

    Enough of ``java.util.Properties`` for config files people write; unicode escapes are not decoded.
    """
    props: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        # An odd number of trailing backslashes continues the line.
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            logical += line[:-1]
            continue
        logical += line
        match = re.match(r"((?:[^=:\s\\]|\\.)*)\s*[=:\s]?\s*(.*)$", logical)
        if match:
            key = re.sub(r"\\(.)", r"\1", match.group(1))
            props[key] = match.group(2)
        logical = ""
    return props


def rest_port_of(worker_props: dict[str, str]) -> int:
    """The REST port a Connect worker will listen on (Connect's default is 8083); DevError if the
    ``listeners`` setting names none."""
    listeners = worker_props.get("listeners", "http://:8083")
    first = listeners.split(",")[0].strip()
    match = re.search(r":(\d+)/?$", first)
    if not match:
        raise DevError(f"cannot read a port from listeners={listeners!r}; give one, e.g. listeners=http://{HOST}:8083")
    return int(match.group(1))


def _scram_jaas(user: str, password: str) -> str:
    return f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" password="{password}";'


def _render(props: dict[str, str], header: str) -> str:
    return f"# {header}\n" + "".join(f"{key}={value}\n" for key, value in props.items())
