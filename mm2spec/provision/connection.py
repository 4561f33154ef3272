"""How a provider method reaches a Kafka cluster: from the resource's inputs, never from the provider.

Every Kafka resource carries ``cluster`` (the alias), ``connection`` (bootstrap servers, security
protocol, SASL mechanism, user name and the *name* of the password secret: the credentials mm2spec
provisions with, i.e. the spec's ``security.admin`` when set; with TLS, ``tls``: the CA and the
certificate mm2spec provisions with as file paths, store and key passwords by secret name only) and
``password``, a Pulumi secret (encrypted in the state, masked in output, and declared a secret
output too). TLS store and key passwords are read by name when a client is made (``current_secret``:
the stack's secret config, then the environment), so no state holds them.

The connection is one nested input rather than six: the Pulumi SDK's cost per resource grows with
its number of top-level properties, and a spec may mean thousands of resources.

Admin clients are cached per provider-host thread, keyed by connection, so 1,000 topics do not open
1,000 connections, yet the host's worker threads do not queue behind one another: a broker answers
the requests of one connection in order, and CreateTopics holds its answer until the topic exists.
The cache lives in this module, not in a provider object, so nothing of it is ever pickled.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Mapping

from mm2spec.errors import SecretMissing
from mm2spec.live.kafka import KafkaAdmin, client_tls
from mm2spec.mm2.tls import Identity, Store, TlsSettings
from mm2spec.spec.model import Cluster, DesiredState, Security

SecretLookup = Callable[[str], "str | None"]

#: Inputs that say which cluster and how to reach it (``password`` aside).
CONNECTION_KEYS = ("cluster", "connection")
#: The secret input holding the password. Never compared (a provider's ``secret_keys``): rotating it
#: must not show every resource as changed; ``delete`` prefers the secret's current value (``admin``).
PASSWORD = "password"

_ADMINS = threading.local()
# Secret config handed to the provider host by Pulumi (``ResourceProvider.configure``), by name.
_CONFIGURED: dict[str, str] = {}


def used_clusters(state: DesiredState) -> list[str]:
    """Aliases of the clusters the stack touches: every flow's source and target, and Connect's."""
    aliases = [a for flow in state.mirrors for a in (flow.source, flow.target)] + [state.connect.cluster]
    return list(dict.fromkeys(aliases))


def resolve_passwords(state: DesiredState, lookup: SecretLookup) -> dict[str, str | None]:
    """Each used cluster's password (None without SASL), by the secret name the spec gives. The TLS
    settings are checked too (files, forms, expiry; store and key passwords by their secret names):
    a stack whose clients cannot be made is refused before any resource is declared."""
    passwords: dict[str, str | None] = {}
    missing = []
    for alias in used_clusters(state):
        cluster = state.cluster(alias)
        security = provisioning_security(cluster)
        for name in cluster.tls.secret_names if cluster.security.uses_tls and cluster.tls else ():
            if lookup(name) is None:
                missing.append(f'cluster "{alias}" needs the secret {name}: set it with '
                               f"`pulumi config set --secret {name} <password>` or export {name}")
        name = security.password_secret
        if not (security.uses_sasl and name):
            passwords[alias] = None
            continue
        passwords[alias] = lookup(name)
        if passwords[alias] is None:
            missing.append(f'cluster "{alias}" needs the secret {name}: set it with '
                           f"`pulumi config set --secret {name} <password>` or export {name}")
    if missing:
        raise SecretMissing("; ".join(missing))
    for alias in used_clusters(state):
        client_tls(state.cluster(alias), lookup)  # TlsInvalid before anything is declared
    return passwords


def provisioning_security(cluster: Cluster) -> Security:
    """The credentials mm2spec provisions with: the cluster's ``security.admin`` if the spec sets one."""
    as_admin = getattr(cluster.security, "as_admin", None)
    return as_admin() if as_admin else cluster.security


def _store_inputs(store: Store | None) -> dict[str, Any] | None:
    return None if store is None else {"path": store.path, "type": store.type, "passwordSecret": store.password_secret}


def _tls_inputs(tls: TlsSettings) -> dict[str, Any]:
    """The ``tls`` of a connection: the CA and the provisioning certificate, paths and secret names only."""
    identity = tls.identity_for(admin=True) or Identity()
    found = {"ca": tls.ca, "truststore": _store_inputs(tls.truststore), "certificate": identity.certificate,
             "key": identity.key, "keyPasswordSecret": identity.key_password_secret,
             "keystore": _store_inputs(identity.keystore), "verifyHostname": tls.verify_hostname}
    return {k: v for k, v in found.items() if v is not None}


def _store_from(props: Mapping[str, Any] | None) -> Store | None:
    return None if not props else Store(str(props["path"]), str(props["type"]), props.get("passwordSecret") or None)


def _tls_from(props: Mapping[str, Any] | None) -> TlsSettings | None:
    if not props:
        return None
    identity = Identity(props.get("certificate") or None, props.get("key") or None, props.get("keyPasswordSecret") or None,
                        _store_from(props.get("keystore")))
    has_identity = bool(identity.certificate or identity.keystore)
    return TlsSettings(ca=props.get("ca") or None, truststore=_store_from(props.get("truststore")),
                       identity=identity if has_identity else None, verify_hostname=bool(props.get("verifyHostname", True)))


def connection_inputs(cluster: Cluster, password: Any) -> dict[str, Any]:
    """The connection inputs of a resource on ``cluster``; ``password`` is a secret Output or None."""
    security = provisioning_security(cluster)
    connection: dict[str, Any] = {
        "bootstrapServers": cluster.bootstrap,
        "securityProtocol": security.protocol,
        "saslMechanism": security.sasl_mechanism,
        "username": security.username,
        "passwordSecret": security.password_secret,
    }
    if cluster.tls is not None and security.uses_tls:  # absent otherwise: no diff on stacks without TLS
        connection["tls"] = _tls_inputs(cluster.tls)
    return {"cluster": cluster.alias, "connection": connection, PASSWORD: password}


def cluster_from(props: Mapping[str, Any]) -> Cluster:
    """The cluster a resource's inputs (or recorded outputs) name; a setting they lack is unset."""
    conn = props.get("connection") or {}
    return Cluster(
        alias=props["cluster"],
        bootstrap_servers=tuple(str(conn["bootstrapServers"]).split(",")),
        security=Security(
            protocol=conn.get("securityProtocol") or "PLAINTEXT",
            sasl_mechanism=conn.get("saslMechanism") or None,
            username=conn.get("username") or None,
            password_secret=conn.get("passwordSecret") or None,
        ),
        tls=_tls_from(conn.get("tls")),
    )


def remember_config(config: Any) -> None:
    """Keep the stack's config values the provider host was given (``configure``), for ``current_secret``."""
    raw = getattr(config, "_props", None) or {}
    for key, value in raw.items():
        if isinstance(value, str):
            _CONFIGURED[key.rpartition(":")[2]] = value


def current_secret(name: str | None) -> str | None:
    """The secret's value now: Pulumi config given to the provider host, then the environment."""
    if not name:
        return None
    return _CONFIGURED.get(name) or os.environ.get(name)


def connection_key(props: Mapping[str, Any], prefer_current: bool = False) -> tuple[Cluster, str | None]:
    """The cluster a resource's inputs name, and the password to reach it with (see ``admin``)."""
    cluster = cluster_from(props)
    password = props.get(PASSWORD)
    if prefer_current:
        password = current_secret(cluster.security.password_secret) or password
    return cluster, password


def admin(props: Mapping[str, Any], prefer_current: bool = False) -> KafkaAdmin:
    """A ``KafkaAdmin`` for the resource's cluster (cached per connection and thread).

    ``prefer_current``: for ``delete``, whose inputs come from the state and may hold a password
    rotated since; the secret's current value (by its name) wins when it is available.
    """
    key = connection_key(props, prefer_current)
    cluster, password = key
    cache = getattr(_ADMINS, "by_connection", None)
    if cache is None:
        cache = _ADMINS.by_connection = {}
    found = cache.get(key)
    if found is None:
        sasl_secret = cluster.security.password_secret

        def secrets(name: str) -> str | None:
            """The SASL password from the inputs; a TLS store's or key's password by its name."""
            return password if name == sasl_secret else current_secret(name)

        found = cache[key] = KafkaAdmin(cluster, secrets=secrets)
    return found

