r"""Java properties files, read exactly as `java.util.Properties.load` reads them.

Kafka's brokers, its Java clients and its command-line tools all load their configuration with
`java.util.Properties`, whose rules are older and odder than `key=value` lines: continuations with
backslashes, three separators, `\uXXXX` escapes, comments that cannot be continued, and a few
edge cases at the end of the file. A reader that is nearly right shows the user a value the JVM
never sees (a `sasl.jaas.config` cut at its first line, a password with an escape left in), so this
one follows JDK 17's `Properties.LineReader.readLine` and `Properties.load0`/`loadConvert` rule for
rule; tests/clientprops/test_javaprops.py compares it with the JDK on generated files.
"""

from __future__ import annotations

import re

from kprobe.errors import UsageError

# Natural lines: the text up to `\r\n`, `\r` or `\n` (and the terminator), or an unterminated last line.
# `\r\n` as one terminator reads as Java does: outside a continuation its `\n` is an empty line,
# which Java skips; after a continuation Java drops the `\n` itself.
_NATURAL_LINE = re.compile(r"([^\r\n]*)(\r\n|\r|\n)|([^\r\n]+)\Z")
# Properties' whitespace: space, tab and form feed, nothing else (no `\v`, no Unicode spaces).
_WHITESPACE = " \t\f"
# A key: up to the first `=`, `:` or whitespace that no backslash escapes.
_KEY = re.compile(r"(?:[^\\=: \t\f]|\\.)*", re.DOTALL)
# An escape, with `\u` and anything but four hex digits after it (malformed) as its own alternative.
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|(u)|(.))", re.DOTALL)
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class _MalformedEscape(Exception):
    r"""A `\u` without four hex digits after it, at an offset of the string being converted."""

    def __init__(self, offset: int) -> None:
        super().__init__(offset)
        self.offset = offset


def java_logical_lines(text: str) -> list[str]:
    r"""The logical lines `Properties.load` reads, escapes not yet converted, comments and blank lines gone.

    Java's LineReader, rule for rule: leading space/tab/form feed dropped from every natural line
    (continuations included); a line whose first character is `#` or `!` is a comment even when it
    ends in a backslash; an odd run of backslashes at the end continues the line, an even run is
    escaped backslashes; a blank continuation ends the logical line. At the end of the file a line
    made of one backslash (the file's last character, or followed only by `\n` or `\r`) is a line
    of its own, empty, hence the key "" (Java's quirk, kept).
    """
    return [line for line, _ in _logical_lines(text)]


def _logical_lines(text: str) -> list[tuple[str, list[tuple[int, int]]]]:
    """Each logical line with its pieces: (offset in the logical line, natural line number), for messages."""
    out: list[tuple[str, list[tuple[int, int]]]] = []
    pending = ""  # the logical line so far; "" is Java's `len == 0`, where comments and blank lines are seen
    pieces: list[tuple[int, int]] = []
    end = len(text)
    for number, match in enumerate(_NATURAL_LINE.finditer(text), 1):
        content, terminator = (match.group(1), match.group(2)) if match.group(3) is None else (match.group(3), "")
        line = content.lstrip(_WHITESPACE)
        if not pending and (not line or line[0] in "#!"):
            continue  # blank or comment: a comment's trailing backslash continues nothing
        if not line:  # a blank continuation ends the logical line
            out.append((pending, pieces))
            pending, pieces = "", []
            continue
        pieces.append((len(pending), number))
        run = len(line) - len(line.rstrip("\\"))
        if run % 2 == 0:
            out.append((pending + line, pieces))
            pending, pieces = "", []
        elif not terminator or (match.end() == end and len(terminator) == 1):
            # Java reaches the end of the input on this line: the last backslash is dropped, and the
            # line is returned even when nothing is left of it (the `\r\n` case continues instead,
            # then finds nothing: no line).
            out.append((pending + line[:-1], pieces))
            pending, pieces = "", []
        else:
            pending += line[:-1]
            if not pending:
                pieces = []
    if pending:
        out.append((pending, pieces))
    return out


def _convert(raw: str) -> str:
    r"""`loadConvert`: `\uXXXX`, `\t`, `\n`, `\r`, `\f`, and `\c` as `c` for any other character."""
    if "\\" not in raw:
        return raw
    surrogates = False

    def one(match: re.Match[str]) -> str:
        nonlocal surrogates
        hexa, bad, other = match.groups()
        if hexa is not None:
            char = chr(int(hexa, 16))
            surrogates = surrogates or "\ud800" <= char <= "\udfff"
            return char
        if bad is not None:
            raise _MalformedEscape(match.start())
        return _SIMPLE_ESCAPES.get(other, other)

    out = _ESCAPE.sub(one, raw)
    if surrogates:
        # Java's strings are UTF-16: `\ud83d\ude00` is one character there; a lone surrogate stays alone.
        out = out.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return out


def _split(line: str) -> tuple[int, int]:
    """`load0`'s split of a logical line: (the key's length, where the value starts)."""
    key_end = _KEY.match(line).end()  # type: ignore[union-attr]  # the pattern matches "" at least
    limit = len(line)
    start = key_end
    separated = False
    if start < limit:
        separated = line[start] in "=:"
        start += 1
    while start < limit:
        char = line[start]
        if char not in _WHITESPACE:
            if separated or char not in "=:":
                break
            separated = True  # one `=` or `:` after the whitespace that ended the key
        start += 1
    return key_end, start


def parse_java_properties(text: str, *, source: str = "the properties file") -> dict[str, str]:
    r"""The properties `java.util.Properties.load(Reader)` reads from `text`; later keys win, as in Java.

    A `\u` escape without four hex digits is bad input, as in Java (which throws): the message names
    the line of `source` and what to write, never the value, which may be a password.
    """
    settings: dict[str, str] = {}
    for line, pieces in _logical_lines(text):
        key_end, value_start = _split(line)
        key = _convert_or_say(line[:key_end], 0, pieces, source)
        settings[key] = _convert_or_say(line[value_start:], value_start, pieces, source)
    return settings


def _convert_or_say(raw: str, base: int, pieces: list[tuple[int, int]], source: str) -> str:
    r"""`_convert`, a malformed `\u` told as bad input on its natural line (`raw` starts at `base` of the line)."""
    try:
        return _convert(raw)
    except _MalformedEscape as bad:
        at = base + bad.offset
        number = next((n for start, n in reversed(pieces) if start <= at), pieces[0][1] if pieces else 1)
        raise UsageError(
            f"bad \\u escape on line {number} of {source}: a backslash starts an escape in a properties file: "
            "write \\u and four hex digits (e.g. \\u00e9), or \\\\ for a backslash (e.g. C:\\\\Users)") from None
