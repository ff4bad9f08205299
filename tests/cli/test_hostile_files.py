"""Hostile files and modes, each from outside: kprobe's command line as users run it.

- Output files keep the mode of the file they replace, or get the umask's; only the spool is private.
- A YAML "billion laughs" file for `kprobe check`, and more than 8 MiB through a pipe: one line, exit 2,
  fast, in bounded memory.
- A gzip bomb for `kprobe show`: refused in one line after a bounded number of bytes; the other reports
  in the same command still show.
- Trust stores made to cost: PEM armour that never closes, a PKCS12 store of thousands of keys and
  certificates, a PKCS12 store nested thousands deep: one line, exit 2, in bounded CPU.

Peak memory and CPU are the child's own (tests/support/measured_run.py says how, and why not the wall clock).
So every test that bounds memory runs a real `python -m kprobe`-like child; the tests of file modes, which
measure nothing, run kprobe's entry point in this process (tests/support/cli_runner.py), with the umask they name.
"""

from __future__ import annotations

import gzip
import io
import os
import shutil
import socket
import stat
import subprocess
from pathlib import Path

import pytest
from cli_runner import run_cli
from measured_run import measured

from kprobe.hostport import host_problem

ROOT = Path(__file__).resolve().parents[2]
REPORTS = sorted((ROOT / "tests" / "data" / "reports").glob("*.json"))


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    return lines[0]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- output files keep their mode, or get the umask's -------------------------------------------------

def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_output_files_keep_their_mode_or_get_the_umasks(tmp_path):
    """A run against a closed port (refused at once, exit 3) still writes every output it was given."""
    target = f"127.0.0.1:{_closed_port()}"
    kept, prom, new_prom, out = tmp_path / "kept.json", tmp_path / "k.prom", tmp_path / "new.prom", tmp_path / "out"
    kept.write_text("{}")
    kept.chmod(0o640)  # not what the umask would give: kept as it is
    prom.write_text("# old\n")
    prom.chmod(0o644)  # node_exporter, another user, reads it
    for option, path, umask in (("-o", kept, 0o022), ("--prom-file", prom, 0o077), ("--prom-file", new_prom, 0o022)):
        done = run_cli(["probe", "-b", target, "--timeout", "1", "--no-identity", option, str(path),
                        "--out", str(out)], umask=umask, env={**os.environ, "NO_COLOR": "1"}, cwd=ROOT)
        assert done.returncode == 3, done.stderr
        assert path.read_text() != "{}" and path.read_text() != "# old\n"  # replaced by this run's output
    assert _mode(kept) == 0o640  # the existing file's mode, not the umask's 0644
    assert _mode(prom) == 0o644  # the existing file's mode, not the umask's 0600 (nor mkstemp's)
    assert _mode(new_prom) == 0o644  # a new file: 0666 & ~022
    # --out: a new file per run, each with its run's umask (the names sort by time: runs 1, 2, 3).
    reports = sorted(p for p in out.rglob("*") if p.is_file())
    assert [_mode(p) for p in reports] == [0o644, 0o600, 0o644], [oct(_mode(p)) for p in reports]
    assert not [p for p in tmp_path.rglob(".*.tmp")], "a temporary file was left"


def test_the_spool_stays_private(tmp_path):
    """Spooled reports are for kprobe alone (sent, then deleted): 0600 whatever the umask."""
    spool = tmp_path / "spool"
    done = run_cli(["probe", "-b", f"127.0.0.1:{_closed_port()}", "--timeout", "1", "--no-identity",
                    "--publish", f"127.0.0.1:{_closed_port()}/reports", "--spool", str(spool)], umask=0o022,
                   env={**os.environ, "NO_COLOR": "1"}, cwd=ROOT)
    assert done.returncode == 3, done.stderr
    [spooled] = spool.glob("*.json")
    assert _mode(spooled) == 0o600


# -- YAML alias bombs and files past 8 MiB for `kprobe check` ---------------------------------------

LAUGHS = "".join([f"l0: &l0 [{','.join(['lol'] * 9)}]\n"]
                 + [f"l{i}: &l{i} [{','.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 7)]
                 + ["kind: *l6\n"])  # detect() read `kind` with str(): 161 MB and a 2,000-character message


def test_a_billion_laughs_is_one_line_fast_in_bounded_memory(tmp_path):
    """Seven levels of nine aliases: 9^7 = 4.8 million strings once expanded, from a file of 332 bytes."""
    path = tmp_path / "laughs.yaml"
    path.write_text(LAUGHS)
    assert len(LAUGHS) == 332
    done, seconds, mib = measured("check", str(path))
    assert done.returncode == 2 and done.stdout == "", done.stderr[-2000:]
    assert one_line(done) == (f"kprobe: error: {path}: its aliases expand past 1,000,000 nodes and characters (at line "
                              "6): a YAML alias bomb? write the values out, or share fewer")
    assert seconds < 5 and mib < 64, (seconds, mib)


def test_shared_anchors_as_compose_files_use_them_still_read(tmp_path):
    """The bound leaves room for real anchors: one `x-kafka` block merged into three brokers."""
    common = "".join(f"      KAFKA_OPTION_{i}: 'value {i}'\n" for i in range(30))
    text = ("x-kafka: &kafka\n  image: apache/kafka:4.1.1\n  environment: &env\n" + common
            + "      KAFKA_PROCESS_ROLES: broker,controller\nservices:\n"
            + "".join(f"  kafka-{i}:\n    <<: *kafka\n    environment:\n      <<: *env\n"
                      f"      KAFKA_LISTENERS: PLAINTEXT://:9092,CONTROLLER://:9093\n"
                      f"      KAFKA_ADVERTISED_LISTENERS: PLAINTEXT://kafka-{i}:9092\n" for i in range(3)))
    path = tmp_path / "compose.yaml"
    path.write_text(text)
    done = run_cli(["check", str(path), "--json"], env={**os.environ, "NO_COLOR": "1"}, cwd=ROOT)
    assert done.returncode in (0, 1), done.stderr
    assert '"kafka-2"' in done.stdout


def test_more_than_8_mib_through_a_pipe_is_refused_after_8_mib(tmp_path):
    """`st_size` of a pipe is 0: the bytes read are counted, and reading stops one past the limit."""
    writer = subprocess.Popen(["yes", "key: value"], stdout=subprocess.PIPE)  # never ends by itself
    try:
        assert writer.stdout is not None
        done, seconds, mib = measured("check", "/dev/stdin", stdin=writer.stdout.fileno())
    finally:
        writer.kill()
        writer.wait()
    assert done.returncode == 2, done.stderr[-2000:]
    assert one_line(done) == ("kprobe: error: /dev/stdin: more than 8 MiB, too big for a configuration file: give "
                              "the configuration file itself")
    assert seconds < 5 and mib < 120, (seconds, mib)


STRIMZI = ("apiVersion: kafka.strimzi.io/v1\nkind: Kafka\nmetadata: {name: c}\nspec:\n  kafka:\n    replicas: REPLICAS\n"
           "    listeners: [{name: plain, port: 9092, type: internal, tls: false}]\n")
POOL = ("---\napiVersion: kafka.strimzi.io/v1\nkind: KafkaNodePool\nmetadata:\n  name: pool\n  labels: "
        "{strimzi.io/cluster: c}\n  annotations: {strimzi.io/next-node-ids: '[0-999999999]'}\n"
        "spec: {replicas: 3, roles: [broker]}\n")
COMPOSE = ("services:\n  kafka:\n    image: apache/kafka\n    ports: ['1-999999999:1-999999999']\n    environment:\n"
           "      KAFKA_LISTENERS: PLAINTEXT://:9092\n")


@pytest.mark.parametrize(("text", "says"), [
    ("a: &a [1, *a]\n", "an alias at line 1 refers to a node that contains it"),
    (STRIMZI.replace("REPLICAS", "1000000000"), "Kafka c spec.kafka.replicas is 1000000000, more than the 10,000"),
    (STRIMZI.replace("REPLICAS", "3") + POOL, "the number of strimzi.io/next-node-ids is 1000000000, more than"),
    (COMPOSE, "bad ports: entry '1-999999999:1-999999999': ports are numbers from 0 to 65535"),
], ids=["recursive-alias", "replicas", "next-node-ids", "port-range"])
def test_counts_a_file_gives_are_bounded(tmp_path, text, says):
    """Numbers that size a loop (`range(10**9)` is gigabytes) and a structure that contains itself: one line."""
    path = tmp_path / "config.yaml"
    path.write_text(text)
    done, seconds, mib = measured("check", str(path))
    assert done.returncode == 2 and done.stdout == "", done.stderr[-2000:]
    line = one_line(done)
    assert line.startswith(f"kprobe: error: {path}: ") and says in line, line
    assert seconds < 5 and mib < 64, (seconds, mib)


# -- a gzip bomb for `kprobe show` ------------------------------------------------------------------

MIB = 1024 * 1024


def _bomb(megabytes: int = 200, byte: bytes = b"\0", before: bytes = b"") -> bytes:
    """`megabytes` MiB of `byte` as gzip members of one MiB each (a gzip file may have many; readers
    read them as one stream): 200 MiB in about 200 KB, made in milliseconds. `before`: a member ahead."""
    member = gzip.compress(byte * MIB, compresslevel=9, mtime=0)
    return (gzip.compress(before, mtime=0) if before else b"") + member * megabytes


def _shown_alone(path: Path) -> str:
    """What `kprobe show PATH` prints for one report (in-process: the expected text of a good file)."""
    from kprobe.saved.reading import Filters
    from kprobe.saved.show import ShowOptions, show

    out = io.StringIO()
    show([str(path)], Filters(), ShowOptions(), out)
    return out.getvalue()


@pytest.mark.parametrize("byte", [b"\0", b" ", b"\n"], ids=["zeros", "spaces", "newlines"])
def test_a_gzip_bomb_is_refused_and_the_other_reports_still_show(tmp_path, byte):
    reports = tmp_path / "reports"
    reports.mkdir()
    first, last = reports / "a.json", reports / "c.json.gz"
    shutil.copy(REPORTS[0], first)
    last.write_bytes(gzip.compress(REPORTS[-1].read_bytes()))
    bomb = reports / "b.json.gz"
    bomb.write_bytes(_bomb(byte=byte))
    assert bomb.stat().st_size < 400_000
    done, seconds, mib = measured("show", str(reports))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == (f"==> {first} <==\n{_shown_alone(first)}\n==> {last} <==\n{_shown_alone(last)}")
    assert one_line(done) == (f"kprobe: skipped 1 file that is not a kprobe v1 report (first: {bomb}: it is bigger "
                              "than 64 MiB once decompressed, more than any kprobe report (a gzip bomb?): give a "
                              "report kprobe wrote)")
    assert seconds < 5 and mib < 128, (seconds, mib)  # 64 MiB read at most, never the 200 (before: 431 MB)


def test_a_gzip_bomb_named_alone_is_one_line_exit_2(tmp_path):
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(_bomb())
    done, seconds, mib = measured("show", str(bomb))
    assert done.returncode == 2 and done.stdout == ""
    assert one_line(done).startswith(f"kprobe: error: {bomb}: it is bigger than 64 MiB once decompressed")
    assert seconds < 5 and mib < 128, (seconds, mib)


def test_a_bomb_line_in_a_stream_ends_the_stream_after_the_good_lines(tmp_path):
    """JSON Lines: the good line before the bomb shows; the bomb line is refused, and nothing after it is read."""
    stream = tmp_path / "runs.jsonl.gz"
    good = REPORTS[0].read_bytes().replace(b"\n", b"") + b"\n"
    stream.write_bytes(_bomb(before=good) + gzip.compress(b"\n" + good, mtime=0))
    done, seconds, mib = measured("show", str(stream))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == _shown_alone(REPORTS[0])
    assert one_line(done) == (f"kprobe: skipped 1 line that is not a kprobe v1 report (first: {stream}:2: the line "
                              "is bigger than 64 MiB once decompressed, more than any kprobe report, and the rest of "
                              "the file is not read (a gzip bomb?): give a report kprobe wrote)")
    assert seconds < 5 and mib < 128, (seconds, mib)


# -- a broker's side of hostile input: an advertised host with a trailing newline is never resolved ------------

def test_an_advertised_host_with_a_trailing_newline_is_not_a_host():
    assert host_problem("kafka-1\n") == "the host contains characters no host name or address has"
    assert host_problem("kafka-1") is None


# -- trust stores made to cost: one line, exit 2, in bounded CPU --------------------------------------------

def _tlv(tag: int, body: bytes) -> bytes:
    """One DER element (definite length)."""
    if len(body) < 0x80:
        return bytes([tag, len(body)]) + body
    size = len(body).to_bytes((len(body).bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(size)]) + size + body


def _oid(dotted: str) -> bytes:
    from kprobe.clientprops.der import oid

    return _tlv(0x06, oid(dotted))


DATA = "1.2.840.113549.1.7.1"


def _pfx(content: bytes) -> bytes:
    """A PFX (version 3) whose authSafe is data holding `content`, with no MAC."""
    return _tlv(0x30, _tlv(0x02, b"\x03") + _tlv(0x30, _oid(DATA) + _tlv(0xA0, content)))


def _bag(kind: str, key_id: bytes, alias: str, value: bytes) -> bytes:
    """A SafeBag with a friendlyName and a localKeyId: a shrouded key bag, or an X.509 certificate bag."""
    attributes = _tlv(0x31, _tlv(0x30, _oid("1.2.840.113549.1.9.20") + _tlv(0x31, _tlv(0x1E, alias.encode("utf-16-be"))))
                      + _tlv(0x30, _oid("1.2.840.113549.1.9.21") + _tlv(0x31, _tlv(0x04, key_id))))
    if kind == "key":
        return _tlv(0x30, _oid("1.2.840.113549.1.12.10.1.2") + _tlv(0xA0, value) + attributes)
    cert = _tlv(0x30, _oid("1.2.840.113549.1.9.22.1") + _tlv(0xA0, _tlv(0x04, value)))
    return _tlv(0x30, _oid("1.2.840.113549.1.12.10.1.3") + _tlv(0xA0, cert) + attributes)


def _many_keys(size: int) -> bytes:
    """About `size` bytes of key bags and as many certificate bags, none of them a key's: every key's leaf is
    looked for in vain."""
    n = size // 170  # a key bag and a certificate bag take about 170 bytes
    bags = [_bag("key", b"k%d" % i, f"key{i}", _tlv(0x30, b"")) for i in range(n)]
    bags += [_bag("cert", b"c%d" % i, f"cert{i}", _tlv(0x30, b"")) for i in range(n)]
    safe = _tlv(0x30, b"".join(bags))
    return _pfx(_tlv(0x04, _tlv(0x30, _tlv(0x30, _oid(DATA) + _tlv(0xA0, _tlv(0x04, safe))))))


def _nested(depth: int) -> bytes:
    """The authSafe's OCTET STRING as a BER constructed string, each one holding the next, `depth` deep."""
    inner = _tlv(0x04, b"")
    for _ in range(depth):
        inner = _tlv(0x24, inner)
    return _pfx(inner)


# Each store's type, how it is made (when its test runs, not at collection), and the start of what kprobe says.
HOSTILE_STORES = {
    # 219 KiB of BEGIN lines without an END: a lazy pattern that searches the rest of the text from each of
    # them is quadratic, 8.6 s of CPU here.
    "unclosed-pem": ("PEM", lambda: b"-----BEGIN CERTIFICATE-----\n" * (219 * 1024 // 28),
                     "(PEM): no trusted certificate in the store, so Java fails"),
    # 2 MiB of keys and certificates: a scan of every certificate for each key's leaf is quadratic, 11 s here.
    "many-keys-p12": ("PKCS12", lambda: _many_keys(2 * 1024 * 1024), "(PKCS12): no trusted certificate in the store"),
    # 5,000 levels in 20 KB: past Python's recursion limit for a reader that recurses without a bound.
    "nested-p12": ("PKCS12", lambda: _nested(5000), "(PKCS12): the store is truncated or corrupt"),
}


@pytest.mark.parametrize(("name", "password"), [("unclosed-pem", None), ("many-keys-p12", None), ("nested-p12", None),
                                              ("nested-p12", "changeit")])
def test_a_hostile_truststore_is_one_line_in_bounded_cpu(tmp_path, name, password):
    """Refused before anything is probed, in CPU bounded whatever the store holds: one scan, lookups by id,
    a bounded depth. With a password, a PKCS12 store fails its MAC first and is then walked, to tell a corrupt
    store from a wrong password."""
    kind, make, says = HOSTILE_STORES[name]
    store = tmp_path / f"{name}.store"
    store.write_bytes(make())
    props = tmp_path / "client.properties"
    props.write_text(f"security.protocol=SSL\nssl.truststore.location={store}\nssl.truststore.type={kind}\n"
                     + (f"ssl.truststore.password={password}\n" if password else ""))
    done, seconds, mib = measured("probe", "-b", f"127.0.0.1:{_closed_port()}", "--timeout", "1", "-F", str(props))
    assert done.returncode == 2 and done.stdout == "", done.stderr[-2000:]
    line = one_line(done)
    assert line.startswith(f"kprobe: error: client.properties: ssl.truststore.location={store} {says}"), line
    assert seconds < 2 and mib < 128, (seconds, mib)


def test_writing_never_follows_a_planted_link(tmp_path: Path) -> None:
    """What the root lab writes (its record, hosts files, ready files) goes through kprobe.output.files: a link
    planted at the name is replaced, never written through, and a new file never lands on it."""
    from kprobe.errors import KprobeError
    from kprobe.output.files import write_atomic, write_new

    victim = tmp_path / "victim"
    victim.write_text("root's own")
    victim.chmod(0o600)
    (tmp_path / "scenario").symlink_to(victim)
    with pytest.raises(KprobeError):
        write_new(tmp_path / "scenario", "planted-through")
    write_atomic(tmp_path / "scenario", "the lab's", private=True)  # the link is replaced, not written through
    assert victim.read_text() == "root's own"
    assert not (tmp_path / "scenario").is_symlink() and (tmp_path / "scenario").read_text() == "the lab's"
