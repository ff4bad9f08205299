"""`kprobe show` and `kprobe diff` on real saved reports: exact output, bad input, many files.

The promise is that a saved report reads exactly as the live run did. One test here makes a real
run against the lab's brokers, saves its JSON with -o while printing its text, and demands that
`show` of the file print that text byte for byte (tests/runs/test_probe_agreement.py holds the same for every
lab scenario and vantage). Everything else reads reports a real probe wrote (tests/data/reports,
recorded by tests/data/record_reports.py), copied into tmp_path and edited the way a hostile file,
a newer kprobe, a stream or another vantage would change them, and compares whole outputs
(no broker where it proves nothing more). Reports written by earlier kprobe
versions keep rendering, and everything that is not a readable v1 report is one line and exit 2.

`kprobe` runs in-process (tests/support/cli_runner.py): what is tested is what kprobe.cli.main prints and
returns. Peak memory needs a process of its own, so that test starts one.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from cli_runner import run_cli
from report_check import validate

from kprobe.findings.diagnose import diagnose
from kprobe.models import CLIENTS_CONNECT
from kprobe.output.files import report_path
from kprobe.output.json_load import from_dict
from kprobe.output.json_report import to_dict
from kprobe.records import replace
from kprobe.redaction import redact

DATA = Path(__file__).resolve().parents[1] / "data" / "reports"
OLD = sorted(DATA.glob("*.json"))
# A real run of kprobe 7c779c2 against the three-brokers lab: broker 2 of BLACKHOLED times out (GAP).
BLACKHOLED = json.loads((DATA / "2026-11-23-7c779c2-blackholed.json").read_text())
CLUSTER = BLACKHOLED["bootstraps"][0]["cluster_id"]

# What `show` prints for it: byte for byte what that run's probe printed (the .txt recorded beside it).
BLACKHOLED_TEXT = """\
Metadata for all topics (from broker -1: 127.0.0.31:45985/bootstrap):
 3 brokers:
  broker 0 at 127.0.0.31:45985
  broker 1 at 127.0.0.32:49429 (controller)
  broker 2 at 127.0.0.34:34647
 cluster shGOm72PSr-ZngFi_fTtRw, answered in 4.5ms

Advertised endpoints, from recorded (the system resolver):
  NODE  ENDPOINT          DNS      ADDRESSES   TCP       ANSWERS  VERDICT
  0     127.0.0.31:45985  literal  127.0.0.31  ok 1.4ms  node 0   usable
  1     127.0.0.32:49429  literal  127.0.0.32  ok 1.4ms  node 1   usable
  2     127.0.0.34:34647  literal  127.0.0.34  timeout   -        unreachable

Findings:
  ERROR ADVERTISED_TIMEOUT
    Broker 2 advertises 127.0.0.34:34647 (127.0.0.34), but connections to it time out from here (a
      firewall or security group dropping packets, or a private address): producers and consumers
      will bootstrap fine, then fail on every request after the first metadata response, after
      waiting for the timeout.
    Fix: Open the port between this network and 127.0.0.34, or make the listener on port 45985
      advertise an address this network can reach.

GAP: 1/1 bootstraps answered, 2/3 advertised endpoints usable from here, 1 errors, 0 warnings (1.01s)
"""

BR = "  "  # Markdown's hard line break, two trailing spaces
BLACKHOLED_MARKDOWN = f"""\
#### kprobe: GAP: 1/1 bootstraps answered, 2/3 advertised endpoints usable from here, 1 errors, 0 warnings (1.01s)

From `recorded` (system resolver) at `2026-11-24T10:18:56.907Z`, kprobe 0.1.0:

```console
$ kprobe probe -b 127.0.0.31:45985 --timeout 1s --deadline 5s --vantage recorded
```

- Cluster `shGOm72PSr-ZngFi_fTtRw`: 3 brokers advertised through 1/1 bootstraps

**Advertised endpoints**

| Node | Endpoint | DNS | Addresses | TCP | Answers | Verdict |
| --- | --- | --- | --- | --- | --- | --- |
| 0 | `127.0.0.31:45985` | literal | 127.0.0.31 | ok 1.4ms | node 0 | usable |
| 1 | `127.0.0.32:49429` | literal | 127.0.0.32 | ok 1.4ms | node 1 | usable |
| 2 | `127.0.0.34:34647` | literal | 127.0.0.34 | timeout | - | **unreachable** |

**Findings**

- **ERROR** `ADVERTISED_TIMEOUT` (broker 2, `127.0.0.34:34647`){BR}
  Broker 2 advertises 127.0.0.34:34647 (127.0.0.34), but connections to it time out from here (a firewall or \
security group dropping packets, or a private address): producers and consumers will bootstrap fine, then fail on \
every request after the first metadata response, after waiting for the timeout.{BR}
  **Fix:** Open the port between this network and 127.0.0.34, or make the listener on port 45985 advertise an \
address this network can reach.
"""

_LABELS = 'cluster_id="shGOm72PSr-ZngFi_fTtRw",node_id="{n}",host="127.0.0.3{h}",port="{p}",vantage="recorded"'
BLACKHOLED_SAMPLES = [  # the exposition's samples, its HELP and TYPE lines aside
    'kprobe_probe_success{vantage="recorded"} 0',
    'kprobe_probe_duration_seconds{vantage="recorded"} 1.00832',
    'kprobe_bootstrap_up{bootstrap="127.0.0.31:45985",cluster_id="shGOm72PSr-ZngFi_fTtRw",vantage="recorded"} 1',
    *(f"kprobe_endpoint_up{{{_LABELS.format(n=n, h=h, p=p)}}} {up}"
      for n, h, p, up in ((0, 1, 45985, 1), (1, 2, 49429, 1), (2, 4, 34647, 0))),
    *(f"kprobe_endpoint_usable{{{_LABELS.format(n=n, h=h, p=p)}}} {up}"
      for n, h, p, up in ((0, 1, 45985, 1), (1, 2, 49429, 1), (2, 4, 34647, 0))),
    'kprobe_dns_lookup_seconds{host="127.0.0.31",vantage="recorded"} 0',
    'kprobe_dns_lookup_seconds{host="127.0.0.32",vantage="recorded"} 0',
    'kprobe_dns_lookup_seconds{host="127.0.0.34",vantage="recorded"} 0',
    'kprobe_tcp_connect_seconds{host="127.0.0.31",port="45985",address="127.0.0.31",vantage="recorded"} 0.001368',
    'kprobe_tcp_connect_seconds{host="127.0.0.32",port="49429",address="127.0.0.32",vantage="recorded"} 0.001441',
    'kprobe_probe_phase_duration_seconds{phase="metadata",vantage="recorded"} 0.00449',
    'kprobe_probe_phase_duration_seconds{phase="connect",vantage="recorded"} 0.001441',
    'kprobe_probe_phase_duration_seconds{phase="identity",vantage="recorded"} 0.006607',
    'kprobe_findings{code="ADVERTISED_TIMEOUT",severity="error",vantage="recorded"} 1',
]


def kprobe(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(args, stdin=stdin, env={**os.environ, "NO_COLOR": "1"})


def saved(tmp_path: Path, data: dict, name: str | None = None) -> Path:
    """`data` as a report file in tmp_path, as `probe -o` writes it."""
    path = tmp_path / (name or f"r-{uuid.uuid4().hex[:8]}.json")
    path.write_text(json.dumps(data, indent=2))
    return path


def seen_as(data: dict, node_id: int, name: str, *, resolves: bool) -> dict:
    """The recorded run seen from a network where broker `node_id` advertises `name`: resolved there to the
    address that answers, or not (what kprobe records when the system resolver says "Name or service not known":
    no address, nothing dialled, no identity).

    Only the endpoint is written here; the findings, the verdict and the summary are then the real
    code's (kprobe.findings.diagnose, kprobe.output.json_report) on the edited results, as a probe makes them.
    """
    seen = copy.deepcopy(data)

    def rename(value: object) -> None:
        if isinstance(value, dict):
            if value.get("node_id") == node_id and "host" in value:
                value["host"] = name
            for v in value.values():
                rename(v)
        elif isinstance(value, list):
            for v in value:
                rename(v)

    rename(seen["bootstraps"])
    rename(seen["endpoints"])
    [endpoint] = [e for e in seen["endpoints"] if e["node_id"] == node_id]
    address = endpoint["dns"]["addresses"][0]
    dns = {"ms": 1.0, "source": "system", "cname_chain": [], "ttl": None, "in_hosts_file": False}
    if resolves:
        endpoint.update(dns={**dns, "status": "ok", "addresses": [address], "error": None}, status="reachable",
                        tcp=[{"address": address, "status": "ok", "ms": 1.2, "error": None, "source": "127.0.0.1"}])
    else:
        endpoint.update(dns={**dns, "status": "nxdomain", "addresses": [], "error": f"{name}: Name or service not "
                             "known"}, tcp=[], status="unresolvable", identity=None)
    report = from_dict(seen)
    findings = tuple(diagnose(report.bootstraps, report.endpoints))
    gap = any(f.severity == "error" for f in findings) or any(e.status not in CLIENTS_CONNECT for e in report.endpoints)
    out = to_dict(replace(report, findings=findings, status="gap" if gap else "ok"))
    return validate(json.loads(json.dumps(out)))


def two_views() -> tuple[dict, dict]:
    """The recorded run from two DNS views of one network: broker 2 advertises kafka2, which the `docker` view
    resolves and the `host` view does not."""
    docker = seen_as(BLACKHOLED, 2, "kafka2", resolves=True)
    docker["vantage"]["name"] = "docker"
    host = seen_as(BLACKHOLED, 2, "kafka2", resolves=False)
    host["vantage"]["name"] = "host"
    return docker, host


# -- the live run: show prints what the probe printed ---------------------------------------------

def test_show_prints_what_the_probe_printed(three_lab, tmp_path):
    """One real run saved with -o while it printed: its text, its Markdown, and the same file gzipped or piped."""
    path, md_path = tmp_path / "run.json", tmp_path / "run-md.json"
    live = kprobe("probe", "-b", three_lab.real_endpoint("BLACKHOLED", 0), "--timeout", "1", "-o", str(path))
    assert live.returncode == 1, live.stderr
    validate(json.loads(path.read_text()))
    shown = kprobe("show", str(path))
    assert (shown.returncode, shown.stderr) == (0, "")
    assert shown.stdout == live.stdout
    # The same report gzipped, from standard input, and as one line of a JSON Lines stream.
    gz = path.with_suffix(".json.gz")
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert kprobe("show", str(gz)).stdout == live.stdout
    assert kprobe("show", "-", stdin=path.read_bytes()).stdout == live.stdout
    line = json.dumps(json.loads(path.read_text())).encode() + b"\n"
    assert kprobe("show", "-", stdin=gzip.compress(line)).stdout == live.stdout
    # `probe --format markdown` prints, live, what `show --format markdown` prints of its saved report.
    live_md = kprobe("probe", "-b", three_lab.real_endpoint("BLACKHOLED", 0), "--timeout", "1", "--format",
                     "markdown", "-o", str(md_path))
    assert live_md.returncode == 1, live_md.stderr
    assert live_md.stdout.startswith("#### kprobe: GAP: 1/1 bootstraps answered, 2/3 advertised endpoints usable")
    assert kprobe("show", str(md_path), "--format", "markdown").stdout == live_md.stdout


# -- saved reports, exact output --------------------------------------------------------------------

def test_a_saved_report_shows_exactly_as_its_probe_printed_it(tmp_path):
    recorded = DATA / "2026-11-23-7c779c2-blackholed.json"
    assert recorded.with_suffix(".txt").read_text() == BLACKHOLED_TEXT  # what the probe of 7c779c2 printed
    shown = kprobe("show", str(recorded))
    assert (shown.returncode, shown.stderr, shown.stdout) == (0, "", BLACKHOLED_TEXT)
    gz = tmp_path / "run.json.gz"
    gz.write_bytes(gzip.compress(recorded.read_bytes()))
    assert kprobe("show", str(gz)).stdout == BLACKHOLED_TEXT
    assert kprobe("show", "-", stdin=recorded.read_bytes()).stdout == BLACKHOLED_TEXT
    line = json.dumps(BLACKHOLED).encode() + b"\n"
    assert kprobe("show", "-", stdin=gzip.compress(line)).stdout == BLACKHOLED_TEXT


def test_show_in_every_format(tmp_path):
    path = saved(tmp_path, BLACKHOLED)
    as_json = kprobe("show", str(path), "--json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout) == BLACKHOLED  # as saved, not re-encoded
    prom = kprobe("show", str(path), "--format", "prometheus")
    assert prom.returncode == 0
    assert [ln for ln in prom.stdout.splitlines() if not ln.startswith("#")] == BLACKHOLED_SAMPLES
    md = kprobe("show", str(path), "--format", "markdown")
    assert (md.returncode, md.stderr, md.stdout) == (0, "", BLACKHOLED_MARKDOWN)


def test_markdown_carries_no_secret(tmp_path):
    """The settings a SASL probe saves (its properties through kprobe.redaction, as run_probe keeps them) rebuild
    the command line in Markdown with the password redacted, and no format prints the password."""
    password = "Sup3r-s3cret-" + uuid.uuid4().hex[:8]
    given = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "alice",
             "sasl.password": password}
    data = copy.deepcopy(BLACKHOLED)
    data["settings"]["properties"] = redact(given)
    path = saved(tmp_path, data)
    for fmt in ("markdown", "text", "prometheus", "json"):
        shown = kprobe("show", str(path), "--format", fmt)
        assert shown.returncode == 0 and password not in shown.stdout + shown.stderr
    md = kprobe("show", str(path), "--format", "markdown").stdout
    assert "$ kprobe probe -b 127.0.0.31:45985 -X security.protocol=SASL_PLAINTEXT -X sasl.mechanism=PLAIN -X " \
           "sasl.username=alice -X 'sasl.password=[redacted]' --timeout 1s --deadline 5s --vantage recorded\n" in md


def test_hostile_names_cannot_write_markup_or_escapes(tmp_path):
    """A saved report is untrusted input: a name built to break out of a table or a terminal stays text."""
    hostile = "evil\x1b[31m|`[x](http://evil.example)<img src=x>\n# heading"
    bad = copy.deepcopy(BLACKHOLED)
    bad["endpoints"][2]["host"] = hostile
    bad["findings"][0]["message"] = "see " + hostile
    bad["vantage"]["name"] = hostile
    path = saved(tmp_path, bad)
    for fmt in ("text", "markdown", "prometheus"):
        out = kprobe("show", str(path), "--format", fmt).stdout
        assert "\x1b" not in out and "\nheading" not in out and "\n# heading" not in out
    md = kprobe("show", str(path), "--format", "markdown").stdout
    table = [line for line in md.splitlines() if line.startswith("| ")]
    assert len(table) == 5 and all(line.count(" | ") == table[0].count(" | ") for line in table)  # no extra column
    # In prose (the finding's message), every character Markdown reads as markup is escaped.
    assert "see evil\\\\x1b\\[31m\\|\\`\\[x\\](http://evil.example)\\<img src=x>\\\\x0a\\# heading" in md
    assert "``evil\\x1b[31m\\|`[x](http://evil.example)<img src=x>\\x0a# heading``" in md
    summary = kprobe("show", str(path), "--summary").stdout
    assert "\x1b" not in summary and summary.count("\n") == 1


@pytest.mark.parametrize("old", OLD, ids=[p.stem for p in OLD])
def test_reports_of_earlier_versions_keep_rendering(old):
    data = json.loads(old.read_text())
    printed_then = old.with_suffix(".txt").read_text()
    for fmt in ("text", "json", "markdown", "prometheus"):
        shown = kprobe("show", str(old), "--format", fmt)
        assert shown.returncode == 0 and shown.stderr == "", shown.stderr
    text = kprobe("show", str(old)).stdout
    # Today's words, the same facts: every advertised broker, every finding, the verdict.
    for line in printed_then.splitlines():
        if line.startswith("  broker ") or line.startswith(("GAP", "OK", "FAILED")):
            key = line.split(" (")[0].split(":")[0]
            assert key in text, (key, text)
    for finding in data["findings"]:
        assert finding["code"] in text
    summary = kprobe("show", str(old), "--summary").stdout
    assert summary.startswith(data["started_at"]) and data["summary"]["status"].upper() in summary


def test_unknown_fields_are_ignored(tmp_path):
    newer = copy.deepcopy(BLACKHOLED)
    newer["from_the_future"] = {"x": 1}
    newer["endpoints"][0]["quic"] = True
    newer["summary"]["extra"] = [1, 2]
    assert kprobe("show", str(saved(tmp_path, newer))).stdout == BLACKHOLED_TEXT


def _bad(tmp_path: Path, name: str, content: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


@pytest.mark.parametrize(("name", "content", "says"), [
    ("list.json", b"[1, 2]", "not a kprobe report (a JSON list, not an object)"),
    ("other.json", b'{"name": "x"}', 'not a kprobe report (no "schema": "kprobe.report/v1")'),
    ("check.json", b'{"schema": "kprobe.check/v1"}', "a kprobe.check/v1 document, not a probe report"),
    ("v2.json", b'{"schema": "kprobe.report/v2", "id": "x"}', "a kprobe.report/v2 report: this kprobe reads "
                                                              "kprobe.report/v1 reports"),
    ("cut.json", b'{"schema": "kprobe.report/v1", "id": "x", "endpoints": [{"host": "a', "cut short"),
    ("empty.json", b"", "it is empty"),
    ("garbage.json", b"\x00\x01\x02 not json", "not JSON"),
    ("broken.gz", b"\x1f\x8b\x08\x00garbage", "cannot read it"),
    ("field.json", b'{"schema": "kprobe.report/v1", "id": "x", "started_at": "2026-11-24T00:00:00.000Z", '
                   b'"vantage": {"name": "v"}, "summary": {"status": "ok"}, "bootstraps": [], "endpoints": '
                   b'[{"node_id": "zero"}], "findings": []}', "endpoints[0].node_id is not an integer"),
    ("word.json", b'{"schema": "kprobe.report/v1", "id": "x", "started_at": "2026-11-24T00:00:00.000Z", '
                  b'"vantage": {"name": "v"}, "summary": {"status": "fine"}, "bootstraps": [], "endpoints": [], '
                  b'"findings": []}', "summary.status is 'fine', not one of ok, gap, failed, interrupted"),
])
def test_what_is_not_a_readable_report_is_one_line_and_exit_2(tmp_path, name, content, says):
    path = _bad(tmp_path, name, content)
    commands = [["show", str(path)], ["diff", str(path), str(path)]]
    if name != "field.json":  # --summary reads only the fields it shows (docs/reading.md says why): not endpoints
        commands.append(["show", "--summary", str(path)])
    for command in commands:
        done = kprobe(*command)
        assert done.returncode == 2 and done.stdout == "", (command, done.stdout)
        [line] = done.stderr.splitlines()
        assert line.startswith(f"kprobe: error: {path}") and says in line, line


def test_missing_paths_and_empty_directories_are_bad_input(tmp_path):
    done = kprobe("show", str(tmp_path / "nope.json"))
    assert done.returncode == 2 and done.stderr.strip() == (
        f"kprobe: error: cannot read {tmp_path / 'nope.json'}: no such file or directory")
    (tmp_path / "notes.txt").write_text("hello")
    done = kprobe("show", str(tmp_path))
    assert done.returncode == 2 and done.stderr.strip() == f"kprobe: error: no kprobe report in {tmp_path}"
    done = kprobe("diff", str(tmp_path), str(tmp_path))
    assert done.returncode == 2 and "no kprobe report in" in done.stderr
    for args, says in ((["show", str(tmp_path), "--status", "broken"], "bad --status 'broken'"),
                       (["show", str(tmp_path), "--since", "yesterday"], "bad --since 'yesterday'"),
                       (["show", str(tmp_path), "--format", "yaml"], "bad --format 'yaml'"),
                       (["show", str(tmp_path), "--summary", "--json"], "--summary prints one text line"),
                       (["diff", "-", "-"], "standard input can be only one side")):
        done = kprobe(*args)
        assert done.returncode == 2 and says in done.stderr, (args, done.stderr)


def test_a_stream_with_bad_lines_renders_the_good_ones_and_counts_the_rest(tmp_path):
    data = BLACKHOLED
    second = copy.deepcopy(data)
    second["id"] = str(uuid.uuid4())
    lines = [json.dumps(data), '{"schema": "kprobe.report/v1", "id": "cut', "", "not json at all",
             json.dumps({"schema": "kprobe.report/v9"}), json.dumps(second)]
    stream = tmp_path / "runs.jsonl"
    stream.write_text("\n".join(lines) + "\n")
    done = kprobe("show", str(stream))
    assert done.returncode == 0
    out = done.stdout
    assert out == f"==> {stream}:1 <==\n{BLACKHOLED_TEXT}\n==> {stream}:6 <==\n{BLACKHOLED_TEXT}"
    [warning] = done.stderr.splitlines()
    assert warning.startswith("kprobe: skipped 3 lines that are not a kprobe v1 report (first: ")
    assert f"{stream}:2: cut short" in warning and f"{stream}:4: not JSON" in warning
    # JSON out: one report per line, as watch writes them.
    as_json = kprobe("show", str(stream), "--json").stdout.splitlines()
    assert [json.loads(x)["id"] for x in as_json] == [data["id"], second["id"]]
    # Prometheus takes one report.
    many = kprobe("show", str(stream), "--format", "prometheus")
    assert many.returncode == 2 and "--format prometheus shows one report" in many.stderr


def _write_out_dir(root: Path, base: dict, n: int, vantages: tuple[str, ...] = ("office", "vpn")) -> list[dict]:
    """n reports in --out's layout (DIR/<date>/<vantage>-<stamp>-<id>.json), a minute apart, statuses varied.

    Each file is `base` with its id, times, vantage and status replaced (serialised once, the values put in
    as text: ten thousand deep copies and encodings cost the suite more than the test that reads them).
    What is returned holds those fields of each report, in the shape of the report.
    """
    marks = {"id": "@ID@", "started_at": "@AT@", "finished_at": "@AT@"}
    template = {**copy.deepcopy(base), **marks}
    template["vantage"]["name"] = "@VANTAGE@"
    template["summary"]["status"] = "@STATUS@"
    text = json.dumps(template, separators=(",", ":"))
    written = []
    for i in range(n):
        minute = 24 * 60 * 2 + i  # from 2026-11-02T00:00Z on
        at = f"2026-11-{minute // 1440 + 1:02d}T{minute // 60 % 24:02d}:{minute % 60:02d}:00.000Z"
        report = {"id": str(uuid.UUID(int=i + 1)), "started_at": at, "finished_at": at,
                  "vantage": {"name": vantages[i % len(vantages)]},
                  "summary": {"status": "gap" if i % 10 == 0 else "ok"}}
        path = report_path(root, report["vantage"]["name"], at, report["id"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace('"@ID@"', json.dumps(report["id"])).replace('"@AT@"', json.dumps(at))
                        .replace('"@VANTAGE@"', json.dumps(report["vantage"]["name"]))
                        .replace('"@STATUS@"', json.dumps(report["summary"]["status"])))
        written.append(report)
    return written


def test_summary_filters_and_order(tmp_path):
    data = BLACKHOLED
    root = tmp_path / "out"
    written = _write_out_dir(root, data, 40)
    (root / ".tmp-partial.json").write_text("{")  # a writer's temporary file: never read
    lines = kprobe("show", str(root), "--summary").stdout.splitlines()
    assert [line.split()[0] for line in lines] == [r["started_at"] for r in written]  # oldest first, across vantages
    assert lines[0] == (f"2026-11-03T00:00:00.000Z  office  {CLUSTER}  GAP: 1/1 bootstraps answered, 2/3 advertised "
                        "endpoints usable from here, 1 errors, 0 warnings (1.01s)  ADVERTISED_TIMEOUT: Broker 2 "
                        "advertises 127.0.0.34:34647 (127.0.0.34), but connections to it time out from here (a "
                        "fi...")  # the message's first 100 characters
    vpn_gaps = kprobe("show", str(root), "--summary", "--vantage", "vpn", "--status", "gap,failed").stdout
    assert len(vpn_gaps.splitlines()) == sum(1 for r in written if r["vantage"]["name"] == "vpn"
                                            and r["summary"]["status"] == "gap")
    window = kprobe("show", str(root), "--summary", "--since", written[10]["started_at"], "--until",
                    written[20]["started_at"]).stdout.splitlines()
    assert [line.split()[0] for line in window] == [r["started_at"] for r in written[10:20]]
    none = kprobe("show", str(root), "--since", "2099-01-01")
    assert none.returncode == 0 and none.stdout == ""
    assert none.stderr.strip() == "kprobe: none of the 40 reports matches the filters"


def test_ten_thousand_reports_stream_in_bounded_memory(tmp_path):
    """--summary over 10,000 reports holds one at a time: its peak memory is that of 1,000 reports.

    Peak memory is a process's: this test starts its own (the one test here that does).
    """
    data = json.loads((DATA / "2026-11-23-7c779c2-client.json").read_text())  # a healthy real run (OK)
    big = tmp_path / "big"
    small = tmp_path / "small"
    _write_out_dir(big, data, 10_000)
    _write_out_dir(small, data, 1_000)
    measure = ("import resource, sys, atexit\n"
               "atexit.register(lambda: sys.stderr.write(f'maxrss={resource.getrusage(resource.RUSAGE_SELF)"
               ".ru_maxrss}\\n'))\n"
               "sys.argv = ['kprobe', *sys.argv[1:]]\nfrom kprobe.cli import main\nmain()\n")
    peaks = {}
    for root, n in ((small, 1_000), (big, 10_000)):
        done = subprocess.run([sys.executable, "-c", measure, "show", "--summary", str(root)], capture_output=True,
                              timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        assert len(done.stdout.splitlines()) == n
        peaks[n] = int(done.stderr.decode().split("maxrss=")[1].split()[0])  # KiB
    # Ten times the reports, the same memory (within 8 MiB): held one at a time, never all.
    assert peaks[10_000] - peaks[1_000] < 8 * 1024, peaks


def test_diff_of_two_dns_views_names_exactly_the_endpoints_that_differ(tmp_path):
    """Broker 2 advertises kafka2, which one view resolves and the other does not (the listeners scenario's case)."""
    docker, host = two_views()
    assert [f["code"] for f in host["findings"]] == ["ADVERTISED_UNRESOLVABLE"] and host["summary"]["status"] == "gap"
    inside, outside = saved(tmp_path, docker, "docker.json"), saved(tmp_path, host, "host.json")
    same = kprobe("diff", str(inside), str(inside))
    assert same.returncode == 0 and same.stdout.splitlines()[-1] == "SAME: the verdicts agree"
    done = kprobe("diff", str(inside), str(outside))
    assert done.returncode == 1, done.stderr
    # Two vantages, side by side: neither came first, so nothing "changed" or "appeared".
    assert done.stdout == f"""\
A: {inside}: OK from docker (system resolver) at 2026-11-24T10:18:56.907Z
B: {outside}: GAP from host (system resolver) at 2026-11-24T10:18:56.907Z
Cluster {CLUSTER} on both sides
Brokers 0, 1, 2 on both sides

Advertised endpoints, as each side saw them:
  NODE  ENDPOINT          A       B
  0     127.0.0.31:45985  usable  usable
  1     127.0.0.32:49429  usable  usable
  2     kafka2:34647      usable  unresolvable  differs

Findings only at B (host):
  ERROR ADVERTISED_UNRESOLVABLE (broker 2, kafka2:34647)
    You reached the cluster at 127.0.0.31:45985, but broker 2 advertises kafka2:34647, which does
      not resolve from here (kafka2: Name or service not known): producers and consumers will
      bootstrap fine, then fail on every request after the first metadata response.
    Fix: Make the listener on port 45985 advertise a name this network can resolve
      (advertised.listeners), or add a listener for this network with its own advertised name; an
      /etc/hosts entry only fixes this one machine.

DIFFERENT: run ok at A, gap at B, 1 verdict differs, 1 finding only at B
"""
    js = json.loads(kprobe("diff", str(inside), str(outside), "--json").stdout)
    [comparison] = js["comparisons"]
    changed = [e for e in comparison["endpoints"] if e["change"] != "same"]
    assert js["differs"] is True and [(e["node_id"], e["a"], e["verdict_a"], e["verdict_b"]) for e in changed] == [
        (2, "kafka2:34647", "usable", "unresolvable")]
    assert [f["code"] for f in comparison["findings_only_b"]] == ["ADVERTISED_UNRESOLVABLE"]
    md = kprobe("diff", str(inside), str(outside), "--format", "markdown").stdout
    assert md.startswith("#### kprobe diff: DIFFERENT: run ok at A, gap at B") and "| 2 | `kafka2:34647` |" in md


def test_diff_of_directories_compares_the_newest_report_of_each_cluster(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    docker, host = two_views()
    runs = {"before": host, "after": docker}  # the same vantage before and after kafka2 got its record
    docker["vantage"]["name"] = "host"
    written: dict[str, list[Path]] = {"before": [], "after": []}
    for root, side in ((before, "before"), (after, "after")):
        for minute in range(2):  # two runs each: the newer is the one compared
            r = copy.deepcopy(runs[side])
            r["id"] = str(uuid.uuid4())
            r["started_at"] = r["finished_at"] = f"2026-11-24T10:0{minute}:00.000Z"
            path = report_path(root, r["vantage"]["name"], r["started_at"], r["id"])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(r))
            written[side].append(path)
    other = copy.deepcopy(json.loads((DATA / "2026-11-23-7c779c2-client.json").read_text()))
    other["bootstraps"][0]["cluster_id"] = "another-cluster"  # a second cluster, in B only
    other_path = report_path(after, "recorded", "2026-11-24T10:05:00.000Z", other["id"])
    other_path.write_text(json.dumps(other))
    done = kprobe("diff", str(before), str(after), "--json")
    assert done.returncode == 1
    js = json.loads(done.stdout)
    [comparison] = js["comparisons"]
    assert (comparison["a"]["source"], comparison["b"]["source"]) == (str(written["before"][1]),
                                                                      str(written["after"][1]))
    assert [(e["verdict_a"], e["verdict_b"]) for e in comparison["endpoints"]] == [
        ("usable", "usable"), ("usable", "usable"), ("unresolvable", "usable")]
    [unpaired] = js["unpaired"]
    assert unpaired == {**unpaired, "side": "B", "source": str(other_path)}
    text = kprobe("diff", str(before), str(after)).stdout
    assert "Only in B: cluster another-cluster" in text
