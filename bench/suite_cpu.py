"""CPU seconds of a process tree, by kind of process: where a test suite's (or any command's) CPU goes.

    python bench/suite_cpu.py OUT.json -- bash .ci/run

Runs the command and reads /proc/*/stat every 0.5 s for every process below it, adding each one's CPU
(user + system) to a class made from its command line: a Kafka broker JVM, `kafka-storage format`, a
Spark driver JVM, Spark's standalone cluster, a pytest worker, a kprobe child, other Java (clients),
or the program's name. Why not time(1): it misses the JVMs that tests start and kill, and says
nothing of which of them cost what. A process that ends between two reads loses its last 0.5 s at
most; one that re-parents to init when its parent dies is no longer counted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

HZ = os.sysconf("SC_CLK_TCK")


def kind(command: str) -> str:
    """The class of a process, from its command line."""
    program = command.split(" ", 1)[0].rsplit("/", 1)[-1]
    if program == "java":
        if "kafka.Kafka " in command:
            return "java: Kafka broker"
        if "StorageTool" in command:
            return "java: kafka-storage format"
        if "deploy.master" in command or "deploy.worker" in command or "CoarseGrainedExecutorBackend" in command:
            return "java: Spark standalone cluster"
        if "SparkSubmit" in command or "launcher.Main" in command:
            return "java: Spark driver"
        return "java: other (clients, keytool)"
    if program.startswith("python"):
        if "pytest" in command or "xdist" in command or "exec(eval(sys.stdin.readline()))" in command:
            return "python: pytest"
        if "kprobe" in command:
            return "python: kprobe child"
        return "python: other (pip, helpers, PySpark workers)"
    return program or "?"


def _lab_of(command: str) -> str | None:
    """The lab directory a Kafka JVM's properties file sits in, less its random suffix (`kprobe-lab-tls`)."""
    if "server.properties" not in command:
        return None
    path = next((w for w in command.split(" ") if w.endswith("server.properties")), "")
    parts = [p for p in path.split("/") if p.startswith("kprobe-lab-")]
    return parts[0].rsplit("-", 1)[0] if parts else path.rsplit("/", 3)[0]


def _stat(pid: int) -> tuple[int, int, str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), int(fields[11]) + int(fields[12]), fields[19]  # parent, CPU ticks, start time


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def main() -> None:
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        raise SystemExit("usage: suite_cpu.py OUT.json -- COMMAND [ARGS...]")
    out, argv = Path(sys.argv[1]), sys.argv[3:]
    root = subprocess.Popen(argv)
    seen: dict[tuple[int, str], tuple[int, str]] = {}  # (pid, start) -> (ticks counted, class)
    total: Counter[str] = Counter()
    by_lab: Counter[str] = Counter()  # a broker's or format's CPU by the lab its properties file belongs to
    started: Counter[str] = Counter()  # processes of each class
    mine = {root.pid}
    while True:
        stats = {p: s for p in (int(n) for n in os.listdir("/proc") if n.isdigit()) if (s := _stat(p))}
        mine = {p for p in mine if p in stats} | {root.pid}
        grew = True
        while grew:
            below = {p for p, (parent, _, _) in stats.items() if parent in mine and p not in mine}
            mine |= below
            grew = bool(below)
        for pid in mine:
            if pid not in stats:
                continue
            _, ticks, start = stats[pid]
            counted, cls = seen.get((pid, start), (0, ""))
            command = _command(pid)
            if command:  # an exec (env, bash -c) changes what a process is
                cls = kind(command)
            total[cls] += ticks - counted
            if (lab := _lab_of(command)) is not None:
                by_lab[lab] += ticks - counted
            if (pid, start) not in seen or seen[(pid, start)][1] != cls:
                started[cls] += 1
            seen[(pid, start)] = (ticks, cls)
        if root.poll() is not None:
            break
        time.sleep(0.5)
    report = {cls: round(ticks / HZ, 1) for cls, ticks in total.most_common()}
    labs = {lab: round(ticks / HZ, 1) for lab, ticks in by_lab.most_common()}
    out.write_text(json.dumps({"command": argv, "exit": root.returncode, "cpu_seconds": report,
                               "all": round(sum(total.values()) / HZ, 1), "processes": dict(started.most_common()),
                               "kafka_jvms_by_lab": labs}, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    raise SystemExit(root.returncode)


if __name__ == "__main__":
    main()
