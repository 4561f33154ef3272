"""How a provider method reaches a Kafka cluster: from the resource's inputs, never from the provider.

Every Kafka resource carries ``cluster`` (the alias), ``connection`` (bootstrap servers, security
protocol, SASL mechanism, user name and the *name* of the password secret: the credentials mm2spec
provisions with, i.e. the spec's ``security.admin`` when set) and ``password``, a Pulumi secret
(encrypted in the state, masked in output, and declared a secret output too).

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
from mm2spec.live.kafka import KafkaAdmin
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
    """Each used cluster's password (None without SASL), by the secret name the spec gives."""
    passwords: dict[str, str | None] = {}
    missing = []
    for alias in used_clusters(state):
        security = provisioning_security(state.cluster(alias))
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
    return passwords


def provisioning_security(cluster: Cluster) -> Security:
    """The credentials mm2spec provisions with: the cluster's ``security.admin`` if the spec sets one."""
    as_admin = getattr(cluster.security, "as_admin", None)
    return as_admin() if as_admin else cluster.security


def connection_inputs(cluster: Cluster, password: Any) -> dict[str, Any]:
    """The connection inputs of a resource on ``cluster``; ``password`` is a secret Output or None."""
    security = provisioning_security(cluster)
    return {
        "cluster": cluster.alias,
        "connection": {
            "bootstrapServers": cluster.bootstrap,
            "securityProtocol": security.protocol,
            "saslMechanism": security.sasl_mechanism,
            "username": security.username,
            "passwordSecret": security.password_secret,
        },
        PASSWORD: password,
    }


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
        found = cache[key] = KafkaAdmin(cluster, secrets=lambda _name: password)
    return found

