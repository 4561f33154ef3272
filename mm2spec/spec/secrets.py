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
# One option of a JAAS config: name="quoted value" or name=bare-value.
_JAAS_OPTION = re.compile(r'(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(?:"(?P<quoted>[^"]*)"|(?P<bare>[^\s";]+))')

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


def _option_value(option: re.Match) -> str:
    quoted = option.group("quoted")
    return quoted if quoted is not None else option.group("bare")


def _is_literal_secret(option: re.Match) -> bool:
    """Whether a JAAS option is sensitive and written out rather than referenced."""
    return is_sensitive_key(option.group("name")) and not is_provider_reference(_option_value(option))


def _hide_option(option: re.Match) -> str:
    if not _is_literal_secret(option):
        return option.group(0)
    quoted = option.group("quoted") is not None
    head = option.group(0)[:option.start("quoted" if quoted else "bare") - option.start()]
    return head + (f'{MASKED}"' if quoted else MASKED)


def inline_secret(key: str, value: Any) -> bool:
    """Whether ``key: value`` in a free-form config map writes a secret into the spec."""
    if not is_sensitive_key(key) or value is None or isinstance(value, (bool, dict, list)):
        return False
    text = str(value)
    if is_jaas_key(key):
        return any(_is_literal_secret(option) for option in _JAAS_OPTION.finditer(text))
    return not is_provider_reference(text)


def mask(field: str, value: object) -> object:
    """The value, or ``(sensitive)`` when the field can hold a secret and the value is not a reference.

    A JAAS config keeps its shape (login module, username) with only its secret options hidden; one
    without any secret option it can recognise is hidden whole: it cannot be told safe."""
    if value is None or not is_sensitive_key(field):
        return value
    text = str(value)
    if is_provider_reference(text):
        return value
    if is_jaas_key(field) and any(is_sensitive_key(o.group("name")) for o in _JAAS_OPTION.finditer(text)):
        return _JAAS_OPTION.sub(_hide_option, text)
    return MASKED
