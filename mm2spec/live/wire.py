"""DescribeConfigs of many topics over Kafka's wire protocol, without synonyms.

Why not the AdminClient: librdkafka always asks DescribeConfigs with ``IncludeSynonyms``, and
confluent-kafka turns every entry and synonym of the answer into a Python ``ConfigEntry``: at 10,000
topics over half a million objects, seconds of CPU per cluster under the GIL, while a plan keeps
only the few configs set on each topic. Here the request asks for no synonyms and the answer is
walked in place, keeping only ``DYNAMIC_TOPIC_CONFIG`` entries, for a fraction of that CPU (the
broker's own work stays: it works out the synonyms either way). The figures are in
benchmarks/README.md (plan_1000_topics.py).
``mm2spec.live.kafka.KafkaAdmin`` is the only user; anything this module cannot do (a SASL
mechanism other than PLAIN and SCRAM, a TLS or authentication failure, an old broker) raises
``WireUnavailable`` and the AdminClient reads instead.

Requests: SaslHandshake v1 and SaslAuthenticate v1 (KIP-152), DescribeConfigs v1 (answered by any
broker for topics; v0 is the only version Kafka 4 removed), request header v1, response header v0.
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
from dataclasses import dataclass
from typing import Callable, Iterator

DESCRIBE_CONFIGS = 32
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
TOPIC = 2
"""DescribeConfigs resource type of a topic."""
DYNAMIC_TOPIC_CONFIG = 1
"""DescribeConfigs config source of a config set on the topic itself."""

_SCRAM = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
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


class WireConnection:
    """One authenticated connection to one broker; used for a few requests, then closed."""

    def __init__(self, host: str, port: int, protocol: str, mechanism: str | None, username: str | None,
                 password: str | None, timeout: float):
        self._correlation = 0
        try:
            raw = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise WireUnavailable(f"connect to {host}:{port}: {exc}") from None
        self._sock: socket.socket = raw
        try:
            if protocol.endswith("SSL"):
                self._sock = ssl.create_default_context().wrap_socket(raw, server_hostname=host)
            if protocol.startswith("SASL"):
                self._authenticate(mechanism or "", username or "", password or "")
        except (OSError, ValueError, struct.error) as exc:
            self.close()
            raise WireUnavailable(f"{type(exc).__name__} while authenticating") from None
        except WireUnavailable:
            self.close()
            raise

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


def _header_request(api_key: int, version: int, correlation_id: int, body: bytes, client: str = "mm2spec") -> bytes:
    payload = _I16.pack(api_key) + _I16.pack(version) + _I32.pack(correlation_id) + _string(client) + body
    return _I32.pack(len(payload)) + payload


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
        salted = hashlib.pbkdf2_hmac(self._hash().name, self._password, base64.b64decode(salt), iterations)
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

