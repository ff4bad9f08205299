"""`kprobe show` and `kprobe diff` on reports saved by real runs against the lab's brokers.

The promise is that a saved report reads exactly as the live run did: every probe here saves its
JSON with -o while printing its text, and `show` of the file must print that text byte for byte.
(tests/test_agreement.py holds the same for every lab scenario and vantage.) Reports written by
earlier kprobe versions (tests/data/reports, recorded by tests/data/record_reports.py) keep
rendering, and everything that is not a readable v1 report is one line and exit 2.
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
from report_check import validate

from kprobe.output.files import report_path

DATA = Path(__file__).resolve().parent / "data" / "reports"
OLD = sorted(DATA.glob("*.json"))


def kprobe(*args: str, stdin: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "kprobe", *args], input=stdin, capture_output=True, timeout=timeout,
                          check=False, env={**os.environ, "NO_COLOR": "1"})


def probe_saved(tmp_path: Path, *args: str) -> tuple[Path, bytes, dict]:
    """A real probe's text (stdout) and the JSON it saved with -o."""
    path = tmp_path / f"r-{uuid.uuid4().hex[:8]}.json"
    done = kprobe("probe", *args, "-o", str(path))
    assert done.returncode in (0, 1), done.stderr
    return path, done.stdout, validate(json.loads(path.read_text()))


@pytest.mark.parametrize("listener", ["LISTENER_BOB", "LISTENER_FRED", "LISTENER_ALICE"])
@pytest.mark.parametrize("view", ["docker", "host"])
def test_show_prints_what_the_listeners_probe_printed(listeners_lab, tmp_path, listener, view):
    path, printed, _ = probe_saved(tmp_path, "-b", listeners_lab.real_endpoint(listener), "--nameserver",
                                   listeners_lab.nameserver(view))
    shown = kprobe("show", str(path))
    assert shown.returncode == 0 and shown.stderr == b""
    assert shown.stdout == printed


@pytest.mark.parametrize("listener", ["CLIENT", "BLACKHOLED", "CROSSED", "TWIN", "IMPOSTOR", "PARTIAL", "DARK"])
def test_show_prints_what_the_three_brokers_probe_printed(three_lab, tmp_path, listener):
    path, printed, _ = probe_saved(tmp_path, "-b", three_lab.real_endpoint(listener, 0), "--timeout", "1",
                                   "--deadline", "4")
    assert kprobe("show", str(path)).stdout == printed
    # The same report gzipped, from standard input, and as one line of a JSON Lines stream.
    gz = path.with_suffix(".json.gz")
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert kprobe("show", str(gz)).stdout == printed
    assert kprobe("show", "-", stdin=path.read_bytes()).stdout == printed
    line = json.dumps(json.loads(path.read_text())).encode() + b"\n"
    assert kprobe("show", "-", stdin=gzip.compress(line)).stdout == printed


def test_show_in_every_format_agrees_with_the_probe(three_lab, tmp_path):
    path, _, data = probe_saved(tmp_path, "-b", three_lab.real_endpoint("BLACKHOLED", 0), "--timeout", "1")
    as_json = json.loads(kprobe("show", str(path), "--json").stdout)
    assert as_json == data  # the report as saved, not re-encoded by this version
    prom = kprobe("show", str(path), "--format", "prometheus").stdout.decode()
    assert 'kprobe_endpoint_up{cluster_id="' in prom and "kprobe_probe_success" in prom
    md = kprobe("show", str(path), "--format", "markdown")
    assert md.returncode == 0
    text = md.stdout.decode()
    assert text.startswith("#### kprobe: GAP: 1/1 bootstraps answered, 2/3 advertised endpoints usable")
    assert f"$ kprobe probe -b {three_lab.real_endpoint('BLACKHOLED', 0)} --timeout 1s" in text
    assert "| 2 | `" in text and "**unreachable**" in text
    assert "**ERROR** `ADVERTISED_TIMEOUT` (broker 2," in text and "**Fix:**" in text
    # `probe --format markdown` prints the same, live.
    live = kprobe("probe", "-b", three_lab.real_endpoint("BLACKHOLED", 0), "--timeout", "1", "--format", "markdown")
    assert live.returncode == 1
    assert live.stdout.decode().splitlines()[4:6] == text.splitlines()[4:6]  # the command line, fenced


def test_markdown_carries_no_secret(sasl_lab, tmp_path):
    password = sasl_lab.passwords["alice"]
    path, _, _ = probe_saved(tmp_path, "-b", sasl_lab.bootstrap("SASL_PLAIN"), "-X", "security.protocol=SASL_PLAINTEXT",
                             "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=alice", "-X",
                             f"sasl.password={password}")
    for fmt in ("markdown", "text", "prometheus", "json"):
        shown = kprobe("show", str(path), "--format", fmt)
        assert shown.returncode == 0 and password.encode() not in shown.stdout + shown.stderr
    md = kprobe("show", str(path), "--format", "markdown").stdout.decode()
    assert "-X security.protocol=SASL_PLAINTEXT -X sasl.mechanism=PLAIN -X sasl.username=alice -X " \
           "'sasl.password=[redacted]'" in md


def test_hostile_names_cannot_write_markup_or_escapes(three_lab, tmp_path):
    """A saved report is untrusted input: a name built to break out of a table or a terminal stays text."""
    path, _, data = probe_saved(tmp_path, "-b", three_lab.real_endpoint("BLACKHOLED", 0), "--timeout", "1")
    hostile = "evil\x1b[31m|`[x](http://evil.example)<img src=x>\n# heading"
    bad = copy.deepcopy(data)
    bad["endpoints"][2]["host"] = hostile
    bad["findings"][0]["message"] = "see " + hostile
    bad["vantage"]["name"] = hostile
    path.write_text(json.dumps(bad))
    for fmt in ("text", "markdown", "prometheus"):
        out = kprobe("show", str(path), "--format", fmt).stdout.decode()
        assert "\x1b" not in out and "\nheading" not in out and "\n# heading" not in out
    md = kprobe("show", str(path), "--format", "markdown").stdout.decode()
    table = [line for line in md.splitlines() if line.startswith("| ")]
    assert all(line.count(" | ") == table[0].count(" | ") for line in table)  # no cell broke out: no extra column
    # In prose (the finding's message), every character Markdown reads as markup is escaped.
    assert "see evil\\\\x1b\\[31m\\|\\`\\[x\\](http://evil.example)\\<img src=x>\\\\x0a\\# heading" in md
    assert "``evil\\x1b[31m\\|`[x](http://evil.example)<img src=x>\\x0a# heading``" in md
    summary = kprobe("show", str(path), "--summary").stdout.decode()
    assert "\x1b" not in summary and summary.count("\n") == 1


@pytest.mark.parametrize("old", OLD, ids=[p.stem for p in OLD])
def test_reports_of_earlier_versions_keep_rendering(old):
    data = json.loads(old.read_text())
    printed_then = old.with_suffix(".txt").read_text()
    for fmt in ("text", "json", "markdown", "prometheus"):
        shown = kprobe("show", str(old), "--format", fmt)
        assert shown.returncode == 0 and shown.stderr == b"", shown.stderr
    text = kprobe("show", str(old)).stdout.decode()
    # Today's words, the same facts: every advertised broker, every finding, the verdict.
    for line in printed_then.splitlines():
        if line.startswith("  broker ") or line.startswith(("GAP", "OK", "FAILED")):
            key = line.split(" (")[0].split(":")[0]
            assert key in text, (key, text)
    for finding in data["findings"]:
        assert finding["code"] in text
    summary = kprobe("show", str(old), "--summary").stdout.decode()
    assert summary.startswith(data["started_at"]) and data["summary"]["status"].upper() in summary


def test_unknown_fields_are_ignored(three_lab, tmp_path):
    path, printed, data = probe_saved(tmp_path, "-b", three_lab.real_endpoint("BLACKHOLED", 0), "--timeout", "1")
    newer = copy.deepcopy(data)
    newer["from_the_future"] = {"x": 1}
    newer["endpoints"][0]["quic"] = True
    newer["summary"]["extra"] = [1, 2]
    path.write_text(json.dumps(newer))
    assert kprobe("show", str(path)).stdout == printed


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
        assert done.returncode == 2 and done.stdout == b"", (command, done.stdout)
        [line] = done.stderr.decode().splitlines()
        assert line.startswith(f"kprobe: error: {path}") and says in line, line


def test_missing_paths_and_empty_directories_are_bad_input(tmp_path):
    done = kprobe("show", str(tmp_path / "nope.json"))
    assert done.returncode == 2 and done.stderr.decode().strip() == (
        f"kprobe: error: cannot read {tmp_path / 'nope.json'}: no such file or directory")
    (tmp_path / "notes.txt").write_text("hello")
    done = kprobe("show", str(tmp_path))
    assert done.returncode == 2 and done.stderr.decode().strip() == f"kprobe: error: no kprobe report in {tmp_path}"
    done = kprobe("diff", str(tmp_path), str(tmp_path))
    assert done.returncode == 2 and "no kprobe report in" in done.stderr.decode()
    for args, says in ((["show", str(tmp_path), "--status", "broken"], "bad --status 'broken'"),
                       (["show", str(tmp_path), "--since", "yesterday"], "bad --since 'yesterday'"),
                       (["show", str(tmp_path), "--format", "yaml"], "bad --format 'yaml'"),
                       (["show", str(tmp_path), "--summary", "--json"], "--summary prints one text line"),
                       (["diff", "-", "-"], "standard input can be only one side")):
        done = kprobe(*args)
        assert done.returncode == 2 and says in done.stderr.decode(), (args, done.stderr)


def test_a_stream_with_bad_lines_renders_the_good_ones_and_counts_the_rest(three_lab, tmp_path):
    _, printed, data = probe_saved(tmp_path, "-b", three_lab.real_endpoint("BLACKHOLED", 0), "--timeout", "1")
    second = copy.deepcopy(data)
    second["id"] = str(uuid.uuid4())
    lines = [json.dumps(data), '{"schema": "kprobe.report/v1", "id": "cut', "", "not json at all",
             json.dumps({"schema": "kprobe.report/v9"}), json.dumps(second)]
    stream = tmp_path / "runs.jsonl"
    stream.write_text("\n".join(lines) + "\n")
    done = kprobe("show", str(stream))
    assert done.returncode == 0
    out = done.stdout.decode()
    assert out.count("==> ") == 2 and f"==> {stream}:1 <==\n" in out and f"==> {stream}:6 <==\n" in out
    assert out.split(f"==> {stream}:1 <==\n")[1].split("\n==> ")[0] == printed.decode()
    [warning] = done.stderr.decode().splitlines()
    assert warning.startswith("kprobe: skipped 3 lines that are not a kprobe v1 report (first: ")
    assert f"{stream}:2: cut short" in warning and f"{stream}:4: not JSON" in warning
    # JSON out: one report per line, as watch writes them.
    as_json = kprobe("show", str(stream), "--json").stdout.decode().splitlines()
    assert [json.loads(x)["id"] for x in as_json] == [data["id"], second["id"]]
    # Prometheus takes one report.
    many = kprobe("show", str(stream), "--format", "prometheus")
    assert many.returncode == 2 and "--format prometheus shows one report" in many.stderr.decode()


def _write_out_dir(root: Path, base: dict, n: int, vantages: tuple[str, ...] = ("office", "vpn")) -> list[dict]:
    """n reports in --out's layout (DIR/<date>/<vantage>-<stamp>-<id>.json), a minute apart, statuses varied."""
    written = []
    for i in range(n):
        report = copy.deepcopy(base)
        report["id"] = str(uuid.UUID(int=i + 1))
        minute = 24 * 60 * 2 + i  # from 2026-11-02T00:00Z on
        report["started_at"] = f"2026-11-{minute // 1440 + 1:02d}T{minute // 60 % 24:02d}:{minute % 60:02d}:00.000Z"
        report["finished_at"] = report["started_at"]
        report["vantage"]["name"] = vantages[i % len(vantages)]
        report["summary"]["status"] = "gap" if i % 10 == 0 else "ok"
        path = report_path(root, report["vantage"]["name"], report["started_at"], report["id"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, separators=(",", ":")))
        written.append(report)
    return written


def test_summary_filters_and_order(three_lab, tmp_path):
    _, _, data = probe_saved(tmp_path, "-b", three_lab.real_endpoint("BLACKHOLED", 0), "--timeout", "1")
    root = tmp_path / "out"
    written = _write_out_dir(root, data, 40)
    (root / ".tmp-partial.json").write_text("{")  # a writer's temporary file: never read
    lines = kprobe("show", str(root), "--summary").stdout.decode().splitlines()
    assert [line.split()[0] for line in lines] == [r["started_at"] for r in written]  # oldest first, across vantages
    assert lines[0].split()[1:4] == ["office", data["bootstraps"][0]["cluster_id"], "GAP:"]
    assert "ADVERTISED_TIMEOUT: Broker 2 advertises" in lines[0]
    vpn_gaps = kprobe("show", str(root), "--summary", "--vantage", "vpn", "--status", "gap,failed").stdout.decode()
    assert len(vpn_gaps.splitlines()) == sum(1 for r in written if r["vantage"]["name"] == "vpn"
                                            and r["summary"]["status"] == "gap")
    window = kprobe("show", str(root), "--summary", "--since", written[10]["started_at"], "--until",
                    written[20]["started_at"]).stdout.decode().splitlines()
    assert [line.split()[0] for line in window] == [r["started_at"] for r in written[10:20]]
    none = kprobe("show", str(root), "--since", "2099-01-01")
    assert none.returncode == 0 and none.stdout == b""
    assert none.stderr.decode().strip() == "kprobe: none of the 40 reports matches the filters"


def test_ten_thousand_reports_stream_in_bounded_memory(three_lab, tmp_path):
    """--summary over 10,000 reports holds one at a time: its peak memory is that of 1,000 reports."""
    _, _, data = probe_saved(tmp_path, "-b", three_lab.real_endpoint("CLIENT", 0))
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


def test_diff_of_two_dns_views_names_exactly_the_endpoints_that_differ(listeners_lab, tmp_path):
    bob = listeners_lab.real_endpoint("LISTENER_BOB")
    inside, _, a = probe_saved(tmp_path, "-b", bob, "--nameserver", listeners_lab.nameserver("docker"),
                               "--vantage", "docker")
    outside, _, b = probe_saved(tmp_path, "-b", bob, "--nameserver", listeners_lab.nameserver("host"),
                                "--vantage", "host")
    same = kprobe("diff", str(inside), str(inside))
    assert same.returncode == 0 and same.stdout.decode().splitlines()[-1] == "SAME: the verdicts agree"
    done = kprobe("diff", str(inside), str(outside))
    assert done.returncode == 1, done.stderr
    out = done.stdout.decode()
    [endpoint] = [e for e in a["endpoints"]]
    # Two vantages, side by side: neither came first, so nothing "changed" or "appeared".
    assert f"  0     {endpoint['host']}:{endpoint['port']}  usable  unresolvable  differs" in out
    assert "Findings only at B (host):\n  ERROR ADVERTISED_UNRESOLVABLE (broker 0, kafka0:" in out
    assert out.splitlines()[-1] == "DIFFERENT: run ok at A, gap at B, 1 verdict differs, 1 finding only at B"
    js = json.loads(kprobe("diff", str(inside), str(outside), "--json").stdout)
    [comparison] = js["comparisons"]
    changed = [e for e in comparison["endpoints"] if e["change"] != "same"]
    assert js["differs"] is True and [(e["node_id"], e["a"], e["verdict_a"], e["verdict_b"]) for e in changed] == [
        (0, f"{endpoint['host']}:{endpoint['port']}", "usable", "unresolvable")]
    assert [f["code"] for f in comparison["findings_only_b"]] == [f["code"] for f in b["findings"]
                                                                   if f["severity"] == "error"][:1]
    md = kprobe("diff", str(inside), str(outside), "--format", "markdown").stdout.decode()
    assert md.startswith("#### kprobe diff: DIFFERENT: run ok at A, gap at B") and "| 0 | `kafka0:" in md


def test_diff_of_directories_compares_the_newest_report_of_each_cluster(listeners_lab, cloud_lab, tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    for root, view in ((before, "host"), (after, "docker")):
        for _ in range(2):  # two runs each: the newer is the one compared
            kprobe("probe", "-b", listeners_lab.real_endpoint("LISTENER_BOB"), "--nameserver",
                   listeners_lab.nameserver(view), "--out", str(root))
    kprobe("probe", "-b", cloud_lab.bootstrap("EXTERNAL"), "--nameserver", cloud_lab.nameserver("internet"),
           "--out", str(after))
    done = kprobe("diff", str(before), str(after), "--json")
    assert done.returncode == 1
    js = json.loads(done.stdout)
    [comparison] = js["comparisons"]
    newest_after = sorted(p for p in after.rglob("*.json") if json.loads(p.read_text())["bootstraps"][0]["address"]
                          == listeners_lab.real_endpoint("LISTENER_BOB"))[-1]
    assert comparison["b"]["source"] == str(newest_after)
    assert [(e["verdict_a"], e["verdict_b"]) for e in comparison["endpoints"]] == [("unresolvable", "usable")]
    [unpaired] = js["unpaired"]
    assert unpaired["side"] == "B" and unpaired["source"].startswith(str(after))
    text = kprobe("diff", str(before), str(after)).stdout.decode()
    assert "Only in B: cluster " in text
