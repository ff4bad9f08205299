"""DER, the little that the key store readers need: elements, their contents, object identifiers.

Standard library only, and nothing at all imported: the JKS key protector, a PKCS12 store's bags and a
PEM block's first element are read with these few functions.
"""

from __future__ import annotations

__all__ = ["MAX_DEPTH", "Corrupt", "expect", "items", "oid", "tlv"]

# How deeply a reader follows an element that holds more of its kind (a BER string in chunks, each chunk a
# string) before it calls the structure corrupt: stores as tools write them nest one level, while a hostile
# file nests thousands of headers in a few kilobytes, past Python's recursion limit.
MAX_DEPTH = 32


class Corrupt(ValueError):
    """A structure ended early or had an unexpected tag."""


def tlv(data: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """(tag, start of content, end of content) of the DER element at pos (definite lengths only)."""
    if pos + 2 > end:
        raise Corrupt
    tag, n = data[pos], data[pos + 1]
    pos += 2
    if n & 0x80:
        k = n & 0x7F
        if k == 0 or k > 4 or pos + k > end:
            raise Corrupt
        n = int.from_bytes(data[pos : pos + k], "big")
        pos += k
    if pos + n > end:
        raise Corrupt
    return tag, pos, pos + n


def items(data: bytes, start: int, end: int) -> list[tuple[int, int, int]]:
    """The elements inside a constructed element's content."""
    out = []
    pos = start
    while pos < end:
        item = tlv(data, pos, end)
        out.append(item)
        pos = item[2]
    return out


def expect(item: tuple[int, int, int], tag: int) -> tuple[int, int, int]:
    """The item itself, when it has this tag; :class:`Corrupt` otherwise."""
    if item[0] != tag:
        raise Corrupt
    return item


def oid(dotted: str) -> bytes:
    """The content bytes of an OBJECT IDENTIFIER, to compare with what a store holds."""
    parts = [int(p) for p in dotted.split(".")]
    out = bytearray([parts[0] * 40 + parts[1]])
    for p in parts[2:]:
        chunk = [p & 0x7F]
        p >>= 7
        while p:
            chunk.append(0x80 | (p & 0x7F))
            p >>= 7
        out += bytes(reversed(chunk))
    return bytes(out)
