r"""The client configuration a user already has, read as their own client reads it.

`-F FILE` and `--command-config FILE` take either family's file: a Java `client.properties` (read
with `java.util.Properties`' syntax and translated, kprobe.clientprops.java) or a librdkafka/kcat
file (read line by line as kcat reads it, so a `\` in a password stays a `\`). Which one a file is
comes from its keys (kprobe.clientprops.keys). Without either option kprobe reads kcat's own file
(`$KCAT_CONFIG`, else `~/.config/kcat.conf`), as kcat does. `-X key=value` pairs (librdkafka's
names) come last and win.

Every key is used, or named in one warning line (with the key it most likely meant): a setting
dropped without a word is how a probe ends up judging a configuration the user never wrote.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from kprobe.clientprops import kcat_config_file as kcat_config_file  # defined there, kept here for callers
from kprobe.clientprops.keys import JAVA_ONLY, JAVA_USED, LIBRDKAFKA_ONLY, LIBRDKAFKA_USED, Dialect, dialect_of, nearest
from kprobe.errors import UsageError
from kprobe.logs import logger
from kprobe.records import field, record

_LOG = logger("kprobe.clientprops")
MAX_FILE_BYTES = 1024 * 1024  # a client properties file is a few hundred bytes; a key store is read elsewhere
# Keys with control characters a file may hold before it is taken for something other than text: a stray one
# from an editor is named in a warning like any unknown key; a binary file read as properties makes one per
# line break it happens to hold, hundreds of lines of noise before a probe of settings nobody wrote.
MAX_CONTROL_KEYS = 3
# A line (either family's readers end one at \r or \n) whose key, read loosely up to a separator, holds a
# control character: one scan of the file, whatever its number of lines.
_CONTROL_KEY = re.compile(r"(?:\A|(?<=[\r\n]))[ \t\f]*(?![#!])[^=: \t\f\r\n\x00-\x1f\x7f]*[\x00-\x08\x0b\x0e-\x1f\x7f]")
_JAVA_BLANKS = "".join(chr(c) for c in range(33))  # what Java's String.trim() strips
_KEY_START = re.compile(r"^[ \t\f]*([^\s#!=:\\][^\s=:\\]*)")
# What to use instead, for the other family's most common names.
_JAVA_FOR = {"sasl.username": "sasl.jaas.config", "sasl.password": "sasl.jaas.config",
             "ssl.ca.location": "ssl.truststore.location", "ssl.certificate.location": "ssl.keystore.location",
             "ssl.key.location": "ssl.keystore.location", "metadata.broker.list": "bootstrap.servers",
             "sasl.mechanisms": "sasl.mechanism"}
_CREDENTIALS = ("sasl.username", "sasl.password")
_RD_FOR = {"sasl.jaas.config": "sasl.username and sasl.password", "ssl.truststore.location": "ssl.ca.location",
           "ssl.keystore.location": "ssl.certificate.location and ssl.key.location"}


@record
class ClientProperties:
    """The settings every client of a run takes (librdkafka's names), and what the user gave."""

    props: dict[str, str] = field(default_factory=dict)
    # The keys as the user wrote them, file by file then -X, for the report (redacted by its writer).
    given: dict[str, str] = field(default_factory=dict)
    # The -X pairs alone, as given: with the files' names, what a command to run the probe again repeats.
    pairs: dict[str, str] = field(default_factory=dict)
    # sasl.username and sasl.password -> the key the user gave each under: itself, or sasl.jaas.config in a
    # Java file. An authentication failure's fix names the key the user wrote, never its value.
    credentials: dict[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    # Which files were read and as what: --verbose lines.
    notes: tuple[str, ...] = ()

    @property
    def bootstrap(self) -> str | None:
        """bootstrap.servers (or librdkafka's older metadata.broker.list), when a file or -X gave it."""
        return self.props.get("bootstrap.servers") or self.props.get("metadata.broker.list") or None

    def __repr__(self) -> str:  # values hold passwords and keys
        return f"ClientProperties(keys={sorted(self.props)})"


def load(files: Sequence[str], pairs: Iterable[str] = (), *, kcat_default: bool = False) -> ClientProperties:
    """Every -F/--command-config file in order, then the -X pairs; warnings logged once, here.

    `kcat_default`: with no file given, read kcat's own configuration file when there is one.
    """
    props: dict[str, str] = {}
    given: dict[str, str] = {}
    pairs_given: dict[str, str] = {}
    credentials: dict[str, str] = {}
    warnings: list[str] = []
    notes: list[str] = []
    sources: list[tuple[str, str]] = [(name, "-F") for name in files]
    if not sources and kcat_default:
        found = kcat_config_file()
        if found is not None:
            sources.append((str(found), "kcat"))
    for name, how in sources:
        data = _read(name)
        _check_text(data, name)
        label = Path(name).name
        # Keys are ASCII in practice: Latin-1 reads them from any bytes, to tell the dialect first.
        dialect = "librdkafka" if how == "kcat" else dialect_of(_keys_of(data.decode("latin-1")))
        if dialect == "librdkafka":
            raw = _read_librdkafka(_utf8(data, name), name)
            notes.append(f"read {name} as librdkafka properties"
                         + (" (kcat's configuration file; no -F given)" if how == "kcat" else ""))
            mine, said = _librdkafka(raw, label)
        else:
            from kprobe.clientprops.javaprops import parse_java_properties

            # Latin-1, as Kafka's tools and most applications load a file (Properties.load(InputStream)),
            # and each value trimmed, as Kafka's ConfigDef trims what it parses.
            raw = {k: v.strip(_JAVA_BLANKS) for k, v in parse_java_properties(data.decode("latin-1"),
                                                                               source=label).items()}
            mine, said = _java(raw, label, decided=dialect == "java")
            notes.append(f"read {name} as " + ("Java client properties" if dialect == "java"
                                               else "properties (no key tells Java from librdkafka)"))
        props.update(mine)
        given.update(raw)
        java_login = dialect == "java" and "sasl.jaas.config" in raw
        credentials.update({key: "sasl.jaas.config" if java_login else key for key in _CREDENTIALS if key in mine})
        warnings += said
    for pair in pairs:
        key, value = _pair(pair)
        given[key] = pairs_given[key] = value
        if key in JAVA_ONLY:
            warnings.append(f"-X {key} is a Java client setting, which librdkafka refuses: give it in a Java "
                            "properties file (--command-config FILE), or use librdkafka's "
                            f"{_RD_FOR.get(key, 'name for it')}")
            continue
        props[key] = value
        if key in _CREDENTIALS:
            credentials[key] = key
        warnings += _unused_librdkafka([key], "-X")
    for line in notes:
        _LOG.debug("%s", line)
    for line in warnings:
        _LOG.warning("%s", line)
    return ClientProperties(props=props, given=given, pairs=pairs_given, credentials=credentials,
                            warnings=tuple(warnings), notes=tuple(notes))


def _check_text(data: bytes, name: str) -> None:
    """Refuse a file that is not text before any of its lines is warned about or used.

    NUL bytes, which no text file holds, or more than MAX_CONTROL_KEYS lines whose key (the start of the
    line, up to a separator) holds a control character. Keys alone are looked at: a value may hold bytes of
    another encoding, and a line's key is where a binary file read as properties shows itself.
    """
    if b"\0" in data:
        raise UsageError(f"cannot read -F {name}: it holds NUL bytes, so it is not a text file (a key store or "
                         "another binary file?): give the properties file itself")
    lines = _CONTROL_KEY.finditer(data.decode("latin-1"))
    if sum(1 for _ in itertools.islice(lines, MAX_CONTROL_KEYS + 1)) > MAX_CONTROL_KEYS:
        raise UsageError(f"cannot read -F {name}: keys with control characters on more than {MAX_CONTROL_KEYS} "
                         "lines, so it is not a text file (a key store or another binary file?): give the "
                         "properties file itself")


def _java(raw: Mapping[str, str], label: str, *, decided: bool) -> tuple[dict[str, str], list[str]]:
    """A Java file's settings under librdkafka's names, and the lines about its other keys.

    A file with no Java-only key (only names both families share) is taken key by key, without
    the Java client's own rules on credentials: its credentials may well come from -X.
    """
    warnings: list[str] = []
    if decided:
        from kprobe.clientprops.java import translate

        done = translate(raw, source=label)
        props, warnings = done.props, list(done.warnings)
    else:
        props = {k: v for k, v in raw.items() if k in JAVA_USED and k in LIBRDKAFKA_USED}
        if props.get("ssl.endpoint.identification.algorithm", "x").strip() == "":
            props["ssl.endpoint.identification.algorithm"] = "none"  # Java's empty is librdkafka's none
    for key in raw:
        if key in JAVA_USED and (decided or key in LIBRDKAFKA_USED):
            continue
        if key in LIBRDKAFKA_ONLY:
            warnings.append(f"{label}: {key} is a librdkafka setting, which a Java client ignores, and so does kprobe "
                            f"in a Java properties file: use {_JAVA_FOR.get(key, 'the Java client’s name for it')}")
        else:
            warnings.append(_unknown(key, label, "java"))
    return props, warnings


def _librdkafka(raw: Mapping[str, str], label: str) -> tuple[dict[str, str], list[str]]:
    props: dict[str, str] = {}
    warnings: list[str] = []
    for key, value in raw.items():
        if key in JAVA_ONLY:
            warnings.append(f"{label}: {key} is a Java client setting, which librdkafka refuses, so kprobe leaves it "
                            f"out: use {_RD_FOR.get(key, 'librdkafka’s name for it')}, or give a Java file whole")
            continue
        props[key] = value
    warnings += _unused_librdkafka(props, label)
    return props, warnings


def _unused_librdkafka(keys: Iterable[str], label: str) -> list[str]:
    return [_unknown(key, label, "librdkafka") for key in keys if key not in LIBRDKAFKA_USED]


def _unknown(key: str, label: str, dialect: Dialect) -> str:
    """One line for a key kprobe does not use: a likely typo named, else what becomes of it."""
    near = nearest(key, dialect)
    if near is not None:
        return f"{label}: {key} is not a setting kprobe knows: did you mean {near}?"
    if dialect == "librdkafka":
        return (f"{label}: {key} is not used by kprobe's own client (its librdkafka clients, as in --roundtrip, "
                "get it as given)")
    return f"{label}: {key} is not used by kprobe (it does not change how a client connects)"


def _keys_of(text: str) -> set[str]:
    """The keys a file's lines start with, read loosely: enough to tell the dialect, whatever the syntax."""
    keys = set()
    for line in text.splitlines():
        match = _KEY_START.match(line)
        if match:
            keys.add(match.group(1))
    return keys


def _utf8(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"cannot read -F {name}: UnicodeDecodeError: give a readable UTF-8 properties file "
                         "(librdkafka's files are UTF-8)") from None


def _read(name: str) -> bytes:
    """The file's bytes, at most MAX_FILE_BYTES: `-F /dev/zero` or a pipe that never ends is refused, not read."""
    path = Path(name).expanduser()
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise UsageError(f"cannot read -F {name}: more than {MAX_FILE_BYTES // (1024 * 1024)} MiB, too big for "
                             "a client properties file: give the properties file itself")
        return data
    except FileNotFoundError:
        raise UsageError(f"cannot read -F {name}: no such file: give the path of a properties file") from None
    except IsADirectoryError:
        raise UsageError(f"cannot read -F {name}: it is a directory, give a properties file") from None
    except PermissionError:
        raise UsageError(f"cannot read -F {name}: permission denied: make it readable (chmod u+r) or give another "
                         "file") from None
    except OSError as exc:
        raise UsageError(f"cannot read -F {name}: {exc.__class__.__name__}: give a readable properties "
                         "file") from None


def _read_librdkafka(text: str, name: str) -> dict[str, str]:
    """As kcat reads a file: one `key=value` per line, `#` (or `!`) comments, no escapes or continuations."""
    props: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "!")):
            continue
        key, sep, value = stripped.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"bad line {number} in -F {name}: expected key=value: write each line as key=value "
                             "('#' starts a comment)")
        props[key.strip()] = value.strip()
    return props


def _pair(pair: str) -> tuple[str, str]:
    key, sep, value = pair.partition("=")
    if not sep or not key.strip():
        # Echo only the key-like start: `-X sasl.password:hunter2` must not print hunter2.
        shown = re.match(r"[\w.-]*", pair.strip())
        raise UsageError(f"bad -X {shown.group(0) if shown else ''!r}: write it as -X key=value, "
                         "e.g. -X security.protocol=SSL")
    return key.strip(), value.strip()
