"""kprobe's java.util.Properties reader against the rules, and against the JDK itself.

The JDK is the reference: one small Java program, compiled once into the session's temporary
directory and started once, answers every file the tests send it on stdin (a line of base64 UTF-8
text each) with the properties Properties.load(StringReader) reads, each string as hex UTF-16 code
units, so Python compares character for character (lone surrogates included).
"""

from __future__ import annotations

import base64
import shutil
import subprocess
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kprobe.check.deployments.properties import logical_lines, parse_properties, read_properties
from kprobe.clientprops.javaprops import java_logical_lines, parse_java_properties
from kprobe.errors import UsageError

JAVA_SOURCE = r"""
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;

public class LoadProperties {
    private static final char[] HEX = "0123456789abcdef".toCharArray();

    private static void hex(StringBuilder out, String s) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            out.append(HEX[(c >> 12) & 15]).append(HEX[(c >> 8) & 15]).append(HEX[(c >> 4) & 15]).append(HEX[c & 15]);
        }
    }

    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        Writer out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.US_ASCII));
        String record;
        while ((record = in.readLine()) != null) {
            String text = new String(Base64.getDecoder().decode(record), StandardCharsets.UTF_8);
            Properties props = new Properties();
            StringBuilder line = new StringBuilder();
            try {
                props.load(new StringReader(text));
                line.append("OK");
                for (Map.Entry<Object, Object> e : props.entrySet()) {
                    line.append(' ');
                    hex(line, (String) e.getKey());
                    line.append('=');
                    hex(line, (String) e.getValue());
                }
            } catch (IllegalArgumentException e) {
                line.setLength(0);
                line.append("Malformed \\uxxxx encoding.".equals(e.getMessage()) ? "MALFORMED" : "OTHER");
            }
            out.write(line.append('\n').toString());
            out.flush();
        }
    }
}
"""


def _unhex(text: str) -> str:
    return bytes.fromhex(text).decode("utf-16-be", "surrogatepass")


class Jdk:
    """One JVM, asked one file at a time over a pipe: Properties.load's answer, or None when it throws."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc

    def load(self, text: str) -> dict[str, str] | None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(base64.b64encode(text.encode("utf-8")).decode("ascii") + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().rstrip("\n")
        if answer == "MALFORMED":
            return None
        head, *pairs = answer.split(" ")
        assert head == "OK", f"the JDK said {answer!r}"
        return {_unhex(k): _unhex(v) for k, _, v in (pair.partition("=") for pair in pairs)}


@pytest.fixture(scope="module")
def jdk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jdk]:
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("needs a JDK (javac and java on PATH)")
    where = tmp_path_factory.mktemp("java-properties")
    (where / "LoadProperties.java").write_text(JAVA_SOURCE, encoding="utf-8")
    subprocess.run(["javac", "-d", str(where), str(where / "LoadProperties.java")], check=True, timeout=120)
    # A short-lived helper: C1 only and the serial collector start fastest.
    proc = subprocess.Popen(["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", "-cp", str(where),
                             "LoadProperties"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            encoding="ascii")
    try:
        yield Jdk(proc)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


# Exact outputs, one rule each. Every row is also checked against the JDK (test_the_table_is_what_the_jdk_reads).
JAAS = ("sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        "    username='ABCDEFGHIJKLMNOP' \\\n"
        "    password='s3cr3t/With+Slash=';\n")
TABLE: list[tuple[str, str, dict[str, str]]] = [
    ("equals", "a=b\n", {"a": "b"}),
    ("colon", "a:b\n", {"a": "b"}),
    ("whitespace separator", "a b\n", {"a": "b"}),
    ("tab separator", "a\tb\n", {"a": "b"}),
    ("form feed separator", "a\fb\n", {"a": "b"}),
    ("spaces around the separator", "key = value\n", {"key": "value"}),
    ("colon then equals: one separator only", "key:=value\n", {"key": "=value"}),
    ("equals then colon", "key=:value\n", {"key": ":value"}),
    ("whitespace then one separator", "key  =  =value\n", {"key": "=value"}),
    ("whitespace then colon", "key \t: value\n", {"key": "value"}),
    ("trailing whitespace kept", "a=b  \n", {"a": "b  "}),
    ("leading whitespace dropped", "  \t\fa=b\n", {"a": "b"}),
    ("key alone", "lonely\n", {"lonely": ""}),
    ("key and separator", "empty=\n", {"empty": ""}),
    ("key and whitespace", "empty   \n", {"empty": ""}),
    ("empty key", "=value\n", {"": "value"}),
    ("later keys win", "a=1\na=2\n", {"a": "2"}),
    ("comments", "# a=1\n! b=2\n  # c=3\nd=4\n", {"d": "4"}),
    ("a comment is not continued", "# comment \\\nkey=value\n", {"key": "value"}),
    ("a bang comment is not continued", "! comment \\\nkey=value\n", {"key": "value"}),
    ("a hash inside a value", "a=b#c\n", {"a": "b#c"}),
    ("blank lines", "\n\n  \n\t\na=b\n\n", {"a": "b"}),
    ("continuation", "a=b\\\n  c\n", {"a": "bc"}),
    ("continuation drops tabs and form feeds", "a=b\\\n\t\f c\\\n d\n", {"a": "bcd"}),
    ("continuation keeps whitespace before the backslash", "a=b \\\n  c\n", {"a": "b c"}),
    ("continued key", "ke\\\n  y=v\n", {"key": "v"}),
    ("continuation onto a blank line ends it", "a=b\\\n\nc=d\n", {"a": "b", "c": "d"}),
    ("continuation onto a whitespace line ends it", "a=b\\\n   \nc=d\n", {"a": "b", "c": "d"}),
    ("a continued line may look like a comment", "a=b\\\n#c\n", {"a": "b#c"}),
    ("a lone backslash, then a comment", "\\\n# not a key\nk=v\n", {"k": "v"}),
    ("double backslash at the end: no continuation", "path=C:\\\\\nnext=1\n", {"path": "C:\\", "next": "1"}),
    ("triple backslash: one escaped, one continuation", "a=x\\\\\\\n y\n", {"a": "x\\y"}),
    ("CR line ends", "a=1\rb=2\r", {"a": "1", "b": "2"}),
    ("CRLF line ends", "a=1\r\nb=2\r\n", {"a": "1", "b": "2"}),
    ("CRLF continuation", "a=1\\\r\n  2\r\nb=3\r\n", {"a": "12", "b": "3"}),
    ("CR continuation", "a=1\\\r  2\rb=3", {"a": "12", "b": "3"}),
    ("LF then CR after a continuation is a blank line", "a=1\\\n\rb=2", {"a": "1", "b": "2"}),
    ("no final newline", "a=b", {"a": "b"}),
    ("backslash at the end of the file", "a=b\\", {"a": "b"}),
    ("a lone backslash ending the file is the key \"\"", "a=b\n\\", {"a": "b", "": ""}),
    ("a lone backslash and LF ending the file", "a=b\n\\\n", {"a": "b", "": ""}),
    ("a lone backslash and CRLF ending the file: nothing", "a=b\n\\\r\n", {"a": "b"}),
    ("unicode escapes", "a=\\u00e9\\u20AC\n", {"a": "é€"}),
    ("unicode escape in a key", "caf\\u00e9=1\n", {"café": "1"}),
    ("surrogate pair escapes make one character", "a=\\ud83d\\ude00\n", {"a": "😀"}),
    ("a lone surrogate stays", "a=\\ud800x\n", {"a": "\ud800x"}),
    ("control escapes", "a=\\t\\n\\r\\f\n", {"a": "\t\n\r\f"}),
    ("other escapes are the character", "a=\\q\\#\\!\\\\\\\"\\'\n", {"a": "q#!\\\"'"}),
    ("escaped separators in a key", "my\\ key\\:x\\=y=v\n", {"my key:x=y": "v"}),
    ("escaped leading space in a value", "a=\\  b\n", {"a": "  b"}),
    ("escaped hash starts a key", "\\#a=b\n", {"#a": "b"}),
    ("escaped backslash before the separator", "a\\\\=b\n", {"a\\": "b"}),
    ("non-ASCII as is", "clé=€ uro\n", {"clé": "€ uro"}),
    ("no line terminator but U+2028 and VT", "a=b\u2028c\x0bd\n", {"a": "b\u2028c\x0bd"}),
    ("VT is no whitespace", "\x0ba =b\n", {"\x0ba": "b"}),
    ("Confluent Cloud's client.properties", "bootstrap.servers=pkc-abc.us-east-1.aws.confluent.cloud:9092\n"
     "security.protocol=SASL_SSL\nsasl.mechanisms=PLAIN\n" + JAAS,
     {"bootstrap.servers": "pkc-abc.us-east-1.aws.confluent.cloud:9092", "security.protocol": "SASL_SSL",
      "sasl.mechanisms": "PLAIN",
      "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
                          "username='ABCDEFGHIJKLMNOP' password='s3cr3t/With+Slash=';"}),
]

MALFORMED: list[tuple[str, str, int]] = [
    ("too short at the end", "a=\\u12\n", 1),
    ("not hex", "a=1\nb=x\\u12g4\n", 2),
    ("a Windows path", "# keystore\nssl.truststore.location=C:\\users\\me\\truststore.jks\n", 2),
    ("in a key", "\\uzzzz=1\n", 1),
    ("on a continuation line", "a=1\n\nsasl.password=first \\\n   h\\unter2\n", 4),
    ("cut by the separator", "k\\u00=1\n", 1),
]


@pytest.mark.parametrize(("text", "expected"), [(t, e) for _, t, e in TABLE], ids=[n for n, _, _ in TABLE])
def test_the_rules(text, expected):
    assert parse_java_properties(text) == expected


@pytest.mark.lab  # the JDK reads the same files
def test_the_table_is_what_the_jdk_reads(jdk):
    for name, text, expected in TABLE:
        assert jdk.load(text) == expected, name
    for name, text, _ in MALFORMED:
        assert jdk.load(text) is None, name


@pytest.mark.parametrize(("text", "number"), [(t, n) for _, t, n in MALFORMED], ids=[n for n, _, _ in MALFORMED])
def test_a_malformed_unicode_escape_is_one_line_naming_the_line(text, number):
    with pytest.raises(UsageError) as caught:
        parse_java_properties(text, source="client.properties")
    message = str(caught.value)
    assert message.startswith(f"bad \\u escape on line {number} of client.properties: ")
    assert "\n" not in message
    for secret in ("hunter2", "unter2", "users", "truststore.jks", "zzzz", "x\\u"):
        assert secret not in message


def test_logical_lines_are_java_s():
    text = "# c \\\n a = b\\\n   c\\\\\n\n\\\n  d\\\r\n e  \n"
    assert java_logical_lines(text) == ["a = bc\\\\", "de  "]
    assert logical_lines(text) == java_logical_lines(text)


# Generated files, biased toward what Properties treats specially; whole escapes and line ends as fragments too.
_CHARS = ["=", ":", " ", " ", "\t", "\f", "\\", "\\", "\\", "#", "!", "\n", "\n", "\r", "u", "0", "7", "a", "D", "f",
          "k", "e", "y", "é", "€", "𝄞", "\v", "\u2028", "\x85"]
_FRAGMENTS = ["\\u00e9", "\\u20AC", "\\ud83d\\ude00", "\\udc00", "\\u12", "\\\n", "\\\r\n", "\\\r", "\\\\", " = ",
              ":=", "\\ ", "\\=", "\\:", "\\t", "\\n", "\r\n", "  ", "key", "value", "\\\n  ", "\\\\\\\n"]
_TOKENS = st.one_of(st.sampled_from(_CHARS), st.sampled_from(_FRAGMENTS))
_LINES = st.lists(_TOKENS, max_size=10).map("".join)
_FILES = st.lists(st.tuples(_LINES, st.sampled_from(["\n", "\r", "\r\n", ""])), max_size=6).map(
    lambda lines: "".join(line + end for line, end in lines))


@pytest.mark.lab  # the JDK reads the same files
@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(text=_FILES)
def test_generated_files_read_as_the_jdk_reads_them(jdk, text):
    expected = jdk.load(text)
    if expected is None:
        with pytest.raises(UsageError):
            parse_java_properties(text)
    else:
        assert parse_java_properties(text) == expected


SERVER_PROPERTIES = (
    "# a broker of kprobe check's\n"
    "process.roles=broker,controller\n"
    "node.id=1\n"
    "listeners=PLAINTEXT://:9092,\\\n"
    "          CONTROLLER://:9093,\\\n"
    "          EXTERNAL://0.0.0.0:29092   \n"
    "advertised.listeners : PLAINTEXT://kafka-1:9092,EXTERNAL://broker\\u002dexternal.example.com:29092\n"
    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,\\\r\n"
    "\tEXTERNAL:SASL_SSL\r\n"
    "controller.listener.names CONTROLLER\n"
    "controller.quorum.voters=1@localhost:9093\n"
    "ssl.keystore.password=pa\\ss\\=word\\\\\n"
    "log.dirs=/tmp/k\\\n"
)


@pytest.mark.lab  # the JDK reads the same files
def test_server_properties_read_as_java_then_kafka_reads_them(jdk):
    settings = parse_properties(SERVER_PROPERTIES)
    java = jdk.load(SERVER_PROPERTIES)
    assert java is not None
    # Kafka's ConfigDef trims each value (String.trim); the rest is Java's.
    assert settings == {k: v.strip("".join(map(chr, range(0x21)))) for k, v in java.items()}
    assert settings["listeners"] == "PLAINTEXT://:9092,CONTROLLER://:9093,EXTERNAL://0.0.0.0:29092"
    assert settings["advertised.listeners"] == "PLAINTEXT://kafka-1:9092,EXTERNAL://broker-external.example.com:29092"
    assert settings["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,EXTERNAL:SASL_SSL"
    assert settings["controller.listener.names"] == "CONTROLLER"
    assert settings["ssl.keystore.password"] == "pass=word\\"
    assert settings["log.dirs"] == "/tmp/k"

    deployment = read_properties([("server.properties", SERVER_PROPERTIES)])
    (broker,) = deployment.brokers
    assert [(lst.name, lst.advertised.host if lst.advertised else None) for lst in broker.listeners] == [
        ("PLAINTEXT", "kafka-1"), ("CONTROLLER", None), ("EXTERNAL", "broker-external.example.com")]
    assert "pass=word\\" in deployment.secrets


def test_server_properties_with_a_malformed_escape_name_the_file_and_line():
    with pytest.raises(UsageError, match=r"^bad \\u escape on line 2 of /etc/kafka/server\.properties: "):
        read_properties([("/etc/kafka/server.properties", "node.id=1\nlisteners=PLAINTEXT://\\u:9092\n")])
