"""Certificates of the TLS dev clusters (``mm2spec dev up --tls``): a private CA per cluster, made
with the ``openssl`` and ``keytool`` command-line tools, no Python crypto library.

Each cluster gets its own CA, so a certificate of one cluster is refused by the other, as between two
real data centres. The folder also holds the cases a TLS test needs besides the good ones: a client
certificate that has expired, one signed by a CA the cluster does not trust, and the same client key
in every container a client may be given (PEM, encrypted PKCS#8, PKCS12, JKS truststore).

Passwords reach the tools through the environment (``-passout env:VAR``, ``-storepass:env VAR``),
never the command line, where any local user could read them in ``/proc``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from mm2spec.components import Components, components
from mm2spec.errors import ComponentMissing, DevError
from mm2spec.runtime.process import HOST

#: The client certificates every cluster's CA signs, one per dev user: ``admin`` is a super user,
#: ``mm2`` and ``intruder`` have no ACLs (``mm2`` gets them from a spec; ``intruder`` never does).
CLIENT_NAMES = ("admin", "mm2", "intruder")
#: How long the CA and the certificates it signs are valid; ``ensure_cluster_certs`` makes new ones
#: when any expires within ``RENEW_BEFORE_S``.
VALID_DAYS = 30
RENEW_BEFORE_S = 24 * 3600
#: The environment variable the store password is handed to openssl and keytool in.
PASSWORD_VAR = "MM2SPEC_DEV_STORE_PASSWORD"
#: One openssl or keytool run: either is done in well under a second (keytool starts a JVM).
TOOL_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class ClusterCerts:
    """Where the certificates of one dev cluster are: every path is derived from ``folder``.

    Private keys and every file holding one are mode 0600, as is the store password file."""

    cluster: str
    """The cluster's name (``primary``, ``dr``): it names the CA and the broker's subject."""
    folder: Path

    @property
    def ca(self) -> Path:
        """The cluster's CA certificate (PEM): the truststore of its broker and of its clients."""
        return self.folder / "ca.pem"

    @property
    def ca_key(self) -> Path:
        return self.folder / "ca.key"

    @property
    def broker_keystore(self) -> Path:
        """The broker's PKCS#8 key, certificate and CA in one PEM file (``ssl.keystore.type=PEM``)."""
        return self.folder / "broker-keystore.pem"

    @property
    def broker_principal(self) -> str:
        """The broker's own principal when it connects as a client (inter-broker on SSL)."""
        return f"User:CN=broker-{self.cluster}"

    def certificate(self, user: str) -> Path:
        """``user``'s client certificate (subject ``CN=<user>``), PEM."""
        return self.folder / f"{_client(user)}.pem"

    def key(self, user: str) -> Path:
        """``user``'s unencrypted PKCS#8 private key (``-----BEGIN PRIVATE KEY-----``)."""
        return self.folder / f"{_client(user)}.key"

    def keystore(self, user: str) -> Path:
        """``user``'s key, certificate and CA in one PEM file: a Java client's ``ssl.keystore.location``."""
        return self.folder / f"{_client(user)}-keystore.pem"

    @property
    def mm2_encrypted_key(self) -> Path:
        """``mm2``'s key as encrypted PKCS#8 (``-----BEGIN ENCRYPTED PRIVATE KEY-----``), store password."""
        return self.folder / "mm2-encrypted.key"

    @property
    def mm2_p12(self) -> Path:
        """``mm2``'s key, certificate and CA as a PKCS12 keystore, store password."""
        return self.folder / "mm2.p12"

    @property
    def truststore_p12(self) -> Path:
        """The CA as a PKCS12 truststore, store password."""
        return self.folder / "truststore.p12"

    @property
    def truststore_jks(self) -> Path:
        """The CA as a JKS truststore, store password."""
        return self.folder / "truststore.jks"

    @property
    def expired_certificate(self) -> Path:
        """A certificate for ``CN=mm2`` signed by this CA whose validity ended yesterday."""
        return self.folder / "expired.pem"

    @property
    def expired_key(self) -> Path:
        return self.folder / "expired.key"

    @property
    def foreign_certificate(self) -> Path:
        """A certificate for ``CN=mm2`` signed by a throwaway CA this cluster does not trust."""
        return self.folder / "foreign.pem"

    @property
    def foreign_key(self) -> Path:
        return self.folder / "foreign.key"

    @property
    def foreign_ca(self) -> Path:
        """The throwaway CA's certificate (its key is not kept)."""
        return self.folder / "foreign-ca.pem"

    @property
    def password_file(self) -> Path:
        """The store password of this folder's encrypted key, PKCS12 and JKS files (mode 0600)."""
        return self.folder / "store-password"

    def store_password(self) -> str:
        return self.password_file.read_text().strip()

    def files(self) -> dict[str, Path]:
        """Every file of the folder by a stable name (the state file records them)."""
        named = {
            "ca": self.ca,
            "ca_key": self.ca_key,
            "broker_keystore": self.broker_keystore,
            "mm2_encrypted_key": self.mm2_encrypted_key,
            "mm2_p12": self.mm2_p12,
            "truststore_p12": self.truststore_p12,
            "truststore_jks": self.truststore_jks,
            "expired_certificate": self.expired_certificate,
            "expired_key": self.expired_key,
            "foreign_certificate": self.foreign_certificate,
            "foreign_key": self.foreign_key,
            "foreign_ca": self.foreign_ca,
            "password_file": self.password_file,
        }
        for user in CLIENT_NAMES:
            named |= {f"{user}_certificate": self.certificate(user), f"{user}_key": self.key(user),
                      f"{user}_keystore": self.keystore(user)}
        return named

    def to_json(self) -> dict[str, str]:
        return {name: str(path) for name, path in self.files().items()}


def ensure_cluster_certs(folder: Path, cluster: str, *, found: Components | None = None) -> ClusterCerts:
    """The certificates of ``cluster`` in ``folder``: those there when complete and none expires within
    a day, otherwise all made anew (a new CA, a new store password). ComponentMissing without openssl
    or keytool."""
    certs = ClusterCerts(cluster, Path(folder).resolve())
    tools = _Tools.find(found)
    if _usable(certs, tools):
        return certs
    # Made in a scratch folder and moved in whole: an interrupted run never leaves a folder that
    # looks complete, and a half-made one is simply made again.
    certs.folder.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{cluster}-certs-", dir=certs.folder.parent))
    try:
        _make(ClusterCerts(cluster, scratch), tools)
        shutil.rmtree(certs.folder, ignore_errors=True)
        scratch.rename(certs.folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return certs


def ensure_certs(root: Path, clusters: tuple[str, ...], *, found: Components | None = None) -> dict[str, ClusterCerts]:
    """``ensure_cluster_certs`` for each cluster, in ``root/<cluster>``."""
    return {name: ensure_cluster_certs(Path(root) / name, name, found=found) for name in clusters}


class _Tools:
    """The openssl and keytool binaries, with the one way both are run."""

    def __init__(self, openssl: str, keytool: str):
        self.openssl = openssl
        self.keytool = keytool

    @classmethod
    def find(cls, found: Components | None) -> _Tools:
        openssl = shutil.which("openssl")
        if not openssl:
            raise ComponentMissing("no openssl command found: the TLS dev clusters need it to make their "
                                   "certificates (apt-get install openssl)")
        java = Path((found or components()).java()).resolve()
        keytool = java.parent / "keytool"
        if not keytool.is_file():
            keytool = Path(shutil.which("keytool") or keytool)
        if not keytool.is_file():
            raise ComponentMissing(f"no keytool next to {java} or on PATH: install a full JDK 17 or newer")
        return cls(openssl, str(keytool))

    def run(self, tool: str, *args: str | Path, password: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        env = {**os.environ, PASSWORD_VAR: password} if password is not None else None
        command = [tool, *map(str, args)]
        # umask 077: a key is never readable by others, not even between its creation and a chmod.
        done = subprocess.run(command, capture_output=True, text=True, env=env, umask=0o077, timeout=TOOL_TIMEOUT_S)
        if check and done.returncode != 0:
            name = Path(tool).name
            raise DevError(f"{name} {' '.join(command[1:3])} failed (exit {done.returncode}): "
                           f"{(done.stderr or done.stdout).strip()[-600:]}")
        return done

    def valid_for(self, certificate: Path, seconds: int) -> bool:
        return self.run(self.openssl, "x509", "-noout", "-checkend", str(seconds), "-in", certificate,
                        check=False).returncode == 0


def _usable(certs: ClusterCerts, tools: _Tools) -> bool:
    if not all(path.is_file() for path in certs.files().values()):
        return False
    lasting = [certs.ca, certs.broker_keystore, certs.foreign_certificate, *map(certs.certificate, CLIENT_NAMES)]
    return all(tools.valid_for(path, RENEW_BEFORE_S) for path in lasting)


def _make(certs: ClusterCerts, tools: _Tools) -> None:
    folder = certs.folder
    work = folder / "work"
    work.mkdir()
    config = work / "openssl.cnf"
    config.write_text(_openssl_config(work))
    password = secrets.token_urlsafe(24)
    certs.password_file.write_text(password + "\n")
    certs.password_file.chmod(0o600)

    _new_key(tools, certs.ca_key)
    _new_ca(tools, config, certs.ca_key, f"mm2spec dev CA {certs.cluster}", certs.ca)

    broker_key, broker_cert = work / "broker.key", work / "broker.pem"
    _new_key(tools, broker_key)
    _sign(tools, config, certs.ca, certs.ca_key, broker_key, f"broker-{certs.cluster}", "server_ext", broker_cert)
    _concatenate(certs.broker_keystore, broker_key, broker_cert, certs.ca)

    for user in CLIENT_NAMES:
        _new_key(tools, certs.key(user))
        _sign(tools, config, certs.ca, certs.ca_key, certs.key(user), user, "client_ext", certs.certificate(user))
        _concatenate(certs.keystore(user), certs.key(user), certs.certificate(user), certs.ca)

    tools.run(tools.openssl, "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", certs.key("mm2"),
              "-out", certs.mm2_encrypted_key, "-passout", f"env:{PASSWORD_VAR}", password=password)
    tools.run(tools.openssl, "pkcs12", "-export", "-name", "mm2", "-in", certs.certificate("mm2"), "-inkey", certs.key("mm2"),
              "-certfile", certs.ca, "-out", certs.mm2_p12, "-passout", f"env:{PASSWORD_VAR}", password=password)
    for store, kind in ((certs.truststore_p12, "PKCS12"), (certs.truststore_jks, "JKS")):
        tools.run(tools.keytool, "-importcert", "-noprompt", "-alias", "ca", "-file", certs.ca, "-keystore", store,
                  "-storetype", kind, "-storepass:env", PASSWORD_VAR, password=password)

    _new_key(tools, certs.expired_key)
    _sign_expired(tools, config, certs, work)

    # The throwaway CA: only its certificate is kept, to show what signed the foreign certificate.
    foreign_ca_key = work / "foreign-ca.key"
    _new_key(tools, foreign_ca_key)
    _new_ca(tools, config, foreign_ca_key, f"mm2spec dev foreign CA {certs.cluster}", certs.foreign_ca)
    _new_key(tools, certs.foreign_key)
    _sign(tools, config, certs.foreign_ca, foreign_ca_key, certs.foreign_key, "mm2", "client_ext", certs.foreign_certificate)

    shutil.rmtree(work)
    for path in folder.iterdir():
        # Certificates are public; everything else holds a key or the password.
        public = path.suffix == ".pem" and not path.name.endswith("-keystore.pem") and path != certs.broker_keystore
        path.chmod(0o644 if public else 0o600)
    folder.chmod(0o700)


def _new_key(tools: _Tools, path: Path) -> None:
    """An EC P-256 key, written as unencrypted PKCS#8 (``-----BEGIN PRIVATE KEY-----``)."""
    tools.run(tools.openssl, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path)


def _new_ca(tools: _Tools, config: Path, key: Path, common_name: str, out: Path) -> None:
    tools.run(tools.openssl, "req", "-x509", "-new", "-config", config, "-key", key, "-subj", f"/CN={common_name}",
              "-days", str(VALID_DAYS), "-sha256", "-extensions", "ca_ext", "-set_serial", _serial(), "-out", out)


def _sign(tools: _Tools, config: Path, ca: Path, ca_key: Path, key: Path, common_name: str, extensions: str,
          out: Path) -> None:
    """A certificate for ``key`` with subject ``CN=<common_name>`` only, signed by the CA ``ca``."""
    request = config.parent / f"{out.stem}.csr"
    tools.run(tools.openssl, "req", "-new", "-config", config, "-key", key, "-subj", f"/CN={common_name}", "-out", request)
    tools.run(tools.openssl, "x509", "-req", "-in", request, "-CA", ca, "-CAkey", ca_key,
              "-set_serial", _serial(), "-days", str(VALID_DAYS), "-sha256", "-extfile", config, "-extensions", extensions,
              "-out", out)


def _sign_expired(tools: _Tools, config: Path, certs: ClusterCerts, work: Path) -> None:
    """``CN=mm2`` valid from 30 days ago until yesterday. ``openssl x509 -req`` takes explicit dates only
    from OpenSSL 3.4 (``-not_before``/``-not_after``); ``openssl ca -startdate/-enddate`` takes them in
    every version, so it is the one way used."""
    request = work / "expired.csr"
    tools.run(tools.openssl, "req", "-new", "-config", config, "-key", certs.expired_key, "-subj", "/CN=mm2",
              "-out", request)
    (work / "index.txt").write_text("")
    (work / "serial").write_text(_serial()[2:] + "\n")
    now = datetime.now(timezone.utc)
    tools.run(tools.openssl, "ca", "-batch", "-config", config, "-name", "expired_ca", "-cert", certs.ca,
              "-keyfile", certs.ca_key, "-in", request, "-out", certs.expired_certificate, "-notext",
              "-startdate", _asn1_time(now - timedelta(days=VALID_DAYS)), "-enddate", _asn1_time(now - timedelta(days=1)),
              "-extensions", "client_ext")


def _openssl_config(work: Path) -> str:
    # The broker's certificate is also its client certificate (inter-broker on the SSL listener), so
    # it allows both uses; the SAN is the one address every dev process uses.
    return f"""\
[ req ]
distinguished_name = dn
[ dn ]
[ ca_ext ]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[ server_ext ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth, clientAuth
subjectAltName = DNS:localhost, IP:{HOST}
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[ client_ext ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[ expired_ca ]
database = {work}/index.txt
serial = {work}/serial
new_certs_dir = {work}
default_md = sha256
policy = common_name_only
unique_subject = no
[ common_name_only ]
commonName = supplied
"""


def _concatenate(out: Path, *parts: Path) -> None:
    out.write_text("".join(part.read_text() for part in parts))


def _serial() -> str:
    # Positive, 63 random bits: every certificate of a run gets its own serial.
    return f"0x{secrets.randbits(63) | 1 << 62:016x}"


def _asn1_time(moment: datetime) -> str:
    return moment.strftime("%Y%m%d%H%M%SZ")


def _client(user: str) -> str:
    if user not in CLIENT_NAMES:
        raise DevError(f"the TLS dev clusters have no client certificate for {user!r} (known: {', '.join(CLIENT_NAMES)})")
    return user
