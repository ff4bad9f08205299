"""The native lab backend: one JVM per broker on loopback, no Docker needed.

Each node is a combined KRaft broker+controller started with `kafka.Kafka`, bound to its own
127.0.0.x address. The JVM resolves names through a private hosts file
(`-Djdk.net.hosts.file`), so `kafka0` works for the broker without touching /etc/hosts.
Every JVM carries `-Dkprobe.lab=<id>` so tests can count leftovers, and dies with its parent
(PR_SET_PDEATHSIG) so a crashed test run cannot leak brokers.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kprobe import paths
from kprobe.errors import LabError
from kprobe.lab import jars
from kprobe.lab.base import RunningLab, render, server_properties
from kprobe.lab.helpers import die_with_parent as _die_with_parent
from kprobe.lab.helpers import processes_where
from kprobe.lab.scenarios import Scenario

# A lab broker's JVM: a small heap, and a JIT and collector for a short life on a shared machine (C1
# only, the serial collector) rather than Kafka's defaults for a long-lived server (G1, C2), which
# cost a lab broker several times the CPU to start. The container backend hands the image the same.
HEAP_OPTS = ["-Xms64m", "-Xmx320m"]
PERFORMANCE_OPTS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData", "-Xss512k",
                    "-Djava.awt.headless=true"]
JVM_OPTS = [*HEAP_OPTS, *PERFORMANCE_OPTS]
READY_TIMEOUT = 90.0
# How long a lab's stop waits for the broker writing the brokers' class-data archive to shut down and
# write it (a controlled shutdown, then the dump: about 3 s on two cores); past it, no archive this time.
# Well inside the 30 s that `kprobe lab down` gives a detached lab's supervisor to stop its lab.
ARCHIVE_WAIT_S = 15.0

_LOG4J2 = """Configuration:
  Appenders:
    File:
      name: file
      fileName: "{log}"
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        - ref: file
"""


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding.

    Like Kafka's own ``Uuid.randomUuid()``, an id that starts with ``-`` is drawn again: one in
    64 would, and ``kafka-storage format -t -abc...`` then reads the id as an option and fails.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def class_archive(java: str, classpath: str) -> Path:
    """Where the lab's `kafka-storage format` JVMs keep their class-data archive (AppCDS) for this JDK and these jars.

    Why: a broker's start is mostly loading and verifying Kafka's and Scala's classes; mapped from
    an archive instead, a broker starts on about a fifth less CPU, and `kafka-storage format` on
    half. The first lab of a JDK and a Kafka version writes it, from its
    first `format` as that JVM exits. Brokers map it until they have their own (broker_archive).
    Keyed by the JDK and the class path (kprobe.paths.class_archive), so another Kafka version gets its own.
    """
    return paths.class_archive("lab", "classes", java, classpath, files=_jars(classpath))


def _jars(classpath: str) -> list[str]:
    """The jars of a class path, a `dir/*` entry (KPROBE_KAFKA_LIBS) as the JVM expands it."""
    found: list[str] = []
    for entry in classpath.split(os.pathsep):
        if entry.endswith("*"):
            found += sorted(str(jar) for jar in Path(entry[:-1] or ".").glob("*.jar"))
        else:
            found.append(entry)
    return found


def broker_archive(java: str, classpath: str) -> Path:
    """The brokers' own class-data archive: every class a broker loaded in its lab's life.

    Why a second one: `format` loads a part of what a broker does (no network layer, raft,
    coordinators or SASL), so a broker mapping the format's archive still loads and verifies the
    rest; mapping its own, a broker starts on about a quarter less CPU again and a
    three-broker lab a second sooner. A broker only writes it as it exits
    (`-XX:ArchiveClassesAtExit`), and a lab's brokers are killed, so the first lab of a JDK and a
    Kafka version has one broker write it: at that lab's stop, that broker alone is shut down
    (SIGTERM) and given ARCHIVE_WAIT_S to write it.
    """
    return paths.class_archive("lab", "broker", java, classpath, files=_jars(classpath))


def storage_template(java: str, classpath: str) -> Path:
    """Where the lab keeps the `bootstrap.checkpoint` a `kafka-storage format` wrote, for this JDK and these jars.

    Why: `format` is a JVM of its own per node, about a second of CPU each, and for a lab without SCRAM
    users what it writes is the same for every node and every lab of a Kafka version: that file (the
    release's feature levels, no node or cluster in it) and a `meta.properties` naming the node, its
    directory and the cluster. The first format of a Kafka version leaves its file here; later nodes get a
    copy of it and their own `meta.properties` (`write_storage`), and start as a formatted node does.
    """
    return paths.class_archive("lab", "bootstrap", java, classpath).with_suffix(".checkpoint")


def copyable_storage(properties: str) -> Path | None:
    """The one log folder of a node whose storage a copy of the template makes, or None where `format` must run.

    Only what the template was made for: static voters (a dynamic quorum's format writes the voters
    into the log), one log folder that is also the metadata's, no unstable feature levels (they change
    what the format chooses). SCRAM users are the caller's to rule out: their records go in the file.
    """
    settings = dict(line.split("=", 1) for line in properties.splitlines() if "=" in line and not line.startswith("#"))
    folders = [f for f in settings.get("log.dirs", settings.get("log.dir", "")).split(",") if f]
    if (len(folders) != 1 or "metadata.log.dir" in settings or not settings.get("controller.quorum.voters")
            or any(key.startswith("unstable.") for key in settings)):
        return None
    return Path(folders[0])


def write_storage(folder: Path, template: Path, node_id: int, cluster_id: str) -> None:
    """A node's storage as `kafka-storage format` leaves it: the template's file and the node's `meta.properties`."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, folder / "bootstrap.checkpoint")
    (folder / "meta.properties").write_text(
        f"#\n#written by kprobe's lab as kafka-storage format writes it\nnode.id={node_id}\n"
        f"directory.id={new_cluster_id()}\nversion=1\ncluster.id={cluster_id}\n")


class NativeLab(RunningLab):
    """A scenario running as local JVMs."""

    backend = "native"

    def __init__(self, scenario: Scenario, workdir: Path | None = None, *, die_with_parent: bool = True) -> None:
        super().__init__(scenario)
        self.lab_id = uuid.uuid4().hex[:12]
        # An own folder is made at start, not here: a lab built and never started (a file refused, a test of its
        # plan) leaves no empty folder behind. Until then the name is a placeholder no stop removes.
        self.workdir = workdir or Path(tempfile.gettempdir()) / f"kprobe-lab-{scenario.name}-unstarted"
        self.owns_workdir = workdir is None
        self._made_workdir = False
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        self.die_with_parent = die_with_parent
        self.classpath = ""
        self.java = ""
        self.archive: Path | None = None
        self.broker_archive: Path | None = None
        self._dump: tuple[int, Path] | None = None  # the broker writing the brokers' archive as it exits, and where

    # -- start ----------------------------------------------------------------------------
    def start(self) -> NativeLab:
        """Resolve jars, format storage, start every JVM and wait until each serves clients."""
        try:
            if self.owns_workdir and not self._made_workdir:
                self.workdir = Path(tempfile.mkdtemp(prefix=f"kprobe-lab-{self.scenario.name}-"))
                self._made_workdir = True
            self.java = jars.require_java()
            self.classpath = jars.kafka_classpath()
            self._start_network()
            self.nodes = render(self.scenario, self.blackholes, self.impostors, self.proxy_ports,
                                self.forward_ports, self.port_claims)
            self._start_shadows()
            self._make_certs(self.workdir / "tls")
            self._start_proxies(self.workdir / "proxies", self.lab_id)
            self._start_forwards(self.workdir / "forwards", self.lab_id)
            self._start_idp(self.workdir / "idp")
            self.cluster_id = new_cluster_id()
            self._write_configs()
            self.archive = class_archive(self.java, self.classpath)
            nodes = list(self.nodes)
            if not self.archive.exists():
                self._format(nodes.pop(0), archive=True)
            with ThreadPoolExecutor(max_workers=max(1, len(nodes))) as pool:
                list(pool.map(self._format, nodes))
            self.broker_archive = broker_archive(self.java, self.classpath)
            writer = next((n for n, node in self.nodes.items() if node.spec.role != "controller"), None)
            if not self.broker_archive.exists() and writer is not None:
                paths.remove_stray_dumps(self.broker_archive.parent, f".{self.broker_archive.name}.*")
                name = f".{self.broker_archive.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}"
                self._dump = (writer, self.broker_archive.with_name(name))
            for node_id in self.nodes:
                self._spawn(node_id)
            self._wait_ready(list(self.nodes))
            self._create_topics()
        except BaseException:
            self.stop()
            raise
        return self

    def node_dir(self, node_id: int) -> Path:
        """Where a node's config, data and logs live (kept for debugging until stop)."""
        return self.workdir / f"node{node_id}"

    def log_path(self, node_id: int) -> Path:
        """The broker's server.log."""
        return self.node_dir(node_id) / "server.log"

    def _write_configs(self) -> None:
        hosts = ["127.0.0.1 localhost"]
        for node in self.scenario.nodes:
            hosts.extend(f"{node.address} {name}" for name in node.hostnames)
        (self.workdir / "hosts").write_text("\n".join(hosts) + "\n")
        for node_id in self.nodes:
            ndir = self.node_dir(node_id)
            (ndir / "data").mkdir(parents=True, exist_ok=True)
            props = server_properties(self.scenario, self.nodes, node_id, str(ndir / "data"), self.certs,
                                      self.passwords, self.idp_settings)
            (ndir / "server.properties").write_text(props)
            (ndir / "log4j2.yaml").write_text(_LOG4J2.format(log=ndir / "server.log"))

    def _java_cmd(self, node_id: int, main: list[str]) -> list[str]:
        ndir = self.node_dir(node_id)
        archive = self.archive
        if main[0] == "kafka.Kafka":
            if self._dump is not None and self._dump[0] == node_id:
                # On the JDK's own base archive, the only one a dynamic archive can be written over.
                archive, main = None, [f"-XX:ArchiveClassesAtExit={self._dump[1]}", *main]
            elif self.broker_archive is not None and self.broker_archive.exists():
                archive = self.broker_archive
        shared = [f"-XX:SharedArchiveFile={archive}"] if archive and archive.exists() else []
        return [
            self.java, *JVM_OPTS, *shared,
            f"-Djdk.net.hosts.file={self.workdir / 'hosts'}",
            f"-Dlog4j2.configurationFile={ndir / 'log4j2.yaml'}",
            f"-Dkprobe.lab={self.lab_id}",
            *(f"-D{key}={value}" for key, value in self.jvm_properties.items()),
            "-cp", self.classpath, *main,
        ]

    def _format(self, node_id: int, archive: bool = False) -> None:
        """`kafka-storage format` for one node; with `archive`, it also leaves the class-data archive as it exits."""
        ndir = self.node_dir(node_id)
        scram = []
        mechanisms = {rl.spec.mechanism for rl in self.nodes[node_id].listeners.values()}
        for mech in sorted(m for m in mechanisms if m and m.startswith("SCRAM-")):
            for user, password in self.passwords.items():
                scram += ["--add-scram", f"{mech}=[name={user},password={password}]"]
        folder = None if scram else copyable_storage((ndir / "server.properties").read_text())
        template = storage_template(self.java, self.classpath)
        if folder is not None and not archive and template.is_file():
            write_storage(folder, template, node_id, self.cluster_id)
            return
        main = ["kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", str(ndir / "server.properties"),
                "--ignore-formatted", *scram]
        dump = None
        if archive and self.archive is not None:
            self.archive.parent.mkdir(parents=True, exist_ok=True)
            dump = self.archive.with_name(f".{self.archive.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}")
            main = [f"-XX:ArchiveClassesAtExit={dump}", *main]
        cmd = self._java_cmd(node_id, main)
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
            if done.returncode != 0:
                tail = (done.stdout + done.stderr).strip().splitlines()[-2:]
                raise LabError(f"formatting broker {node_id}'s storage failed: {' / '.join(tail)}")
            if dump is not None and self.archive is not None and dump.exists():
                paths.put_archive(dump, self.archive)
            if folder is not None and not template.is_file():
                paths.remove_stray_dumps(template.parent, f".{template.name}.*")
                kept = template.with_name(f".{template.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}")
                shutil.copyfile(folder / "bootstrap.checkpoint", kept)
                os.replace(kept, template)  # the next node finds all of it or none
        finally:
            if dump is not None:
                dump.unlink(missing_ok=True)

    def _spawn(self, node_id: int) -> None:
        ndir = self.node_dir(node_id)
        cmd = self._java_cmd(node_id, ["kafka.Kafka", str(ndir / "server.properties")])
        out = open(ndir / "stdout.log", "ab")  # noqa: SIM115 - handed to the child, closed below
        try:
            self.processes[node_id] = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_die_with_parent() if self.die_with_parent else None,
            )
        finally:
            out.close()

    def _wait_ready(self, node_ids: list[int]) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        pending = set(node_ids)
        while pending:
            for node_id in sorted(pending):
                proc = self.processes[node_id]
                if proc.poll() is not None:
                    raise LabError(f"broker {node_id} exited with {proc.returncode}: {self._log_tail(node_id)}")
                if self._serves_clients(node_id):
                    pending.discard(node_id)
            if pending and time.monotonic() > deadline:
                raise LabError(f"brokers {sorted(pending)} not ready after {READY_TIMEOUT:.0f}s: "
                               f"{self._log_tail(min(pending))}")
            if pending:
                time.sleep(0.1)

    def _serves_clients(self, node_id: int) -> bool:
        try:
            log = self.log_path(node_id).read_text(errors="replace")
        except OSError:
            return False
        if "Kafka Server started" not in log:
            return False
        node = self.nodes[node_id]
        ports = [(rl.bind_ip, rl.port) for rl in node.listeners.values()]
        if node.spec.role == "controller":
            # A controller-only node logs the same line, and has only its CONTROLLER listener to check.
            ports.append((node.spec.address, node.controller_port))
        for target in ports:
            try:
                with socket.create_connection(target, timeout=1):
                    pass
            except OSError:
                return False
        return not node.spec.is_broker or self._lists_running_brokers(node_id)

    def _lists_running_brokers(self, node_id: int) -> bool:
        """Whether the broker's own Metadata answer lists every broker running now, itself among them.

        Why: a broker's log line "Kafka Server started" and its open ports do not mean its own metadata
        lists it yet: a suite run saw broker 0 answer a Metadata request with brokers 1 and 2 alone, which a
        test, or a user's first probe of a lab just up, would take for a broken cluster. Asked on the
        inter-broker listener, which every broker has (a Metadata answer names only the brokers that have
        the listener it came in on); where that listener needs TLS or SASL, the ports are all there is.
        """
        from kprobe.kafka.exchanges import fetch_and_identify
        from kprobe.kafka.wire import WireError

        listener = next(rl for rl in self.nodes[node_id].listeners.values() if rl.spec.inter_broker)
        if listener.spec.protocol != "PLAINTEXT":
            return True
        running = {n for n, node in self.nodes.items()
                   if node.spec.is_broker and n in self.processes and self.processes[n].poll() is None}
        try:
            meta = fetch_and_identify(listener.bind_ip, listener.port, timeout=2, identity=False)[0]
        except (OSError, ValueError, WireError):
            return False  # not answering yet: asked again on the next round
        return running <= {b.node_id for b in meta.brokers}

    def _log_tail(self, node_id: int) -> str:
        for path in (self.log_path(node_id), self.node_dir(node_id) / "stdout.log"):
            try:
                lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
            except OSError:
                continue
            errors = [ln for ln in lines if " ERROR " in ln or "Exception" in ln]
            if errors or lines:
                return (errors or lines)[-1][:300] + f" (see {path})"
        return f"no log (see {self.node_dir(node_id)})"

    # -- stop -----------------------------------------------------------------------------
    def stop_node(self, node_id: int) -> None:
        """Kill one broker's JVM, as a crash would: its ports then refuse connections."""
        proc = self.processes.get(node_id)
        if proc is None or proc.poll() is not None:
            return
        _kill_group(proc)

    def start_node(self, node_id: int, wait: bool = True) -> None:
        """Start a stopped broker again on the same ports and storage."""
        proc = self.processes.get(node_id)
        if proc is not None and proc.poll() is None:
            return
        log = self.log_path(node_id)
        if log.exists():
            log.rename(log.with_suffix(f".{int(time.time())}.log"))
        self._spawn(node_id)
        if wait:
            self._wait_ready([node_id])

    def _stop_processes(self) -> None:
        if self._dump is not None:
            if self.broker_archive is not None and not self.broker_archive.exists():  # not since written by another lab
                self._keep_broker_archive(*self._dump)
            self._dump[1].unlink(missing_ok=True)  # what a broker killed, or too slow, left of it
            self._dump = None
        for proc in self.processes.values():
            if proc.poll() is None:
                _kill_group(proc)
        if self.owns_workdir and self._made_workdir and not os.environ.get("KPROBE_LAB_KEEP"):
            shutil.rmtree(self.workdir, ignore_errors=True)
            self._made_workdir = False  # a later start makes a folder of its own

    def _keep_broker_archive(self, node_id: int, written: Path) -> None:
        """Shut the writing broker down while the others still run (its controlled shutdown needs the
        quorum), and put the archive it wrote as it exited in place, whole; a broker killed, or too slow,
        leaves none, and the next lab's brokers start on the format's archive, one of them writing again.
        """
        proc = self.processes.get(node_id)
        try:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=ARCHIVE_WAIT_S)
                if written.is_file() and written.stat().st_size and self.broker_archive is not None:
                    paths.put_archive(written, self.broker_archive)
        except (OSError, subprocess.TimeoutExpired):
            pass  # killed below with the others

    @property
    def pids(self) -> dict[int, int]:
        """Node id to JVM pid, for the detached lab's state file."""
        return {node_id: proc.pid for node_id, proc in self.processes.items()}


def running_jvms(lab_id: str) -> list[int]:
    """PIDs of JVMs carrying a lab's marker (`pgrep -f kprobe.lab=<id>`), for leak accounting."""
    mark = f"-Dkprobe.lab={lab_id}".encode()
    return processes_where(lambda args: mark in args)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the JVM's process group and reap it: lab data is throwaway, speed matters."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
