"""The application section in every output: text, Markdown, Prometheus, `show` and `diff`.

Pure: a report recorded from the three-brokers lab (broker 2's endpoint times out) is given the
application section a probe with `--group billing-2 --transactional-id tx-1 --topic billing --topic
nope` makes when broker 2 coordinates the group, and its findings are then the real rules' own
(kprobe.findings.diagnose), as a probe makes them. What is checked is what a user reads: the lines
that name the coordinator (also as the Java client logs it), what is wrong with an internal topic,
the topics named; that a saved report shows the same; that a name a user or broker chose cannot
write escapes or markup; and that `diff` names a coordinator or internal topic that changed.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_runner import run_cli
from report_check import validate

from kprobe.findings.diagnose import diagnose
from kprobe.models import CLIENTS_CONNECT
from kprobe.models.compare import Side, compare
from kprobe.output import diff as diff_output
from kprobe.output import markdown, prometheus, text
from kprobe.output.json_load import from_dict
from kprobe.output.json_report import to_dict
from kprobe.records import replace

DATA = Path(__file__).resolve().parents[1] / "data" / "reports"
BLACKHOLED = json.loads((DATA / "2026-11-23-7c779c2-blackholed.json").read_text())


def _offsets(**changes: object) -> dict:
    return {"name": "__consumer_offsets", "exists": True, "partitions": 3, "live_brokers": 3,
            "replication_factor": 1, "min_isr": None, "settings_read": True, "offline": [], "under_min_isr": [],
            "can_create": True, "serves": True, **changes}


def _transactions(**changes: object) -> dict:
    return {"name": "__transaction_state", "exists": False, "partitions": 50, "live_brokers": 3,
            "replication_factor": 3, "min_isr": 2, "settings_read": False, "offline": [], "under_min_isr": [],
            "can_create": True, "serves": True, **changes}


def _coordinator(kind: str, key: str, partition: int, node_id: int | None, endpoint: str | None,
                 status: str | None, error: str | None = None) -> dict:
    java_id = None if node_id is None else 2147483647 - node_id if kind == "group" else node_id
    return {"kind": kind, "key": key, "partition": partition, "partition_leader": node_id, "node_id": node_id,
            "java_id": java_id, "endpoint": endpoint, "status": status, "error": error}


APPLICATION = {
    "group": "billing-2", "transactional_id": "tx-1",
    "topics": [{"name": "billing", "status": "ok", "partitions": 3, "leaderless": [], "error": None},
               {"name": "nope", "status": "not_found", "partitions": 0, "leaderless": [],
                "error": "UNKNOWN_TOPIC_OR_PARTITION"}],
    "internal_topics": [_offsets(), _transactions()],
    "coordinators": [_coordinator("group", "billing-2", 2, 2, "127.0.0.34:34647", "timeout"),
                     _coordinator("transaction", "tx-1", 20, 0, "127.0.0.31:45985", "reachable")],
}


def with_application(application: dict | None, data: dict = BLACKHOLED) -> dict:
    """The recorded run with this application section, its findings and status made by the real rules."""
    edited = copy.deepcopy(data)
    edited["application"] = copy.deepcopy(application)
    edited["settings"].update(group=(application or {}).get("group"),
                              transactional_id=(application or {}).get("transactional_id"),
                              topics=[t["name"] for t in (application or {}).get("topics", [])])
    report = from_dict(edited)
    findings = tuple(diagnose(report.bootstraps, report.endpoints, (), (), None, report.application))
    gap = any(f.severity == "error" for f in findings) or any(e.status not in CLIENTS_CONNECT for e in report.endpoints)
    return validate(json.loads(json.dumps(to_dict(replace(report, findings=findings, status="gap" if gap else "ok")))))


APPLICATION_TEXT = """\
Application, from recorded:
  group 'billing-2':       coordinator broker 2 at 127.0.0.34:34647 (the Java client logs id 2147483645), \
partition 2 of __consumer_offsets led by 2: unreachable from here
  transactional id 'tx-1': coordinator broker 0 at 127.0.0.31:45985, \
partition 20 of __transaction_state led by 0: usable from here
  __transaction_state:     missing, will be created at the first transactional producer's coordinator lookup
  topic 'billing':         3 partitions, ok
  topic 'nope':            not found

"""


def kprobe(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(args, env={**os.environ, "NO_COLOR": "1"})


def test_text_shows_the_application_between_the_endpoints_and_the_findings():
    rendered = text.render(from_dict(with_application(APPLICATION)))
    assert APPLICATION_TEXT in rendered
    endpoints, rest = rendered.split("Application, from recorded:\n")
    assert "Advertised endpoints" in endpoints and "Findings:" not in endpoints
    assert rest.index("Findings:") > rest.index("topic 'nope'")
    assert "ERROR COORDINATOR_UNREACHABLE" in rest and "ERROR TOPIC_NOT_FOUND" in rest


def test_a_report_without_an_application_prints_no_block():
    assert "Application" not in text.render(from_dict(with_application(None)))
    assert "Application" not in markdown.render(from_dict(with_application(None)))
    assert "kprobe_internal_topic_serves" not in prometheus.render(from_dict(with_application(None)))


def test_show_of_the_saved_report_prints_what_the_probe_printed(tmp_path):
    data = with_application(APPLICATION)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    shown = kprobe("show", str(path))
    assert (shown.returncode, shown.stderr) == (0, "")
    assert shown.stdout == text.render(from_dict(data))


@pytest.mark.parametrize(("internal", "line"), [
    ([_offsets(exists=False, replication_factor=3, live_brokers=1, partitions=50, can_create=False, serves=False)],
     "__consumer_offsets: missing; cannot be created: replication factor 3, 1 live broker"),
    ([_offsets(offline=[2], serves=False)], "__consumer_offsets: 1 of 3 partitions without a leader: 2"),
    ([_transactions(exists=False, replication_factor=3, live_brokers=1, can_create=False, serves=False)],
     "__transaction_state: missing; cannot be created: replication factor 3 (Kafka's default: not readable from "
     "here), 1 live broker"),
    ([_transactions(exists=True, partitions=50, settings_read=True, under_min_isr=list(range(12)), serves=False)],
     "__transaction_state: 12 of 50 partitions below min.isr 2: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 and 2 more"),
    ([_transactions(exists=False, replication_factor=1, min_isr=2, settings_read=True)],
     "__transaction_state: missing; its writes will be refused: replication factor 1, min.isr 2"),
])
def test_each_internal_topic_state_in_one_line(internal, line):
    app = {**APPLICATION, "internal_topics": internal, "coordinators": [], "topics": [], "group": None,
           "transactional_id": None}
    rendered = text.render(from_dict(with_application(app)))
    assert f"Application, from recorded:\n  {line}\n\n" in rendered


def test_a_missing_offsets_topic_the_brokers_can_create_is_said_only_when_the_application_is_named():
    """A fresh cluster that never had a group: nothing wrong, and nothing to say unless a group was asked about."""
    fresh = {**APPLICATION, "internal_topics": [_offsets(exists=False, partitions=50)], "coordinators": [],
             "topics": [], "group": None, "transactional_id": None}
    assert "Application" not in text.render(from_dict(with_application(fresh)))
    rendered = text.render(from_dict(with_application({**fresh, "group": "billing"})))
    assert "  __consumer_offsets: missing, will be created at the first consumer's coordinator lookup\n" in rendered


def test_a_failed_lookup_names_the_error_and_where_the_key_lives():
    app = {**APPLICATION, "coordinators": [_coordinator("group", "billing-2", 2, None, None, None,
                                                        "COORDINATOR_NOT_AVAILABLE")],
           "internal_topics": [_offsets(offline=[2], serves=False)], "topics": []}
    rendered = text.render(from_dict(with_application(app)))
    assert ("  group 'billing-2':       partition 2 of __consumer_offsets (no leader): no coordinator "
            "(COORDINATOR_NOT_AVAILABLE)\n") in rendered
    # The transactional id was named but no answer came back for it: said, not silently left out.
    assert "  transactional id 'tx-1': coordinator not known (no bootstrap answered the question)\n" in rendered


def test_markdown_has_the_application_table():
    md = markdown.render(from_dict(with_application(APPLICATION)))
    assert ("**Application**\n\n| Part | State |\n| --- | --- |\n"
            "| group `billing-2` | coordinator broker 2 at 127.0.0.34:34647 (the Java client logs id 2147483645), "
            "partition 2 of \\_\\_consumer\\_offsets led by 2: **unreachable from here** |\n") in md
    assert "| topic `nope` | **not found** |\n" in md
    assert "$ kprobe probe -b 127.0.0.31:45985 --timeout 1s --deadline 5s --group billing-2 --transactional-id tx-1 " \
           "--topic billing --topic nope --vantage recorded\n" in md


def test_names_from_users_and_brokers_cannot_write_escapes_or_markup():
    hostile = "evil\x1b[31m|`[x](http://evil.example)\n# heading"
    app = copy.deepcopy(APPLICATION)
    app["group"] = app["coordinators"][0]["key"] = hostile
    app["topics"][1]["name"] = hostile
    data = with_application(app)
    for rendered in (text.render(from_dict(data)), markdown.render(from_dict(data)),
                     prometheus.render(from_dict(data))):
        assert "\x1b" not in rendered and "\n# heading" not in rendered
    md = markdown.render(from_dict(data))
    rows = [line for line in md.split("**Application**")[1].split("\n\n")[1].splitlines()]
    assert all(line.count(" | ") == rows[0].count(" | ") for line in rows)  # no extra column from a `|`


def test_prometheus_has_a_gauge_per_internal_topic_and_coordinator(tmp_path):
    exposition = prometheus.render(from_dict(with_application(APPLICATION)))
    samples = [line for line in exposition.splitlines() if line.startswith(("kprobe_internal", "kprobe_coordinator"))]
    assert samples == [
        'kprobe_internal_topic_serves{topic="__consumer_offsets",vantage="recorded"} 1',
        'kprobe_internal_topic_serves{topic="__transaction_state",vantage="recorded"} 1',
        'kprobe_coordinator_usable{kind="group",key="billing-2",vantage="recorded"} 0',
        'kprobe_coordinator_usable{kind="transaction",key="tx-1",vantage="recorded"} 1',
    ]
    promtool = shutil.which("promtool")
    if promtool is not None:
        path = tmp_path / "metrics.txt"
        path.write_text(exposition)
        with path.open() as stdin:
            check = subprocess.run([promtool, "check", "metrics"], stdin=stdin, capture_output=True, text=True,
                                   timeout=60, check=False)
        assert check.returncode == 0, check.stdout + check.stderr


def _fixed(data: dict) -> dict:
    """Broker 2's endpoint answering again, as after its listener was fixed: the real rules judge it."""
    fixed = copy.deepcopy(data)
    endpoint = fixed["endpoints"][2]
    endpoint["tcp"][0].update(status="ok", ms=1.0)
    endpoint["status"] = "reachable"
    fixed["application"]["coordinators"][0]["status"] = "reachable"
    return with_application(fixed["application"], fixed)


def test_diff_names_a_coordinator_that_changed():
    before = with_application(APPLICATION)
    diff = compare(Side(source="before", report=from_dict(before)), Side(source="after",
                                                                          report=from_dict(_fixed(before))))
    assert [(c.part, c.name, c.state_a, c.state_b) for c in diff.application] == [
        ("coordinator", "billing-2", "broker 2, unreachable", "broker 2, usable")]
    rendered = diff_output.render_text([diff])
    assert ("Coordinators and internal topics that changed:\n"
            "  PART               A                      B\n"
            "  group 'billing-2'  broker 2, unreachable  broker 2, usable\n") in rendered
    assert "1 coordinator changed" in diff_output.verdict_line(diff)
    assert diff_output.to_dict(diff)["application"] == [
        {"part": "coordinator", "kind": "group", "name": "billing-2", "a": "broker 2, unreachable",
         "b": "broker 2, usable"}]
    assert "| group `billing-2` | broker 2, unreachable | broker 2, usable |" in diff_output.render_markdown([diff])


def test_diff_names_an_internal_topic_that_stopped_serving():
    offline = {**APPLICATION, "internal_topics": [_offsets(offline=[2], serves=False), _transactions()]}
    diff = compare(Side(source="a", report=from_dict(with_application(None))),
                   Side(source="b", report=from_dict(with_application(offline))))
    assert [(c.part, c.name, c.state_a, c.state_b) for c in diff.application] == [
        ("internal_topic", "__consumer_offsets", "-", "1 of 3 partitions without a leader")]
    assert "1 internal topic changed" in diff_output.verdict_line(diff)
    same = compare(Side(source="a", report=from_dict(with_application(APPLICATION))),
                   Side(source="b", report=from_dict(with_application(APPLICATION))))
    assert same.application == () and not same.differs
