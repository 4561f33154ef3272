"""Topic and group patterns as MM2 reads them: Java regular expressions matched against whole names.

Two jobs:
- ``java_regex_error``: is this a valid *Java* regex? Python's ``re`` is close but not the same, so
  Java-only syntax (``\\Q..\\E``, ``\\p{..}``, ``(?<name>..)``, inline flags anywhere, ...) is
  translated before compiling; what remains invalid is invalid in Java too.
- ``classify``: ACLs cannot be regexes, so a pattern is sorted into a literal name, a plain prefix
  (``invoices-.*`` -> PREFIXED ``invoices-``) or a true regex that only a live cluster can resolve.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

_JAVA_FLAGS = set("idmsuxU")
# A Kafka topic name: letters, digits, '.', '_' and '-'. A '.' in a pattern made of these is read as
# the literal dot a topic name has (it also matches any one character in MM2, see classify()).
_NAME_CHARS = re.compile(r"^[A-Za-z0-9._-]+\Z")  # \Z: "$" would let a trailing newline through


def _translate(java: str) -> str:
    """Rewrite Java-only regex syntax into Python syntax with the same validity."""
    out: list[str] = []
    i, n = 0, len(java)
    while i < n:
        c = java[i]
        if c == "\\" and i + 1 < n:
            nxt = java[i + 1]
            if nxt == "Q":  # \Q...\E quotes everything up to \E (or the end)
                end = java.find("\\E", i + 2)
                literal = java[i + 2 :] if end < 0 else java[i + 2 : end]
                out.append(re.escape(literal))
                i = n if end < 0 else end + 2
                continue
            if nxt in "pP":  # \p{Alpha}, \pL: Unicode/POSIX classes
                if i + 2 < n and java[i + 2] == "{":
                    end = java.find("}", i + 3)
                    if end < 0:
                        raise re.error("unclosed character class name \\p{", pos=i)
                    if not re.fullmatch(r"[A-Za-z_=]+", java[i + 3 : end]):
                        raise re.error(f"unknown character property {java[i:end + 1]}", pos=i)
                    i = end + 1
                elif i + 2 < n and java[i + 2].isalpha():
                    i += 3
                else:
                    raise re.error("\\p must be followed by a property name", pos=i)
                out.append("a")
                continue
            if nxt == "k" and i + 2 < n and java[i + 2] == "<":  # \k<name> backreference
                end = java.find(">", i + 3)
                if end < 0:
                    raise re.error("unterminated group name in \\k<", pos=i)
                out.append(f"(?P={java[i + 3:end]})")
                i = end + 1
                continue
            if nxt == "x" and i + 2 < n and java[i + 2] == "{":
                end = java.find("}", i + 3)
                if end < 0 or not re.fullmatch(r"[0-9A-Fa-f]{1,6}", java[i + 3 : end]):
                    raise re.error("bad \\x{...} escape", pos=i)
                out.append("a")
                i = end + 1
                continue
            replacements = {"h": "[ \\t]", "H": "[^ \\t]", "R": "(?:\\r\\n|\\n)", "X": ".", "z": "\\Z",
                            "G": "", "e": "\\x1b", "V": "[^\\n]"}
            if nxt in replacements:
                out.append(replacements[nxt])
                i += 2
                continue
            if nxt == "c" and i + 2 < n:
                out.append("a")
                i += 3
                continue
            out.append(java[i : i + 2])
            i += 2
            continue
        if c == "(" and java.startswith("(?<", i) and i + 3 < n and java[i + 3] not in "=!":
            out.append("(?P<")
            i += 3
            continue
        if c == "(" and java.startswith("(?", i):
            # Inline flags "(?i)" or "(?i-s:" are legal anywhere in Java; Python wants them first.
            m = re.match(r"\(\?([A-Za-z]*)(?:-([A-Za-z]*))?([):])", java[i:])
            if m and (m.group(1) or m.group(2) is not None):
                bad = set((m.group(1) or "") + (m.group(2) or "")) - _JAVA_FLAGS
                if bad:
                    raise re.error(f"unknown inline flag {''.join(sorted(bad))!r}", pos=i)
                out.append("" if m.group(3) == ")" else "(?:")
                i += m.end()
                continue
        out.append(c)
        i += 1
    return "".join(out)


MAX_PATTERN_CHARS = 1000
"""Longest topic or group pattern checked: a Kafka name is at most 249 characters, so a longer pattern
is a mistake, and it bounds what compiling one can cost."""


@lru_cache(maxsize=65536)
def java_regex_error(pattern: str) -> str | None:
    """None if ``pattern`` is a valid Java regular expression, else why not (e.g. ``missing )``).

    Cached and with a fast path for plain names, so a spec of thousands of topics checked once per
    environment compiles each pattern once, and plain names never."""
    if _NAME_CHARS.match(pattern):
        return None
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"longer than {MAX_PATTERN_CHARS} characters: split it into several patterns"
    try:
        translated = _translate(pattern)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. FutureWarning for Java's [a&&b] set syntax
            re.compile(translated)
    except re.error as exc:
        return exc.msg
    except OverflowError:
        return "a repetition count is too large"
    except RecursionError:
        return "pattern nested too deeply"
    return None


@lru_cache(maxsize=8192)
def python_regex(pattern: str) -> re.Pattern:
    """A Python approximation of the Java pattern, for matching names (``fullmatch``, as MM2 does)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return re.compile(_translate(pattern))


class NameSelector:
    """Matches names against a list of patterns (any of them), as MM2's topic and group filters do.

    Plain names are looked up in a set and the rest compiled once, so selecting among thousands of
    topics with thousands of patterns stays linear instead of patterns x names regex runs.
    """

    def __init__(self, patterns):
        self.literals = set()
        regexes = []
        for text in patterns:
            plain = text.replace("\\.", ".")
            if _NAME_CHARS.match(plain) and "." not in text.replace("\\.", ""):
                self.literals.add(plain)
            else:
                regexes.append(python_regex(text))
        self.regexes = tuple(regexes)

    def matches(self, name: str) -> bool:
        return name in self.literals or any(r.fullmatch(name) for r in self.regexes)


PatternKind = Literal["literal", "prefix", "regex"]


@dataclass(frozen=True)
class NamePattern:
    """A topic or group pattern from the spec, classified for ACLs.

    ``kind`` is ``literal`` (``value`` is the exact name; ``*`` for "everything"), ``prefix``
    (``value`` is the prefix) or ``regex`` (``value`` is the pattern, resolved against a live cluster).
    """

    text: str
    kind: PatternKind
    value: str

    def matches(self, name: str) -> bool:
        """Whether MM2 would select ``name`` with this pattern (whole-name Java regex match)."""
        return python_regex(self.text).fullmatch(name) is not None


def classify(text: str) -> NamePattern:
    """Sort a pattern into literal / prefix / regex (see NamePattern)."""
    plain = text.replace("\\.", ".")
    if text in (".*", ".+"):
        return NamePattern(text, "literal", "*")
    if _NAME_CHARS.match(plain) and not plain.endswith("."):
        return NamePattern(text, "literal", plain)
    if plain.endswith(".*"):
        head = plain[:-2]
        if head and _NAME_CHARS.match(head) and ".*" not in head:
            return NamePattern(text, "prefix", head)
    return NamePattern(text, "regex", text)
