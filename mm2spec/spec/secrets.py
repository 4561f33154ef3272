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
- ``mask(field, value)``: plans and ``promote`` show sensitive values as ``(sensitive)`` whatever their
  shape (a string, a number, a list, a mapping), references as they are (they only name a secret),
  and JAAS configs with their shape kept and only the secret options hidden; lists and mappings under
  other keys are masked item by item, by the same rule.

**Some values are secrets whatever their key** (``holds_secret``): a PEM private key, the password
of a URL (``http://user:password@host``), and credentials written into an address
(``user:password@host:9092``, as a bootstrap server). They are refused anywhere in a spec and
hidden wherever a value is shown (``redact``).

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
# Up to the last "@" before the host: a password holding an unescaped "@" is hidden whole, not cut at its first.
_URL_PASSWORD = re.compile(r"://(?P<user>[^\s/@:]*):(?P<password>[^\s/]*[^\s/@])@")
# Credentials written into an address without a scheme (``user:password@host:9092``), at the start of the
# value or of an item of a list written as one string (``a:b@h1:9092,h2:9092``). Anchored on the start or a
# separator, and a password never runs past one, so a long value is scanned once. The user holds no
# regex punctuation: a Java regex such as "(?:a)@b" is a pattern, not a login.
_ADDRESS_PASSWORD = re.compile(
    r"(?:^|(?<=[\s,;]))(?P<user>[^\s/@:,;?()\[\]{}|^$\\]*):(?P<password>[^\s/,;]*[^\s/@,;])@")

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
    """Whether a value is a secret whatever its key: it holds a PEM private key, a URL's password or
    credentials written into an address."""
    return isinstance(value, str) and bool(_PEM_PRIVATE_KEY.search(value) or _URL_PASSWORD.search(value)
                                           or _ADDRESS_PASSWORD.search(value))


def redact(value: object) -> object:
    """The value with what ``holds_secret`` finds hidden: a URL or an address keeps its user and host,
    a PEM key is hidden whole."""
    if not holds_secret(value):
        return value
    if _PEM_PRIVATE_KEY.search(value):
        return MASKED
    value = _URL_PASSWORD.sub(lambda m: f"://{m.group('user')}:{MASKED}@", value)
    return _ADDRESS_PASSWORD.sub(lambda m: f"{m.group('user')}:{MASKED}@", value)


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


SHORTEST_KNOWN_SECRET = 4
"""Shorter values seen under a sensitive key are not hidden elsewhere: ``mm2`` or ``30`` would hide
usernames and task counts, and so short a secret gives little away."""


def literal_secrets(value: object) -> set:
    """The literal values (strings and numbers, not references) in ``value``, which sits under a
    sensitive key: ``mask(..., known=)`` hides them wherever else they appear (a YAML alias copies a
    password to any key)."""
    if isinstance(value, dict):
        return set().union(*(literal_secrets(item) for item in value.values()))
    if isinstance(value, (list, tuple)):
        return set().union(*(literal_secrets(item) for item in value))
    if isinstance(value, bool) or not isinstance(value, (str, int, float)) or len(str(value)) < SHORTEST_KNOWN_SECRET:
        return set()
    return set() if isinstance(value, str) and is_provider_reference(value) else {value}


def mask(field: str, value: object, known: frozenset | set = frozenset()) -> object:
    """The value as a plan or a promotion may show it, whatever its shape: the one place values are masked.

    Under a sensitive ``field``, anything but a single string reference is ``(sensitive)`` whole (a
    list, a mapping, a number, a tagged scalar's value); a JAAS config keeps its shape (login module,
    username) with only its secret options hidden, and one that does not parse as JAAS is hidden
    whole: it cannot be told safe. Under any other field, a mapping is masked key by key, a list item
    by item, a value in ``known`` (``literal_secrets``) is hidden, and a string has what
    ``holds_secret`` finds hidden (``redact``)."""
    if value is None:
        return None
    if not is_sensitive_key(field):
        if isinstance(value, dict):
            return {key: mask(str(key), item, known) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [mask(field, item, known) for item in value]
        if known and not isinstance(value, bool) and isinstance(value, (str, int, float)) and value in known:
            return MASKED
        return redact(value)
    if not isinstance(value, str):
        return MASKED
    if is_provider_reference(value):
        return value
    if is_jaas_key(field) and _parses_as_jaas(value):
        return _JAAS_OPTION.sub(_hide_option, value)
    return MASKED
