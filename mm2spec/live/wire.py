"""mm2spec's one client of Kafka's wire protocol, for the requests confluent-kafka cannot make well:
DescribeConfigs of many topics without synonyms, Metadata of many named topics, ApiVersions (the
cluster's ``metadata.version``), and the TLS probe that tells why a TLS cluster cannot be reached
before any other client tries.

DescribeConfigs of many topics, without synonyms:

Why not the AdminClient: librdkafka always asks DescribeConfigs with ``IncludeSynonyms``, and
confluent-kafka turns every entry and synonym of the answer into a Python ``ConfigEntry``: at 10,000
topics over half a million objects, seconds of CPU per cluster under the GIL, while a plan keeps
only the few configs set on each topic. Here the request asks for no synonyms and the answer is
walked in place, keeping only ``DYNAMIC_TOPIC_CONFIG`` entries, for a fraction of that CPU (the
broker's own work stays: it works out the synonyms either way). The figures are in
benchmarks/README.md (plan_1000_topics.py).

Metadata of named topics: a plan needs each target topic's partition count and replication factor;
confluent-kafka's DescribeTopics builds an object per topic, partition, replica and broker node (half
a CPU-second at 10,000 topics), where the answer walked here gives the two numbers for a fifteenth.

``mm2spec.live.kafka.KafkaAdmin`` is the only user; anything this module cannot do (a SASL
mechanism other than PLAIN and SCRAM, a TLS or authentication failure, an old broker) raises
``WireUnavailable`` and the AdminClient reads instead.

TLS: a connection takes the ``ssl.SSLContext`` of ``mm2spec.mm2.tls.ClientTls`` (the cluster's CA, the
client certificate, hostname verification), the same settings every other client is given. With
``tls_errors`` a TLS failure is a ``TlsInvalid`` saying which side refused what (the probe's mode).

Requests: ApiVersions v3 (KIP-511, answered before authentication), SaslHandshake v1 and
SaslAuthenticate v1 (KIP-152), DescribeConfigs v1 (answered by any broker for topics; v0 is the only
version Kafka 4 removed), Metadata v7 (Kafka 2.1 on; Kafka 4 removed v0-v3), request header v1 (v2
for ApiVersions), response header v0.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket
import ssl
import struct
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterator

from mm2spec.errors import TlsInvalid

DESCRIBE_CONFIGS = 32
API_VERSIONS = 18
METADATA = 3
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
TOPIC = 2
"""DescribeConfigs resource type of a topic."""
DYNAMIC_TOPIC_CONFIG = 1
"""DescribeConfigs config source of a config set on the topic itself."""

_SCRAM = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
# SCRAM's salted password by (hash, password, salt, iterations), as RFC 5802 (5.1) lets a client keep
# it: one read opens several connections to a cluster, and each PBKDF2 of 4,096 rounds or more takes
# tens of milliseconds of CPU on a busy host.
_SALTED: dict[tuple[str, bytes, bytes, int], bytes] = {}
_SALTED_LOCK = threading.Lock()
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ENTRY_TAIL = struct.Struct(">bbbi")  # read_only, config_source, is_sensitive, synonyms count


class WireUnavailable(Exception):
    """This path cannot read the cluster (connection, TLS, authentication, protocol): the caller
    reads through the AdminClient instead, which reports the failure in its own words."""


@dataclass(frozen=True)
class ConfigsResult:
    """One topic's answer: the configs set on the topic, or the broker's error for it."""

    configs: dict[str, str | None]
    """``DYNAMIC_TOPIC_CONFIG`` entries that are not sensitive, by name; empty on an error."""
    error_code: int = 0
    """The broker's error code for this topic (0: none), as in Kafka's protocol."""
    error_message: str | None = None
    """The broker's message with the error, if any."""


def _string(text: str) -> bytes:
    data = text.encode()
    return _I16.pack(len(data)) + data


def _bytes(data: bytes) -> bytes:
    return _I32.pack(len(data)) + data


def describe_configs_request(correlation_id: int, names: list[str], client: str = "mm2spec") -> bytes:
    """DescribeConfigs v1 for ``names`` (all their configs, no synonyms), size-prefixed."""
    body = [_I16.pack(DESCRIBE_CONFIGS), _I16.pack(1), _I32.pack(correlation_id), _string(client),
            _I32.pack(len(names))]
    for name in names:
        body += [bytes([TOPIC]), _string(name), _I32.pack(-1)]  # -1: every config key
    body.append(b"\0")  # IncludeSynonyms false
    payload = b"".join(body)
    return _I32.pack(len(payload)) + payload


def parse_describe_configs(response: bytes) -> dict[str, ConfigsResult]:
    """A DescribeConfigs v1 response (after the correlation id) by topic name. Walks every entry
    but builds strings only for those set on the topic: most of an answer is defaults."""
    unpack_i16, unpack_i32, unpack_tail = _I16.unpack_from, _I32.unpack_from, _ENTRY_TAIL.unpack_from
    at = 4  # throttle time
    count, = unpack_i32(response, at)
    at += 4
    results: dict[str, ConfigsResult] = {}
    for _ in range(count):
        error, = unpack_i16(response, at)
        size, = unpack_i16(response, at + 2)
        at += 4
        message = None
        if size >= 0:
            message = response[at:at + size].decode()
            at += size
        at += 1  # resource type
        size, = unpack_i16(response, at)
        name = response[at + 2:at + 2 + size].decode()
        at += 2 + size
        entries, = unpack_i32(response, at)
        at += 4
        configs: dict[str, str | None] = {}
        for _ in range(max(entries, 0)):
            key_size, = unpack_i16(response, at)
            key_at = at + 2
            at = key_at + key_size
            value_size, = unpack_i16(response, at)
            value_at = at + 2
            at = value_at + max(value_size, 0)
            _read_only, source, sensitive, synonyms = unpack_tail(response, at)
            at += 7
            for _ in range(max(synonyms, 0)):  # none asked for; walked in case a broker sends some
                at += 2 + unpack_i16(response, at)[0]
                at += 2 + max(unpack_i16(response, at)[0], 0) + 1
            if source == DYNAMIC_TOPIC_CONFIG and not sensitive:  # as the AdminClient's path keeps them
                value = response[value_at:value_at + value_size].decode() if value_size >= 0 else None
                configs[response[key_at:key_at + key_size].decode()] = value
        results[name] = ConfigsResult(configs if not error else {}, error, message)
    return results


@dataclass(frozen=True)
class TopicLayout:
    """One topic's Metadata answer: its partitions and replicas, or the broker's error for it."""

    partitions: int
    """How many partitions the topic has; 0 on an error."""
    replicas: int
    """The most replicas any of its partitions has (its replication factor); 0 on an error."""
    error_code: int = 0
    """The broker's error code for this topic (0: none; 3: it does not exist), as in Kafka's protocol."""


def metadata_request(correlation_id: int, names: list[str], client: str = "mm2spec") -> bytes:
    """Metadata v7 for ``names`` (at least one: an empty array asks for no topic), never creating
    one; size-prefixed."""
    body = [_I32.pack(len(names))] + [_string(name) for name in names] + [b"\0"]  # AllowAutoTopicCreation false
    return _header_request(METADATA, 7, correlation_id, b"".join(body), client)


def parse_metadata(response: bytes) -> dict[str, TopicLayout]:
    """A Metadata v7 response (after the correlation id) by topic name: each topic's partition count
    and most replicas; the brokers, the ISRs and the leaders are skipped."""
    unpack_i16, unpack_i32 = _I16.unpack_from, _I32.unpack_from
    at = 4  # throttle time
    brokers, = unpack_i32(response, at)
    at += 4
    for _ in range(brokers):  # node id, host, port, rack (nullable)
        at += 4
        at += 2 + unpack_i16(response, at)[0] + 4
        at += 2 + max(unpack_i16(response, at)[0], 0)
    at += 2 + max(unpack_i16(response, at)[0], 0) + 4  # cluster id (nullable), controller id
    count, = unpack_i32(response, at)
    at += 4
    results: dict[str, TopicLayout] = {}
    for _ in range(count):
        error, = unpack_i16(response, at)
        size, = unpack_i16(response, at + 2)
        name = response[at + 4:at + 4 + size].decode()
        at += 4 + size + 1  # is internal
        partitions, = unpack_i32(response, at)
        at += 4
        most = 0
        for _ in range(max(partitions, 0)):
            at += 14  # error code, partition index, leader id, leader epoch
            replicas, = unpack_i32(response, at)
            most = max(most, replicas)
            at += 4 + 4 * max(replicas, 0)
            at += 4 + 4 * max(unpack_i32(response, at)[0], 0)  # ISR
            at += 4 + 4 * max(unpack_i32(response, at)[0], 0)  # offline replicas
        results[name] = TopicLayout(max(partitions, 0), most) if not error else TopicLayout(0, 0, error)
    return results


@dataclass(frozen=True)
class Sasl:
    """SASL credentials of a connection (PLAIN or SCRAM); ``repr`` hides the password."""

    mechanism: str
    username: str
    password: str = field(repr=False)


# OpenSSL's X509 verify codes: the broker's certificate chain does not lead to a trusted CA ...
_UNTRUSTED = {2, 18, 19, 20, 21, 27}
_EXPIRED = 10
_NAME_MISMATCH = {62, 64}  # the host name, the IP address


def tls_failure(exc: BaseException, host: str, port: int, during: str, with_certificate: bool = True) -> str:
    """Why a TLS connection to ``host:port`` failed, in a user's words (``during``: handshake or read;
    ``with_certificate``: whether the client presented a certificate)."""
    where = f"{host}:{port}"
    if isinstance(exc, ssl.SSLCertVerificationError):
        code, why = exc.verify_code, exc.verify_message
        if code in _NAME_MISMATCH:
            return (f"the broker's certificate at {where} does not name the host {host} ({why}): connect by a name "
                    f"the certificate holds, or set tls.verifyHostname: false if it can hold none")
        if code in _UNTRUSTED:
            return (f"the broker's certificate at {where} is not signed by a CA the client trusts ({why}): "
                    f"tls.ca (or tls.truststore) must hold the CA that signed the brokers' certificates")
        if code == _EXPIRED:
            return f"the broker's certificate at {where} has expired: the cluster's operators must renew it"
        return f"the broker's certificate at {where} does not verify ({why})"
    reason = (getattr(exc, "reason", None) or "").upper()
    refused = "ALERT" in reason and ("CERTIFICATE" in reason or "UNKNOWN_CA" in reason or "ACCESS_DENIED" in reason)
    if "CERTIFICATE_REQUIRED" in reason or (refused and not with_certificate):
        return (f"the broker at {where} requires a client certificate (mutual TLS) and none was given: "
                f"set tls.certificate and tls.key, or tls.keystore")
    if refused:
        return (f"the broker at {where} refused the client certificate ({reason.lower()}): it must be signed by a "
                f"CA the brokers trust and be valid now")
    if "WRONG_VERSION_NUMBER" in reason or "RECORD_LAYER" in reason or "PACKET_LENGTH" in reason:
        return (f"{where} does not answer TLS: is it a PLAINTEXT or SASL_PLAINTEXT listener? check the port "
                f"and security.protocol")
    closed = isinstance(exc, (ConnectionError, ssl.SSLEOFError, ssl.SSLZeroReturnError, WireUnavailable))
    if during == "read" and closed and not with_certificate:
        return (f"the broker at {where} closed the connection after the TLS handshake: it requires a client "
                f"certificate (mutual TLS) and none was given: set tls.certificate and tls.key, or tls.keystore")
    if during == "read" and closed:
        return (f"the broker at {where} closed the connection after the TLS handshake: it refused the client "
                f"certificate (missing, or not signed by a CA it trusts) or the listener requires SASL")
    if isinstance(exc, ssl.SSLEOFError) or "EOF" in reason:
        return (f"{where} closed the connection during the TLS handshake: it may not be a TLS listener, "
                f"or it refused the client's TLS settings")
    return f"TLS with {where} failed ({reason.lower() or exc})"


class WireConnection:
    """One connection to one broker (TLS when given a context, authenticated when given SASL
    credentials); used for a few requests, then closed."""

    def __init__(self, host: str, port: int, timeout: float, context: ssl.SSLContext | None = None,
                 sasl: Sasl | None = None, tls_errors: bool = False, where: str = "", with_certificate: bool = True):
        self._correlation = 0
        self._where, self._host, self._port, self._tls_errors = where, host, port, tls_errors
        self._with_certificate = with_certificate
        try:
            raw = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise WireUnavailable(f"connect to {host}:{port}: {exc}") from None
        self._sock: socket.socket = raw
        try:
            if context is not None:
                try:
                    self._sock = context.wrap_socket(raw, server_hostname=host)
                except (ssl.SSLError, OSError) as exc:
                    self._tls_failed(exc, "handshake")
                    raise
            if sasl is not None:
                self._authenticate(sasl.mechanism, sasl.username, sasl.password)
        except (OSError, ValueError, struct.error) as exc:
            self.close()
            raise WireUnavailable(f"{type(exc).__name__} while authenticating") from None
        except WireUnavailable:
            self.close()
            raise

    def _tls_failed(self, exc: BaseException, during: str) -> None:
        """With ``tls_errors``: raise the ``TlsInvalid`` that says why (the caller raises otherwise)."""
        if self._tls_errors and isinstance(exc, (ssl.SSLError, OSError, WireUnavailable)) and not isinstance(
                exc, (socket.timeout, TimeoutError)):
            self.close()
            why = tls_failure(exc, self._host, self._port, during, self._with_certificate)
            raise TlsInvalid(f"{self._where}: {why}") from None

    def answers_unauthenticated(self) -> bool:
        """Whether the broker answers a request other than ApiVersions without SASL authentication
        (an empty Metadata v4): False on a SASL listener, which closes the connection instead."""
        try:
            self.request(_empty_metadata_request)
        except (OSError, WireUnavailable):
            return False
        return True

    def api_versions(self) -> bytes:
        """The ApiVersions v3 response (after the correlation id): the probe's request, and the
        features; with ``tls_errors`` a broker that drops the connection here refused the TLS client."""
        try:
            return self.request(api_versions_request)
        except (ssl.SSLError, OSError, WireUnavailable) as exc:
            self._tls_failed(exc, "read")
            raise WireUnavailable(f"ApiVersions: {exc}") from None

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass

    def __enter__(self) -> WireConnection:
        return self

    def __exit__(self, *_exc) -> None:
        self.close()

    def request(self, build: Callable[[int], bytes]) -> bytes:
        """Send ``build(correlation_id)`` and return the response body after its correlation id."""
        self._correlation += 1
        self._sock.sendall(build(self._correlation))
        return self._response(self._correlation)

    def requests(self, builds: list[Callable[[int], bytes]]) -> Iterator[bytes]:
        """Each request's response body, in order. A thread sends the requests while the caller reads
        the answers: a broker takes the next request off a connection only once it has answered the
        last, so the next one already waiting keeps the broker busy while the caller parses."""
        first = self._correlation + 1
        self._correlation += len(builds)

        def send() -> None:
            try:
                for offset, build in enumerate(builds):
                    self._sock.sendall(build(first + offset))
            except OSError:  # the reader then sees the connection end
                self.close()

        sender = threading.Thread(target=send, name="mm2spec-wire-send", daemon=True)
        sender.start()
        try:
            for offset in range(len(builds)):
                yield self._response(first + offset)
        finally:
            sender.join(timeout=1)

    def _response(self, correlation_id: int) -> bytes:
        size, = _I32.unpack(self._read(4))
        data = self._read(size)
        if _I32.unpack_from(data)[0] != correlation_id:
            raise WireUnavailable("response out of order")
        return data[4:]

    def _read(self, size: int) -> bytes:
        chunks, got = [], 0
        while got < size:
            chunk = self._sock.recv(min(size - got, 1 << 20))
            if not chunk:
                raise WireUnavailable("the broker closed the connection")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _authenticate(self, mechanism: str, username: str, password: str) -> None:
        if mechanism != "PLAIN" and mechanism not in _SCRAM:
            raise WireUnavailable(f"SASL mechanism {mechanism or 'unset'} is not spoken here")
        answer = self.request(lambda cid: _header_request(SASL_HANDSHAKE, 1, cid, _string(mechanism)))
        if _I16.unpack_from(answer)[0]:
            raise WireUnavailable(f"the broker refused SASL mechanism {mechanism}")
        if mechanism == "PLAIN":
            self._sasl_step(b"\0" + username.encode() + b"\0" + password.encode())
            return
        scram = ScramClient(mechanism, username, password)
        server_first = self._sasl_step(scram.first())
        server_final = self._sasl_step(scram.final(server_first))
        scram.verify(server_final)

    def _sasl_step(self, token: bytes) -> bytes:
        answer = self.request(lambda cid: _header_request(SASL_AUTHENTICATE, 1, cid, _bytes(token)))
        error, = _I16.unpack_from(answer)
        size, = _I16.unpack_from(answer, 2)
        at = 4 + max(size, 0)
        if error:
            raise WireUnavailable(f"SASL authentication failed (error code {error})")
        length, = _I32.unpack_from(answer, at)
        return answer[at + 4:at + 4 + max(length, 0)]


def _uvarint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def _skip_tags(data: bytes, at: int) -> int:
    count, at = _uvarint(data, at)
    for _ in range(count):
        _, at = _uvarint(data, at)
        size, at = _uvarint(data, at)
        at += size
    return at


def api_versions_request(correlation_id: int, client: str = "mm2spec") -> bytes:
    """ApiVersions v3 (KIP-511): header v2 (api key 18, version 3, correlation id, client id, no tags),
    body: client software name and version as compact strings, no tags; size-prefixed."""
    name = client.encode()
    header = struct.pack(">hhih", API_VERSIONS, 3, correlation_id, len(name)) + name + b"\0"
    body = bytes([len(name) + 1]) + name + bytes([len(b"1") + 1]) + b"1" + b"\0"
    return struct.pack(">i", len(header) + len(body)) + header + body


def finalized_metadata_version(response: bytes) -> int | None:
    """The finalized ``metadata.version`` level in an ApiVersions v3 response body (after the
    correlation id); None without one. The features are tagged fields of the body: tag 2,
    FinalizedFeatures, an array of (name, max level, min level)."""
    error, = struct.unpack_from(">h", response, 0)
    if error:
        raise ValueError(f"ApiVersions error code {error}")
    count, at = _uvarint(response, 2)
    for _ in range(max(count - 1, 0)):
        at = _skip_tags(response, at + 6)  # api key, min and max version (int16 each)
    at += 4  # throttle time
    tags, at = _uvarint(response, at)
    for _ in range(tags):
        tag, at = _uvarint(response, at)
        size, at = _uvarint(response, at)
        if tag == 2:
            features, cursor = _uvarint(response, at)
            for _ in range(max(features - 1, 0)):
                length, cursor = _uvarint(response, cursor)
                name = response[cursor:cursor + length - 1].decode()
                cursor += length - 1
                level, = struct.unpack_from(">h", response, cursor)
                cursor = _skip_tags(response, cursor + 4)
                if name == "metadata.version":
                    return level
        at += size
    return None


def _empty_metadata_request(correlation_id: int) -> bytes:
    """Metadata v4 for no topic (an empty array, not null: null means all), no auto-creation."""
    return _header_request(METADATA, 4, correlation_id, _I32.pack(0) + b"\0")


def _header_request(api_key: int, version: int, correlation_id: int, body: bytes, client: str = "mm2spec") -> bytes:
    payload = _I16.pack(api_key) + _I16.pack(version) + _I32.pack(correlation_id) + _string(client) + body
    return _I32.pack(len(payload)) + payload


def _salted_password(hash_name: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    """SCRAM's SaltedPassword (PBKDF2), worked out once a process for each salt and iteration count."""
    key = (hash_name, password, salt, iterations)
    with _SALTED_LOCK:
        found = _SALTED.get(key)
    if found is None:
        found = hashlib.pbkdf2_hmac(hash_name, password, salt, iterations)
        with _SALTED_LOCK:
            _SALTED[key] = found
    return found


class ScramClient:
    """The client side of SCRAM (RFC 5802), as Kafka's SCRAM-SHA-256/512 speak it."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None):
        self._hash = _SCRAM[mechanism]
        self._password = password.encode()
        self._nonce = nonce or base64.b64encode(os.urandom(24)).decode()
        name = username.replace("=", "=3D").replace(",", "=2C")
        self._first_bare = f"n={name},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        fields = dict(part.split("=", 1) for part in text.split(","))
        nonce, salt, iterations = fields.get("r", ""), fields.get("s", ""), int(fields.get("i", "0"))
        if not nonce.startswith(self._nonce) or not salt or iterations <= 0:
            raise WireUnavailable("unexpected SCRAM server-first message")
        salted = _salted_password(self._hash().name, self._password, base64.b64decode(salt), iterations)
        client_key = hmac.new(salted, b"Client Key", self._hash).digest()
        stored_key = self._hash(client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, self._hash).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_key = hmac.new(salted, b"Server Key", self._hash).digest()
        self._server_signature = hmac.new(server_key, auth_message, self._hash).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        fields = dict(part.split("=", 1) for part in server_final.decode().split(",") if "=" in part)
        if "v" not in fields or not hmac.compare_digest(base64.b64decode(fields["v"]), self._server_signature):
            raise WireUnavailable("the broker's SCRAM signature does not verify")

