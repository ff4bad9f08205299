"""`kprobe diff` over one `--out` directory that several vantages write to (the layout the docs recommend).

Each side picks its vantage (`DIR@VANTAGE`, `--a-vantage`/`--b-vantage`), so that a report piped in
from another vantage is found and `kprobe diff reports/ reports/` does not compare the newest report
with itself; a report is never silently compared with itself; and two vantages, seen at once, read
side by side ("only at A"), while one vantage at two times reads before and after ("appeared").

No broker: the reports are a real one recorded from the lab (tests/data/reports), written in
`--out`'s layout with the vantage, time and verdict of each run changed, as tests/saved/test_show.py does.
Outputs are compared whole, with paths relative to the directory the command runs in. `kprobe` runs
in-process (tests/support/cli_runner.py): no interpreter start-up per command.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from cli_runner import run_cli

from kprobe.errors import UsageError
from kprobe.output.files import report_path
from kprobe.saved.show import diff_side

BASE = json.loads((Path(__file__).resolve().parents[1] / "data" / "reports" /
                   "2026-11-23-7c779c2-blackholed.json").read_text())
CLUSTER = BASE["bootstraps"][0]["cluster_id"]


def report(vantage: str, minute: int, *, blackholed: bool) -> dict:
    """The recorded run (broker 2 times out: GAP) from `vantage` at 10:MM, or with broker 2 answering (OK)."""
    r = copy.deepcopy(BASE)
    r["id"] = str(uuid.UUID(int=minute + 1))
    r["started_at"] = r["finished_at"] = f"2026-11-24T10:{minute:02d}:00.000Z"
    r["vantage"]["name"] = vantage
    if not blackholed:
        e = r["endpoints"][2]
        e["tcp"][0]["status"], e["tcp"][0]["error"], e["status"] = "ok", None, "reachable"
        r["findings"] = []
        r["summary"]["status"] = "ok"
    return r


def write(root: Path, r: dict) -> str:
    """`r` saved where `--out root` would have saved it; its path as the output names it (relative)."""
    path = report_path(root, r["vantage"]["name"], r["started_at"], r["id"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(r))
    return str(path.relative_to(root.parent))


@pytest.fixture
def shared(tmp_path: Path) -> dict[str, str]:
    """reports/: laptop (broker 2 blackholed from there) and vpc (all usable), two runs each, interleaved."""
    root = tmp_path / "reports"
    return {"laptop_old": write(root, report("laptop", 0, blackholed=True)),
            "vpc_old": write(root, report("vpc", 1, blackholed=False)),
            "laptop": write(root, report("laptop", 2, blackholed=True)),
            "vpc": write(root, report("vpc", 3, blackholed=False))}


def kprobe(cwd: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    """`kprobe ARGS` in `cwd`, run in-process (tests/support/cli_runner.py): what main prints and returns, as a child's."""
    return run_cli(args, stdin=stdin, cwd=cwd, env={**os.environ, "NO_COLOR": "1"})


def refused(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    """The one line a refusal prints (exit 2, nothing on stdout)."""
    done = kprobe(cwd, *args, stdin=stdin)
    assert done.returncode == 2 and done.stdout == "", (args, done.returncode, done.stdout)
    [line] = done.stderr.splitlines()
    return line


FINDING = """\
  ERROR ADVERTISED_TIMEOUT (broker 2, 127.0.0.34:34647)
    Broker 2 advertises 127.0.0.34:34647 (127.0.0.34), but connections to it time out from here (a
      firewall or security group dropping packets, or a private address): producers and consumers
      will bootstrap fine, then fail on every request after the first metadata response, after
      waiting for the timeout.
    Fix: Open the port between this network and 127.0.0.34, or make the listener on port 45985
      advertise an address this network can reach.
"""


BR = "  "  # Markdown's hard line break, two trailing spaces


def side_by_side_text(a: str, b: str) -> str:
    return f"""\
A: {a}: GAP from laptop (system resolver) at 2026-11-24T10:02:00.000Z
B: {b}: OK from vpc (system resolver) at 2026-11-24T10:03:00.000Z
Cluster {CLUSTER} on both sides
Brokers 0, 1, 2 on both sides

Advertised endpoints, as each side saw them:
  NODE  ENDPOINT          A            B
  0     127.0.0.31:45985  usable       usable
  1     127.0.0.32:49429  usable       usable
  2     127.0.0.34:34647  unreachable  usable  differs

Findings only at A (laptop):
{FINDING}
DIFFERENT: run gap at A, ok at B, 1 verdict differs, 1 finding only at A
"""


def test_one_directory_twice_asks_for_sides_instead_of_comparing_a_report_with_itself(tmp_path, shared):
    # Before: exit 0, "SAME: the verdicts agree", the newest report (vpc's) against itself.
    hint = "reports/ holds reports from 2 vantages (laptop, vpc): pick one per side, as kprobe diff " \
           "reports/@laptop reports/@vpc"
    assert refused(tmp_path, "diff", "reports/", "reports/") == (
        f"kprobe: error: A and B would both be {shared['laptop']}: {hint}")
    # --vantage chooses both sides: the same report again.
    assert refused(tmp_path, "diff", "reports/", "reports/", "--vantage", "vpc") == (
        f"kprobe: error: A and B would both be {shared['vpc']}: {hint}")
    assert refused(tmp_path, "diff", "reports/@laptop", "reports/@laptop") == (
        f"kprobe: error: A and B would both be {shared['laptop']}: {hint}")
    assert refused(tmp_path, "diff", "reports/@vpc", "reports/", "--vantage", "vpc") == (
        f"kprobe: error: A and B would both be {shared['vpc']}: {hint}")
    # One vantage only: nothing to pick, so the line says what to give instead.
    (tmp_path / "one").mkdir()
    write(tmp_path / "one", report("laptop", 5, blackholed=True))
    only = refused(tmp_path, "diff", "one", "one")
    assert only.startswith("kprobe: error: A and B would both be one/2026-11-24/laptop-20261124T100500.000Z-") and \
        only.endswith(": name two different reports or directories to compare")
    # A report named twice is still compared with itself: asked for, and a fair check.
    same = kprobe(tmp_path, "diff", shared["vpc"], shared["vpc"])
    assert same.returncode == 0 and same.stdout.splitlines()[-1] == "SAME: the verdicts agree"


def test_a_vantage_per_side_compares_the_newest_of_each_in_words_of_two_vantages(tmp_path, shared):
    expected = side_by_side_text(shared["laptop"], shared["vpc"])
    for args in (["reports/@laptop", "reports/@vpc"],
                 ["reports/", "reports/", "--a-vantage", "laptop", "--b-vantage", "vpc"],
                 ["reports@laptop", "reports", "--b-vantage", "vpc"],
                 ["reports/", "reports/@vpc", "--vantage", "laptop"]):  # a side's own vantage replaces --vantage
        done = kprobe(tmp_path, "diff", *args)
        assert (done.returncode, done.stderr) == (1, ""), args
        assert done.stdout == expected, args
    # B first: the same facts, the sides swapped, still no "appeared" or "->".
    done = kprobe(tmp_path, "diff", "reports/@vpc", "reports/@laptop")
    assert done.stdout.endswith("\nFindings only at B (laptop):\n" + FINDING +
                                "\nDIFFERENT: run ok at A, gap at B, 1 verdict differs, 1 finding only at B\n")


def test_json_and_markdown_use_the_same_neutral_words(tmp_path, shared):
    done = kprobe(tmp_path, "diff", "reports/@laptop", "reports/@vpc", "--json")
    assert done.returncode == 1
    js = json.loads(done.stdout)
    [c] = js["comparisons"]
    assert (c["a"]["source"], c["a"]["vantage"], c["b"]["source"], c["b"]["vantage"]) == (
        shared["laptop"], "laptop", shared["vpc"], "vpc")
    assert c["before_after"] is False
    assert c["verdict"] == "DIFFERENT: run gap at A, ok at B, 1 verdict differs, 1 finding only at A"
    assert [(e["node_id"], e["verdict_a"], e["verdict_b"], e["change"]) for e in c["endpoints"]] == [
        (0, "usable", "usable", "same"), (1, "usable", "usable", "same"), (2, "unreachable", "usable", "changed")]
    assert [f["code"] for f in c["findings_only_a"]] == ["ADVERTISED_TIMEOUT"] and c["findings_only_b"] == []
    assert js["unpaired"] == [] and js["differs"] is True
    md = kprobe(tmp_path, "diff", "reports/@laptop", "reports/@vpc", "--format", "markdown")
    assert md.returncode == 1 and md.stdout == f"""\
#### kprobe diff: DIFFERENT: run gap at A, ok at B, 1 verdict differs, 1 finding only at A

- **A**: `{shared['laptop']}`, **GAP** from `laptop` at `2026-11-24T10:02:00.000Z`
- **B**: `{shared['vpc']}`, **OK** from `vpc` at `2026-11-24T10:03:00.000Z`
- Cluster {CLUSTER.replace('_', chr(92) + '_')} on both sides
- Brokers 0, 1, 2 on both sides

Each side's probe, to run it again from its vantage:

```console
$ kprobe probe -b 127.0.0.31:45985 --timeout 1s --deadline 5s --vantage laptop  # A
$ kprobe probe -b 127.0.0.31:45985 --timeout 1s --deadline 5s --vantage vpc  # B
```

| Node | Endpoint | A | B | Change |
| --- | --- | --- | --- | --- |
| 0 | `127.0.0.31:45985` | usable | usable |  |
| 1 | `127.0.0.32:49429` | usable | usable |  |
| 2 | `127.0.0.34:34647` | unreachable | usable | **differs** |

**Findings only at A (`laptop`)**

- **ERROR** `ADVERTISED_TIMEOUT` (broker 2, `127.0.0.34:34647`){BR}
  Broker 2 advertises 127.0.0.34:34647 (127.0.0.34), but connections to it time out from here (a firewall or \
security group dropping packets, or a private address): producers and consumers will bootstrap fine, then fail on \
every request after the first metadata response, after waiting for the timeout.{BR}
  **Fix:** Open the port between this network and 127.0.0.34, or make the listener on port 45985 advertise an \
address this network can reach.
"""


def test_piping_one_side_in_takes_the_filters_to_the_other_side(tmp_path, shared):
    fresh = report("laptop", 4, blackholed=True)  # a run just made, not in reports/
    piped = json.dumps(fresh).encode()
    expected = side_by_side_text("-", shared["vpc"]).replace("at 2026-11-24T10:02:00.000Z", "at 2026-11-24T10:04:00.000Z")
    for args in (["-", "reports/", "--vantage", "vpc"],  # before: "no kprobe report in - matches the filters"
                 ["-", "reports/@vpc"], ["-", "reports/", "--b-vantage", "vpc"],
                 ["-", "reports/@vpc", "--a-vantage", "laptop"], ["-", "reports/", "--vantage", "vpc", "--status", "ok"]):
        done = kprobe(tmp_path, "diff", *args, stdin=piped)
        assert (done.returncode, done.stderr, done.stdout) == (1, "", expected), args
    # The piped side's own vantage is held against it: the user said what it is.
    assert refused(tmp_path, "diff", "-", "reports/@vpc", "--a-vantage", "vpc", stdin=piped) == (
        "kprobe: error: A is -, a report from vantage 'laptop', not 'vpc'")
    # A stream of several (JSON Lines, as a console consumer prints a topic) is chosen from, as a directory is.
    stream = b"\n".join(json.dumps(r).encode() for r in (fresh, report("vpc", 5, blackholed=False)))
    done = kprobe(tmp_path, "diff", "-", "reports/@vpc", "--a-vantage", "laptop", stdin=stream)
    assert done.returncode == 1 and done.stdout.startswith("A: -:1: GAP from laptop")
    assert refused(tmp_path, "diff", "-", "reports/@vpc", stdin=stream).startswith(
        "kprobe: error: A (-) holds reports of cluster ")


def test_before_and_after_of_every_vantage_keep_the_words_of_time(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    for minute, vantage, blackholed in ((0, "laptop", True), (1, "vpc", False)):
        write(before, report(vantage, minute, blackholed=blackholed))
    for minute, vantage in ((10, "laptop"), (11, "vpc")):  # the listener fixed: both usable
        write(after, report(vantage, minute, blackholed=False))
    done = kprobe(tmp_path, "diff", "before/", "after/", "--json")
    assert done.returncode == 1
    js = json.loads(done.stdout)
    # Each vantage against itself, not the newest "of the cluster" whichever vantage ran last.
    assert [(c["a"]["vantage"], c["b"]["vantage"], c["before_after"], c["verdict"]) for c in js["comparisons"]] == [
        ("laptop", "laptop", True, "DIFFERENT: run gap -> ok, 1 verdict changed, 1 finding went away"),
        ("vpc", "vpc", True, "SAME: the verdicts agree")]
    text = kprobe(tmp_path, "diff", "before/", "after/").stdout
    assert "  2     127.0.0.34:34647  unreachable  usable  changed\n" in text
    assert "\nFindings only in A (gone in B):\n  ERROR ADVERTISED_TIMEOUT" in text
    # One vantage given newest first is no "before and after": side by side words, not time reversed.
    a = write(tmp_path / "laptop", report("laptop", 20, blackholed=False))
    b = write(tmp_path / "laptop", report("laptop", 21, blackholed=True))
    assert kprobe(tmp_path, "diff", a, b).stdout.splitlines()[-1] == (
        "DIFFERENT: run ok -> gap, 1 verdict changed, 1 finding appeared")
    assert kprobe(tmp_path, "diff", b, a).stdout.splitlines()[-1] == (
        "DIFFERENT: run gap at A, ok at B, 1 verdict differs, 1 finding only at A")
    # A directory of two vantages against one report: which of them is for the user to say.
    assert refused(tmp_path, "diff", a, "before/") == (
        "kprobe: error: B (before/) holds reports of cluster " + CLUSTER + " from 2 vantages (laptop, vpc) and A "
        "from one: say which B is, as before/@vpc or --b-vantage vpc")


@pytest.mark.parametrize(("args", "says"), [
    (["reports/@lap", "reports/@vpc"], "no kprobe report in reports/ is from vantage 'lap': its reports are from "
                                       "laptop, vpc"),
    (["reports/@vpc", "reports/@laptop", "--status", "gap"],
     "no kprobe report in reports/ is from vantage 'vpc' and matches the filters: those that match are from laptop"),
    (["reports/@laptop", "reports/", "--a-vantage", "vpc"], "A's vantage is given twice (reports/@laptop and "
                                                            "--a-vantage vpc): give it once"),
    (["reports/", "reports/@vpc", "--a-vantage", " "], "bad --a-vantage ' ': give a vantage name"),
    (["nowhere/@laptop", "reports/@vpc"], "cannot read nowhere/: no such file or directory"),
    (["@laptop", "reports/@vpc"], "bad '@laptop': give a report file or directory before the @, as reports/@laptop"),
    (["reports/@", "reports/@vpc"], "bad 'reports/@': give a vantage after the @, as reports/@VANTAGE"),
])
def test_a_bad_side_is_one_line_and_exit_2(tmp_path, shared, args, says):
    assert refused(tmp_path, "diff", *args) == f"kprobe: error: {says}"


def test_an_at_sign_in_a_file_name_is_part_of_the_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "alice@laptop.json").write_text("{}")
    (tmp_path / "reports").mkdir()
    assert diff_side("A", "alice@laptop.json").path == "alice@laptop.json"
    assert (diff_side("A", "alice@laptop.json@vpc").path, diff_side("A", "alice@laptop.json@vpc").vantage) == (
        "alice@laptop.json", "vpc")
    assert diff_side("B", "reports/@alice@laptop").vantage == "alice@laptop"  # a vantage may hold an @
    assert diff_side("B", "-@vpc").path == "-" and diff_side("B", "-", "vpc").vantage == "vpc"
    with pytest.raises(UsageError, match="B's vantage is given twice"):
        diff_side("B", "reports/@vpc", "laptop")


def test_a_node_advertised_apart_at_two_vantages_has_not_moved():
    """Two vantages told of broker 2 at different endpoints (a listener per network): `vs`, not `->`."""
    from kprobe.models.compare import Side, compare
    from kprobe.output import diff as diff_output
    from kprobe.output.json_load import from_dict

    office, vpn = report("office", 0, blackholed=False), report("vpn", 1, blackholed=False)
    vpn["endpoints"][2]["host"] = "127.0.0.39"
    diff = compare(Side(source="office.json", report=from_dict(office)), Side(source="vpn.json", report=from_dict(vpn)))
    assert diff_output.verdict_line(diff) == "DIFFERENT: 1 node advertised at another endpoint"
    assert "  2     127.0.0.34:34647 vs 127.0.0.39:34647  usable  usable  other endpoint\n" in \
        diff_output.render_text([diff])
    vpn["vantage"]["name"] = "office"  # one vantage, later: the listener was changed
    diff = compare(Side(source="a.json", report=from_dict(office)), Side(source="b.json", report=from_dict(vpn)))
    assert diff_output.verdict_line(diff) == "DIFFERENT: 1 endpoint moved"
    assert "127.0.0.34:34647 -> 127.0.0.39:34647  usable  usable  moved\n" in diff_output.render_text([diff])
