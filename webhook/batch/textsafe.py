"""Text from manifests made safe to print: names and messages come from files an attacker may write.

A newline in ``metadata.name`` must not forge a second report line, an ESC sequence must not reach the
terminal (or a CI log viewer), and a right-to-left override must not reorder what a reviewer reads. Every
such character is written as a visible escape (``\\n``, ``\\x1b``, ``\\u202e``). JUnit output additionally
must hold only characters XML 1.0 allows.
"""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, line/paragraph separators, bidirectional overrides and isolates, and lone
# surrogates (a JSON string may hold one; it cannot even be encoded as UTF-8).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# What XML 1.0 forbids (https://www.w3.org/TR/xml/#charsets), besides what _UNSAFE already escapes.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _escape_one(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: str) -> str:
    """``text`` with every control, separator, bidi or surrogate character written as a visible escape."""
    return _UNSAFE.sub(_escape_one, text) if _UNSAFE.search(text) else text


def xml_text(text: str) -> str:
    """``escape`` for XML: the result holds only characters XML 1.0 allows."""
    return _NOT_XML.sub(_escape_one, escape(text))
