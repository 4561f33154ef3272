"""mm2spec.mm2.tls, the one translation of a cluster's TLS settings, against real keys and stores.

Every file is made with the ``openssl`` and ``keytool`` programs in a temporary folder (``make_certs``,
also used by test_tls_render.py): a private CA, client certificates and keys in each form a spec may
give (PEM PKCS#8, encrypted PKCS#8, PKCS#1, PKCS#12 and JKS keystores, PKCS#12 and JKS truststores)
and an expired certificate. Passwords are recognisable values, so a test can assert that no message
ever shows one.
"""

from __future__ import annotations

import os
import re
import shutil
import ssl
import subprocess
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from mm2spec.dev.certs import ensure_cluster_certs
from mm2spec.errors import SecretMissing, TlsInvalid
from mm2spec.mm2.tls import (DIR_PROVIDER, ClientTls, Identity, Store, TlsSettings, java_properties, resolve_references,
                             uses_dir_provider)

STORE_PASSWORD = "Store-Pass-7731"
KEY_PASSWORD = "Key-Pass-4412"
WRONG_PASSWORD = "Wrong-Pass-9906"
SECRETS = {"STORE_PASSWORD": STORE_PASSWORD, "KEY_PASSWORD": KEY_PASSWORD, "WRONG_PASSWORD": WRONG_PASSWORD}
"""Secret name -> value, the lookup every ClientTls of these tests reads."""
WHERE = 'cluster "primary"'



_FILES = {"ca": "ca.pem", "ca_key": "ca.key", "cert": "mm2.pem", "key": "mm2.key", "encrypted_key": "mm2.enc.key",
          "pkcs1_key": "mm2.rsa.key", "admin_cert": "admin.pem", "admin_key": "admin.key", "truststore_p12": "trust.p12",
          "truststore_jks": "trust.jks", "keystore_p12": "mm2.p12", "keystore_jks": "mm2.jks",
          "keystore_jks_key_password": "mm2-kp.jks", "expired_cert": "expired.pem", "expired_key": "expired.key"}


@dataclass(frozen=True)
class Certs:
    """The files ``make_certs`` writes into ``folder`` (absolute paths)."""

    folder: Path
    ca: str
    ca_key: str
    cert: str
    """The mirror's client certificate (CN=mm2), signed by the CA."""
    key: str
    """Its key, unencrypted PKCS#8."""
    encrypted_key: str
    """The same key, encrypted PKCS#8 (password ``KEY_PASSWORD``)."""
    pkcs1_key: str
    admin_cert: str
    admin_key: str
    truststore_p12: str
    truststore_jks: str
    keystore_p12: str
    keystore_jks: str
    keystore_jks_key_password: str
    """A JKS keystore whose key has its own password (``KEY_PASSWORD``)."""
    expired_cert: str
    expired_key: str


def _tool(*args: str, cwd: Path) -> None:
    env = {**os.environ, "P": STORE_PASSWORD, "KP": KEY_PASSWORD}
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"{' '.join(args)}: {done.stdout}{done.stderr}"


def make_certs(folder: Path) -> Certs:
    """A CA, the mirror's and the admin's client certificates and every container of the mirror's key."""
    folder.mkdir(parents=True, exist_ok=True)
    run = lambda *args: _tool(*args, cwd=folder)  # noqa: E731
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=test-ca")
    for name in ("mm2", "admin"):
        run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", f"/CN={name}")
    for serial, name in enumerate(("mm2", "admin"), start=2):
        run("openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial",
            str(serial), "-days", "2", "-out", f"{name}.pem")
    # The expired certificate as the dev clusters make theirs (dates in the past need `openssl ca`).
    dev = ensure_cluster_certs(folder / "dev", "t")
    shutil.copy(dev.expired_certificate, folder / "expired.pem")
    shutil.copy(dev.expired_key, folder / "expired.key")
    run("openssl", "pkcs8", "-topk8", "-in", "mm2.key", "-out", "mm2.enc.key", "-passout", "env:KP")
    run("openssl", "rsa", "-in", "mm2.key", "-traditional", "-out", "mm2.rsa.key")
    for kind, name in (("PKCS12", "trust.p12"), ("JKS", "trust.jks")):
        run("keytool", "-importcert", "-storetype", kind, "-keystore", name, "-storepass:env", "P", "-noprompt",
            "-alias", "ca", "-file", "ca.pem")
    run("openssl", "pkcs12", "-export", "-in", "mm2.pem", "-inkey", "mm2.key", "-certfile", "ca.pem", "-name", "mm2",
        "-out", "mm2.p12", "-passout", "env:P")
    run("keytool", "-importkeystore", "-noprompt", "-srckeystore", "mm2.p12", "-srcstoretype", "PKCS12",
        "-srcstorepass:env", "P", "-destkeystore", "mm2.jks", "-deststoretype", "JKS", "-deststorepass:env", "P")
    run("keytool", "-importkeystore", "-noprompt", "-srckeystore", "mm2.p12", "-srcstoretype", "PKCS12",
        "-srcstorepass:env", "P", "-srcalias", "mm2", "-destkeystore", "mm2-kp.jks", "-deststoretype", "JKS",
        "-deststorepass:env", "P", "-destkeypass:env", "KP")
    return Certs(folder, **{field: str(folder / name) for field, name in _FILES.items()})


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def client(settings: TlsSettings, admin: bool = False) -> ClientTls:
    """The settings as every client gets them: Java properties (references), then ClientTls."""
    return ClientTls(dict(java_properties(settings, admin=admin)), SECRETS.get, WHERE)


def pem_body(text: str) -> str:
    """The base64 of the first certificate of ``text``, whitespace removed."""
    match = re.search(r"-----BEGIN CERTIFICATE-----(.+?)-----END CERTIFICATE-----", text, re.S)
    assert match, text[:200]
    return "".join(match.group(1).split())


def refusal(settings: TlsSettings) -> str:
    """``check()``'s message for settings that cannot work; asserts it shows no password."""
    with pytest.raises(TlsInvalid) as caught:
        client(settings).check()
    message = str(caught.value)
    assert message.startswith(WHERE)
    for value in SECRETS.values():
        assert value not in message
    return message


# ------------------------------------------------------------------------------ Java properties

def test_java_properties_of_pem_files_name_references_never_values(certs):
    settings = TlsSettings(ca=certs.ca, identity=Identity(certs.cert, certs.encrypted_key, "KEY_PASSWORD"),
                           admin=Identity(certs.admin_cert, certs.admin_key))
    props = dict(java_properties(settings))
    folder = str(certs.folder)
    assert props == {"ssl.truststore.type": "PEM", "ssl.truststore.location": certs.ca, "ssl.keystore.type": "PEM",
                     "ssl.keystore.certificate.chain": "${dir:" + folder + ":mm2.pem}",
                     "ssl.keystore.key": "${dir:" + folder + ":mm2.enc.key}", "ssl.key.password": "${env:KEY_PASSWORD}"}
    assert uses_dir_provider(props)
    admin = dict(java_properties(settings, admin=True))
    assert admin["ssl.keystore.certificate.chain"] == "${dir:" + folder + ":admin.pem}"
    assert "ssl.key.password" not in admin
    assert DIR_PROVIDER[0][0] == "config.providers.dir.class"


def test_java_properties_of_stores_and_no_hostname_verification(certs):
    settings = TlsSettings(truststore=Store(certs.truststore_p12, "PKCS12", "STORE_PASSWORD"),
                           identity=Identity(keystore=Store(certs.keystore_jks, "JKS", "STORE_PASSWORD")),
                           verify_hostname=False)
    props = dict(java_properties(settings))
    assert props == {"ssl.truststore.type": "PKCS12", "ssl.truststore.location": certs.truststore_p12,
                     "ssl.truststore.password": "${env:STORE_PASSWORD}", "ssl.keystore.type": "JKS",
                     "ssl.keystore.location": certs.keystore_jks, "ssl.keystore.password": "${env:STORE_PASSWORD}",
                     "ssl.key.password": "${env:STORE_PASSWORD}", "ssl.endpoint.identification.algorithm": ""}
    assert not uses_dir_provider(props)
    assert java_properties(None) == []


def test_references_resolve_to_secrets_and_file_contents(certs):
    text = "${env:KEY_PASSWORD} ${dir:" + str(certs.folder) + ":mm2.pem}"
    resolved = resolve_references(text, SECRETS.get, WHERE)
    assert resolved.startswith(KEY_PASSWORD + " -----BEGIN CERTIFICATE-----")
    with pytest.raises(SecretMissing, match="NOT_SET"):
        resolve_references("${env:NOT_SET}", SECRETS.get, WHERE)
    with pytest.raises(TlsInvalid, match="tls.key: .*gone.key does not exist"):
        resolve_references("${dir:" + str(certs.folder) + ":gone.key}", SECRETS.get, WHERE, "tls.key")


# -------------------------------------------------------------------------------------- librdkafka

def test_librdkafka_pem_files(certs):
    conf = client(TlsSettings(ca=certs.ca, identity=Identity(certs.cert, certs.key))).librdkafka()
    assert set(conf) == {"ssl.ca.location", "ssl.certificate.pem", "ssl.key.pem"}
    assert conf["ssl.ca.location"] == certs.ca
    assert conf["ssl.certificate.pem"] == Path(certs.cert).read_text()
    assert conf["ssl.key.pem"] == Path(certs.key).read_text()
    encrypted = client(TlsSettings(ca=certs.ca, identity=Identity(certs.cert, certs.encrypted_key, "KEY_PASSWORD")))
    assert encrypted.librdkafka()["ssl.key.password"] == KEY_PASSWORD


@pytest.mark.parametrize("store, kind", [("truststore_p12", "PKCS12"), ("truststore_jks", "JKS")])
def test_librdkafka_truststore_becomes_ca_pem(certs, store, kind):
    conf = client(TlsSettings(truststore=Store(getattr(certs, store), kind, "STORE_PASSWORD"))).librdkafka()
    assert set(conf) == {"ssl.ca.pem"}
    assert pem_body(conf["ssl.ca.pem"]) == pem_body(Path(certs.ca).read_text())


def test_librdkafka_pkcs12_keystore_is_given_as_it_is(certs):
    settings = TlsSettings(ca=certs.ca, identity=Identity(keystore=Store(certs.keystore_p12, "PKCS12", "STORE_PASSWORD")))
    conf = client(settings).librdkafka()
    assert conf == {"ssl.ca.location": certs.ca, "ssl.keystore.location": certs.keystore_p12,
                    "ssl.keystore.password": STORE_PASSWORD}


@pytest.mark.parametrize("store, key_secret", [("keystore_jks", None), ("keystore_jks_key_password", "KEY_PASSWORD")])
def test_librdkafka_jks_keystore_is_converted_to_pkcs12(certs, store, key_secret):
    settings = TlsSettings(ca=certs.ca, identity=Identity(key_password_secret=key_secret,
                                                          keystore=Store(getattr(certs, store), "JKS", "STORE_PASSWORD")))
    conf = client(settings).librdkafka()
    converted = conf["ssl.keystore.location"]
    assert converted != getattr(certs, store) and converted.endswith(".p12")
    assert conf["ssl.keystore.password"] == STORE_PASSWORD
    assert os.stat(Path(converted).parent).st_mode & 0o077 == 0  # a private folder
    out = subprocess.run(["openssl", "pkcs12", "-in", converted, "-nodes", "-passin", "env:P"], capture_output=True,
                         text=True, env={**os.environ, "P": STORE_PASSWORD}, timeout=60)
    assert out.returncode == 0, out.stderr
    assert pem_body(out.stdout) == pem_body(Path(certs.cert).read_text()) and "PRIVATE KEY" in out.stdout


def test_hostname_verification_off_in_each_family(certs):
    tls = client(TlsSettings(ca=certs.ca, verify_hostname=False))
    assert tls.librdkafka() == {"ssl.ca.location": certs.ca, "ssl.endpoint.identification.algorithm": "none"}
    assert tls.ssl_context().check_hostname is False
    assert client(TlsSettings(ca=certs.ca)).ssl_context().check_hostname is True


# ----------------------------------------------------------------------------------- ssl context

@pytest.mark.parametrize("identity", [
    lambda c: Identity(c.cert, c.key),
    lambda c: Identity(c.cert, c.encrypted_key, "KEY_PASSWORD"),
    lambda c: Identity(keystore=Store(c.keystore_p12, "PKCS12", "STORE_PASSWORD")),
    lambda c: Identity(keystore=Store(c.keystore_jks, "JKS", "STORE_PASSWORD")),
    lambda c: Identity(keystore=Store(c.keystore_jks_key_password, "JKS", "STORE_PASSWORD"), key_password_secret="KEY_PASSWORD"),
], ids=["pem", "encrypted-pem", "pkcs12", "jks", "jks-key-password"])
def test_ssl_context_loads_every_form(certs, identity):
    context = client(TlsSettings(truststore=Store(certs.truststore_jks, "JKS", "STORE_PASSWORD"),
                                 identity=identity(certs))).ssl_context()
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName", "test-ca"),),)]


def test_the_admin_identity_is_checked_when_asked_for(certs):
    settings = TlsSettings(ca=certs.ca, identity=Identity(certs.cert, certs.pkcs1_key),
                           admin=Identity(certs.admin_cert, certs.admin_key))
    client(settings, admin=True).check()
    with pytest.raises(TlsInvalid, match="PKCS#1"):
        client(settings).check()


# -------------------------------------------------------------------------------------- refusals

def test_a_missing_file_names_the_field_and_the_path(certs):
    gone = str(certs.folder / "gone.pem")
    assert refusal(TlsSettings(ca=gone)) == f"{WHERE}: tls.ca: {gone} does not exist"
    assert refusal(TlsSettings(ca=certs.ca, identity=Identity(certs.cert, gone))) == f"{WHERE}: tls.key: {gone} does not exist"
    assert refusal(TlsSettings(ca=certs.ca, identity=Identity(gone, certs.key))) == \
        f"{WHERE}: tls.certificate: {gone} does not exist"
    assert f"tls.truststore.path: {gone} does not exist" in refusal(TlsSettings(truststore=Store(gone, "JKS", "STORE_PASSWORD")))
    assert f"tls.keystore.path: {gone} does not exist" in refusal(
        TlsSettings(identity=Identity(keystore=Store(gone, "PKCS12", "STORE_PASSWORD"))))


def test_a_pkcs1_key_is_refused_with_the_conversion(certs):
    message = refusal(TlsSettings(ca=certs.ca, identity=Identity(certs.cert, certs.pkcs1_key)))
    assert f"tls.key: {certs.pkcs1_key} is a PKCS#1/SEC1 key" in message
    assert f"openssl pkcs8 -topk8 -in {certs.pkcs1_key}" in message


def test_a_jks_store_given_as_ca_is_refused(certs):
    message = refusal(TlsSettings(ca=certs.truststore_jks))
    assert f"tls.ca: {certs.truststore_jks} is a JKS store, not PEM" in message
    assert "tls.truststore" in message
    assert "is binary" in refusal(TlsSettings(ca=certs.truststore_p12))


@pytest.mark.parametrize("settings", [
    lambda c: TlsSettings(truststore=Store(c.truststore_p12, "PKCS12", "WRONG_PASSWORD")),
    lambda c: TlsSettings(truststore=Store(c.truststore_jks, "JKS", "WRONG_PASSWORD")),
    lambda c: TlsSettings(ca=c.ca, identity=Identity(keystore=Store(c.keystore_p12, "PKCS12", "WRONG_PASSWORD"))),
    lambda c: TlsSettings(ca=c.ca, identity=Identity(keystore=Store(c.keystore_jks, "JKS", "WRONG_PASSWORD"))),
], ids=["pkcs12-truststore", "jks-truststore", "pkcs12-keystore", "jks-keystore"])
def test_a_wrong_store_password_is_named(certs, settings):
    assert "the password does not open it" in refusal(settings(certs))


def test_a_wrong_key_password_is_named(certs):
    pem = TlsSettings(ca=certs.ca, identity=Identity(certs.cert, certs.encrypted_key, "WRONG_PASSWORD"))
    assert refusal(pem) == f"{WHERE}: client certificate and key: the key's password is wrong (tls.keyPasswordSecret)"
    jks = TlsSettings(ca=certs.ca, identity=Identity(key_password_secret="WRONG_PASSWORD",
                                                     keystore=Store(certs.keystore_jks_key_password, "JKS", "STORE_PASSWORD")))
    assert "the password does not open it" in refusal(jks)
    unnamed = TlsSettings(ca=certs.ca, identity=Identity(keystore=Store(certs.keystore_jks_key_password, "JKS",
                                                                        "STORE_PASSWORD")))
    assert "its key has a password of its own: name its secret in tls.keyPasswordSecret" in refusal(unnamed)


def test_key_password_and_key_encryption_must_agree(certs):
    # Kafka's Java PEM reader decrypts the key when given a password, and only then.
    assert "tls.key is encrypted" in refusal(TlsSettings(ca=certs.ca, identity=Identity(certs.cert, certs.encrypted_key)))
    assert "tls.key is not encrypted" in refusal(TlsSettings(ca=certs.ca,
                                                             identity=Identity(certs.cert, certs.key, "KEY_PASSWORD")))


def test_an_expired_client_certificate_is_refused(certs):
    message = refusal(TlsSettings(ca=certs.ca, identity=Identity(certs.expired_cert, certs.expired_key)))
    yesterday = (datetime.now(timezone.utc) - timedelta(days=1)).strftime("%Y-%m-%d")
    assert message.startswith(f"{WHERE}: the client certificate expired on {yesterday}")
    assert message.endswith("renew it")


def test_a_key_of_another_certificate_is_refused(certs):
    message = refusal(TlsSettings(ca=certs.ca, identity=Identity(certs.cert, certs.admin_key)))
    assert "the key does not belong to the certificate" in message


def test_a_truststore_given_as_keystore_is_refused(certs):
    message = refusal(TlsSettings(ca=certs.ca, identity=Identity(keystore=Store(certs.truststore_p12, "PKCS12",
                                                                                "STORE_PASSWORD"))))
    assert "holds no private key" in message


def test_a_secret_not_set_is_named_not_guessed(certs):
    tls = ClientTls(dict(java_properties(TlsSettings(truststore=Store(certs.truststore_p12, "PKCS12", "UNSET_SECRET")))),
                    SECRETS.get, WHERE)
    with pytest.raises(SecretMissing, match="UNSET_SECRET is not set"):
        tls.check()
