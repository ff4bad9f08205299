"""The namespace lab: real brokers behind routers, NAT and firewalls, seen from vantages that are networks.

Why: every other vantage of the lab is a DNS view on one loopback, so what users meet between
networks (no route, a security group that drops, an ICMP reject, NAT, a VPN that loses large
packets) was never staged. Here each network is a Linux network namespace:

- `kpl-<id>-cluster`: the brokers, started by the native launcher under `ip netns exec`, their
  addresses on the namespace's `lo` (this kernel has no `dummy` driver);
- `kpl-<id>-router`: forwards between the others and carries the scenario's nftables rules;
- `kpl-<id>-<vantage>`: one per vantage (laptop, vpc, office-vpn), with only the routes it has;
- `kpl-<id>-monitoring` (scenarios with a monitoring network): the collector broker that vantages
  publish their reports to, on a network of its own (`kprobe lab exec monitoring -- ...` runs there).

Safety, by construction: every address is checked to lie in 198.18.0.0/15 or the lab's IPv6 ULA
prefix before it is added; every command runs inside a namespace the lab made (`ip -n NS`,
`ip netns exec NS`; veth pairs are created between two lab namespaces, never in the root one); the
veths get no link-local address (`addrgenmode none`). `<id>` is the pid of the lab's process.

What the lab touches, by construction too: its files live in a directory only root can use
(`/run/kprobe-netns/kpl-<id>`, checked: owner, mode, not a link), never in a shared temp
directory another user could have prepared; each lab records there, before making it, every
namespace it makes, with its process's start time. A start (and `kprobe lab down`) removes the
recorded namespaces of a lab whose process is gone (killing what still runs in them), so nothing
outlives a `kill -9` past the next start; a namespace the lab did not record is never touched,
whatever its name. Its children run this kprobe (`python -P`), never a `kprobe/` in the caller's
working directory.

Name resolution in a vantage: a hosts file per vantage, bind-mounted on /etc/hosts in a private
mount namespace by `kprobe lab exec` (glibc, the JVM and librdkafka all read it first), so no DNS
server needs to run inside the namespaces.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from kprobe.errors import EXIT_USAGE, KprobeError, LabError
from kprobe.lab.netns_scenarios import (
    CLUSTER6_NET,
    COLLECTOR,
    COLLECTOR_NAME,
    MONITORING_NET,
    NetnsScenario,
    get_netns_scenario,
    private6,
)
from kprobe.lab.supervisor import alive, identity, is_process, wait_until_ready
from kprobe.output.files import write_atomic
from kprobe.private import UnsafePath, private_dir, python_argv

PREFIX = "kpl-"
V4_NET = ipaddress.ip_network("198.18.0.0/15")  # RFC 2544: never a real network
ULA_NET = ipaddress.ip_network("fd6b:7072:6f62::/48")  # the lab's one IPv6 prefix ("kprob")
ALLOWED = (V4_NET, ULA_NET)
COMMAND_TIMEOUT = 20.0
READY_TIMEOUT = 180.0
STOP_TIMEOUT = 20.0
READY_ENV = "KPROBE_NETNS_READY"
RECORD = "lab.json"  # in a lab's work directory: its process, scenario and the namespaces it made
RUN_DIR = Path("/run")


class NetnsUnavailable(KprobeError):
    """Where the namespace lab cannot run (not root, no `ip` or `nft`): exit 2, one line."""

    exit_code = EXIT_USAGE


def require_tools() -> None:
    """Refuse early, in one line, where namespaces cannot be made: the DNS-view lab still works."""
    if os.geteuid() != 0:
        raise NetnsUnavailable("the namespace lab needs root (network namespaces, veths, nftables); "
                               "the DNS-view scenarios (`kprobe lab list`) need none")
    missing = [tool for tool in ("ip", "nft", "unshare", "mount") if shutil.which(tool) is None]
    if missing:
        packages = {"ip": "iproute2", "nft": "nftables", "unshare": "util-linux", "mount": "mount"}
        raise NetnsUnavailable(f"the namespace lab needs {', '.join(missing)} (apt-get install "
                               f"{' '.join(packages[m] for m in missing)})")


def check_address(address: str) -> str:
    """The address (with or without a prefix length), refused unless inside the lab's own ranges."""
    interface = ipaddress.ip_interface(address)
    if not any(interface.ip in net for net in ALLOWED if net.version == interface.version):
        raise LabError(f"refusing address {address}: the namespace lab uses only {V4_NET} and {ULA_NET}")
    return address


def _run(*args: str, input_text: str | None = None) -> str:
    """One command, bounded; its error text in a LabError (the lab's set-up is all or nothing)."""
    try:
        done = subprocess.run(list(args), capture_output=True, text=True, timeout=COMMAND_TIMEOUT,
                              input=input_text, check=False)
    except subprocess.TimeoutExpired:
        raise LabError(f"`{' '.join(args)}` did not finish in {COMMAND_TIMEOUT:.0f}s") from None
    if done.returncode != 0:
        raise LabError(f"`{' '.join(args)}` failed: {(done.stderr or done.stdout).strip()[:300]}")
    return done.stdout


def lab_namespaces() -> list[str]:
    """Every namespace carrying the lab's prefix, live or stale: what there is, not what the lab may remove."""
    try:
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=COMMAND_TIMEOUT,
                             check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return sorted(line.split()[0] for line in out.splitlines() if line.startswith(PREFIX))


def lab_base(run_dir: Path = RUN_DIR) -> Path:
    """The root-only directory that holds every namespace lab's work directory (made, or checked, here).

    Why not the temp directory: any user may create a name there first and fill it with links, which
    root would then write through, or with a broker configuration that root's JVM would run. `/run`
    is root's own; where it is not (a container without one), a checked directory in the temp dir.
    """
    try:
        info = run_dir.lstat()
        usable = run_dir.is_dir() and not run_dir.is_symlink() and info.st_uid == os.geteuid() \
            and not info.st_mode & 0o022
    except OSError:
        usable = False
    parent = run_dir if usable else Path(tempfile.gettempdir())
    try:
        return private_dir(parent / "kprobe-netns")
    except UnsafePath as exc:
        raise NetnsUnavailable(f"the namespace lab will not use its directory: {exc}") from None


def workdir_for(lab_id: str) -> Path:
    """Where a lab keeps its record, hosts files, broker data and ready files (found again from the id)."""
    return lab_base() / f"{PREFIX}{lab_id}"


def _record(workdir: Path) -> dict:
    """A lab's record (`{}` when it has none yet, or it cannot be read)."""
    try:
        record = json.loads((workdir / RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _recorded() -> list[tuple[Path, dict]]:
    """Every lab work directory with its record, running or left by a lab that died."""
    base = lab_base()
    return [(entry, _record(entry)) for entry in sorted(base.iterdir())
            if entry.name.startswith(PREFIX) and entry.is_dir() and not entry.is_symlink()]


def _is_running(workdir: Path, record: dict) -> bool:
    """Whether the lab of a record still runs: the very process that wrote it (pid and start time)."""
    pid = record.get("pid")
    if not isinstance(pid, int):  # made, not yet recorded: nothing of it to remove unless its pid is gone
        owner = workdir.name[len(PREFIX):]
        return owner.isdigit() and alive(int(owner))
    return is_process(pid, record.get("start"), b"")


def _names(record: dict) -> list[str]:
    """The namespaces a record names, only those that carry its own lab's prefix.

    A record is root's, but even a damaged one must not reach another lab's namespaces or anyone else's.
    """
    names = record.get("namespaces")
    mine = f"{PREFIX}{record.get('lab_id')}-"
    return [n for n in names if isinstance(n, str) and n.startswith(mine)] if isinstance(names, list) else []


def _remove(namespaces: list[str]) -> None:
    """Kill what runs in each namespace (the lab's brokers), then delete it."""
    for namespace in namespaces:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            pids = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True,
                                  timeout=COMMAND_TIMEOUT, check=False).stdout.split()
            for pid in pids:
                if pid.isdigit() and int(pid) != os.getpid():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
    for namespace in namespaces:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(["ip", "netns", "delete", namespace], capture_output=True, timeout=COMMAND_TIMEOUT,
                           check=False)


def remove_stale() -> list[str]:
    """Remove what labs whose process is gone (a `kill -9`) recorded: their namespaces (the names
    removed) and work directories. Nothing unrecorded is touched.
    """
    existing = set(lab_namespaces())
    removed: list[str] = []
    for workdir, record in _recorded():
        if _is_running(workdir, record):
            continue
        names = [ns for ns in _names(record) if ns in existing]
        _remove(names)
        removed += names
        shutil.rmtree(workdir, ignore_errors=True)
    return removed


def running_labs() -> dict[int, list[str]]:
    """Live namespace labs: owner pid -> the namespaces it recorded that exist."""
    existing = set(lab_namespaces())
    labs: dict[int, list[str]] = {}
    for workdir, record in _recorded():
        if isinstance(record.get("pid"), int) and _is_running(workdir, record):
            labs[record["pid"]] = [ns for ns in _names(record) if ns in existing]
    return labs


class NetnsLab:
    """One scenario's namespaces, links, rules and brokers; `stop()` removes all of it."""

    def __init__(self, scenario: NetnsScenario, lab_id: str | None = None) -> None:
        self.scenario = scenario
        self.lab_id = lab_id or str(os.getpid())
        self.owns_workdir = False
        self.children: list[subprocess.Popen[bytes]] = []  # the brokers' launcher, each vantage's DNS server
        self.made: list[str] = []
        self.describe_lines: list[str] = []
        self.network_seconds = 0.0  # how long the namespaces, links and rules took: their share of the lab's start

    @functools.cached_property
    def workdir(self) -> Path:
        """Under the root-only base, made or checked on first use (so a lab object needs no root until it starts)."""
        return workdir_for(self.lab_id)

    def ns(self, role: str) -> str:
        """The namespace of a role ("cluster", "router") or a vantage's name."""
        return f"{PREFIX}{self.lab_id}-{role}"

    # -- start ------------------------------------------------------------------------------
    def start(self) -> NetnsLab:
        """Build the topology, then start the brokers in the cluster namespace and wait until they serve."""
        require_tools()
        remove_stale()
        try:
            began = time.monotonic()
            self._build()
            self.network_seconds = time.monotonic() - began
            self._start_brokers()
        except BaseException:
            self.stop()
            raise
        return self

    def _add_ns(self, role: str) -> str:
        name = self.ns(role)
        self.made.append(name)
        self._write_record()  # before it exists: a kill -9 between the two leaves nothing unrecorded
        _run("ip", "netns", "add", name)
        _run("ip", "-n", name, "link", "set", "lo", "up")
        return name

    def _link(self, router: str, router_if: str, other: str, index: int) -> None:
        """A veth pair between the router and `other` on 198.18.0.4k/30 (and fd6b:7072:6f62:k::/64)."""
        _run("ip", "-n", router, "link", "add", router_if, "type", "veth", "peer", "name", "uplink", "netns", other)
        base = 4 * index
        for namespace, ifname, host in ((router, router_if, 1), (other, "uplink", 2)):
            _run("ip", "-n", namespace, "link", "set", ifname, "addrgenmode", "none")
            _run("ip", "-n", namespace, "addr", "add", check_address(f"198.18.0.{base + host}/30"), "dev", ifname)
            _run("ip", "-n", namespace, "-6", "addr", "add", check_address(f"fd6b:7072:6f62:{index}::{host}/64"),
                 "dev", ifname, "nodad")
            _run("ip", "-n", namespace, "link", "set", ifname, "up")
        # IPv6 neighbours, fixed: without link-local addresses (`addrgenmode none`, so that every address stays in
        # the lab's prefix) a router resolving a next hop for a forwarded packet solicits from `::`, which the other
        # end takes for duplicate address detection and never answers.
        macs = {ns: json.loads(_run("ip", "-n", ns, "-j", "link", "show", "dev", ifname))[0]["address"]
                for ns, ifname in ((router, router_if), (other, "uplink"))}
        for namespace, ifname, peer, host in ((router, router_if, other, 2), (other, "uplink", router, 1)):
            _run("ip", "-n", namespace, "-6", "neigh", "replace", check_address(f"fd6b:7072:6f62:{index}::{host}"),
                 "lladdr", macs[peer], "dev", ifname, "nud", "permanent")

    def _write_record(self) -> None:
        """The lab's record: who runs it (pid, start time), its scenario (`lab down NAME`), what it made."""
        record = {**identity(os.getpid()), "lab_id": self.lab_id, "scenario": self.scenario.name,
                  "namespaces": self.made}
        write_atomic(self.workdir / RECORD, json.dumps(record), private=True)

    def _make_workdir(self) -> None:
        """A new, root-only work directory; one left under this id by a lab that died is removed first."""
        try:
            os.mkdir(self.workdir, 0o700)
        except FileExistsError:
            raise LabError(f"a namespace lab with id {self.lab_id} is already running (its directory "
                           f"{self.workdir} exists): stop it first with `kprobe lab down`") from None
        self.owns_workdir = True
        self._write_record()

    def _build(self) -> None:
        self._make_workdir()
        router = self._add_ns("router")
        cluster = self._add_ns("cluster")
        _run("ip", "netns", "exec", router, "sysctl", "-qw", "net.ipv4.ip_forward=1",
             "net.ipv6.conf.all.forwarding=1")  # the router namespace's own switches
        self._link(router, "cluster", cluster, 0)
        for node in self.scenario.cluster.nodes:
            _run("ip", "-n", cluster, "addr", "add", check_address(f"{node.address}/32"), "dev", "lo")
        _run("ip", "-n", cluster, "route", "add", "default", "via", "198.18.0.1")
        _run("ip", "-n", router, "route", "add", check_address("198.18.1.0/24"), "via", "198.18.0.2")
        if self.scenario.ipv6:
            for node in self.scenario.cluster.nodes:
                _run("ip", "-n", cluster, "-6", "addr", "add", check_address(f"{private6(node.node_id)}/128"),
                     "dev", "lo", "nodad")
            _run("ip", "-n", cluster, "-6", "route", "add", "default", "via", "fd6b:7072:6f62:0::1")
            _run("ip", "-n", router, "-6", "route", "add", check_address(CLUSTER6_NET), "via", "fd6b:7072:6f62:0::2")
        interfaces: dict[str, str] = {}
        for index, vantage in enumerate(self.scenario.vantages, start=1):
            namespace = self._add_ns(vantage.name)
            interfaces[vantage.name] = vantage.name[:15]
            if vantage.in_cluster:
                # A host of the brokers' own network: linked to the cluster namespace, which forwards for it; the
                # router reaches it through the cluster (for answers to what it masquerades, hairpin NAT).
                _run("ip", "netns", "exec", cluster, "sysctl", "-qw", "net.ipv4.ip_forward=1")
                self._link(cluster, interfaces[vantage.name], namespace, index)
                _run("ip", "-n", router, "route", "add", check_address(f"198.18.0.{4 * index}/30"), "via",
                     "198.18.0.2")
            else:
                self._link(router, interfaces[vantage.name], namespace, index)
            for route in vantage.routes:
                self._route(namespace, index, route, "add")
            self._names(vantage.name)
        if self.scenario.monitoring is not None:
            self._build_monitoring(router, len(self.scenario.vantages) + 1)
        rules = self.scenario.rules.format(lan="cluster", **{"if": interfaces})
        if rules.strip():
            _run("ip", "netns", "exec", router, "nft", "-f", "-", input_text=rules)

    def _names(self, target: str) -> None:
        """The hosts and resolv.conf files `lab exec` bind-mounts in a vantage (or the monitoring network)."""
        hosts = ["127.0.0.1 localhost", "::1 localhost"]
        hosts += [f"{check_address(address)} {name}" for name, address in self.scenario.hosts_of(target).items()]
        # Read by `lab exec` (bind-mounted as /etc/hosts), so as readable as /etc/hosts itself.
        files = {f"hosts-{target}": "\n".join(hosts) + "\n", f"resolv-{target}": "nameserver 127.0.0.1\n"}
        for name, text in files.items():
            write_atomic(self.workdir / name, text)
            os.chmod(self.workdir / name, 0o644)  # whatever root's umask: every user inside reads them

    def _build_monitoring(self, router: str, index: int) -> None:
        """The monitoring network: a namespace linked to the router, its collector's address on `lo`."""
        assert self.scenario.monitoring is not None
        monitoring = self._add_ns("monitoring")
        self._link(router, "monitoring", monitoring, index)
        for node in self.scenario.monitoring.nodes:
            _run("ip", "-n", monitoring, "addr", "add", check_address(f"{node.address}/32"), "dev", "lo")
        _run("ip", "-n", monitoring, "route", "add", "default", "via", f"198.18.0.{4 * index + 1}")
        _run("ip", "-n", router, "route", "add", check_address(MONITORING_NET), "via", f"198.18.0.{4 * index + 2}")
        self._names("monitoring")

    def exec_targets(self) -> list[str]:
        """Where `lab exec` can run: every vantage, and the monitoring network when there is one."""
        return [v.name for v in self.scenario.vantages] + (["monitoring"] if self.scenario.monitoring else [])

    def set_route(self, vantage: str, destination: str, present: bool) -> None:
        """Cut (`present=False`) or restore a vantage's route through the router: a link that flaps.

        Why: the multi-vantage pipeline's story (docs/scheduling.md) has one vantage lose its way to the
        monitoring network for a while; a deleted route fails its connects at once (ENETUNREACH).
        """
        index = [v.name for v in self.scenario.vantages].index(self.scenario.vantage(vantage).name) + 1
        self._route(self.ns(vantage), index, destination, "add" if present else "del")

    @staticmethod
    def _route(namespace: str, index: int, destination: str, action: str) -> None:
        """A vantage's route through the router, over IPv4 or (a ULA prefix) IPv6; "default" is IPv4's."""
        target = destination if destination == "default" else check_address(destination)
        if ":" in target:
            _run("ip", "-n", namespace, "-6", "route", action, target, "via", f"fd6b:7072:6f62:{index}::1")
        else:
            _run("ip", "-n", namespace, "route", action, target, "via", f"198.18.0.{4 * index + 1}")

    def _child(self, namespace: str, what: str, *args: str) -> tuple[subprocess.Popen[bytes], Path, Path]:
        """`python -m kprobe.lab.netns WHAT ARGS... READY` inside a namespace, dying with this process."""
        from kprobe.lab.helpers import die_with_parent

        ready = self.workdir / f"{what}-{namespace}.json"
        log = ready.with_suffix(".log")
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as out:
            proc = subprocess.Popen(
                ["ip", "netns", "exec", namespace, *python_argv("kprobe.lab.netns", what, *args, str(ready))],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                preexec_fn=die_with_parent(), cwd="/",
            )
        self.children.append(proc)
        return proc, ready, log

    @staticmethod
    def _wait_ready(what: str, proc: subprocess.Popen[bytes], ready: Path, log: Path) -> dict:
        end = time.monotonic() + READY_TIMEOUT
        while not ready.exists():
            if proc.poll() is not None:
                tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
                raise LabError(f"the {what} did not start: {tail[0]} (log: {log})")
            if time.monotonic() > end:
                raise LabError(f"the {what} did not start within {READY_TIMEOUT:.0f}s (log: {log})")
            time.sleep(0.05)
        return json.loads(ready.read_text())

    def _start_brokers(self) -> None:
        """Each vantage's DNS server (on its own 127.0.0.1:53), and the brokers, in their namespaces."""
        dns = [self._child(self.ns(target), "dns", self.scenario.name, target) for target in self.exec_targets()]
        brokers = [self._child(self.ns(role), "brokers", self.scenario.name, role)
                   for role in ("cluster", "monitoring")[:1 + (self.scenario.monitoring is not None)]]
        for child in dns:
            self._wait_ready("vantage's DNS server", *child)
        self.describe_lines = [line for child in brokers for line in self._wait_ready("brokers", *child)["describe"]]

    # -- use --------------------------------------------------------------------------------
    def exec_argv(self, vantage: str, command: list[str]) -> list[str]:
        """`command` as run inside a vantage: its network namespace and its own /etc/hosts."""
        self.scenario.hosts_of(vantage)
        return exec_argv(self.ns(vantage), self.workdir, vantage, command)

    def describe(self) -> list[str]:
        """What runs where, and how to probe it from each vantage."""
        s = self.scenario
        lines = [f"namespace scenario {s.name}: {s.summary}", *self.describe_lines,
                 f"router {self.ns('router')}; brokers in {self.ns('cluster')}"]
        for vantage in s.vantages:
            lines.append(f"vantage {vantage.name} ({self.ns(vantage.name)}): kprobe lab exec {vantage.name} -- "
                         f"kprobe probe -b {vantage.bootstrap}" + (f"   # {vantage.note}" if vantage.note else ""))
        if s.monitoring is not None:
            topic = next(iter(s.monitoring.topics))
            lines.append(f"monitoring network {MONITORING_NET} ({self.ns('monitoring')}): topic {topic} on "
                         f"{COLLECTOR_NAME}:9092 ({COLLECTOR}); from a vantage: kprobe watch ... --publish "
                         f"{COLLECTOR_NAME}:9092/{topic}; read it there: kprobe lab exec monitoring -- "
                         f"kprobe aggregate --kafka {COLLECTOR_NAME}:9092/{topic} --out DIR")
        return lines

    # -- stop -------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop the brokers, then remove every namespace this lab made; safe to call twice."""
        for child in self.children:
            if child.poll() is None:
                child.terminate()
        for child in self.children:
            try:
                child.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(timeout=STOP_TIMEOUT)
        self.children.clear()
        existing = set(lab_namespaces())
        _remove([ns for ns in self.made if ns in existing])
        self.made.clear()
        if self.owns_workdir:  # never another lab's, whose id a refused start shared
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.owns_workdir = False

    def __enter__(self) -> NetnsLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def exec_argv(namespace: str, workdir: Path, vantage: str, command: list[str]) -> list[str]:
    """`ip netns exec` into the namespace, then a private mount namespace with the vantage's own
    /etc/hosts and an /etc/resolv.conf naming its DNS server (127.0.0.1 there).
    """
    script = 'mount --bind "$1" /etc/hosts && mount --bind "$2" /etc/resolv.conf && shift 2 && exec "$@"'
    return ["ip", "netns", "exec", namespace, "unshare", "-m", "--propagation", "private", "sh", "-c", script,
            f"kprobe-lab-{vantage}", str(workdir / f"hosts-{vantage}"), str(workdir / f"resolv-{vantage}"), *command]


def find_vantage(vantage: str, scenario: str | None = None) -> tuple[str, Path]:
    """The namespace and work directory of a vantage (for `kprobe lab exec`): of the newest running lab
    that has it, or of the newest running lab of `scenario` (two labs may run side by side).
    """
    require_tools()
    labs = {owner: names for owner, names in running_labs().items()
            if scenario is None or _scenario_of(owner) == scenario}
    if not labs:
        which = f" {scenario}" if scenario else ""
        raise LabError(f"no namespace lab{which} is running: start one with `kprobe lab up --netns SCENARIO`")
    def started(owner: int) -> float:
        with contextlib.suppress(OSError):
            return workdir_for(str(owner)).stat().st_mtime
        return 0.0

    for owner, namespaces in sorted(labs.items(), key=lambda item: started(item[0]), reverse=True):  # newest first
        name = f"{PREFIX}{owner}-{vantage}"
        if name in namespaces and vantage not in ("cluster", "router"):
            return name, workdir_for(str(owner))
    have = sorted({ns.split("-", 2)[2] for names in labs.values() for ns in names} - {"cluster", "router"})
    raise LabError(f"no vantage {vantage!r} in the running namespace lab (vantages: {', '.join(have)})")


# -- the CLI's entry points -------------------------------------------------------------------
def run_foreground(name: str) -> None:
    """`kprobe lab up --netns NAME`: build, print, wait for Ctrl-C or SIGTERM, remove everything."""
    scenario = get_netns_scenario(name)
    require_tools()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    sys.stderr.write(f"starting namespace lab {name}...\n")
    lab = NetnsLab(scenario).start()
    try:
        lines = lab.describe()
        ready = os.environ.get(READY_ENV)
        if ready:
            write_atomic(Path(ready), json.dumps({"pid": os.getpid(), "describe": lines}), private=True)
        print("\n".join(lines), flush=True)
        print("lab running; Ctrl-C stops it", flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        lab.stop()


def start_detached(name: str, timeout: float = READY_TIMEOUT) -> list[str]:
    """`kprobe lab up --netns NAME --detach`: the foreground lab in the background, once it is ready."""
    get_netns_scenario(name)
    require_tools()
    ready = Path(tempfile.mkdtemp(prefix="kprobe-netns-")) / "ready.json"
    log = ready.with_name("lab.log")
    with open(log, "wb") as out:
        proc = subprocess.Popen(python_argv("kprobe", "lab", "up", "--netns", name),
                                env={**os.environ, READY_ENV: str(ready)}, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, cwd="/")
    wait_until_ready(proc, ready, log, timeout, "the namespace lab")
    describe = json.loads(ready.read_text())["describe"]
    shutil.rmtree(ready.parent, ignore_errors=True)  # kept only while a failed start needs its log quoted
    return [*describe, f"namespace lab {name} running in the background (pid {proc.pid}); stop it with "
            f"`kprobe lab down {name}`"]


def _is_lab_command(pid: int) -> bool:
    """Whether `pid` is a `kprobe lab up --netns` process (the only owners `lab down` signals)."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"--netns" in args and b"lab" in args


def _scenario_of(owner: int) -> str:
    scenario = _record(workdir_for(str(owner))).get("scenario")
    return scenario if isinstance(scenario, str) else ""


def stop_all(scenario: str | None = None, timeout: float = STOP_TIMEOUT) -> list[str]:
    """`kprobe lab down [NAME]`: SIGTERM each live namespace lab (of that scenario), then remove stale namespaces."""
    lines = []
    for owner in running_labs():
        name = _scenario_of(owner)  # read now: the lab removes its work directory as it stops
        if not _is_lab_command(owner) or scenario not in (None, name):
            continue  # a program holding a NetnsLab itself (a test) stops its own; never signal it
        with contextlib.suppress(ProcessLookupError):
            os.kill(owner, signal.SIGTERM)
        end = time.monotonic() + timeout
        while alive(owner) and time.monotonic() < end:
            time.sleep(0.1)
        if alive(owner):
            with contextlib.suppress(ProcessLookupError):
                os.kill(owner, signal.SIGKILL)
            time.sleep(0.2)
        lines.append(f"stopped namespace lab {name or '?'} (pid {owner})")
    stale = remove_stale()
    if stale:
        lines.append(f"removed {len(stale)} stale lab namespace(s)")
    return lines


def _brokers_main(name: str, role: str, ready: str) -> None:
    """Inside the cluster (or monitoring) namespace: the native launcher's brokers, until SIGTERM."""
    from kprobe.lab.native import NativeLab

    scenario = get_netns_scenario(name)
    cluster = scenario.monitoring if role == "monitoring" else scenario.cluster
    assert cluster is not None
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    workdir = Path(ready).parent / f"brokers-{role}"
    workdir.mkdir(parents=True, exist_ok=True)
    lab = NativeLab(cluster, workdir).start()
    try:
        what = "collector broker" if role == "monitoring" else "broker"
        lines = [f"{what} {node_id} on {node.spec.address}: " + ", ".join(
            f"{listener} {rl.bind_ip}:{rl.port} advertises {rl.advertised}" for listener, rl in node.listeners.items())
            for node_id, node in lab.nodes.items()]
        write_atomic(Path(ready), json.dumps({"describe": lines}), private=True)
        while not stop.wait(0.5):
            pass
    finally:
        lab.stop()


def _dns_main(name: str, vantage_name: str, ready: str) -> None:
    """Inside a vantage: the lab's DNS server on 127.0.0.1:53 with the vantage's names, until SIGTERM.

    Why: glibc reads the bind-mounted hosts file, but kprobe's own resolver (dnspython) and `--nameserver`
    ask a DNS server; without one in the namespace each query would wait out its timeout.
    """
    from kprobe.lab.dns_server import DnsServer

    hosts = get_netns_scenario(name).hosts_of(vantage_name)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server = DnsServer({host: (address,) for host, address in hosts.items()}, "127.0.0.1", 53,
                       name=vantage_name).start()
    try:
        write_atomic(Path(ready), json.dumps({"nameserver": server.nameserver}), private=True)
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "brokers":
        _brokers_main(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) == 5 and sys.argv[1] == "dns":
        _dns_main(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit("usage: python -m kprobe.lab.netns brokers SCENARIO ROLE READY | dns SCENARIO VANTAGE READY")
