"""The TLS dev clusters' certificates, made for real with openssl and keytool in a temporary folder
and checked with the same tools: what each file is, who signed it, for whom, until when."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from mm2spec.dev import certs as certs_module
from mm2spec.dev.certs import CLIENT_NAMES, PASSWORD_VAR, ClusterCerts, ensure_certs, ensure_cluster_certs
from mm2spec.errors import DevError


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ClusterCerts]:
    return ensure_certs(tmp_path_factory.mktemp("certs"), ("primary", "dr"))


def openssl(*args: str | Path, password: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, PASSWORD_VAR: password} if password is not None else None
    return subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True, env=env, timeout=60)


def keytool_list(store: Path, password: str) -> subprocess.CompletedProcess:
    keytool = Path(shutil.which("java") or "java").resolve().parent / "keytool"
    return subprocess.run([str(keytool), "-list", "-keystore", str(store), "-storepass:env", PASSWORD_VAR],
                          capture_output=True, text=True, env={**os.environ, PASSWORD_VAR: password}, timeout=120)


def subject(certificate: Path) -> str:
    return openssl("x509", "-in", certificate, "-noout", "-subject", "-nameopt", "RFC2253").stdout.strip()


def test_the_broker_certificate_is_signed_by_its_clusters_ca_for_the_dev_host(pair: dict[str, ClusterCerts]) -> None:
    primary = pair["primary"]
    verified = openssl("verify", "-CAfile", primary.ca, "-verify_ip", "127.0.0.1", primary.broker_keystore)
    assert verified.returncode == 0, verified.stderr
    assert openssl("verify", "-CAfile", primary.ca, "-verify_ip", "10.0.0.1", primary.broker_keystore).returncode != 0
    assert openssl("verify", "-CAfile", primary.ca, "-verify_hostname", "localhost", primary.broker_keystore).returncode == 0
    assert subject(primary.broker_keystore) == "subject=CN=broker-primary"
    assert primary.broker_principal == "User:CN=broker-primary"


def test_the_broker_keystore_is_one_pem_file_with_a_pkcs8_key_and_the_chain(pair: dict[str, ClusterCerts]) -> None:
    text = pair["dr"].broker_keystore.read_text()
    assert text.startswith("-----BEGIN PRIVATE KEY-----")
    assert text.count("-----BEGIN CERTIFICATE-----") == 2
    assert text.endswith(pair["dr"].ca.read_text())


def test_each_cluster_has_its_own_ca(pair: dict[str, ClusterCerts]) -> None:
    primary, dr = pair["primary"], pair["dr"]
    assert primary.ca.read_text() != dr.ca.read_text()
    assert openssl("verify", "-CAfile", dr.ca, primary.certificate("mm2")).returncode != 0
    assert openssl("verify", "-CAfile", dr.ca, dr.certificate("mm2")).returncode == 0


@pytest.mark.parametrize("user", CLIENT_NAMES)
def test_client_certificates_name_only_the_user_and_their_keys_are_plain_pkcs8(
        pair: dict[str, ClusterCerts], user: str) -> None:
    certs = pair["primary"]
    assert subject(certs.certificate(user)) == f"subject=CN={user}"
    assert openssl("verify", "-CAfile", certs.ca, "-purpose", "sslclient", certs.certificate(user)).returncode == 0
    assert certs.key(user).read_text().startswith("-----BEGIN PRIVATE KEY-----\n")
    # The key belongs to the certificate.
    from_key = openssl("pkey", "-in", certs.key(user), "-pubout").stdout
    from_cert = openssl("x509", "-in", certs.certificate(user), "-noout", "-pubkey").stdout
    assert from_key and from_key == from_cert
    keystore = certs.keystore(user).read_text()
    assert keystore.startswith(certs.key(user).read_text()) and keystore.count("-----BEGIN CERTIFICATE-----") == 2


def test_the_expired_certificate_is_mm2_from_the_clusters_ca_and_expired(pair: dict[str, ClusterCerts]) -> None:
    certs = pair["primary"]
    assert subject(certs.expired_certificate) == "subject=CN=mm2"
    assert openssl("x509", "-in", certs.expired_certificate, "-noout", "-checkend", "0").returncode != 0
    refused = openssl("verify", "-CAfile", certs.ca, certs.expired_certificate)
    assert refused.returncode != 0 and "certificate has expired" in refused.stdout + refused.stderr
    # Only its dates are wrong: the same check without the clock passes.
    assert openssl("verify", "-no_check_time", "-CAfile", certs.ca, certs.expired_certificate).returncode == 0


def test_the_foreign_certificate_is_mm2_from_a_ca_the_cluster_does_not_trust(pair: dict[str, ClusterCerts]) -> None:
    certs = pair["dr"]
    assert subject(certs.foreign_certificate) == "subject=CN=mm2"
    refused = openssl("verify", "-CAfile", certs.ca, certs.foreign_certificate)
    assert refused.returncode != 0 and "unable to get local issuer certificate" in refused.stdout + refused.stderr
    assert openssl("verify", "-CAfile", certs.foreign_ca, certs.foreign_certificate).returncode == 0


def test_the_stores_open_with_the_store_password_only(pair: dict[str, ClusterCerts]) -> None:
    certs = pair["primary"]
    password = certs.store_password()
    assert len(password) >= 24
    for store, entry in ((certs.truststore_p12, "trustedCertEntry"), (certs.truststore_jks, "trustedCertEntry"),
                         (certs.mm2_p12, "PrivateKeyEntry")):
        listed = keytool_list(store, password)
        assert listed.returncode == 0 and entry in listed.stdout, listed.stdout + listed.stderr
        assert keytool_list(store, "not-the-password").returncode != 0
    assert "Keystore type: JKS" in keytool_list(certs.truststore_jks, password).stdout
    assert "Keystore type: PKCS12" in keytool_list(certs.truststore_p12, password).stdout


def test_the_encrypted_mm2_key_is_mm2s_key_under_the_store_password(pair: dict[str, ClusterCerts]) -> None:
    certs = pair["primary"]
    assert certs.mm2_encrypted_key.read_text().startswith("-----BEGIN ENCRYPTED PRIVATE KEY-----")
    decrypted = openssl("pkey", "-in", certs.mm2_encrypted_key, "-passin", f"env:{PASSWORD_VAR}", "-pubout",
                        password=certs.store_password())
    assert decrypted.returncode == 0, decrypted.stderr
    assert decrypted.stdout == openssl("pkey", "-in", certs.key("mm2"), "-pubout").stdout
    wrong = openssl("pkey", "-in", certs.mm2_encrypted_key, "-passin", f"env:{PASSWORD_VAR}", password="nope")
    assert wrong.returncode != 0


def test_keys_and_the_password_are_readable_by_their_owner_only(pair: dict[str, ClusterCerts]) -> None:
    certs = pair["primary"]
    private = [certs.ca_key, certs.broker_keystore, certs.mm2_encrypted_key, certs.mm2_p12, certs.expired_key,
               certs.foreign_key, certs.password_file, *map(certs.key, CLIENT_NAMES), *map(certs.keystore, CLIENT_NAMES)]
    for path in private:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE(certs.folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(certs.ca.stat().st_mode) == 0o644
    assert all(path.is_file() for path in certs.files().values())
    assert set(certs.to_json().values()) == {str(p) for p in certs.folder.iterdir()}


def test_certificates_are_reused_until_one_is_due_and_then_all_are_made_anew(tmp_path: Path) -> None:
    made = ensure_cluster_certs(tmp_path / "primary", "primary")
    ca, password = made.ca.read_text(), made.store_password()
    again = ensure_cluster_certs(tmp_path / "primary", "primary")
    assert again == made and again.ca.read_text() == ca and again.store_password() == password

    # A client certificate that no longer lasts a day: everything is made again, with a new CA.
    shutil.copy(made.expired_certificate, made.certificate("mm2"))
    renewed = ensure_cluster_certs(tmp_path / "primary", "primary")
    assert renewed.ca.read_text() != ca and renewed.store_password() != password
    assert openssl("verify", "-CAfile", renewed.ca, renewed.certificate("mm2")).returncode == 0

    # A missing file too.
    renewed.truststore_jks.unlink()
    assert ensure_cluster_certs(tmp_path / "primary", "primary").truststore_jks.is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["primary"]  # no scratch folder left behind


def test_passwords_never_appear_on_a_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commands: list[list[str]] = []
    real_run = subprocess.run

    def recording(command, *args, **kwargs):
        commands.append(list(command))
        return real_run(command, *args, **kwargs)

    monkeypatch.setattr(certs_module.subprocess, "run", recording)
    certs = ensure_cluster_certs(tmp_path / "dr", "dr")
    password = certs.store_password()
    assert any(arg == f"env:{PASSWORD_VAR}" for command in commands for arg in command)
    assert not any(password in arg for command in commands for arg in command)


def test_only_the_dev_users_have_client_certificates(tmp_path: Path) -> None:
    with pytest.raises(DevError, match="no client certificate for 'bob'"):
        ClusterCerts("primary", tmp_path).certificate("bob")
