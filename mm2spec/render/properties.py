"""Shared pieces of rendered Kafka client configs: ``java.util.Properties`` text, booleans as Kafka
writes them, and a cluster's connection settings with passwords as ``${env:NAME}`` references (and a
PEM client key and certificate chain as ``${dir:FOLDER:FILE}`` references, ``mm2spec.mm2.tls``)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from mm2spec.mm2.tls import DIR_PROVIDER, java_properties, uses_dir_provider
from mm2spec.spec.model import Cluster, DesiredState, Security

BYTE_ARRAY_CONVERTER = "org.apache.kafka.connect.converters.ByteArrayConverter"
ENV_PROVIDER = (("config.providers", "env"),
                ("config.providers.env.class", "org.apache.kafka.common.config.provider.EnvVarConfigProvider"))
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def jaas_config(security: Security) -> str | None:
    """sasl.jaas.config with the password as a config-provider reference, never the value."""
    module = _LOGIN_MODULES.get(security.sasl_mechanism or "")
    if not security.uses_sasl or module is None or not security.username:
        return None
    return f'{module} required username="{security.username}" password="${{env:{security.password_secret}}}";'


def client_properties(cluster: Cluster) -> list[tuple[str, str]]:
    """Java client connection settings for a cluster (no bootstrap.servers), passwords as ${env:...}."""
    props = [("security.protocol", cluster.security.protocol)] if cluster.security.protocol != "PLAINTEXT" else []
    if cluster.security.uses_sasl and cluster.security.sasl_mechanism:
        props.append(("sasl.mechanism", cluster.security.sasl_mechanism))
        jaas = jaas_config(cluster.security)
        if jaas:
            props.append(("sasl.jaas.config", jaas))
    if cluster.security.uses_tls:
        props.extend(java_properties(cluster.tls))  # the mirror's certificate, never tls.admin's
    props.extend(cluster.config)  # last: the spec's own config wins
    return props


def config_providers(*configs: Iterable[tuple[str, str]] | dict[str, str]) -> list[tuple[str, str]]:
    """The config providers a rendered config declares: ``env`` always, ``dir`` when some value of
    ``configs`` is a ``${dir:...}`` reference (a PEM client identity), so configs without one stay as
    they were."""
    if not any(uses_dir_provider(c if isinstance(c, dict) else list(c)) for c in configs):
        return list(ENV_PROVIDER)
    return [("config.providers", "env,dir"), *ENV_PROVIDER[1:], *DIR_PROVIDER]


def kafka_bool(value: bool) -> str:
    """A boolean as Kafka's configs write it."""
    return "true" if value else "false"


def _escape_properties(text: str, is_key: bool) -> str:
    """java.util.Properties escaping: backslashes, and in keys also '=', ':' and spaces."""
    out = text.replace("\\", "\\\\").replace("\n", "\\n")
    if is_key:
        out = out.replace("=", "\\=").replace(":", "\\:").replace(" ", "\\ ")
    elif out.startswith(" "):
        out = "\\" + out
    return out


def properties_text(props: list[tuple[str, str]], header: str) -> str:
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    lines += [f"{_escape_properties(k, True)}={_escape_properties(v, False)}" for k, v in props]
    return "\n".join(lines) + "\n"


def rendered_header(state: DesiredState) -> str:
    """The comment a rendered properties file starts with: where it came from, and not to edit it."""
    env = state.environment or "base"
    return (f"Rendered by mm2spec from {Path(state.source_file).name} (environment: {env}). Do not edit:\n"
            "change the DR spec and render again. Secrets are read from the environment (${env:NAME}).")
