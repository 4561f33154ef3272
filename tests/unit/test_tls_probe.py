"""The TLS probe's causes against a real TLS server (Python's ``ssl``, on loopback): the cases a Kafka
broker is not needed for, each refused with the cause a user can act on."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest

from mm2spec.errors import TlsInvalid
from mm2spec.live.wire import WireConnection
from mm2spec.mm2.tls import ClientTls, Identity, TlsSettings, java_properties
from test_tls_clients import SECRETS, _tool, make_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    certs = make_certs(tmp_path_factory.mktemp("probe-certs"))
    folder = Path(certs.folder)
    (folder / "san.cnf").write_text("subjectAltName=DNS:broker.example\n")
    _tool("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
          "-subj", "/CN=broker.example", cwd=folder)
    _tool("openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial", "90",
          "-days", "2", "-extfile", "san.cnf", "-out", "server.pem", cwd=folder)
    _tool("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "other-ca.key", "-out", "other-ca.pem",
          "-days", "2", "-subj", "/CN=other-ca", cwd=folder)
    return certs


class _Server:
    """A TLS server on a free loopback port for one connection: handshake, then read until closed."""

    def __init__(self, certs, require_client_certificate: bool):
        folder = Path(certs.folder)
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(folder / "server.pem", folder / "server.key")
        if require_client_certificate:
            self.context.verify_mode = ssl.CERT_REQUIRED
            self.context.load_verify_locations(certs.ca)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        try:
            with self.context.wrap_socket(conn, server_side=True) as tls:
                while tls.recv(4096):
                    pass
        except (ssl.SSLError, OSError):
            pass
        finally:
            self.listener.close()


def _probe(settings: TlsSettings, port: int, host: str = "127.0.0.1") -> str:
    tls = ClientTls(dict(java_properties(settings, admin=True)), SECRETS.get, 'cluster "primary"')
    with pytest.raises(TlsInvalid) as refused:
        with WireConnection(host, port, 5.0, tls.ssl_context(), tls_errors=True, where=tls.where,
                            with_certificate=tls.has_identity) as conn:
            conn.api_versions()
    return str(refused.value)


def test_a_broker_certificate_that_does_not_name_the_host_is_a_hostname_mismatch(certs):
    server = _Server(certs, require_client_certificate=False)
    message = _probe(TlsSettings(ca=certs.ca), server.port)
    assert message.startswith('cluster "primary": the broker\'s certificate at 127.0.0.1:')
    assert "does not name the host 127.0.0.1" in message and "tls.verifyHostname: false" in message


def test_hostname_verification_off_lets_the_same_certificate_through_to_the_request(certs):
    server = _Server(certs, require_client_certificate=True)
    message = _probe(TlsSettings(ca=certs.ca, verify_hostname=False), server.port)
    assert "requires a client certificate (mutual TLS) and none was given" in message, message


def test_a_ca_that_did_not_sign_the_broker_certificate_is_named(certs):
    server = _Server(certs, require_client_certificate=False)
    message = _probe(TlsSettings(ca=str(Path(certs.folder) / "other-ca.pem"), verify_hostname=False), server.port)
    assert "is not signed by a CA the client trusts" in message and "tls.ca" in message


def test_a_client_certificate_of_another_ca_is_refused_by_the_broker(certs, tmp_path):
    folder = Path(certs.folder)
    _tool("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(tmp_path / "k.pem"),
          "-out", str(tmp_path / "c.pem"), "-days", "2", "-subj", "/CN=mm2", cwd=folder)
    server = _Server(certs, require_client_certificate=True)
    identity = Identity(str(tmp_path / "c.pem"), str(tmp_path / "k.pem"))
    message = _probe(TlsSettings(ca=certs.ca, identity=identity, verify_hostname=False), server.port)
    assert "refused the client certificate" in message, message


def test_a_plaintext_listener_is_not_tls(certs):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def answer_garbage() -> None:
        conn, _ = listener.accept()
        conn.recv(4096)
        conn.sendall(b"\x00\x00\x00\x08" + b"\x00" * 8)  # a Kafka-framed answer, not a TLS record
        conn.close()
        listener.close()

    threading.Thread(target=answer_garbage, daemon=True).start()
    message = _probe(TlsSettings(ca=certs.ca), port)
    assert "does not answer TLS" in message or "closed the connection during the TLS handshake" in message, message
