import pytest

from kprobe.errors import UsageError
from kprobe.kafka.security import security_from
from kprobe.models import BootstrapAddress
from kprobe.options import (
    parse_address,
    parse_addresses,
    parse_duration,
    parse_nameserver,
    parse_properties,
)
from kprobe.redaction import is_secret, redact


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("broker:9093", BootstrapAddress("broker", 9093)),
        ("broker", BootstrapAddress("broker", 9092)),
        ("[::1]:9092", BootstrapAddress("::1", 9092)),
        ("[::1]", BootstrapAddress("::1", 9092)),
        ("SASL_SSL://b1.example.com:9094", BootstrapAddress("b1.example.com", 9094, "SASL_SSL")),
        ("LISTENER_BOB://kafka0:29092", BootstrapAddress("kafka0", 29092, None)),
        ("127.0.0.1:1", BootstrapAddress("127.0.0.1", 1)),
        ("kafka0.:9092", BootstrapAddress("kafka0", 9092)),
    ],
)
def test_addresses_people_copy_parse(text, expected):
    assert parse_address(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty"),
        ("host:", "missing"),
        ("host:0", "outside 1-65535"),
        ("host:65536", "outside 1-65535"),
        ("host:abc", "not a number"),
        ("::1:9092", "brackets"),
        ("[::1:9092", "missing ']'"),
        ("[zz]:1", "not an IPv6"),
        ("bad host:1", "not a valid host"),
        ("ftp//x", "not a valid host"),
        ("http://x:1", None),
    ],
)
def test_bad_addresses_say_what_is_wrong(text, fragment):
    if fragment is None:
        # HTTP is not a listener protocol but looks like a listener name: accepted, protocol unset.
        assert parse_address(text).protocol is None
        return
    with pytest.raises(UsageError) as info:
        parse_address(text)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_comma_lists_and_repeats_collapse_duplicates():
    got = parse_addresses(["a:1,b:2", "A:1", " c ", "b:2"])
    assert [a.hostport for a in got] == ["a:1", "b:2", "c:9092"]


def test_no_address_is_a_usage_error():
    with pytest.raises(UsageError, match="KPROBE_BOOTSTRAP"):
        parse_addresses([" , "])


@pytest.mark.parametrize(("text", "seconds"), [("5", 5), ("2.5s", 2.5), ("500ms", 0.5), ("2m", 120), ("1h", 3600)])
def test_durations(text, seconds):
    assert parse_duration(text, "--timeout") == seconds


@pytest.mark.parametrize("text", ["", "0", "-1", "5x", "abc", "25h", "1e3"])
def test_bad_durations(text):
    with pytest.raises(UsageError, match="--timeout"):
        parse_duration(text, "--timeout")


def test_nameserver_forms():
    assert parse_nameserver("127.0.0.1") == ("127.0.0.1", 53)
    assert parse_nameserver("127.0.0.1:5353") == ("127.0.0.1", 5353)
    assert parse_nameserver("[::1]:53") == ("::1", 53)
    with pytest.raises(UsageError, match="IP address"):
        parse_nameserver("dns.example.com")


def test_properties_from_file_then_x(tmp_path):
    f = tmp_path / "client.properties"
    f.write_text("# comment\nsecurity.protocol=SASL_SSL\nsasl.password = s3cret\n\n! also a comment\n")
    props = parse_properties(["security.protocol=SASL_PLAINTEXT"], [str(f)])
    assert props == {"security.protocol": "SASL_PLAINTEXT", "sasl.password": "s3cret"}


@pytest.mark.parametrize("pair", ["novalue", "=x"])
def test_bad_x_pairs(pair):
    with pytest.raises(UsageError, match="key=value"):
        parse_properties([pair])


def test_unreadable_or_malformed_property_files(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        parse_properties([], [str(tmp_path / "missing")])
    with pytest.raises(UsageError, match="directory"):
        parse_properties([], [str(tmp_path)])
    bad = tmp_path / "bad.properties"
    bad.write_text("sasl.username=u\nthis line has no equals\n")  # a librdkafka file: kcat's reading
    with pytest.raises(UsageError, match="line 2"):
        parse_properties([], [str(bad)])


def test_secrets_are_redacted():
    props = {"sasl.password": "hunter2", "ssl.key.password": "k", "sasl.username": "alice",
             "ssl.keystore.password": "x", "my.client.secret": "y", "sasl.oauthbearer.config": "z"}
    shown = redact(props)
    assert shown["sasl.username"] == "alice"
    assert all(shown[k] == "[redacted]" for k in props if k != "sasl.username")
    assert is_secret("SASL.PASSWORD")
    assert "hunter2" not in repr(security_from(props))


def test_security_protocol_from_prefix_and_property():
    assert security_from({}, parse_address("SSL://h:1")).protocol == "SSL"
    assert security_from({"security.protocol": "sasl_plaintext"}).uses_sasl
    with pytest.raises(UsageError, match=r"security\.protocol"):
        security_from({"security.protocol": "TLS"})
