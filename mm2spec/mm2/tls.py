"""A cluster's TLS settings in each client family's own form: the one place they are translated.

The spec's ``clusters.<alias>.tls`` section is a ``TlsSettings``. Its canonical form is Kafka's own
vocabulary, the Java client properties (``java_properties``): what the Connect worker, the MM2
connectors and the Spark job's JVM source and writer are given, with passwords as ``${env:NAME}``
references and a PEM key and certificate chain as ``${dir:FOLDER:FILE}`` references, so rendered
files never hold a secret. Every other family is derived from those properties by ``ClientTls``,
after the references are resolved:

- ``ClientTls.librdkafka()``: confluent-kafka settings (mm2spec's own clients, the Spark job's
  Python clients). librdkafka reads PEM only for CAs and PKCS#12 only for keystores: a JKS or PKCS#12
  truststore and a JKS keystore are converted with ``keytool`` (any Java has it), in memory or in a
  private temporary folder removed at exit.
- ``ClientTls.ssl_context()``: a Python ``ssl.SSLContext`` for the wire-protocol client
  (``mm2spec.live.wire``), which also probes a TLS cluster before anything else talks to it.
- ``ClientTls.check()``: what can be known without the network: files present and readable, a PEM
  where PEM is needed, PKCS#8 keys (Kafka's Java PEM reader takes no other form), client certificates
  not expired, store and key passwords that open what they protect. Each problem is a ``TlsInvalid``
  naming the cluster, the spec field and the cause.

Stdlib only (the Spark job ships this module to its executors); ``keytool`` and ``openssl`` are run
as programs, store passwords passed to them in their environment, never on a command line.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import ssl
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from mm2spec.errors import SecretMissing, TlsInvalid

SecretLookup = Callable[[str], "str | None"]

STORE_TYPES = ("JKS", "PKCS12")
"""Store types a spec may name for a truststore or keystore (PEM files are given as files)."""
_STORE_SUFFIXES = {".jks": "JKS", ".p12": "PKCS12", ".pfx": "PKCS12"}
DIR_PROVIDER = (("config.providers.dir.class", "org.apache.kafka.common.config.provider.DirectoryConfigProvider"),)
"""The config provider the ``${dir:FOLDER:FILE}`` references of a PEM client identity need."""

_ENV_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
_DIR_REF = re.compile(r"\$\{dir:([^:}]+):([^}]+)\}")
_PEM_CERT = re.compile(r"-----BEGIN CERTIFICATE-----[A-Za-z0-9+/=\s]+?-----END CERTIFICATE-----")
_NOT_PKCS8 = re.compile(r"-----BEGIN (RSA|EC|DSA) PRIVATE KEY-----")
_JKS_MAGIC = b"\xfe\xed\xfe\xed"
_TOOL_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Store:
    """A Java key or trust store (``tls.truststore``, ``tls.keystore``)."""

    path: str
    """The store's file (absolute once compiled: relative paths are the spec file's)."""
    type: str
    """``JKS`` or ``PKCS12`` (``type``; default from the file name: .jks, .p12 or .pfx)."""
    password_secret: str | None = None
    """The secret holding the store's password (``passwordSecret``), never the password."""


@dataclass(frozen=True)
class Identity:
    """A client certificate and its key: PEM files, or a keystore."""

    certificate: str | None = None
    """PEM file of the client certificate and its chain (``certificate``)."""
    key: str | None = None
    """PEM file of its private key, PKCS#8 (``key``)."""
    key_password_secret: str | None = None
    """The secret holding the key's password, when the key is encrypted (``keyPasswordSecret``)."""
    keystore: Store | None = None
    """A JKS or PKCS#12 keystore holding certificate and key instead of PEM files (``keystore``)."""

    @property
    def files(self) -> tuple[tuple[str, str], ...]:
        """(spec field, path) of every file the identity names."""
        pairs = [("certificate", self.certificate), ("key", self.key)]
        if self.keystore:
            pairs.append(("keystore.path", self.keystore.path))
        return tuple((f, p) for f, p in pairs if p)


@dataclass(frozen=True)
class TlsSettings:
    """How clients verify a cluster's brokers and prove who they are (``clusters.<alias>.tls``)."""

    ca: str | None = None
    """PEM file of the CA certificates that signed the brokers' (``ca``); None: ``truststore`` or the system's."""
    truststore: Store | None = None
    """A JKS or PKCS#12 truststore instead of ``ca`` (``truststore``)."""
    identity: Identity | None = None
    """The mirror's client certificate (``certificate``/``key`` or ``keystore``); None: no client certificate."""
    admin: Identity | None = None
    """The certificate mm2spec plans and provisions with (``admin``); None: ``identity``."""
    verify_hostname: bool = True
    """Whether the brokers' certificates must name the host connected to (``verifyHostname``)."""

    def identity_for(self, admin: bool) -> Identity | None:
        return (self.admin or self.identity) if admin else self.identity

    @property
    def secret_names(self) -> tuple[str, ...]:
        """Every secret the settings name (stores and keys), each once."""
        names = [self.truststore.password_secret if self.truststore else None]
        for identity in (self.identity, self.admin):
            if identity:
                names += [identity.key_password_secret, identity.keystore.password_secret if identity.keystore else None]
        return tuple(dict.fromkeys(n for n in names if n))


def store_type(path: str, given: str | None) -> str | None:
    """The store type a spec gives, or the one its file name implies; None: neither says."""
    return given or _STORE_SUFFIXES.get(Path(path).suffix.lower())


def _env(name: str) -> str:
    return "${env:" + name + "}"


def _dir(path: str) -> str:
    folder, name = os.path.split(os.path.abspath(path))
    return "${dir:" + folder + ":" + name + "}"


def java_properties(settings: TlsSettings | None, admin: bool = False) -> list[tuple[str, str]]:
    """Kafka Java client ``ssl.*`` properties; passwords as ``${env:NAME}``, PEM key and chain as
    ``${dir:...}`` references (the rendered files name ``DIR_PROVIDER`` when any does)."""
    if settings is None:
        return []
    props: list[tuple[str, str]] = []
    if settings.ca:
        props += [("ssl.truststore.type", "PEM"), ("ssl.truststore.location", settings.ca)]
    elif settings.truststore:
        store = settings.truststore
        props += [("ssl.truststore.type", store.type), ("ssl.truststore.location", store.path)]
        if store.password_secret:
            props.append(("ssl.truststore.password", _env(store.password_secret)))
    identity = settings.identity_for(admin)
    if identity and identity.keystore:
        store = identity.keystore
        props += [("ssl.keystore.type", store.type), ("ssl.keystore.location", store.path)]
        if store.password_secret:
            props.append(("ssl.keystore.password", _env(store.password_secret)))
        key_secret = identity.key_password_secret or store.password_secret
        if key_secret:
            props.append(("ssl.key.password", _env(key_secret)))
    elif identity and identity.certificate and identity.key:
        props += [("ssl.keystore.type", "PEM"), ("ssl.keystore.certificate.chain", _dir(identity.certificate)),
                  ("ssl.keystore.key", _dir(identity.key))]
        if identity.key_password_secret:
            props.append(("ssl.key.password", _env(identity.key_password_secret)))
    if not settings.verify_hostname:
        props.append(("ssl.endpoint.identification.algorithm", ""))
    return props


def uses_dir_provider(props: list[tuple[str, str]] | Mapping[str, str]) -> bool:
    """Whether some value is a ``${dir:...}`` reference (the config must declare ``DIR_PROVIDER``)."""
    values = props.values() if isinstance(props, Mapping) else (v for _, v in props)
    return any(_DIR_REF.search(v) for v in values)


def resolve_references(text: str, lookup: SecretLookup, where: str, field: str | None = None) -> str:
    """``text`` with each ``${env:NAME}`` replaced by the secret's value and each ``${dir:FOLDER:FILE}``
    by the file's content; a secret not set is ``SecretMissing``, a file not readable ``TlsInvalid``
    (naming ``field``, the spec field, when given)."""

    def env(match: re.Match) -> str:
        value = lookup(match.group(1))
        if value is None:
            raise SecretMissing(f"{where}: the secret {match.group(1)} is not set "
                                f"(export {match.group(1)}=... or set it as a Pulumi secret)")
        return value

    def file(match: re.Match) -> str:
        path = os.path.join(match.group(1), match.group(2))
        return _read_text(path, where, field or path)

    return _DIR_REF.sub(file, _ENV_REF.sub(env, text))


def _read_bytes(path: str, where: str, field: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise TlsInvalid(f"{where}: {field}: {path} does not exist") from None
    except IsADirectoryError:
        raise TlsInvalid(f"{where}: {field}: {path} is a folder, not a file") from None
    except OSError as exc:
        raise TlsInvalid(f"{where}: {field}: {path} cannot be read ({exc.strerror})") from None


def _read_text(path: str, where: str, field: str) -> str:
    data = _read_bytes(path, where, field)
    if data.startswith(_JKS_MAGIC) or data[:1] == b"\x30":
        kind = "a JKS store" if data.startswith(_JKS_MAGIC) else "binary (DER or PKCS#12)"
        raise TlsInvalid(f"{where}: {field}: {path} is {kind}, not PEM: give a keystore or truststore as "
                         f"tls.keystore / tls.truststore {{path, type, passwordSecret}}, or convert it to PEM "
                         f"(keytool -exportcert -rfc, or openssl pkcs12 -nodes)")
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        raise TlsInvalid(f"{where}: {field}: {path} is not a PEM file (not text)") from None


# ----------------------------------------------------------------------------- store conversion

def _tool(name: str, where: str, why: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise TlsInvalid(f"{where}: {why} needs `{name}` on the PATH (it comes with Java / OpenSSL); "
                         f"or give PEM files (tls.ca, tls.certificate and tls.key)")
    return found


def _run(args: list[str], secrets: Mapping[str, str], where: str, what: str) -> bytes:
    env = {**os.environ, **secrets}
    try:  # no stdin: keytool asks for a password it lacks, which must fail, not wait
        done = subprocess.run(args, env=env, capture_output=True, timeout=_TOOL_TIMEOUT_S, check=False,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise TlsInvalid(f"{where}: {what}: {Path(args[0]).name} did not finish in {_TOOL_TIMEOUT_S:.0f} s") from None
    if done.returncode != 0:
        text = (done.stdout + done.stderr).decode(errors="replace")
        if re.search(r"password was incorrect|mac verify|invalid password|Integrity check failed|bad decrypt"
                     r"|cannot recover key|final block not properly padded", text, re.I):
            raise TlsInvalid(f"{where}: {what}: the password does not open it (wrong store or key password)")
        if re.search(r"enter key password", text, re.I):
            raise TlsInvalid(f"{where}: {what}: its key has a password of its own: name its secret in tls.keyPasswordSecret")
        last = [line for line in text.splitlines() if line.strip()][-1:] or ["no output"]
        raise TlsInvalid(f"{where}: {what}: {Path(args[0]).name} failed: {last[0][:300]}")
    return done.stdout


_PRIVATE_DIR: list[str] = []


def _private_dir() -> str:
    """A folder only this user may read, removed when the process exits (converted stores, keys)."""
    if not _PRIVATE_DIR:
        folder = tempfile.mkdtemp(prefix="mm2spec-tls-")
        os.chmod(folder, 0o700)
        atexit.register(shutil.rmtree, folder, True)
        _PRIVATE_DIR.append(folder)
    return _PRIVATE_DIR[0]


def store_certificates(path: str, kind: str, password: str | None, where: str) -> str:
    """The certificates of a JKS or PKCS#12 truststore as PEM text (``keytool -list -rfc``)."""
    _read_bytes(path, where, "tls.truststore.path")
    keytool = _tool("keytool", where, f"reading the {kind} truststore {path}")
    args = [keytool, "-list", "-rfc", "-keystore", path, "-storetype", kind]
    args += ["-storepass:env", "MM2SPEC_STORE_PASSWORD"] if password is not None else ["-storepass", ""]
    out = _run(args, {"MM2SPEC_STORE_PASSWORD": password or ""}, where, f"truststore {path}").decode(errors="replace")
    certs = _PEM_CERT.findall(out)
    if not certs:
        raise TlsInvalid(f"{where}: truststore {path} holds no certificate")
    return "\n".join(certs) + "\n"


def pkcs12_keystore(path: str, kind: str, password: str, key_password: str | None, where: str) -> str:
    """A PKCS#12 file librdkafka can read for a keystore: the file itself, or a JKS converted to one
    (same password) in the private folder."""
    _read_bytes(path, where, "tls.keystore.path")
    if kind == "PKCS12":
        return path
    keytool = _tool("keytool", where, f"reading the JKS keystore {path}")
    out = os.path.join(_private_dir(), f"keystore-{abs(hash((path, time.time())))}.p12")
    secrets = {"MM2SPEC_STORE_PASSWORD": password, "MM2SPEC_KEY_PASSWORD": key_password or password}
    args = [keytool, "-importkeystore", "-noprompt", "-srckeystore", path, "-srcstoretype", "JKS",
            "-srcstorepass:env", "MM2SPEC_STORE_PASSWORD", "-destkeystore", out, "-deststoretype", "PKCS12",
            "-deststorepass:env", "MM2SPEC_STORE_PASSWORD"]
    if key_password is not None and key_password != password:
        # keytool takes a key password only with the entry's alias; PKCS#12 keeps one password for both.
        args += ["-srcalias", _key_alias(keytool, path, password, where), "-srckeypass:env", "MM2SPEC_KEY_PASSWORD",
                 "-destkeypass:env", "MM2SPEC_STORE_PASSWORD"]
    _run(args, secrets, where, f"keystore {path}")
    return out


def _key_alias(keytool: str, path: str, password: str, where: str) -> str:
    """The alias of a JKS keystore's first private key entry (``keytool -list -v``, in English)."""
    out = _run([keytool, "-J-Duser.language=en", "-list", "-v", "-keystore", path, "-storetype", "JKS",
                "-storepass:env", "MM2SPEC_STORE_PASSWORD"], {"MM2SPEC_STORE_PASSWORD": password}, where,
               f"keystore {path}").decode(errors="replace")
    match = re.search(r"^Alias name: (.+?)\s*\n(?:.*\n){0,3}?Entry type: PrivateKeyEntry", out, re.M)
    if match is None:
        raise TlsInvalid(f"{where}: keystore {path} holds no private key (a client certificate's key)")
    return match.group(1)


def pkcs12_pem(path: str, password: str, where: str) -> str:
    """Certificate chain and unencrypted key of a PKCS#12 keystore as PEM text (``openssl pkcs12``)."""
    openssl = _tool("openssl", where, f"reading the keystore {path} for mm2spec's own TLS probe")
    return _run([openssl, "pkcs12", "-in", path, "-nodes", "-passin", "env:MM2SPEC_STORE_PASSWORD"],
                {"MM2SPEC_STORE_PASSWORD": password}, where, f"keystore {path}").decode(errors="replace")


# ----------------------------------------------------------------------------- one client's TLS

def _not_after(pem: str, where: str, field: str) -> float | None:
    """When the first certificate of ``pem`` expires (epoch seconds); None if it cannot be read."""
    block = _PEM_CERT.search(pem)
    if block is None:
        raise TlsInvalid(f"{where}: {field} holds no PEM certificate")
    with tempfile.NamedTemporaryFile("w", suffix=".pem", dir=_private_dir(), delete=True) as handle:
        handle.write(block.group(0) + "\n")
        handle.flush()
        try:
            decoded = ssl._ssl._test_decode_cert(handle.name)  # type: ignore[attr-defined]  # stdlib's only cert reader
        except (ssl.SSLError, AttributeError, ValueError):
            return None
    return ssl.cert_time_to_seconds(decoded["notAfter"]) if decoded.get("notAfter") else None


# Kafka's default principal of a client certificate is its subject as Java's X500Principal.getName()
# writes it (RFC 2253): most specific RDN first, these attributes by keyword.
_RFC2253_KEYWORDS = {"commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O", "localityName": "L",
                     "stateOrProvinceName": "ST", "countryName": "C", "streetAddress": "STREET", "domainComponent": "DC",
                     "userId": "UID"}


def _rfc2253_value(value: str) -> str:
    escaped = re.sub(r'([,+"\\<>;=])', r"\\\1", value)
    if escaped[:1] in (" ", "#"):
        escaped = "\\" + escaped
    return escaped[:-1] + "\\ " if escaped.endswith(" ") else escaped


def certificate_principal(path: str) -> str | None:
    """The Kafka principal a client certificate has under the brokers' default mapping, e.g.
    ``User:CN=mm2,OU=platform``; None when the file cannot be read or its subject has an attribute
    Java writes as an OID (the user then names the principal)."""
    try:
        decoded = ssl._ssl._test_decode_cert(path)  # type: ignore[attr-defined]  # stdlib's only cert reader
    except (ssl.SSLError, OSError, AttributeError, ValueError):
        return None
    rdns = []
    for rdn in reversed(decoded.get("subject", ())):
        parts = []
        for name, value in rdn:
            if name not in _RFC2253_KEYWORDS:
                return None
            parts.append(f"{_RFC2253_KEYWORDS[name]}={_rfc2253_value(value)}")
        rdns.append("+".join(parts))
    return "User:" + ",".join(rdns) if rdns else None


_SPEC_FIELDS = {"ssl.keystore.key": "tls.key", "ssl.keystore.certificate.chain": "tls.certificate"}
"""The spec field a ``${dir:...}`` reference of a Java property comes from (named in messages)."""


class ClientTls:
    """One client's TLS settings, given as Kafka Java properties (``java_properties``, references
    allowed), turned into each family's form. ``where`` names the cluster in every message."""

    def __init__(self, props: Mapping[str, str], lookup: SecretLookup, where: str):
        self.where = where
        self._raw = {k: v for k, v in props.items() if k.startswith("ssl.")}
        self._lookup = lookup
        self._resolved: dict[str, str] | None = None
        self._context: ssl.SSLContext | None = None

    @property
    def props(self) -> dict[str, str]:
        """The ``ssl.*`` properties with every reference resolved (secrets and PEM contents)."""
        if self._resolved is None:
            self._resolved = {k: resolve_references(v, self._lookup, self.where, _SPEC_FIELDS.get(k))
                              for k, v in self._raw.items()}
        return self._resolved

    def _ref_path(self, key: str) -> str | None:
        match = _DIR_REF.fullmatch(self._raw.get(key, ""))
        return os.path.join(match.group(1), match.group(2)) if match else None

    @property
    def has_identity(self) -> bool:
        return "ssl.keystore.type" in self._raw or "ssl.keystore.location" in self._raw

    # -------------------------------------------------------------------- the pieces, each checked
    def ca_pem(self) -> str | None:
        """The CA certificates as PEM text; None: the system's."""
        p = self.props
        kind = p.get("ssl.truststore.type", "JKS").upper()
        if p.get("ssl.truststore.certificates"):
            return p["ssl.truststore.certificates"]
        location = p.get("ssl.truststore.location")
        if not location:
            return None
        if kind == "PEM":
            text = _read_text(location, self.where, "tls.ca")
            if not _PEM_CERT.search(text):
                raise TlsInvalid(f"{self.where}: tls.ca: {location} holds no PEM certificate")
            return text
        return store_certificates(location, kind, p.get("ssl.truststore.password"), self.where)

    def identity_pem(self) -> tuple[str, str, str | None] | None:
        """(certificate chain, key, key password) as PEM text; None without a client certificate."""
        p = self.props
        kind = p.get("ssl.keystore.type", "JKS").upper()
        if not self.has_identity:
            return None
        if kind == "PEM":
            chain, key = p.get("ssl.keystore.certificate.chain"), p.get("ssl.keystore.key")
            location = p.get("ssl.keystore.location")
            if location:
                chain = key = _read_text(location, self.where, "tls.keystore")
            if not chain or not key:
                raise TlsInvalid(f"{self.where}: a PEM client identity needs both tls.certificate and tls.key")
            if not _PEM_CERT.search(chain):
                raise TlsInvalid(f"{self.where}: tls.certificate ({self._ref_path('ssl.keystore.certificate.chain')}) "
                                 f"holds no PEM certificate")
            if _NOT_PKCS8.search(key):
                path = self._ref_path("ssl.keystore.key") or location
                raise TlsInvalid(f"{self.where}: tls.key: {path} is a PKCS#1/SEC1 key; Kafka's Java clients read "
                                 f"PKCS#8 only: convert it with `openssl pkcs8 -topk8 -in {path} -out key.pk8.pem` "
                                 f"(add -nocrypt for an unencrypted key)")
            if "PRIVATE KEY-----" not in key:
                raise TlsInvalid(f"{self.where}: tls.key holds no PEM private key")
            # Kafka's Java PEM reader decrypts the key when, and only when, it is given a password.
            password = p.get("ssl.key.password")
            encrypted = "-----BEGIN ENCRYPTED PRIVATE KEY-----" in key
            if encrypted and not password:
                raise TlsInvalid(f"{self.where}: tls.key is encrypted: name the secret holding its password in "
                                 f"tls.keyPasswordSecret")
            if password and not encrypted:
                raise TlsInvalid(f"{self.where}: tls.keyPasswordSecret is set but tls.key is not encrypted, which "
                                 f"Kafka's Java clients refuse: remove keyPasswordSecret")
            return chain, key, password
        location = p.get("ssl.keystore.location")
        if not location:
            raise TlsInvalid(f"{self.where}: tls.keystore needs a path")
        password = p.get("ssl.keystore.password")
        if password is None:
            raise TlsInvalid(f"{self.where}: tls.keystore {location} needs passwordSecret")
        p12 = pkcs12_keystore(location, kind, password, p.get("ssl.key.password"), self.where)
        text = pkcs12_pem(p12, password, self.where)
        if "PRIVATE KEY-----" not in text:
            raise TlsInvalid(f"{self.where}: tls.keystore {location} holds no private key (a truststore given as keystore?)")
        return text, text, None

    def check(self) -> None:
        """Everything that can be known offline (see the module's docstring); raises ``TlsInvalid``."""
        self.ssl_context()

    # -------------------------------------------------------------------------------- the families
    def ssl_context(self) -> ssl.SSLContext:
        """A client ``ssl.SSLContext``: the CA, the client certificate, hostname verification. Made
        once (it is thread-safe to share): loading a key writes it to the private folder briefly."""
        if self._context is None:
            self._context = self._new_context()
        return self._context

    def _new_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        ca = self.ca_pem()
        if ca is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            try:
                context.load_verify_locations(cadata=ca)
            except ssl.SSLError as exc:
                raise TlsInvalid(f"{self.where}: tls.ca: the CA certificates cannot be read ({exc.reason})") from None
        context.check_hostname = self.props.get("ssl.endpoint.identification.algorithm", "https").lower() == "https"
        identity = self.identity_pem()
        if identity is not None:
            chain, key, password = identity
            expires = _not_after(chain, self.where, "tls.certificate")
            if expires is not None and expires < time.time():
                shown = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(expires))
                raise TlsInvalid(f"{self.where}: the client certificate expired on {shown}: renew it")
            folder = tempfile.mkdtemp(dir=_private_dir())
            try:
                cert_file, key_file = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
                for path, text in ((cert_file, chain), (key_file, key)):
                    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as handle:
                        handle.write(text)
                try:
                    context.load_cert_chain(cert_file, key_file, password=password or "")
                except ssl.SSLError as exc:
                    # OpenSSL reports a wrong password of an encrypted PEM key as "bad decrypt" or "PEM lib".
                    wrong_password = password and ("decrypt" in str(exc).lower() or "pem lib" in str(exc).lower())
                    why = ("the key's password is wrong (tls.keyPasswordSecret)" if wrong_password
                           or "bad password" in str(exc).lower() else
                           "the key does not belong to the certificate" if "mismatch" in str(exc).lower()
                           else f"they cannot be loaded ({exc.reason or exc})")
                    raise TlsInvalid(f"{self.where}: client certificate and key: {why}") from None
            finally:
                shutil.rmtree(folder, ignore_errors=True)
        return context

    def librdkafka(self) -> dict[str, str]:
        """confluent-kafka ``ssl.*`` settings (CA, client certificate, hostname verification)."""
        p = self.props
        conf: dict[str, str] = {}
        kind = p.get("ssl.truststore.type", "JKS").upper()
        if kind == "PEM" and p.get("ssl.truststore.location") and not p.get("ssl.truststore.certificates"):
            self.ca_pem()  # checked: present, readable, PEM
            conf["ssl.ca.location"] = p["ssl.truststore.location"]
        else:
            ca = self.ca_pem()
            if ca is not None:
                conf["ssl.ca.pem"] = ca
        if self.has_identity:
            kind = p.get("ssl.keystore.type", "JKS").upper()
            if kind == "PEM":
                chain, key, password = self.identity_pem() or ("", "", None)
                conf["ssl.certificate.pem"], conf["ssl.key.pem"] = chain, key
                if password:
                    conf["ssl.key.password"] = password
            else:
                location, password = p.get("ssl.keystore.location", ""), p.get("ssl.keystore.password")
                if password is None:
                    raise TlsInvalid(f"{self.where}: tls.keystore {location} needs passwordSecret")
                conf["ssl.keystore.location"] = pkcs12_keystore(location, kind, password, p.get("ssl.key.password"),
                                                                self.where)
                conf["ssl.keystore.password"] = password
        algorithm = p.get("ssl.endpoint.identification.algorithm")
        if algorithm is not None:
            conf["ssl.endpoint.identification.algorithm"] = algorithm.lower() or "none"
        return conf


__all__ = ["ClientTls", "DIR_PROVIDER", "Identity", "STORE_TYPES", "Store", "TlsSettings", "certificate_principal",
           "java_properties",
           "resolve_references", "store_type", "uses_dir_provider"]
