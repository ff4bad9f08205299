"""`kprobe fix` on Bitnami Kafka chart values: `externalAccess.*` set or turned on, the patch applied with
`patch -p0` and `git apply -p0`, and `kprobe check` on the result serving the reported networks.

No lab: the lab stages Compose and server.properties brokers, not a Helm release.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_runner import run_cli
from fix_apply import changed_lines, fix_apply, reach
from fix_reports import report

from kprobe.output.json_report import render

ROOT = Path(__file__).resolve().parents[2]
EXCERPT = ROOT / "tests" / "data" / "configs" / "bitnami" / "values-excerpt.yaml"
POD = "kafka-controller-{}.kafka-controller-headless.kafka.svc.cluster.local"

# External access by node port, advertising a name only the cluster resolves (the chart's own service name).
NODEPORT = """# values for the office cluster
listeners:
  external:
    protocol: PLAINTEXT
externalAccess:
  enabled: true
  controller:
    service:
      type: NodePort
      domain: {domain}   # what every pod advertises
      nodePorts:
        - {p0}
        - {p1}
        - {p2}
"""


def values(domain: str, ports: list[int]) -> str:
    return NODEPORT.format(domain=domain, p0=ports[0], p1=ports[1], p2=ports[2])


@pytest.mark.parametrize("tool", ["patch", "git"])
def test_external_access_advertising_a_cluster_name_gets_the_node_address(tmp_path, tool):
    internal = "kafka.kafka.svc.cluster.local"
    original = values(internal, [31090, 31091, 31092])
    (tmp_path / "values.yaml").write_text(original)
    outside = report("laptop", boots={f"192.0.2.10:{31090 + i}": i for i in range(3)},
                     seen={(i, internal, 31090 + i): "unresolvable" for i in range(3)})
    done, _, patched, checked = fix_apply(tmp_path, "values.yaml", {"laptop.json": outside}, tool=tool)
    assert done.returncode == 0, done.stdout
    assert changed_lines(original, patched) == (
        [f"      domain: {internal}   # what every pod advertises"],
        ["      domain: 192.0.2.10   # what every pod advertises"])
    assert set(reach(checked, "EXTERNAL", "outside").values()) == {"resolves"}


def test_one_pods_node_port_typo_is_its_list_entry(tmp_path):
    original = values("192.0.2.10", [31090, 31901, 31092])
    (tmp_path / "values.yaml").write_text(original)
    seen = {(0, "192.0.2.10", 31090): "reachable", (1, "192.0.2.10", 31901): "unreachable",
            (2, "192.0.2.10", 31092): "reachable"}
    outside = report("laptop", boots={"192.0.2.10:31090": 0, "192.0.2.10:31091": 1}, seen=seen)
    done, document, patched, checked = fix_apply(tmp_path, "values.yaml", {"laptop.json": outside})
    assert done.returncode == 0, done.stdout
    assert changed_lines(original, patched) == (["        - 31901"], ["        - 31091"])
    [change] = document["files"][0]["changes"]
    assert (change["setting"], change["old"], change["new"]) == (
        "externalAccess.controller.service.nodePorts[1]", "31901", "31091")
    assert reach(checked, "EXTERNAL", "outside")["kafka-controller-1"] == "resolves"


@pytest.mark.parametrize("tool", ["patch", "git"])
def test_the_charts_internal_only_values_reached_from_outside_turn_external_access_on(tmp_path, tool):
    shutil.copy(EXCERPT, tmp_path / "values.yaml")
    outside = report("laptop", boots={f"192.0.2.10:{30100 + i}": i for i in range(3)},
                     seen={(i, POD.format(i), 9092): "unresolvable" for i in range(3)})
    inside = report("pod", boots={"kafka.kafka.svc.cluster.local:9092": 0},
                    seen={(i, POD.format(i), 9092): "reachable" for i in range(3)})
    done, document, patched, checked = fix_apply(tmp_path, "values.yaml", {"laptop.json": outside, "pod.json": inside},
                                                 tool=tool)
    assert done.returncode == 0, done.stdout
    old, new = changed_lines(EXCERPT.read_text(), patched)
    assert old == ["  enabled: false"]
    assert new == ["  enabled: true", "  controller:", "    service:", "      type: NodePort", "      nodePorts:",
                   "        - 30103", "        - 30104", "        - 30105", "      domain: 192.0.2.10"]
    assert set(reach(checked, "EXTERNAL", "outside").values()) == {"resolves"}
    assert set(reach(checked, "CLIENT", "cluster").values()) == {"works"}
    assert any(s["kind"] == "service" and "NodePort Service per broker" in s["text"] for s in document["steps"])
    assert {v["vantage"]: v["after"] for v in document["vantages"]} == {"laptop": "closed", "pod": "ok"}


def test_a_report_of_another_cluster_is_one_line_exit_2(tmp_path):
    shutil.copy(EXCERPT, tmp_path / "values.yaml")
    other = report("laptop", boots={"x.example:9092": 7}, seen={(7, "x.example", 9092): "reachable"})
    (tmp_path / "other.json").write_text(render(other))
    done = run_cli(("fix", "other.json", "--config", "values.yaml"), cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
