"""The aggregation as docs/aggregate.md runs it on a cluster: spark-submit to a real Spark standalone cluster.

A master and a worker are started on loopback from pyspark's own `bin/spark-class`, kprobe is zipped
as the docs say, and the documented command runs with default options (report.html included), so
the driver runs `kprobe/aggregate/__main__.py` as a file, with that file's folder first on sys.path:
the way a module named like the standard library's (the old `kprobe/aggregate/html.py`) broke it.
The input is real reports recorded from the lab (tests/data/reports).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")

pytestmark = pytest.mark.lab  # a Spark standalone cluster
ROOT = Path(__file__).resolve().parents[2]
REPORTS = sorted((ROOT / "tests" / "data" / "reports").glob("*.json"))
SPARK_HOME = Path(pyspark.__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# The cluster's JVMs on C1 and the serial GC, as the lab's brokers run: its master, worker, executor and
# driver compiled with C2 cost about twice the CPU for a few hundred records. Set where a site sets them
# (the daemons' environment, the conf directory's spark-defaults.conf), so that the submitted command
# stays the documented one, word for word.
LIGHT_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _env(conf: Path) -> dict[str, str]:
    conf.mkdir(exist_ok=True)
    (conf / "spark-defaults.conf").write_text(f"spark.driver.extraJavaOptions {LIGHT_JVM}\n"
                                              f"spark.executor.extraJavaOptions {LIGHT_JVM}\n")
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_CONF_DIR": str(conf),
           "SPARK_DAEMON_JAVA_OPTS": LIGHT_JVM, "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}
    return env


def _wait_for(predicate, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"{what} did not happen within {timeout:g}s")


@contextmanager
def standalone_cluster(work: Path) -> Iterator[str]:
    """A Spark standalone master and one worker (1 core, 1 GiB) on loopback; the master's URL once it leads."""
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port, ui, worker_ui = _free_port(), _free_port(), _free_port()
    logs = work / "cluster-logs"
    logs.mkdir()
    master = subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(ui)], env=_env(work / "conf"),
                              stdout=(logs / "master.log").open("w"), stderr=subprocess.STDOUT)
    worker = None
    try:
        url = f"spark://127.0.0.1:{port}"
        _wait_for(lambda: "I have been elected leader" in (logs / "master.log").read_text(), "the master's start")
        worker = subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                                   "--cores", "1", "--memory", "1g", "--webui-port", str(worker_ui),
                                   "--work-dir", str(work / "worker")], env=_env(work / "conf"),
                                  stdout=(logs / "worker.log").open("w"), stderr=subprocess.STDOUT)
        # Not waited for: the driver starts (Python, its JVM, the session) while the worker registers, and
        # the application waits at the master for an executor, as one submitted to a busy cluster does.
        yield url
    finally:
        for proc in (worker, master):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)


def test_spark_submit_to_a_standalone_cluster_as_documented(tmp_path):
    inputs = tmp_path / "reports"
    inputs.mkdir()
    for path in REPORTS:
        shutil.copy(path, inputs / path.name)
    # The zip docs/aggregate.md makes: every file under kprobe/.
    archive = tmp_path / "kprobe.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for path in sorted((ROOT / "kprobe").rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                z.write(path, path.relative_to(ROOT))
    out = tmp_path / "agg"
    with standalone_cluster(tmp_path) as master:
        done = subprocess.run(
            [str(SPARK_HOME / "bin" / "spark-submit"), "--master", master, "--py-files", str(archive),
             "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.host=127.0.0.1",
             "--conf", "spark.driver.bindAddress=127.0.0.1", "--executor-memory", "768m",
             str(ROOT / "kprobe" / "aggregate" / "__main__.py"), str(inputs), "--out", str(out)],
            cwd=ROOT, env=_env(tmp_path / "conf"), capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "Successfully registered with master" in (tmp_path / "cluster-logs" / "worker.log").read_text()
    assert "Traceback" not in done.stderr
    assert done.stdout.startswith(f"{len(REPORTS)} records: {len(REPORTS)} reports aggregated"), done.stdout
    counts = json.loads((out / "counts.json").read_text())
    assert counts["reports"] == len(REPORTS) and counts["quarantined"] == 0
    page = (out / "report.html").read_text()
    assert "<html" in page.lower() and "127.0.0.34" in page  # the blackholed broker the reports name
    for name in ("endpoint_vantage", "cluster_summary", "findings", "advertised_changes", "quarantine"):
        assert list((out / "parquet" / name).glob("*.parquet")), name
