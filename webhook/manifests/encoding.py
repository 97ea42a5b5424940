"""Bytes to text as kubectl reads a file or stdin: cli-runtime's ``FileVisitor.Visit`` wraps both in
``transform.NewReader(f, unicode.BOMOverride(unicode.UTF8.NewDecoder()))`` before ``StreamVisitor`` reads them.

- ``FF FE`` or ``FE FF`` first: the rest is UTF-16 (little or big endian); an unpaired surrogate, or a last odd
  byte, becomes U+FFFD (golang.org/x/text ``utf16Decoder``).
- ``EF BB BF`` first: the BOM is dropped and the rest passes unchanged (``transform.Nop``): a byte that is not
  UTF-8 is then refused by the YAML decoder, as kubectl refuses it.
- anything else is UTF-8 in which each ill-formed subsequence (its maximal subpart, as W3C says) becomes U+FFFD:
  a Latin-1 ``©`` in a comment reads as ``�``, and kubectl applies the file.

``fix`` must write back what it read: ``Decoded`` keeps the encoding and BOM, and for UTF-8 with bytes that are
not UTF-8 a text in which each such byte is kept (``surrogateescape``) so untouched lines stay byte for byte.
"""

from __future__ import annotations

import codecs
import io
import re
import struct
from dataclasses import dataclass
from typing import IO, cast

UTF8_BOM = b"\xef\xbb\xbf"
UTF16LE_BOM = b"\xff\xfe"
UTF16BE_BOM = b"\xfe\xff"
REPLACEMENT = "\ufffd"
_ESCAPED = re.compile("[\udc80-\udcff]")


def utf16(data: bytes, big_endian: bool) -> str:
    """``data`` (after its BOM) as golang.org/x/text's UTF-16 decoder reads it: a surrogate followed by a low
    surrogate is one pair (U+FFFD unless the first is a high one), any other surrogate is U+FFFD, and so is a
    last odd byte."""
    codec = "utf-16-be" if big_endian else "utf-16-le"
    try:
        return data.decode(codec)  # valid UTF-16 (the common case) decodes the same either way
    except UnicodeDecodeError:
        pass
    count = len(data) // 2
    units = struct.unpack(f"{'>' if big_endian else '<'}{count}H", data[:2 * count])
    out: list[str] = []
    i = 0
    while i < count:
        unit = units[i]
        if 0xD800 <= unit <= 0xDFFF:
            if i + 1 < count and 0xDC00 <= units[i + 1] <= 0xDFFF:
                low = units[i + 1]
                out.append(chr(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)) if unit < 0xDC00 else REPLACEMENT)
                i += 2
                continue
            out.append(REPLACEMENT)
        else:
            out.append(chr(unit))
        i += 1
    if len(data) % 2:
        out.append(REPLACEMENT)
    return "".join(out)


class _Replacing:
    """A byte stream read through x/text's UTF-8 decoder: valid UTF-8 out, U+FFFD for each ill-formed
    subsequence (Python's ``replace`` handler takes the same maximal subparts). Incremental, so memory stays
    flat however long the stream is."""

    def __init__(self, stream: IO[bytes], head: bytes) -> None:
        self._stream, self._head = stream, head
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._done = False

    def read(self, size: int = -1) -> bytes:
        if self._done:
            return b""
        block = self._head + self._stream.read(size)
        self._head = b""
        final = not block
        text = self._decoder.decode(block, final)
        if final:
            self._done = True
        if not text and not final:
            return self.read(size)  # a partial sequence only: read on (an empty answer would end the stream)
        return text.encode("utf-8")


class _Prefixed:
    """``head`` and then the rest of ``stream``, unchanged."""

    def __init__(self, stream: IO[bytes], head: bytes) -> None:
        self._stream, self._head = stream, head

    def read(self, size: int = -1) -> bytes:
        if self._head:
            head, self._head = self._head, b""
            if size < 0:
                return head + self._stream.read()
            return head if len(head) >= size else head + self._stream.read(size - len(head))
        return self._stream.read(size)


def file_visitor(stream: IO[bytes], limit: int) -> IO[bytes] | int:
    """``stream`` as ``FileVisitor`` hands it to ``StreamVisitor``: UTF-8 bytes. A UTF-16 stream is read whole
    (at most ``limit`` bytes; over it, its length so far is returned instead)."""
    head = stream.read(3)
    while len(head) < 3:
        more = stream.read(3 - len(head))
        if not more:
            break
        head += more
    if head[:2] in (UTF16LE_BOM, UTF16BE_BOM):
        data = head[2:] + stream.read(limit + 1 - len(head))
        if len(data) + 2 > limit:
            return len(data) + 2
        return io.BytesIO(utf16(data, head[:2] == UTF16BE_BOM).encode("utf-8"))
    if head == UTF8_BOM:
        return stream  # the BOM is dropped, the rest passes unchanged
    return cast(IO[bytes], _Replacing(stream, head))


@dataclass(frozen=True, slots=True)
class Decoded:
    """A file's bytes as ``fix`` edits them: ``text`` is what kubectl reads (what is judged and edited);
    ``encode`` turns an edited ``text`` back into bytes in the file's own encoding and BOM, with every byte
    that was not UTF-8 as it was."""

    text: str
    encoding: str  # "UTF-8", "UTF-16LE" or "UTF-16BE"
    bom: bytes = b""
    escaped: str | None = None  # UTF-8 with bytes that are not: ``text`` with each such byte kept

    def encode(self, text: str) -> bytes:
        if self.encoding == "UTF-8":
            return self.bom + text.encode("utf-8", "surrogateescape")
        return self.bom + text.encode("utf-16-be" if self.encoding == "UTF-16BE" else "utf-16-le")


class NotText(ValueError):
    """Bytes ``fix`` cannot write back as it read them (why, and the 1-based line)."""

    def __init__(self, reason: str, line: int) -> None:
        super().__init__(reason)
        self.reason, self.line = reason, line


def decode_for_fix(data: bytes) -> Decoded:
    """``data`` as kubectl reads it, in a form ``fix`` can write back unchanged where it does not edit.

    UTF-16 must be valid (an unpaired surrogate would be written back as U+FFFD: refused); UTF-8 after a BOM
    must be valid (kubectl refuses it too). In UTF-8 without a BOM, each byte that is not UTF-8 is judged as
    U+FFFD and kept as it was (``escaped``); ``Decoded.text`` then has one U+FFFD per such byte, so offsets in
    it are offsets in ``escaped``. Raises ``NotText``."""
    if data[:2] in (UTF16LE_BOM, UTF16BE_BOM):
        big = data[:2] == UTF16BE_BOM
        name = "UTF-16BE" if big else "UTF-16LE"
        try:
            text = data[2:].decode("utf-16-be" if big else "utf-16-le")
        except UnicodeDecodeError as exc:
            line = utf16(data[2:exc.start + 2], big).count("\n") + 1
            raise NotText(f"not valid {name} text ({exc.reason}); kubectl would read it with U+FFFD in its "
                          "place", line) from None
        return Decoded(text, name, data[:2])
    if data.startswith(UTF8_BOM):
        try:
            return Decoded(data[3:].decode("utf-8"), "UTF-8", UTF8_BOM)
        except UnicodeDecodeError as exc:
            line = data[3:exc.start + 3].count(b"\n") + 1
            raise NotText(f"not UTF-8 text (byte 0x{data[exc.start + 3]:02x})", line) from None
    try:
        return Decoded(data.decode("utf-8"), "UTF-8")
    except UnicodeDecodeError:
        pass
    escaped = data.decode("utf-8", "surrogateescape")
    return Decoded(_ESCAPED.sub(REPLACEMENT, escaped), "UTF-8", b"", escaped)


def escaped_lines(decoded: Decoded, start: int, end: int) -> int | None:
    """The 1-based line of the first byte kept as it was (not UTF-8) between offsets ``start`` and ``end``."""
    if decoded.escaped is None:
        return None
    found = _ESCAPED.search(decoded.escaped, start, end)
    return None if found is None else decoded.escaped.count("\n", 0, found.start()) + 1


__all__ = ["Decoded", "NotText", "decode_for_fix", "escaped_lines", "file_visitor", "utf16"]
