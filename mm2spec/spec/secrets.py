"""The one rule for which keys hold secrets, and what follows from it.

**A key is sensitive when its last part names a credential**: it ends (case-insensitively, whatever
the separator: ``.``, ``_``, ``-`` or camelCase) with ``password``, ``passwd``, ``passphrase``,
``secret``, ``token``, ``credential(s)``, ``jaas`` / ``jaas.config``, or a private, secret or keystore
``key``. Examples: ``ssl.truststore.password``, ``source.cluster.sasl.jaas.config``,
``spark.ssl.keyStorePassword``, ``fs.s3a.secret.key``, ``ssl.keystore.key``, ``passwordSecret``.

The end, not anywhere in the key: a key's last part says what its value is. ``sasl.mechanism``
(a mechanism name), ``sasl.oauthbearer.token.endpoint.url`` (a URL) and
``sasl.oauthbearer.assertion.private.key.file`` (a path) mention credentials but hold none, so they
are neither refused in a spec nor masked in a plan.

Three uses, one rule:

- ``hides_value(path)``: error messages never echo a value under ``security`` or under a sensitive key;
- ``inline_secret(key, value)``: a free-form config key (``config``, ``producerOverrides``, ...) that is
  sensitive may only hold a config-provider reference such as ``${env:NAME}``; a JAAS config may be
  written out, but each of its sensitive options (``password``, ``clientSecret``) must be a reference;
- ``mask(field, value)``: plans show sensitive values as ``(sensitive)``, references as they are (they
  only name a secret), and JAAS configs with their shape kept and only the secret options hidden.

**Some values are secrets whatever their key** (``holds_secret``): a PEM private key, and the password
of a URL (``http://user:password@host``). They are refused anywhere in a spec and hidden wherever a
value is shown (``redact``).

**A JAAS config is read by its grammar** (``LoginModule flag name=value ...;``, values bare, "double" or
'single' quoted, as Kafka's ``JaasConfig`` reads them). Only one that parses can have its secret
options told apart; anything else under a JAAS key (a bare password, a truncated config) is treated
as a secret whole.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

_SENSITIVE_KEY = re.compile(
    r"(password|passwd|passphrase|secret|token|credentials?|jaas([._-]?config)?|(private|secret|keystore)[._-]?key)$",
    re.IGNORECASE)
_SENSITIVE_SECTIONS = frozenset({"security"})
"""Spec fields whose whole subtree may hold credentials (usernames, secret names, mechanisms)."""
_PROVIDER_REF = re.compile(r"\$\{[A-Za-z0-9_.-]+:[^}]*\}")
# One option of a JAAS config: name="quoted value", name='quoted value' or name=bare-value.
_OPTION = r"""[A-Za-z_][A-Za-z0-9_.-]*\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"';=]+)"""
_JAAS_OPTION = re.compile(r"""(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*"""
                          r"""(?:"(?P<quoted>[^"]*)"|'(?P<single>[^']*)'|(?P<bare>[^\s"';=]+))""")
# A whole JAAS config: one or more "LoginModuleClass flag option...;" entries. No nested quantifier can
# match the same text two ways (options are separated by spaces and contain "="), so matching is linear.
_JAAS_CONFIG = re.compile(
    rf"(?:\s*[A-Za-z_$][A-Za-z0-9_.$]*\s+(?:required|requisite|sufficient|optional)(?:\s+{_OPTION})*\s*;)+\s*")
_PEM_PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----")
# The password of a URL's user info. Anchored on "://" so a long value is scanned once, not from every position.
_URL_PASSWORD = re.compile(r"://(?P<user>[^\s/@:]*):(?P<password>[^\s/@]+)@")

MASKED = "(sensitive)"
"""What a plan shows instead of a secret."""


def is_sensitive_key(name: str) -> bool:
    """Whether values under the key ``name`` can be secrets (see the module docstring for the rule)."""
    return bool(_SENSITIVE_KEY.search(name.strip()))


def is_provider_reference(value: str) -> bool:
    """Whether ``value`` is exactly one config-provider reference (``${env:NAME}``, ``${file:path:key}``):
    it names where a secret is, it is not the secret."""
    return bool(_PROVIDER_REF.fullmatch(value.strip()))


def is_jaas_key(name: str) -> bool:
    """Whether ``name`` is a JAAS config (``sasl.jaas.config`` with any prefix)."""
    return bool(re.search(r"jaas([._-]?config)?$", name.strip(), re.IGNORECASE))


def hides_value(path: Iterable) -> bool:
    """Whether an error message about the value at ``path`` (JSON Pointer parts) must not echo it."""
    return any(isinstance(p, str) and (p in _SENSITIVE_SECTIONS or is_sensitive_key(p)) for p in path)


def holds_secret(value: object) -> bool:
    """Whether a value is a secret whatever its key: it holds a PEM private key or a URL's password."""
    return isinstance(value, str) and bool(_PEM_PRIVATE_KEY.search(value) or _URL_PASSWORD.search(value))


def redact(value: object) -> object:
    """The value with what ``holds_secret`` finds hidden: a URL keeps its user and host, a PEM key is hidden whole."""
    if not holds_secret(value):
        return value
    if _PEM_PRIVATE_KEY.search(value):
        return MASKED
    return _URL_PASSWORD.sub(lambda m: f"://{m.group('user')}:{MASKED}@", value)


def _option_value(option: re.Match) -> str:
    return next(v for v in option.group("quoted", "single", "bare") if v is not None)


def _is_literal_secret(option: re.Match) -> bool:
    """Whether a JAAS option is sensitive and written out rather than referenced."""
    return is_sensitive_key(option.group("name")) and not is_provider_reference(_option_value(option))


def _hide_option(option: re.Match) -> str:
    if not _is_literal_secret(option):
        return option.group(0)
    group = next(g for g in ("quoted", "single", "bare") if option.group(g) is not None)
    head = option.group(0)[:option.start(group) - option.start()]
    return head + MASKED + option.group(0)[option.end(group) - option.start():]


def _parses_as_jaas(text: str) -> bool:
    return bool(_JAAS_CONFIG.fullmatch(text))


def inline_secret(key: str, value: Any) -> bool:
    """Whether ``key: value`` in a free-form config map writes a secret into the spec."""
    if not is_sensitive_key(key) or value is None or isinstance(value, (bool, dict, list)):
        return False
    text = str(value)
    if is_jaas_key(key) and not is_provider_reference(text):
        return not _parses_as_jaas(text) or any(_is_literal_secret(option) for option in _JAAS_OPTION.finditer(text))
    return not is_provider_reference(text)


def mask(field: str, value: object) -> object:
    """The value, or ``(sensitive)`` when the field can hold a secret and the value is not a reference.

    A JAAS config keeps its shape (login module, username) with only its secret options hidden; one
    that does not parse as JAAS is hidden whole: it cannot be told safe. Under any other field, what
    ``holds_secret`` finds is hidden (``redact``)."""
    if value is None or not is_sensitive_key(field):
        return redact(value)
    text = str(value)
    if is_provider_reference(text):
        return value
    if is_jaas_key(field) and _parses_as_jaas(text):
        return _JAAS_OPTION.sub(_hide_option, text)
    return MASKED
