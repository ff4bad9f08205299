"""A Java client's `sasl.jaas.config`, read as Kafka reads it.

Kafka parses this one property with `java.io.StreamTokenizer` (`JaasConfig`): exactly one login
module, a control flag, then `key=value` options up to a `;`. Values are words or quoted strings
(`"..."` or `'...'`, with backslash escapes); a bare number is refused ("Value not specified for
key"), and `//` and `/* */` are comments. Reading it the same way means a file that a Java
client refuses is refused here too, in one line, and a file it takes gives the same options.

No error quotes an option's value: `password="..."` is the usual option.
"""

from __future__ import annotations

from kprobe.errors import UsageError
from kprobe.records import field, record

_FLAGS = ("required", "requisite", "sufficient", "optional")
# StreamTokenizer's defaults plus Kafka's wordChars('-'), ('_'), ('$'): letters and chars >= 128
# start a word; digits, '.' and '-' continue one (they are its "numeric" characters).
_STARTS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_$-")
_CONTINUES = _STARTS | frozenset("0123456789.")
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


@record
class LoginModule:
    """One JAAS login module entry: its class, flag and options."""

    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def simple_name(self) -> str:
        """`PlainLoginModule` for `org.apache.kafka.common.security.plain.PlainLoginModule`."""
        return self.class_name.rsplit(".", 1)[-1]

    def __repr__(self) -> str:  # options hold passwords
        return f"LoginModule({self.class_name!r}, {self.flag!r}, keys={sorted(self.options)})"


def _word_start(ch: str) -> bool:
    return ch in _STARTS or ord(ch) >= 128


def _word_part(ch: str) -> bool:
    return ch in _CONTINUES or ord(ch) >= 128


def _tokens(text: str, where: str) -> list[tuple[str, str]]:
    """(kind, text) pairs: word, quoted, number, or the character itself ('=', ';', ...)."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch <= " ":
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif _word_start(ch):
            j = i + 1
            while j < n and _word_part(text[j]):
                j += 1
            out.append(("word", text[i:j]))
            i = j
        elif ch in "0123456789.":
            j = i + 1
            while j < n and text[j] in "0123456789.":
                j += 1
            out.append(("number", text[i:j]))
            i = j
        elif ch in "\"'":
            value, i = _quoted(text, i, where)
            out.append(("quoted", value))
        else:
            out.append((ch, ch))
            i += 1
    return out


def _quoted(text: str, start: int, where: str) -> tuple[str, int]:
    """A quoted string from `start` (the quote) to its closing quote, escapes applied as Java does."""
    quote = text[start]
    buf: list[str] = []
    i, n = start + 1, len(text)
    while i < n:
        ch = text[i]
        if ch == quote:
            return "".join(buf), i + 1
        if ch in "\r\n":
            break  # StreamTokenizer ends a quoted string at the line's end
        if ch == "\\" and i + 1 < n:
            nxt = text[i + 1]
            if nxt in "01234567":  # up to three octal digits, the first at most 3 for three
                j = i + 1
                limit = 3 if nxt <= "3" else 2
                while j < n and j - (i + 1) < limit and text[j] in "01234567":
                    j += 1
                buf.append(chr(int(text[i + 1:j], 8)))
                i = j
                continue
            buf.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        buf.append(ch)
        i += 1
    raise UsageError(f"bad sasl.jaas.config{where}: a quoted value is not closed on its line: close it with "
                     f"the same quote it opens with")


def parse_jaas(text: str, *, source: str = "") -> LoginModule:
    """The one login module of a `sasl.jaas.config` value; a UsageError where Kafka's client refuses it.

    `source` names where the value came from (a file), for the message.
    """
    where = f" in {source}" if source else ""
    tokens = _tokens(text, where)
    if not tokens:
        raise UsageError(f"bad sasl.jaas.config{where}: it is empty: write e.g. "
                         "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" "
                         "password=\"p\";")
    kind, class_name = tokens[0]
    if kind != "word":
        raise UsageError(f"bad sasl.jaas.config{where}: it must start with a login module's class name, e.g. "
                         "org.apache.kafka.common.security.scram.ScramLoginModule")
    if len(tokens) < 2 or tokens[1][0] != "word" or tokens[1][1].lower() not in _FLAGS:
        raise UsageError(f"bad sasl.jaas.config{where}: {class_name} must be followed by a control flag "
                         f"({', '.join(_FLAGS)}; usually required)")
    flag = tokens[1][1].lower()
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and tokens[i][0] != ";":
        kind, key = tokens[i]
        if kind not in ("word", "quoted") or i + 1 >= len(tokens) or tokens[i + 1][0] != "=":
            raise UsageError(f"bad sasl.jaas.config{where}: {_not_an_option(tokens, i, class_name, flag)}")
        if i + 2 >= len(tokens) or tokens[i + 2][0] not in ("word", "quoted"):
            raise UsageError(f"bad sasl.jaas.config{where}: the value of {key} is missing or unquoted (Kafka reads "
                             f"an unquoted number as no value): write {key}=\"value\"")
        options[key] = tokens[i + 2][1]
        i += 3
    if i >= len(tokens):
        raise UsageError(f"bad sasl.jaas.config{where}: it must end with ';' (Kafka: \"JAAS config entry not "
                         "terminated by semi-colon\")")
    if i + 1 < len(tokens):
        raise UsageError(f"bad sasl.jaas.config{where}: it holds more than one login module, and a Kafka client "
                         "takes exactly one: keep the one for this listener's sasl.mechanism")
    return LoginModule(class_name, flag, options)


def _not_an_option(tokens: list[tuple[str, str]], i: int, class_name: str, flag: str) -> str:
    """Why tokens[i], where an option's name belongs, is not one, and the fix; never the token itself.

    After an unquoted value the token is most likely more of that value: a password with spaces
    (`password=correct horse battery staple;`) reads as password=correct, then stray words. So the
    message names only what is known to be a name: the option before it, or none. The token itself may
    be a piece of a password.
    """
    if i == 2:
        kind, key = tokens[i]
        if kind == "word":  # right after the control flag: a name, never part of a value
            return f"option {key} has no '=': write {key}=\"value\""
        return f"expected an option name after {class_name} {flag}: write options as key=\"value\""
    previous = tokens[i - 3][1]  # the last option read: name, '=', value, then this token
    if tokens[i - 1][0] == "word":
        return (f"the value of option {previous} has spaces or characters a bare word cannot hold: quote it, "
                f"write {previous}=\"...\"")
    return (f"what follows option {previous}'s value is not an option: write options as key=\"value\", "
            "separated by spaces")
