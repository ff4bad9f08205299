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
    cells: document.querySelectorAll(".matrix td[data-e]").length, gapRows: document.querySelectorAll("#gaps tbody tr").length,
    gapNote: document.getElementById("gaps-note").textContent, svgs: document.querySelectorAll("#timelines svg").length,
    legends: [...document.querySelectorAll(".legend")].filter(l => l.closest("details").open).map(l => {
      const a = l.getBoundingClientRect(), b = l.previousElementSibling.getBoundingClientRect();
      return a.left >= b.right - 1 || a.top >= b.bottom - 1; }),
    boxes: [...document.querySelectorAll(".scroll")].every(s => s.getBoundingClientRect().right <= window.innerWidth + 1),
    injected: document.querySelectorAll("img").length, vantageText: [...document.querySelectorAll(".matrix th.v")].map(t => t.textContent)};
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
                              {"timeout": 60} if bad else {}])
        hours = [1_794_900_000 + 3600 * h for h in range(24)]
        out.append({"id": f"cluster-{c:03d}-{'y' * 30}", "endpoints": [[n, f"b{n}.cluster-{c}.example.com:9092"]
                                                                      for n in range(brokers)],
                    "vantages": names, "cells": cells,
                    "timeline": {"hours": hours, "average": [0.9] * 24, "vantages": vantages,
                                 "series": [{"vantage": names[k], "rates": [0.5 + 0.02 * k] * 24}
                                            for k in range(min(12, vantages))]}})
    return {"clusters": out, "statuses": statuses, "bootstrap_node": -1}


def in_chromium(page: Path, tmp_path: Path) -> tuple[dict, str]:
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text().replace("</body></html>", PROBE + "</body></html>"))
    done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000",
                           "--dump-dom", probed.as_uri()], capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    match = re.search(r'<pre id="probe-result">(.*?)</pre>', done.stdout, re.S)
    assert match, done.stdout[-2000:]
    result = json.loads(match.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
                        .replace("&quot;", '"'))
    return result, done.stderr


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
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[:2] == (800, 1280)
    colours = {tuple(round(float(c), 1) for c in px[:3]) for row in pixels[::10] for px in row[::10]}
    assert len(colours) > 8, "the screenshot is blank"


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


# -- issue 29, item 1: strings that end or swallow a <script> element ----------------------------------------

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
    gaps: [...document.querySelectorAll("#gaps tbody tr")].map(tr => [...tr.cells].map(td => td.textContent)),
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
        "id": h[0], "endpoints": [[1, f"{h[1]}:9092"], [-1, f"{h[2]}:9093"]], "vantages": [h[3], h[4], h[5]],
        "cells": [[0, 0, 10, 5, 1, 1_795_000_000, 1_794_900_000, {h[6]: 5}],
                  [0, 1, 10, 10, 0, 1_795_000_000, 1_794_900_000, {}],
                  [1, 2, 10, 0, 2, 1_795_000_000, 1_794_900_000, {h[7]: 10}]],
        "timeline": {"hours": [1_794_900_000, 1_794_903_600], "average": [0.5, 1.0], "vantages": 3,
                     "series": [{"vantage": h[3], "rates": [0.5, 1.0]}, {"vantage": h[5], "rates": [0.0, None]}]}}],
        "statuses": ["ok", h[8], h[9]], "bootstrap_node": -1}
    counts = {"reports": 3, "observations": 30, "input_records": 5, "duplicates": 1, "quarantined": 1,
              "quarantine_reasons": {h[10]: 1, h[11]: 2}, "reports_in_window": 3, h[12]: h[13]}
    return data, counts


def test_script_breaking_strings_in_every_field_leave_the_page_drawn(tmp_path):
    data, counts = _hostile_data()
    html = render_page(data, counts)
    assert html.count("<script") == 2 and html.count("</script>") == 2  # the page's own two, nothing from the data
    probed = tmp_path / "probed.html"
    probed.write_text(html.replace("</body></html>", DOM_PROBE + "</body></html>"))
    done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=3000",
                           "--dump-dom", probed.as_uri()], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    match = re.search(r'<pre id="dom-result">(.*?)</pre>', done.stdout, re.S)
    assert match, "the page's scripts never ran: " + done.stdout[-1500:]
    dom = json.loads(match.group(1))
    assert dom["drawn"] and "Uncaught" not in done.stderr, done.stderr[-2000:]
    # The browser parsed back exactly the data that went in, every hostile string intact.
    assert dom["data"] == json.loads(json.dumps({**data, "counts": counts}))
    cl = data["clusters"][0]
    (node1, ep1), (_, ep2) = cl["endpoints"]
    # Drawn as text in exactly their places: vantage headers, endpoint rows, gap rows, summaries, legend.
    assert dom["vantages"] == cl["vantages"]
    assert dom["endpoints"] == [f"broker {node1} {ep1}", f"bootstrap {ep2}"]
    assert [row[1:5] + row[6:7] for row in dom["gaps"]] == [
        [cl["id"], "bootstrap", ep2, cl["vantages"][2], data["statuses"][2]],
        [cl["id"], f"broker {node1}", ep1, cl["vantages"][0], data["statuses"][1]]]
    assert dom["matrixSummaries"] == [f"cluster {cl['id']}: 2 endpoints \u00d7 3 vantages, 2 with gaps"]
    assert dom["timelineSummaries"] == [f"cluster {cl['id']}"]
    assert dom["legend"] == ["all 3 vantages", cl["vantages"][0], cl["vantages"][2], "the 2 worst of 3 vantages drawn"]
    failure = next(iter(cl["cells"][0][7]))
    assert dom["detail"].startswith(f"\u00d7broker {node1} {ep1}from {cl['vantages'][0]}, cluster {cl['id']}")
    assert f"failures: {failure} 5" in dom["detail"] and f"last: {data['statuses'][1]} at" in dom["detail"]
    assert dom["scripts"] == 3 and dom["images"] == 0  # the page's two and the probe: nothing injected
