"""The one rule for sensitive keys (``mm2spec.spec.secrets``) in its three uses: hiding values in
error messages, refusing inline secrets in free-form config maps, and masking plans."""

from __future__ import annotations

import pytest

from mm2spec.plan.formats import mask
from mm2spec.spec.document import parse
from mm2spec.spec.secrets import (hides_value, holds_secret, inline_secret, is_provider_reference, is_sensitive_key,
                                  literal_secrets, redact)
from mm2spec.spec.validate import validate

JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="mm2" password="{}";'


@pytest.mark.parametrize("key", [
    "password", "ssl.truststore.password", "ssl.key.password", "sasl.jaas.config", "source.cluster.sasl.jaas.config",
    "spark.ssl.keyStorePassword", "spark.authenticate.secret", "fs.s3a.secret.key", "fs.s3a.session.token",
    "ssl.keystore.key", "private.key", "privateKey", "private.key.passphrase", "passwordSecret", "PASSWD",
    "sasl.oauthbearer.client.credentials.client.secret", "aws.credentials",
])
def test_keys_naming_a_credential_are_sensitive(key):
    assert is_sensitive_key(key)


@pytest.mark.parametrize("key", [
    "sasl.mechanism", "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.assertion.private.key.file",
    "sasl.oauthbearer.client.credentials.client.id", "fs.s3a.aws.credentials.provider", "security.protocol",
    "ssl.truststore.location", "tasks.max", "username", "tokenauth",
])
def test_keys_that_only_mention_a_credential_are_not(key):
    assert not is_sensitive_key(key)


def test_provider_references():
    assert is_provider_reference("${env:KEYSTORE_PASSWORD}") and is_provider_reference(" ${file:/etc/s.properties:pw} ")
    assert not is_provider_reference("changeit") and not is_provider_reference("${env:A}${env:B}")


# ------------------------------------------------------------------------------ error messages

@pytest.mark.parametrize("path,hidden", [
    (["clusters", "primary", "security", "protocol"], True),
    (["clusters", "primary", "security", "username"], True),
    (["clusters", "dr", "config", "ssl.truststore.password"], True),
    (["mirrors", 0, "config", "source.cluster.sasl.jaas.config"], True),
    (["spark", "config", "spark.ssl.keyStorePassword"], True),
    (["mirrors", 0, "replicationPolicy"], False),
    (["spark", "master"], False),
])
def test_error_messages_hide_values_under_security_and_sensitive_keys(path, hidden):
    assert hides_value(path) is hidden


def test_a_schema_error_under_security_does_not_echo_the_value():
    root = parse("apiVersion: mm2spec/v1\nkind: DisasterRecovery\nmetadata: {name: demo}\nclusters:\n"
                 "  primary: {bootstrapServers: [\"p-1:9092\"], security: {protocol: PLAIN-hunter2}}\n"
                 "  dr: {bootstrapServers: [\"d-1:9092\"]}\n"
                 "mirrors:\n  - {source: primary, target: dr, topics: [orders], replicationPolicy: mirrored-x}\n",
                 "s.yaml")
    messages = [str(d) for d in validate(root)]
    assert any("/security/protocol: (value hidden) is not one of" in m for m in messages)
    assert any('"mirrored-x" is not one of' in m for m in messages)  # not a secret: shown to help
    assert not any("hunter2" in m for m in messages)


# ------------------------------------------------------------------------- inline secrets in specs

@pytest.mark.parametrize("key,value", [
    ("ssl.truststore.password", "changeit"),
    ("ssl.key.password", 123456),  # YAML reads it as a number: still a password
    ("spark.authenticate.secret", "s3cr3t"),
    ("fs.s3a.secret.key", "AKIA/abc"),
    ("ssl.keystore.key", "-----BEGIN PRIVATE KEY-----"),
    ("sasl.jaas.config", JAAS.format("hunter2")),
    ("sasl.jaas.config", JAAS.format("hunter2").replace('password="hunter2"', "password = hunter2")),
    ("sasl.jaas.config", 'o.a.k.c.s.oauthbearer.OAuthBearerLoginModule required clientId="mm2" clientSecret="x";'),
])
def test_inline_secrets_are_refused(key, value):
    assert inline_secret(key, value)


@pytest.mark.parametrize("key,value", [
    ("ssl.truststore.password", "${env:TRUSTSTORE_PASSWORD}"),
    ("sasl.jaas.config", JAAS.format("${env:MM2_PASSWORD}")),
    ("sasl.jaas.config", "${file:/etc/kafka/jaas.properties:mm2}"),
    ("sasl.mechanism", "PLAIN"),
    ("sasl.oauthbearer.token.endpoint.url", "https://idp.example.com/oauth2/token"),
    ("sasl.oauthbearer.assertion.private.key.file", "/etc/mm2/key.pem"),
    ("ssl.truststore.location", "/etc/kafka/truststore.jks"),
])
def test_references_and_keys_that_hold_no_secret_are_accepted(key, value):
    assert not inline_secret(key, value)


def test_validate_reports_inline_secrets_at_their_key_and_never_echoes_them():
    root = parse("apiVersion: mm2spec/v1\nkind: DisasterRecovery\nmetadata: {name: demo}\nclusters:\n"
                 "  primary: {bootstrapServers: [\"p-1:9092\"]}\n"
                 "  dr:\n    bootstrapServers: [\"d-1:9092\"]\n    config:\n"
                 "      sasl.mechanism: PLAIN\n"
                 "      sasl.oauthbearer.token.endpoint.url: https://idp.example.com/token\n"
                 "      ssl.keystore.password: topsecret-value\n"
                 "mirrors:\n  - {source: primary, target: dr, topics: [orders]}\n"
                 "spark:\n  config: {spark.ssl.keyStorePassword: \"${env:KS}\", spark.authenticate.secret: hunter2}\n",
                 "s.yaml")
    problems = validate(root)
    assert [(d.pointer, d.line, d.column) for d in problems] == [
        ("/clusters/dr/config/ssl.keystore.password", 11, 7),
        ("/spark/config/spark.authenticate.secret", 15, 53),
    ]
    assert all(d.message == "a password is written inline" for d in problems)
    assert not any("topsecret" in str(d) or "hunter2" in str(d) for d in problems)


# -------------------------------------------------------------------------------- plan masking

@pytest.mark.parametrize("field,value,shown", [
    ("config.ssl.truststore.password", "changeit", "(sensitive)"),
    ("ssl.key.password", 123456, "(sensitive)"),
    ("ssl.truststore.password", "${env:TS}", "${env:TS}"),
    ("sasl.mechanism", "SCRAM-SHA-512", "SCRAM-SHA-512"),
    ("sasl.oauthbearer.token.endpoint.url", "https://idp/token", "https://idp/token"),
    ("tasks.max", "4", "4"),
    ("ssl.truststore.password", None, None),
    ("source.cluster.sasl.jaas.config", JAAS.format("p"), JAAS.format("(sensitive)")),
    ("source.cluster.sasl.jaas.config", JAAS.format("${env:PW}"), JAAS.format("${env:PW}")),
    ("sasl.jaas.config", 'M required username="mm2" password=p;', 'M required username="mm2" password=(sensitive);'),
    ("sasl.jaas.config", 'M required clientId="mm2" clientSecret="x";', 'M required clientId="mm2" clientSecret="(sensitive)";'),
    ("sasl.jaas.config", "something unrecognisable", "(sensitive)"),  # cannot be told safe: hidden whole
    ("sasl.jaas.config", "${file:/etc/jaas.properties:mm2}", "${file:/etc/jaas.properties:mm2}"),
])
def test_plans_mask_secrets_but_show_references_and_harmless_keys(field, value, shown):
    assert mask(field, value) == shown


@pytest.mark.parametrize("field,value,shown", [
    # Under a sensitive key every shape is hidden whole: a list, a mapping, a number, a boolean.
    ("password", ["pw-1", "pw-2"], "(sensitive)"),
    ("ssl.key.password", {"value": "pw"}, "(sensitive)"),
    ("ssl.key.password", 3.14, "(sensitive)"),
    ("sasl.jaas.config", ["M required password=p;"], "(sensitive)"),
    ("passwordSecret", ["${env:A}"], "(sensitive)"),  # only a single string can be a reference
    # Under any other key, containers are masked by the same rule inside.
    ("config", {"ssl.truststore.password": "pw", "tasks.max": 4}, {"ssl.truststore.password": "(sensitive)",
                                                                   "tasks.max": 4}),
    ("config", {"nested": {"token": ["t"]}}, {"nested": {"token": "(sensitive)"}}),
    ("bootstrapServers", ["mm2:pw@b-1:9092", "b-2:9092"], ["mm2:(sensitive)@b-1:9092", "b-2:9092"]),
    ("items", [{"secret": 42}, "plain"], [{"secret": "(sensitive)"}, "plain"]),
])
def test_mask_hides_secrets_whatever_their_shape(field, value, shown):
    assert mask(field, value) == shown


def test_values_known_as_secrets_are_hidden_under_any_key():
    known = literal_secrets({"password": ["pw-copied", "${env:REF}", "abc"], "n": 918273645})
    assert known == {"pw-copied", 918273645}  # not references, not values too short to give anything away
    assert mask("labels", {"copied": "pw-copied", "n": 918273645, "ref": "${env:REF}"}, known) == \
        {"copied": "(sensitive)", "n": "(sensitive)", "ref": "${env:REF}"}


@pytest.mark.parametrize("value,shown", [
    ("mm2:hunter2@broker-1:9092", "mm2:(sensitive)@broker-1:9092"),
    ("SASL_SSL://mm2:hunter2@broker-1:9092", "SASL_SSL://mm2:(sensitive)@broker-1:9092"),
    ("b-0:9092,mm2:hunter2@b-1:9092", "b-0:9092,mm2:(sensitive)@b-1:9092"),
    ("mm2:hun@ter2@broker-1:9092", "mm2:(sensitive)@broker-1:9092"),  # an unescaped "@" in the password
    ("http://admin:hun@ter2@connect:8083/x", "http://admin:(sensitive)@connect:8083/x"),
])
def test_credentials_in_an_address_are_masked(value, shown):
    assert holds_secret(value) and redact(value) == shown and "ter2" not in shown


@pytest.mark.parametrize("value", ["broker-1:9092", "user@broker-1:9092", "http://connect:8083", "(?:orders)@x",
                                   "invoices-.*", "[::1]:9092"])
def test_addresses_without_a_password_are_shown(value):
    assert not holds_secret(value) and redact(value) == value


def test_a_bootstrap_server_with_credentials_is_refused_without_echoing_the_password():
    root = parse("apiVersion: mm2spec/v1\nkind: DisasterRecovery\nmetadata: {name: demo}\nclusters:\n"
                 "  primary: {bootstrapServers: [\"mm2:hunter2@p-1:9092\"]}\n"
                 "  dr: {bootstrapServers: [\"SASL_SSL://mm2:hunter2@d-1:9092\"]}\n"
                 "mirrors:\n  - {source: primary, target: dr, topics: [orders]}\n", "s.yaml")
    messages = [str(d) for d in validate(root)]
    assert len(messages) == 2 and all("holds credentials" in m and "(sensitive)@" in m for m in messages)
    assert not any("hunter2" in m for m in messages)
