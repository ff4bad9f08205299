"""report.html in headless Chromium (Debian's), at 20 vantages x 30 endpoints and at 200 x 300.

The page is drawn by its own script from data the job collects, so its drawing is tested here on
data of the two sizes the issue names (built directly, `render_page`), and end to end once through
a real Spark job. In Chromium at 1280x800: no console error, no horizontal overflow of the page (the
matrices scroll in their own boxes), every cell and every gap drawn, and hostile names shown as text.
A test-only probe script is appended to a copy of the page to read the layout; the page is unchanged.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from kprobe.aggregate.page import render_page

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--enable-logging=stderr",
         "--v=0", "--window-size=1280,800", "--hide-scrollbars"]
HOSTILE = 'v"><img src=x onerror=alert(1)>\x1b[2J'
# Appended to a copy of the page: what a person would see, measured in the browser, written into the DOM.
PROBE = """<script>
window.addEventListener("load", () => setTimeout(() => {
  const de = document.documentElement;
  const out = {drawn: document.body.dataset.drawn === "1", pageWidth: de.scrollWidth, viewport: window.innerWidth,
    cells: document.querySelectorAll(".matrix td[data-e]").length, gapRows: document.querySelectorAll("#gaps tbody tr[data-i]").length,
    gapNote: document.getElementById("gaps-note").textContent, svgs: document.querySelectorAll("#timelines svg").length,
    legends: [...document.querySelectorAll(".legend")].filter(l => l.closest("details").open).map(l => {
      const a = l.getBoundingClientRect(), b = l.previousElementSibling.getBoundingClientRect();
      return a.left >= b.right - 1 || a.top >= b.bottom - 1; }),
    boxes: [...document.querySelectorAll(".scroll")].every(s => s.getBoundingClientRect().right <= window.innerWidth + 1),
    injected: document.querySelectorAll("img").length, vantageText: [...document.querySelectorAll(".matrix th.v")].map(t => t.textContent),
    codes: [...document.querySelectorAll("#gaps tbody tr[data-i] td.code")].map(t => t.textContent),
    why: [...document.querySelectorAll("#gaps tr.why")].map(t => t.textContent),
    summaries: [...document.querySelectorAll("#matrices summary")].map(t => t.textContent),
    plots: [...document.querySelectorAll("#timelines svg")].map(s => [s.getAttribute("aria-label"),
      s.querySelectorAll("circle").length])};
  const pre = document.createElement("pre"); pre.id = "probe-result"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}, 200));
</script>"""


def data_of(vantages: int, clusters: int, brokers: int) -> dict:
    """The page's data for `vantages` x `clusters * brokers` endpoints, every fifth cell with gaps."""
    statuses = ["ok", "timeout", "dns"]
    out = []
    for c in range(clusters):
        names = [f"vantage-{v:03d}-{'x' * (v % 7)}" for v in range(vantages)]
        if c == 0:
            names[1] = HOSTILE
        cells = []
        for e in range(brokers):
            for v in range(vantages):
                bad = (e + v + c) % 5 == 0
                cells.append([e, v, 120, 60 if bad else 120, 1 if bad else 0, 1_795_000_000 + v, 1_794_900_000,
                              {"timeout": 60} if bad else {}, [0, 60, 1_795_000_000, 0] if bad and v % 5 == 0 else None])
        hours = [1_794_898_800 + 3600 * h for h in range(24)]
        out.append({"id": f"cluster-{c:03d}-{'y' * 30}", "name": f"*.cluster-{c}.example.com",
                    "endpoints": [[n, f"b{n}.cluster-{c}.example.com:9092"] for n in range(brokers)],
                    "vantages": names, "cells": cells,
                    "findings": [["ADVERTISED_UNREACHABLE", "error", "An advertised endpoint cannot be reached",
                                  "open the port"]],
                    "timeline": {"times": hours, "bucket": 3600, "average": [0.9] * 24, "vantages": vantages,
                                 "series": [{"vantage": names[k], "rates": [0.5 + 0.02 * k] * 24}
                                            for k in range(min(12, vantages))]}})
    return {"clusters": out, "statuses": statuses, "bootstrap_node": -1}


def in_chromium(page: Path, tmp_path: Path, probe: str = PROBE, result: str = "probe-result", *,
               budget_ms: int = 5000, timeout: float = 180) -> tuple[dict, str]:
    """The page with `probe` appended, run in headless Chromium: the JSON the probe left in `<pre id=result>`
    (the DOM as Chromium dumps it, entities and all), and Chromium's stderr (where uncaught errors go)."""
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text().replace("</body></html>", probe + "</body></html>"))
    done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                           f"--virtual-time-budget={budget_ms}", "--dump-dom", probed.as_uri()],
                          capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    match = re.search(rf'<pre id="{result}">(.*?)</pre>', done.stdout, re.S)
    assert match, "the page's scripts never ran: " + done.stdout[-1500:] + done.stderr[-1500:]
    found = json.loads(match.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
                       .replace("&quot;", '"'))
    return found, done.stderr


@pytest.mark.lab  # a browser
@pytest.mark.parametrize(("vantages", "clusters", "brokers"), [(20, 10, 3), (200, 100, 3)], ids=["20x30", "200x300"])
def test_the_page_reads_well_at_both_sizes(tmp_path, vantages, clusters, brokers):
    data = data_of(vantages, clusters, brokers)
    page = tmp_path / "report.html"
    page.write_text(render_page(data, {"reports": 1000, "observations": 30000, "input_records": 1000,
                                       "duplicates": 0, "quarantined": 0}))
    assert "http://" not in page.read_text().replace("http://www.w3.org", "")  # self-contained: nothing to fetch
    result, log = in_chromium(page, tmp_path)
    assert result["drawn"], result
    assert "CONSOLE" not in log and "Uncaught" not in log, log[-2000:]
    assert result["pageWidth"] <= result["viewport"], result  # no horizontal overflow of the page itself
    assert result["boxes"], "a matrix box is wider than the window"
    assert result["svgs"] == clusters  # a timeline per cluster
    assert len(result["legends"]) == min(5, clusters) and all(result["legends"]), result["legends"]  # beside, not over
    gaps = sum(1 for cl in data["clusters"] for x in cl["cells"] if x[3] < x[2])
    assert result["gapRows"] == min(gaps, 500) and str(gaps) in result["gapNote"]
    # The five clusters with the most gaps are open and drawn, cell by cell.
    assert result["cells"] == 5 * brokers * vantages
    assert result["injected"] == 0 and HOSTILE in result["vantageText"]  # the hostile name is text, not markup
    shot = tmp_path / "shot.png"
    subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile2'}", "--virtual-time-budget=5000",
                    f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=180, check=True)
    image = screenshot(shot)
    assert image.size == (1280, 800)
    assert len(colours(image)) > 8, "the screenshot is blank"


def screenshot(path: Path) -> Any:
    """Chromium's PNG as 8-bit RGB (Pillow decodes it)."""
    from PIL import Image

    with Image.open(path) as image:
        return image.convert("RGB")


def colours(image: Any) -> set[tuple[float, ...]]:
    """The colours of every tenth pixel of every tenth row, each channel rounded to a tenth: a blank page has one or two."""
    width, height = image.size
    return {tuple(round(c / 255, 1) for c in image.getpixel((x, y))) for y in range(0, height, 10)
            for x in range(0, width, 10)}


def pixels_near(image: Any, rgb: tuple[int, int, int], within: float = 0.05) -> int:
    """How many pixels are within `within` (of full scale) of `rgb` in each channel, counted by Pillow in C."""
    from PIL import ImageChops

    masks = [channel.point(lambda v, want=want: 255 if abs(v - want) < within * 255 else 0)
             for channel, want in zip(image.split(), rgb, strict=True)]
    return int(ImageChops.multiply(ImageChops.multiply(masks[0], masks[1]), masks[2]).histogram()[255])


def test_the_job_writes_the_page_end_to_end(spark, tmp_path):
    from kprobe.aggregate.generate import reports, write_jsonl
    from kprobe.aggregate.job import JobOptions, run

    write_jsonl(tmp_path / "in", reports(vantages=3, clusters=2, hours=2))
    run(spark, JobOptions((str(tmp_path / "in"),), str(tmp_path / "out")))
    page = tmp_path / "out" / "report.html"
    result, log = in_chromium(page, tmp_path)
    assert result["drawn"] and "CONSOLE" not in log, log[-2000:]
    rows = spark.read.parquet(str(tmp_path / "out" / "parquet" / "endpoint_vantage")).count()
    assert result["svgs"] == 2 and result["cells"] == rows == 2 * 3 * 3  # 2 clusters x 3 brokers x 3 vantages
    assert result["pageWidth"] <= result["viewport"]
    # The job's findings_by_endpoint reaches the page: each gap names its endpoint's finding in the report's words.
    own = {(r.code, f"{r.message} \u2014 fix: {r.fix}") for r in
           spark.read.parquet(str(tmp_path / "out" / "parquet" / "findings_by_endpoint")).collect()}
    assert result["gapRows"] > 0 and "-" not in result["codes"]  # every generated gap has a finding
    assert set(zip(result["codes"], result["why"], strict=True)) == own
    assert all(" \u00b7 " in s for s in result["summaries"]), result["summaries"]  # a name beside each id
    # Two hours of reports: the job adds a per-minute series, and the page draws minutes (markers on isolated ones).
    assert [label for label, _ in result["plots"]] == ["success rate per minute"] * 2, result["plots"]


# -- strings that end or swallow a <script> element ----------------------------------------

# Each breaks a page that escapes only `</`: `<!--<script` sends the HTML parser into its double-escaped
# state (the drawing script is swallowed), `</script>` in any case ends the data element early. Numbered,
# so that every one is found in exactly its place in the DOM.
SCRIPT_BREAKERS = ["<!--<script", "</script>", "]]>", "<![CDATA[", "</SCRIPT >", "<!--", "-->", "<script>alert(1)</script>",
                   "&lt;&amp;", '"><img src=x onerror=alert(1)>', "\u2028\u2029`${1}`"]
# Appended to a copy of the page: the page's data as the browser parsed it and the text it drew, with every
# character outside printable ASCII (and <, >, &) as a \\u escape, so the dumped DOM needs no unescaping.
DOM_PROBE = """<script>
window.addEventListener("load", () => setTimeout(() => {
  const texts = sel => [...document.querySelectorAll(sel)].map(e => e.textContent);
  const out = {drawn: document.body.dataset.drawn === "1",
    data: JSON.parse(document.getElementById("kprobe-data").textContent),
    vantages: texts(".matrix th.v"), endpoints: texts(".matrix tbody th.ep"),
    endpointTitles: [...document.querySelectorAll(".matrix tbody th.ep")].map(e => e.title),
    cellTitles: [...document.querySelectorAll(".matrix td[data-e]")].map(e => e.title),
    gaps: [...document.querySelectorAll("#gaps tbody tr[data-i]")].map(tr => [...tr.cells, ...tr.nextElementSibling.cells]
      .map(td => td.textContent)),
    matrixSummaries: texts("#matrices summary"), timelineSummaries: texts("#timelines summary"),
    legend: texts(".legend li"), scripts: document.scripts.length, images: document.querySelectorAll("img").length,
    detail: (() => { document.querySelector(".matrix td[data-e]").click(); return document.getElementById("detail").textContent; })()};
  const pre = document.createElement("pre"); pre.id = "dom-result";
  pre.textContent = JSON.stringify(out).replace(/[^\\x20-\\x7e]|[<>&]/g, c => "\\\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  document.body.appendChild(pre);
}, 200));
</script>"""


def _hostile_data() -> tuple[dict, dict]:
    """One cluster whose every string a remote vantage or broker controls is one of SCRIPT_BREAKERS."""
    h = [f"{s}#{i}" for i, s in enumerate(SCRIPT_BREAKERS * 2)]
    data = {"clusters": [{
        "id": h[0], "name": h[14], "endpoints": [[1, f"{h[1]}:9092"], [-1, f"{h[2]}:9093"]], "vantages": [h[3], h[4], h[5]],
        "findings": [[h[15], h[16], h[17], h[18]], [h[19], "error", h[20], h[21]]],
        "cells": [[0, 0, 10, 5, 1, 1_795_000_000, 1_794_900_000, {h[6]: 5}, [0, 5, 1_795_000_000, 0]],
                  [0, 1, 10, 10, 0, 1_795_000_000, 1_794_900_000, {}, None],
                  [1, 2, 10, 0, 2, 1_795_000_000, 1_794_900_000, {h[7]: 10}, [1, 10, 1_795_000_000, 1]]],
        "timeline": {"times": [1_794_898_800, 1_794_902_400], "bucket": 3600, "average": [0.5, 1.0], "vantages": 3,
                     "series": [{"vantage": h[3], "rates": [0.5, 1.0]}, {"vantage": h[5], "rates": [0.0, None]}]}}],
        "statuses": ["ok", h[8], h[9]], "bootstrap_node": -1}
    counts = {"reports": 3, "observations": 30, "input_records": 5, "duplicates": 1, "quarantined": 1,
              "quarantine_reasons": {h[10]: 1, h[11]: 2}, "reports_in_window": 3, h[12]: h[13]}
    return data, counts


@pytest.mark.lab  # a browser
def test_script_breaking_strings_in_every_field_leave_the_page_drawn(tmp_path):
    data, counts = _hostile_data()
    html = render_page(data, counts)
    assert html.count("<script") == 2 and html.count("</script>") == 2  # the page's own two, nothing from the data
    page = tmp_path / "report.html"
    page.write_text(html)
    dom, stderr = in_chromium(page, tmp_path, DOM_PROBE, "dom-result", budget_ms=3000, timeout=60)
    assert dom["drawn"] and "Uncaught" not in stderr, stderr[-2000:]
    # The browser parsed back exactly the data that went in, every hostile string intact.
    assert dom["data"] == json.loads(json.dumps({**data, "counts": counts}))
    cl = data["clusters"][0]
    (node1, ep1), (_, ep2) = cl["endpoints"]
    # Drawn as text in exactly their places: vantage headers, endpoint rows, gap rows, summaries, legend.
    assert dom["vantages"] == cl["vantages"]
    assert dom["endpoints"] == [f"broker {node1} {ep1}", f"bootstrap {ep2}"]
    named = f"{cl['id']} \u00b7 {cl['name']}"
    (code0, _, message0, fix0), (code2, _, message2, fix2) = cl["findings"]
    # The finding of each gap (code, message, fix) as text in its row, beside who cannot reach what.
    assert [row[1:5] + row[6:7] + row[8:10] for row in dom["gaps"]] == [
        [named, "bootstrap", ep2, cl["vantages"][2], data["statuses"][2], code2, f"{message2} \u2014 fix: {fix2}"],
        [named, f"broker {node1}", ep1, cl["vantages"][0], data["statuses"][1], code0, f"{message0} \u2014 fix: {fix0}"]]
    assert dom["endpointTitles"] == [f"broker {node1} {ep1}", f"bootstrap {ep2}"]
    assert dom["cellTitles"][0].endswith(f"\n{code0}: {message0}\nfix: {fix0}")
    assert dom["matrixSummaries"] == [f"cluster {named}: 2 endpoints \u00d7 3 vantages, 2 with gaps"]
    assert dom["timelineSummaries"] == [f"cluster {named} (success rate per hour)"]
    assert dom["legend"] == ["all 3 vantages", cl["vantages"][0], cl["vantages"][2], "the 2 worst of 3 vantages drawn"]
    failure = next(iter(cl["cells"][0][7]))
    assert dom["detail"].startswith(f"\u00d7broker {node1} {ep1}from {cl['vantages'][0]}, cluster {named}")
    assert dom["detail"].endswith(f"{code0} ({cl['findings'][0][1]}): {message0}fix: {fix0}"
                                  "named by 5 reports, the last at 2026-11-18 11:06Z")
    assert f"failures: {failure} 5" in dom["detail"] and f"last: {data['statuses'][1]} at" in dom["detail"]
    assert dom["scripts"] == 3 and dom["images"] == 0  # the page's two and the probe: nothing injected


# -- why a gap, an incident inside one hour, a cluster's name, the port of a label ----------

from kprobe.aggregate.page import DAY, HOUR, bucket_for, cluster_name, timeline  # noqa: E402


def test_the_bucket_follows_the_span_of_the_data():
    """Hours while an incident is hours long, coarser only when the data span weeks; empty buckets are breaks."""
    assert [bucket_for(s) for s in (0, HOUR, 3 * DAY, 3 * DAY + HOUR, 21 * DAY, 60 * DAY)] == [
        HOUR, HOUR, HOUR, 6 * HOUR, 6 * HOUR, DAY]
    # From the job's per-minute series (data within about an hour): minutes, five minutes, then as hours.
    assert [bucket_for(s, 60) for s in (0, 2 * HOUR, 2 * HOUR + 60, 12 * HOUR, 2 * DAY)] == [
        60, 60, 300, 300, HOUR]
    t0 = 1_794_898_800  # on the hour
    fine = timeline([("a", t0 + 600, 0, 4)], 60, average=[(t0, 5, 5), (t0 + 600, 1, 5)], vantages=7)
    assert fine == {"times": [t0 + 60 * m for m in range(11)], "bucket": 60, "vantages": 7,
                    "average": [1.0, *[None] * 9, 0.2], "series": [{"vantage": "a", "rates": [*[None] * 10, 0.0]}]}
    one = timeline([("a", t0, 3, 10), ("b", t0, 10, 10)])
    assert one == {"times": [t0], "bucket": HOUR, "average": [0.65], "vantages": 2,
                   "series": [{"vantage": "a", "rates": [0.3]}, {"vantage": "b", "rates": [1.0]}]}
    # Five days: six-hour buckets from the first one's start, the silent ones null (a break, not a line).
    five = timeline([("a", t0, 1, 2), ("a", t0 + HOUR, 1, 2), ("a", t0 + 5 * DAY, 2, 2)])
    start = t0 - t0 % (6 * HOUR)
    assert five["bucket"] == 6 * HOUR and five["times"][0] == start and len(five["times"]) == 21
    assert five["average"][0] == 0.5 and five["average"][-1] == 1.0 and set(five["average"][1:-1]) == {None}


def test_a_cluster_is_named_by_what_its_brokers_share():
    assert cluster_name("lkc-1", ["b0-pkc-1.eu.aws.confluent.cloud:9092", "b1-pkc-1.eu.aws.confluent.cloud:9092"]) \
        == "*.eu.aws.confluent.cloud"
    assert cluster_name("x", ["kafka-0.kafka.prod.svc:9093", "kafka-1.kafka.prod.svc:9093"]) == "*.kafka.prod.svc"
    assert cluster_name("x", ["10.0.0.2:9092", "10.0.0.1:9092"]) == "10.0.0.1:9092"  # addresses share no name
    assert cluster_name("x", ["broker.example.com:9092"]) == "broker.example.com:9092"  # one broker: its address
    assert cluster_name("x", ["a.one.com:1", "b.two.com:1"]) == "a.one.com:1"  # only ".com" in common
    assert cluster_name("bootstrap:h:9092", ["h:9092"]) == ""  # already named by its bootstraps


PORTS = (9092, 9093, 9094)
LONG = "b{n}-pkc-p11xm.europe-west3.gcp.confluent.cloud"
# Appended to a copy of the page: exact DOM facts and what the eye sees of each endpoint label.
INCIDENT_PROBE = """<script>
window.addEventListener("load", () => setTimeout(() => {
  const all = sel => [...document.querySelectorAll(sel)];
  const fits = e => e.scrollWidth <= e.clientWidth + 1;
  const out = {drawn: document.body.dataset.drawn === "1", pageWidth: document.documentElement.scrollWidth,
    viewport: window.innerWidth,
    gaps: all("#gaps tbody tr[data-i]").map(tr => [...tr.cells, ...tr.nextElementSibling.cells].map(td => td.textContent)),
    whyShown: all("#gaps tr.why td").every(td => td.getBoundingClientRect().right <= window.innerWidth),
    summaries: all("details > summary").map(s => s.textContent),
    labels: all(".matrix tbody th.ep").map(th => { const keep = th.querySelector(".keep"), cut = th.querySelector(".cut");
      const k = keep.getBoundingClientRect(), b = th.getBoundingClientRect();
      return {title: th.title, text: th.textContent, keep: keep.textContent, keepShown: fits(keep) && k.right <= b.right + 1,
              cutShort: !fits(cut)}; }),
    codes: all(".matrix td[data-code]").map(td => td.dataset.code),
    svg: all("#timelines svg").map(s => ({label: s.getAttribute("aria-label"), paths: s.querySelectorAll("path").length,
      circles: [...s.querySelectorAll("circle")].map(c => c.textContent),
      visible: [...s.querySelectorAll("circle")].every(c => c.getBoundingClientRect().width >= 6),
      ticks: [...s.querySelectorAll("text")].map(t => t.textContent).filter(t => !t.endsWith("%"))}))};
  const pre = document.createElement("pre"); pre.id = "incident-result";
  pre.textContent = JSON.stringify(out).replace(/[<>&]/g, c => "\\\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  document.body.appendChild(pre);
}, 200));
</script>"""


def incident_data() -> tuple[dict, list[str]]:
    """One Confluent-like cluster, three brokers on three listeners each, eight vantages, an incident inside one hour.

    Every probe fell between 14:05 and 14:50 of one day: the hourly output has one hour, so each
    timeline is one point. Two vantages lost the 9094 listener (a finding says why); the rest are fine.
    """
    vantages = ["laptop-paris", "ci-runner-eu-1", "ci-runner-eu-2", "gke-prod-europe-west3", "aws-lambda-eu",
                "office-vpn", "bastion", "on-prem-dc2"]
    endpoints = [[n, f"{LONG.format(n=n)}:{port}"] for n in range(3) for port in PORTS]
    t0 = 1_794_924_000  # 2026-11-17 14:00Z... an hour start
    cells, rows = [], []
    for e, (_, hp) in enumerate(endpoints):
        for v in range(len(vantages)):
            bad = hp.endswith(":9094") and v in (1, 4)
            cells.append([e, v, 12, 3 if bad else 12, 2 if bad else 0, t0 + 3000, t0 + 300, {"timeout": 9} if bad else {},
                          [0, 9, t0 + 3000, 0] if bad else None])
    for v, name in enumerate(vantages):
        bad = v in (1, 4)
        rows.append((name, t0, 9 * 12 - (27 if bad else 0), 9 * 12))
    finding = ["ADVERTISED_UNREACHABLE", "error", "An advertised endpoint cannot be reached from here: port 9094 times out",
               "open port 9094 from this network to the brokers, or bootstrap through the 9092 listener"]
    cluster = {"id": "lkc-7n3q2w", "name": cluster_name("lkc-7n3q2w", [hp for _, hp in endpoints]),
               "endpoints": endpoints, "vantages": vantages, "cells": cells,
               "findings": [finding],
               "timeline": timeline(rows)}
    return {"clusters": [cluster], "statuses": ["ok", "dns", "timeout"], "bootstrap_node": -1}, vantages


def shoot(page: Path, tmp_path: Path, size: str, name: str, only: str = "") -> Path:
    """A Chromium screenshot of the page at `size`, kept in tmp_path to look at.

    With `only` (an element id), a copy shows that element and its heading alone, at the top: headless
    Chromium's --screenshot ignores a URL fragment, and a scrolled page captures blank.
    """
    shot = tmp_path / f"{name}.png"
    if only:
        copy = tmp_path / f"{name}.html"
        copy.write_text(page.read_text().replace("</style>", f"body > :not(#{only}, h2:has(+ #{only})){{display:none}}"
                                                 "</style>"))
        page = copy
    subprocess.run([CHROMIUM, *[f for f in FLAGS if not f.startswith("--window-size")], f"--window-size={size}",
                    f"--user-data-dir={tmp_path / ('profile-' + name)}", "--virtual-time-budget=3000",
                    f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=60, check=True)
    return shot


@pytest.mark.lab  # a browser
def test_an_incident_inside_one_hour_is_drawn_and_each_gap_says_why(tmp_path):
    data, vantages = incident_data()
    cl = data["clusters"][0]
    assert cl["timeline"]["times"] == [1_794_924_000] and cl["timeline"]["bucket"] == HOUR
    page = tmp_path / "report.html"
    page.write_text(render_page(data, {"reports": 96, "observations": 864, "input_records": 96, "duplicates": 0,
                                       "quarantined": 0}))
    dom, stderr = in_chromium(page, tmp_path, INCIDENT_PROBE, "incident-result", budget_ms=3000, timeout=60)
    assert dom["drawn"] and "Uncaught" not in stderr and dom["pageWidth"] <= dom["viewport"]
    name = "*.europe-west3.gcp.confluent.cloud"
    assert cl["name"] == name
    assert dom["summaries"] == [f"cluster lkc-7n3q2w \u00b7 {name}: 9 endpoints \u00d7 8 vantages, 6 with gaps",
                                f"cluster lkc-7n3q2w \u00b7 {name} (success rate per hour)"]
    # Each gap: who, from where, and why with the fix, in the table and on the matrix cell.
    code, _, message, fix = cl["findings"][0]
    assert sorted((row[3], row[4], row[8], row[9]) for row in dom["gaps"]) == sorted(
        (f"{LONG.format(n=n)}:9094", vantages[v], code, f"{message} \u2014 fix: {fix}") for n in range(3) for v in (1, 4))
    assert dom["whyShown"], "the why and the fix are cut off to the right"
    assert dom["codes"] == [code] * 6
    # Labels: the whole one as the title and the text; the port always shown, the host cut in its middle.
    assert [lb["title"] for lb in dom["labels"]] == [f"broker {n} {hp}" for n, hp in cl["endpoints"]]
    assert [lb["text"] for lb in dom["labels"]] == [f"broker {n} {hp}" for n, hp in cl["endpoints"]]
    assert all(lb["keepShown"] and lb["keep"].endswith(f":{hp.rsplit(':', 1)[1]}") for lb, (_, hp)
               in zip(dom["labels"], cl["endpoints"], strict=True)), dom["labels"]
    assert all(lb["cutShort"] for lb in dom["labels"]), "the long host names are not cut"
    # One hour, one point per line: no path of a single `M x y`, a visible marker for each vantage drawn and the average.
    (svg,) = dom["svg"]
    assert svg["label"] == "success rate per hour" and svg["paths"] == 0 and svg["visible"]
    assert len(svg["circles"]) == len(vantages) + 1
    assert "all 8 vantages: 93.8% in the hour from 2026-11-17 14:00Z" in svg["circles"]
    assert f"{vantages[1]}: 75.0% in the hour from 2026-11-17 14:00Z" in svg["circles"]
    assert svg["ticks"] == ["2026-11-17 14:00Z (one hour)"]
    shots = [shoot(page, tmp_path, "1280,800", "top"), shoot(page, tmp_path, "1280,800", "timeline", "timelines"),
             shoot(page, tmp_path, "1920,1080", "wide")]
    for shot in shots:
        assert len(colours(screenshot(shot))) > 8
    # The markers themselves: the timeline's screenshot holds the palette's first colour (the worst vantage's dot).
    assert pixels_near(screenshot(shots[1]), (0x15, 0x65, 0xC0)) > 20, "no marker drawn in the timeline"


# -- each gap carries its endpoint's own finding, in the report's words ---------

REPORTS = Path(__file__).parents[1] / "data" / "reports"
# Appended to a copy of the page: every drawn matrix cell (its row's endpoint, its vantage, its finding's code
# and its title), every gap row (its cells and the row under it), and the details of each gap when clicked.
OWN_PROBE = """<script>
window.addEventListener("load", () => setTimeout(() => {
  const all = (root, sel) => [...root.querySelectorAll(sel)];
  const cells = all(document, "#matrices details").flatMap(d => { const heads = all(d, "thead th.v").map(t => t.textContent);
    return all(d, "td[data-e]").map(td => ({endpoint: td.parentElement.querySelector("th.ep").title,
      vantage: heads[+td.dataset.v], rate: td.textContent, code: td.dataset.code ?? null, title: td.title})); });
  const rows = all(document, "#gaps tbody tr[data-i]");
  const out = {drawn: document.body.dataset.drawn === "1", cells,
    gaps: rows.map(tr => [...tr.cells, ...tr.nextElementSibling.cells].map(td => td.textContent)),
    details: rows.map(tr => { tr.cells[0].click(); return [...document.querySelectorAll("#detail .line")].map(l => l.textContent); }),
    note: document.getElementById("gaps-note").textContent};
  const pre = document.createElement("pre"); pre.id = "own-result";
  pre.textContent = JSON.stringify(out).replace(/[^\\x20-\\x7e]|[<>&]/g, c => "\\\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  document.body.appendChild(pre);
}, 200));
</script>"""


def own_finding_reports() -> list[dict]:
    """The lab's recorded reports (tests/data/reports) as they are, and edited copies of them from two more vantages.

    `office`: the blackholed listener's reports again, broker 1 now unresolvable with a finding as probes
    write them today (an `endpoints` list, `node_ids`), beside broker 2's timeout with its finding as older
    probes wrote it (`endpoint` and `node_id` alone), and a warning naming broker 1's address but another
    node (it concerns no endpoint here). The vantage's worst finding is the same for both gaps; each
    gap's own is not. `cut-off`: one report whose bootstrap did not answer, its finding about that bootstrap.
    """
    real = [json.loads(p.read_text()) for p in sorted(REPORTS.glob("*.json"))]
    out = list(real)
    for n, report in enumerate(r for r in real if r["findings"]):
        copy = json.loads(json.dumps(report))
        copy["id"] = f"00000000-0000-4000-8000-{n:012d}"
        copy["vantage"]["name"] = "office"
        ep = copy["endpoints"][1]
        hp = f"{ep['host']}:{ep['port']}"
        error = f"{ep['host']}: no such name (NXDOMAIN) at {copy['started_at']}"
        ep.update(status="unresolvable", tcp=[], identity=None,
                  dns={**ep["dns"], "status": "nxdomain", "addresses": [], "error": error, "source": "system"})
        copy["findings"] += [
            {"code": "ADVERTISED_UNRESOLVABLE", "severity": "error", "node_id": 1, "endpoint": hp,
             "bootstrap": copy["bootstraps"][0]["address"], "endpoints": [hp], "node_ids": [1],
             "message": f"Broker 1 advertises {hp}, which does not resolve from here ({error}): producers and "
                        "consumers will bootstrap fine, then fail on every request broker 1 leads.",
             "fix": "Make the listener advertise a name this network can resolve (advertised.listeners)."},
            {"code": "ADVERTISED_NAME_DIFFERS", "severity": "warning", "node_id": None, "endpoint": None,
             "bootstrap": None, "endpoints": [hp], "node_ids": [7], "message": "not about broker 1", "fix": "-"}]
        out.append(copy)
    cut = json.loads(json.dumps(next(r for r in real if not r["findings"])))
    boot = cut["bootstraps"][0]
    boot.update(status="timeout", error="timed out", answered_by=None, cluster_id=None, controller_id=None, brokers=[])
    cut.update(id="00000000-0000-4000-8000-999999999999", endpoints=[], vantage={**cut["vantage"], "name": "cut-off"},
               summary={**cut["summary"], "status": "failed", "bootstraps_ok": 0, "endpoints": 0, "reachable": 0})
    cut["findings"] = [{"code": "BOOTSTRAP_UNREACHABLE", "severity": "error", "node_id": None, "endpoint": None,
                        "bootstrap": boot["address"], "endpoints": [], "node_ids": [],
                        "message": f"Bootstrap {boot['address']} gave no metadata: it timed out (timed out).",
                        "fix": "Check the address and port, and that this network may reach it."}]
    return [*out, cut]


def test_each_gap_carries_its_endpoint_s_own_finding(spark, tmp_path):
    """Real reports through the job: every gap, in the matrix and in the worst-gaps table, shows the code, the
    message and the fix of the finding about that very endpoint, from the latest report that named it."""
    from kprobe.aggregate.job import JobOptions, run

    reports = own_finding_reports()
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "reports.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reports))
    run(spark, JobOptions((str(tmp_path / "in"),), str(tmp_path / "out")))
    # What each gap must say, from the reports: per endpoint and vantage, the finding about it (every one
    # here is the only code about its endpoint), its count, and the words of the last report naming it.
    expected: dict[tuple[str, str], dict] = {}
    for r in sorted(reports, key=lambda r: r["started_at"]):
        for f in r["findings"]:
            if f["code"] == "ADVERTISED_NAME_DIFFERS":
                continue  # names node 7, which advertises nothing here
            node, where = (f["node_id"], f["endpoint"]) if f["endpoint"] else (-1, f["bootstrap"])
            key = (f"{'bootstrap' if node == -1 else f'broker {node}'} {where}", r["vantage"]["name"])
            seen = expected.setdefault(key, {"n": 0})
            seen.update(code=f["code"], severity=f["severity"], message=f["message"], fix=f["fix"], n=seen["n"] + 1,
                        last=r["started_at"][:16].replace("T", " ") + "Z")
    assert sorted(expected) == [("bootstrap 127.0.0.31:40831", "cut-off"), ("broker 1 127.0.0.32:49429", "office"),
                                ("broker 2 127.0.0.34:34647", "office"), ("broker 2 127.0.0.34:34647", "recorded")]
    # The output the page reads: per endpoint, vantage and code, in the report's words.
    own = {(f"{'bootstrap' if r.node_id == -1 else f'broker {r.node_id}'} {r.host}:{r.port}", r.vantage):
           (r.code, r.severity, r.occurrences, r.message, r.fix) for r in
           spark.read.parquet(str(tmp_path / "out" / "parquet" / "findings_by_endpoint")).collect()}
    assert own == {k: (e["code"], e["severity"], e["n"], e["message"], e["fix"]) for k, e in expected.items()}

    page = tmp_path / "out" / "report.html"
    dom, stderr = in_chromium(page, tmp_path, OWN_PROBE, "own-result", budget_ms=3000, timeout=120)
    assert dom["drawn"] and "Uncaught" not in stderr, stderr[-2000:]
    # The matrix: each gap cell's code, and its title ending in that finding's message and fix.
    gaps = {(c["endpoint"], c["vantage"]): c for c in dom["cells"] if c["rate"] != "100%"}
    assert set(gaps) == set(expected)
    for key, e in expected.items():
        assert gaps[key]["code"] == e["code"]
        assert gaps[key]["title"].endswith(f"\n{e['code']}: {e['message']}\nfix: {e['fix']}"), gaps[key]
    assert all(c["code"] is None for c in dom["cells"] if (c["endpoint"], c["vantage"]) not in expected)
    # The worst-gaps table: the code in its column, message and fix in the row under it, as the terminal words them.
    rows = {(f"{row[2]} {row[3]}", row[4]): row for row in dom["gaps"]}
    assert set(rows) == set(expected)
    for key, e in expected.items():
        assert rows[key][8:] == [e["code"], f"{e['message']} \u2014 fix: {e['fix']}"]
    # A gap's details: the finding's code and severity, message, fix, and how often it was named.
    for row, lines in zip(dom["gaps"], dom["details"], strict=True):
        e = expected[(f"{row[2]} {row[3]}", row[4])]
        assert lines[-3:] == [f"{e['code']} ({e['severity']}): {e['message']}", f"fix: {e['fix']}",
                              f"named by {e['n']} report{'s' if e['n'] > 1 else ''}, the last at {e['last']}"]
    assert dom["note"].endswith("the one the reports named for that endpoint from that vantage "
                                "(the most severe, then the latest).")


# -- colours say what they mean, everywhere on the page ---------------------------------------

# Appended to a copy of the page: the colours Chromium computed for every coloured element, with what each shows.
COLOUR_PROBE = """<script>
window.addEventListener("load", () => setTimeout(() => {
  const all = (root, sel) => [...root.querySelectorAll(sel)];
  const css = (e, prop) => getComputedStyle(e)[prop];
  const out = {drawn: document.body.dataset.drawn === "1",
    cells: all(document, ".matrix td[data-e]").map(td => [td.title, td.textContent, css(td, "backgroundColor")]),
    gaps: all(document, "#gaps tbody tr[data-i]").map(tr => [tr.cells[0].textContent, css(tr.cells[0], "backgroundColor")]),
    header: document.querySelector("#gaps thead th").textContent,
    key: all(document, "#key span").map(s => [s.textContent, css(s.querySelector("i"), "backgroundColor")]),
    codes: all(document, "#gaps tbody td.code").map(td => [td.textContent, css(td, "color")]),
    plots: all(document, "#timelines details").map(d => ({
      strokes: all(d, "path").map(p => css(p, "stroke")),
      markers: all(d, "circle").map(c => [c.textContent.split(": ")[0], css(c, "fill")]),
      legend: all(d, ".legend li").filter(li => li.querySelector("i")).map(li =>
        [li.textContent, css(li.querySelector("i"), "borderTopColor"), css(li.querySelector("i"), "borderTopStyle")])}))};
  const pre = document.createElement("pre"); pre.id = "colour-result";
  pre.textContent = JSON.stringify(out).replace(/[<>&]/g, c => "\\\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  document.body.appendChild(pre);
}, 200));
</script>"""


def meaning(css_colour: str) -> str:
    """What a colour says to a reader: `good` (green), `warning` (amber to yellow), `bad` (red to pink), or
    `neutral` (greys, and the blues to purples, which say nothing about health)."""
    import colorsys

    red, green, blue = (int(c) / 255 for c in re.findall(r"\d+", css_colour)[:3])
    hue, saturation, _ = colorsys.rgb_to_hsv(red, green, blue)
    degrees = hue * 360
    if saturation < 0.1:
        return "neutral"
    if degrees >= 320 or degrees < 20:
        return "bad"
    return "warning" if degrees < 70 else "good" if degrees < 170 else "neutral"


def colour_data() -> dict:
    """Two clusters. `pair`: the newcomer's case, a healthy vantage (every probe succeeded) beside a failing one
    (none did), at rates next to them too (999 and 1 of 1,000). `twelve`: twelve vantages from 0 to 100 %, every
    line the timeline draws. Findings of both severities on the gaps."""
    t0 = 1_794_898_800
    findings = [["ADVERTISED_UNREACHABLE", "error", "cannot be reached", "open the port"],
                ["ADVERTISED_NAME_DIFFERS", "warning", "the name differs", "advertise the name"]]

    def cluster(name: str, vantages: list[str], successes: list[list[int]]) -> dict:
        """`successes[e][v]` of 1,000 probes, per endpoint and vantage; three hours at the vantage's overall rate."""
        cells = [[e, v, 1000, ok, 0 if ok == 1000 else 1, t0 + 7200, t0, {} if ok == 1000 else {"timeout": 1000 - ok},
                  None if ok == 1000 else [v % 2, 3, t0 + 7200, 0]]
                 for e, row in enumerate(successes) for v, ok in enumerate(row)]
        points = [(vantage, t0 + h * HOUR, sum(row[v] for row in successes), 1000 * len(successes))
                  for v, vantage in enumerate(vantages) for h in range(3)]
        return {"id": name, "name": "", "endpoints": [[n, f"b{n}.{name}.example:9092"] for n in range(len(successes))],
                "vantages": vantages, "cells": cells, "findings": findings, "timeline": timeline(points)}

    rates = [0, 100, 300, 499, 500, 700, 899, 900, 950, 990, 999, 1000]
    return {"clusters": [cluster("pair", ["healthy", "failing"], [[1000, 0], [999, 1]]),
                         cluster("twelve", [f"v{ok:04d}" for ok in rates], [rates])],
            "statuses": ["ok", "timeout"], "bootstrap_node": -1}


@pytest.mark.lab  # a browser
def test_every_colour_on_the_page_says_what_it_means(tmp_path):
    """Green is every probe succeeded, red under half, amber between, the same in the matrices, the worst gaps and
    the key; a timeline's line colours tell vantages apart and say nothing about health (the healthy vantage's
    line is not red, the failing one's not green); each legend swatch is its line's colour; an error's code is
    red, a warning's amber."""
    data = colour_data()
    page = tmp_path / "report.html"
    page.write_text(render_page(data, {"reports": 14, "observations": 42, "input_records": 14, "duplicates": 0,
                                       "quarantined": 0}))
    dom, stderr = in_chromium(page, tmp_path, COLOUR_PROBE, "colour-result", budget_ms=3000, timeout=60)
    assert dom["drawn"] and "Uncaught" not in stderr, stderr[-2000:]

    def says(rate: float) -> str:
        return "good" if rate == 1 else "bad" if rate < 0.5 else "warning"

    # The key: one swatch per class, in the words the cells are read in.
    assert [(words, meaning(bg)) for words, bg in dom["key"]] == [
        ("100%", "good"), ("90 to 99.9%", "warning"), ("50 to 89.9%", "warning"), ("under 50%", "bad")]
    key = {bg for _, bg in dom["key"]}
    # Every matrix cell: its colour one of the key's, saying what its rate is; a gap never reads 100% or 0%.
    assert len(dom["cells"]) == 4 + 12 and all(bg in key for _, _, bg in dom["cells"]), dom["cells"]
    by_text = {text: bg for _, text, bg in dom["cells"]}
    assert meaning(by_text["100%"]) == "good" and meaning(by_text["0%"]) == "bad"
    assert meaning(by_text["99.9%"]) == "warning" and meaning(by_text["0.1%"]) == "bad"  # 999 and 1 of 1,000
    rates = {(f"b{x[0]}.{cl['id']}.example:9092 from {cl['vantages'][x[1]]}"): x[3] / x[2]
             for cl in data["clusters"] for x in cl["cells"]}
    drawn = {title.split(": ")[0].split(" ", 2)[2]: (text, bg) for title, text, bg in dom["cells"]}
    assert set(drawn) == set(rates)
    for where, rate in rates.items():
        assert meaning(drawn[where][1]) == says(rate), (where, rate, drawn[where])
    # The worst gaps: every one below 100 %, so never green; red under half.
    assert dom["header"] == "success" and len(dom["gaps"]) == sum(r < 1 for r in rates.values())
    assert all(meaning(bg) == says(float(text.rstrip("%")) / 100) != "good" for text, bg in dom["gaps"]), dom["gaps"]
    # Findings: an error's code red, a warning's amber.
    severity = {code: sev for code, sev, *_ in data["clusters"][0]["findings"]}
    assert {code for code, _ in dom["codes"]} == set(severity)
    assert all(meaning(colour) == {"error": "bad", "warning": "warning"}[severity[code]] for code, colour in dom["codes"])
    # The timelines: every line, marker and swatch in a colour that says nothing of health; each vantage's
    # legend swatch is its markers' colour; twelve vantages are twelve different pens (colour and dash).
    plots = {plot["legend"][0][0]: plot for plot in dom["plots"]}  # the clusters with more gaps come first
    pair, twelve = plots["all 2 vantages"], plots["all 12 vantages"]
    assert [name for name, _, _ in pair["legend"]] == ["all 2 vantages", "failing", "healthy"]
    for plot in (pair, twelve):
        colours = plot["strokes"] + [fill for _, fill in plot["markers"]] + [c for _, c, _ in plot["legend"]]
        assert colours and all(meaning(c) == "neutral" for c in colours), colours
        marker = dict(plot["markers"])
        assert all(marker[name] == colour for name, colour, _ in plot["legend"]), (plot["legend"], marker)
        assert {c for c in plot["strokes"]} <= {c for _, c, _ in plot["legend"]}
    assert len({(colour, style) for _, colour, style in twelve["legend"]}) == 13  # twelve vantages and the average
