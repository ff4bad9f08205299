"""Golden run: every report the lab scenarios produce, captured before a refactor and compared after it.

    python tests/support/golden.py capture OUT_DIR        # start each lab scenario, probe it every way, write JSON
    python tests/support/golden.py compare DIR_A DIR_B    # unified diff of every file that differs; exit 1 if any

Why: a refactor that moves modules must not change what `kprobe probe` reports. Unit tests check
chosen fields; this checks every field of every report the lab can stage, apart from what changes
from run to run anyway (ids, times, durations, ports, cluster ids, temp paths, certificate dates).

What `capture` probes: each scenario of `kprobe.lab.scenarios.SCENARIOS`, started one at a time with
the native backend; from each of its DNS views (a scenario without views is probed with the system
resolver, which only ever sees IP literals there); each listener's bootstrap on each node, the
listener's bootstraps of all nodes in one run where several nodes have it (as `kprobe lab up`
offers them), and the listener's bound `ip:port` where it differs from the bootstrap (as the docs
and tests probe a listener from a network where its bootstrap name does not resolve). TLS and SASL
listeners are probed with the settings a client of that listener needs: its protocol, the lab CA,
and the scenario's first user with their password. One file per (scenario, view, bootstrap).

The probe runs in-process through `run_probe`, with a short per-call timeout (blackholed endpoints
then cost seconds, not minutes) and an ample run deadline, so no outcome depends on how loaded the
machine is. Nothing here retries: a flaky field is a finding, not something to hide.

This is a tool script, not a pytest test (no `test_` prefix): it needs a JDK, Maven and minutes.
It imports kprobe only through `_kprobe_api()`, which knows the module names before and after the
refactor, and it keeps its own copy of docs/generate.py's `normalise()` approach rather than
importing it, so the yardstick cannot move with the code it measures.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import ipaddress
import json
import re
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib.machinery import PathFinder
from pathlib import Path
from types import ModuleType
from typing import Any

# -- the compatibility shim ---------------------------------------------------------------------

# (attribute, module names to try in order: the refactor's new name first, the old one after).
_API = {
    "ProbeOptions": ("kprobe.runs.probe", "kprobe.probe"),
    "run_probe": ("kprobe.runs.probe", "kprobe.probe"),
    "parse_address": ("kprobe.options",),
    "parse_nameserver": ("kprobe.options",),
    "to_dict": ("kprobe.output.json_report", "kprobe.report.json_report"),
}


def _kprobe_root() -> Path:
    """The folder of the `kprobe` package this run imports (PYTHONPATH's, or the venv's)."""
    import kprobe

    return Path(kprobe.__file__).resolve().parent


def _in_tree(name: str, root: Path) -> bool:
    """Whether module `name` exists under `root`, looked up on the file system only.

    An editable install of another checkout adds a finder that serves any `kprobe.*` name the
    imported tree lacks from that checkout: with PYTHONPATH on the old tree, `kprobe.runs.probe`
    would come from the new one. Asking the plain path finder, level by level from `root`,
    sees only this tree.
    """
    parts = name.split(".")
    search = [str(root)]
    for depth in range(2, len(parts) + 1):
        spec = PathFinder.find_spec(".".join(parts[:depth]), search)
        if spec is None:
            return False
        search = list(spec.submodule_search_locations or [])
        if depth < len(parts) and not search:
            return False
    return True


def _module_files(module: ModuleType) -> list[Path]:
    """Where a module was loaded from: its file, or a namespace package's folders."""
    if getattr(module, "__file__", None):
        return [Path(module.__file__).resolve()]  # type: ignore[arg-type]
    return [Path(p).resolve() for p in getattr(module, "__path__", ()) if Path(p).exists()]


def foreign_modules(root: Path) -> list[str]:
    """Loaded `kprobe` modules that do not come from `root`: a run must use one tree only."""
    out = []
    for name, module in sorted(sys.modules.items()):
        if module is not None and (name == "kprobe" or name.startswith("kprobe.")):
            out += [f"{name} from {f}" for f in _module_files(module) if not f.is_relative_to(root)]
    return out


def _import_first(names: Sequence[str], attribute: str, root: Path) -> tuple[Any, str]:
    """`attribute` from the first of `names` that exists in this tree and has it, and that module's name.

    A name this tree lacks moves on to the next one; a module that exists but fails to import
    raises, so the shim never hides a real error.
    """
    for name in names:
        if not _in_tree(name, root):
            continue
        module = importlib.import_module(name)
        if hasattr(module, attribute):
            return getattr(module, attribute), name
    raise ImportError(f"none of {', '.join(names)} in {root} provides {attribute}")


def _kprobe_api() -> dict[str, Any]:
    """The kprobe names the golden run uses, wherever this layout keeps them; `_modules` says where."""
    root = _kprobe_root()
    api: dict[str, Any] = {}
    modules: dict[str, str] = {}
    for attribute, names in _API.items():
        api[attribute], modules[attribute] = _import_first(names, attribute, root)
    api["_modules"] = modules
    api["_root"] = root
    return api


# -- what to probe ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """One probe run: the bootstrap addresses typed and the client properties the listener needs."""

    label: str
    listener: str
    bootstraps: tuple[str, ...]
    props: dict[str, str]


def _client_props(lab: Any, spec: Any) -> dict[str, str]:
    """What a client of this listener sets: its protocol, the lab CA for TLS, a user for SASL.

    The scenario's first user is taken (alice in `sasl`, the super user), as the tests do for
    the working SASL cases.
    """
    props: dict[str, str] = {}
    if spec.protocol != "PLAINTEXT":
        props["security.protocol"] = spec.protocol
    if "SSL" in spec.protocol:
        props["ssl.ca.location"] = lab.ca_file
    if getattr(spec, "client_auth", None):  # mutual TLS: the lab's client certificate
        props["ssl.certificate.location"] = lab.client_cert_file
        props["ssl.key.location"] = lab.client_key_file
    if spec.mechanism == "OAUTHBEARER" and spec.token_validator == "unsecured":
        props.update({"sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": "true",
                      "sasl.oauthbearer.config": "principal=alice"})
    elif spec.mechanism == "OAUTHBEARER":  # the identity provider's first client, trusting its CA
        props.update({**lab.idp.client_properties(lab.scenario.idp.clients[0][0]),
                      "https.ca.location": lab.idp_ca_file})
    elif spec.mechanism:
        user = lab.scenario.users[0]
        props.update({"sasl.mechanism": spec.mechanism, "sasl.username": user,
                      "sasl.password": lab.passwords[user]})
    return props


def targets(lab: Any) -> list[Target]:
    """Every bootstrap the lab offers for every listener, in the scenario's listener and node order."""
    out: list[Target] = []
    for name in lab.scenario.client_listeners:
        nodes = [node for node in lab.nodes.values() if name in node.listeners]
        props = _client_props(lab, nodes[0].listeners[name].spec)
        if len(nodes) > 1:
            out.append(Target(f"{name}.all", name, tuple(n.listeners[name].bootstrap for n in nodes), props))
        for node in nodes:
            rl = node.listeners[name]
            where = f".node{node.node_id}" if len(nodes) > 1 else ""
            out.append(Target(f"{name}{where}.bootstrap", name, (rl.bootstrap,), props))
            real = f"{rl.bind_ip}:{rl.port}"
            if real != rl.bootstrap:
                out.append(Target(f"{name}{where}.real", name, (real,), props))
    return out


def _is_literal(hostport: str) -> bool:
    host = hostport.rsplit(":", 1)[0].strip("[]")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def views(lab: Any) -> list[tuple[str, str | None]]:
    """(view name, nameserver): the lab's DNS views, or the system resolver where it has none.

    The system resolver would send a name to the machine's own DNS servers, off loopback; it is
    therefore used only when every bootstrap and every advertised endpoint is an IP literal,
    which needs no lookup at all.
    """
    if lab.dns:
        return [(view, server.nameserver) for view, server in lab.dns.items()]
    hosts = [rl.bootstrap for n in lab.nodes.values() for rl in n.listeners.values()]
    hosts += [rl.advertised for n in lab.nodes.values() for rl in n.listeners.values()]
    named = [h for h in hosts if not _is_literal(h)]
    if named:
        raise RuntimeError(f"scenario {lab.scenario.name} has no DNS view but names hosts {named}: "
                           "probing it would ask DNS off loopback")
    return [("system", None)]


# -- normalisation ------------------------------------------------------------------------------

# A port where kprobe writes one (`host:PORT`, `port PORT`, `port A/B`, a NodePort shape's "(A, B)"), as
# docs/generate.py's PORT_PLACES: a lab port drawn as 30000 must leave the NodePort range 30000-32767 alone.
_PORT = re.compile(r'(:|\bports? |"port": |(?<=\d/)|(?<=own \()|(?<=\d, )(?=\d+(?:, \d+)*\)))(\d+)(?!\d)')
_IPV4_PORT = re.compile(r"(?<![\d.])(\d{1,3}(?:\.\d{1,3}){3}):(\d+)(?!\d)")
_OPENSSL_DATE = re.compile(r"[A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2} \d{4} GMT")
_DAYS_LEFT = re.compile(r"-?\d+(\.\d+)? days left")
_SSL_SOURCE_LINE = re.compile(r"\(_ssl\.c:\d+\)")
_PORT_LIST = re.compile(r"<[^<>/]*port>(?:/<[^<>/]*port>)+")
_LIBRDKAFKA_PICK = "<librdkafka's pick>"
_TIMING_KEYS = ("ms", "duration_ms")


class Normaliser:
    """Turns what changes from run to run into fixed names, like docs/generate.py's `normalise()`.

    Strings get whole literals replaced first (passwords, the lab's temp directory, the cluster id,
    DNS servers' `ip:port`), then bare port numbers in one pass (a port could otherwise match
    digits inside a cluster id, and a placeholder is never read as another port), then certificate
    dates and days left. Numbers are replaced by field: durations, days left, ports. Lab ports get
    the listener's name, with the node's id in a scenario of several nodes, so a refactor that
    advertised node 1's port for node 2 would still show.

    Three more values vary from run to run although kprobe's logic does not, and are named too (the
    comments where it is done say why): the order of port names in a fix's "port A/B/C" (sorted by
    the lab's random port numbers), the controller id a multi-broker KRaft cluster reports, and
    which connection librdkafka's Metadata answer came on.
    """

    def __init__(self, lab: Any) -> None:
        self.literals: list[tuple[str, str]] = []
        for user, password in lab.passwords.items():
            self.literals.append((password, f"<{user}'s password>"))
        idp = getattr(lab, "idp", None)
        if idp is not None:
            self.literals += [(secret, f"<{client}'s client secret>") for client, secret in idp.client_secrets.items()]
            self.literals += [(idp.https.url(""), "<token endpoint>"), (idp.http.url(""), "<JWKS endpoint>")]
        if lab.ca_file:
            self.literals.append((lab.ca_file, "<lab CA file>"))  # named, wherever a lab keeps it
        workdir = getattr(lab, "workdir", None)
        if workdir is not None:
            self.literals.append((str(workdir), "<lab dir>"))
        if lab.cluster_id:
            self.literals.append((lab.cluster_id, "<cluster id>"))
        # Ports are named by (address, port) where the address is known, and by number alone
        # elsewhere. Only listener and controller ports are unique by number (the lab hands each
        # out once); a blackhole, an impostor or a DNS view binds its own address and can draw the
        # same number as a listener, so a bare number means the listener's port.
        self.endpoints: dict[tuple[str, int], str] = {}
        self.ports: dict[int, str] = {}
        for view, server in lab.dns.items():
            host, port = server.address
            # dnspython writes a server as Do53:ip@port in its errors; kprobe as ip:port.
            self.literals += [(server.nameserver, f"<{view} view>"), (f"{host}@{port}", f"<{view} view>")]
            self.endpoints[(host, port)] = f"<{view} view port>"
        for name, hole in lab.blackholes.items():
            self.endpoints[(hole.host, hole.port)] = f"<{name} port>"
        for name, imp in lab.impostors.items():
            self.endpoints[(imp.host, imp.port)] = f"<{name} port>"
        self.ports.update({port: name for (_, port), name in self.endpoints.items()})
        several = len(lab.nodes) > 1
        for node in lab.nodes.values():
            prefix = f"n{node.node_id} " if several else ""
            owned = [(node.spec.address, node.controller_port, f"<{prefix}controller port>")]
            owned += [(rl.bind_ip, rl.port, f"<{prefix}{name} port>") for name, rl in node.listeners.items()]
            for address, port, placeholder in owned:
                self.endpoints[(address, port)] = placeholder
                self.ports[port] = placeholder
        # In KRaft a broker's Metadata answer names a random live broker as the controller (clients
        # cannot reach the real one), so with several brokers the id changes from request to request.
        self.random_controller = frozenset(lab.nodes) if several else frozenset()

    def port(self, host: Any, port: int) -> str | int:
        """The name of `port` on `host` (an address, a name or None); the number if the lab has no such port."""
        return self.endpoints.get((host, port)) or self.ports.get(port, port)

    def text(self, text: str) -> str:
        """A string with every run-specific value named."""
        for literal, name in self.literals:
            text = text.replace(literal, name)
        text = _IPV4_PORT.sub(lambda m: f"{m.group(1)}:{self.port(m.group(1), int(m.group(2)))}", text)
        text = _PORT.sub(lambda m: m.group(1) + str(self.ports.get(int(m.group(2)), m.group(2))), text)
        # "the listener on port A/B/C": kprobe sorts the ports by number, and the lab draws its ports
        # at random, so their names come in a different order at each start: the names are sorted.
        text = _PORT_LIST.sub(lambda m: "/".join(sorted(m.group(0).split("/"))), text)
        text = _OPENSSL_DATE.sub("<date>", text)
        text = _DAYS_LEFT.sub("<days> days left", text)
        return _SSL_SOURCE_LINE.sub("(_ssl.c)", text)  # CPython's source line: moves between versions

    def value(self, key: str, value: Any) -> Any:
        """`value` found under `key` (a list's items under the list's key), normalised."""
        if isinstance(value, dict):
            host = value.get("host", value.get("address"))
            return {k: self.port(host, v) if k == "port" and isinstance(v, int) else self.value(k, v)
                    for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(key, v) for v in value]
        if value is None or isinstance(value, bool):
            return value
        if key in _TIMING_KEYS:
            return "<ms>"
        if key == "days_left":
            return "<days>"  # moves with the clock: the certificates are made at each lab start
        if key == "not_after":
            return "<date>"
        if key == "controller_id" and value in self.random_controller:
            return "<a live broker>"
        if isinstance(value, str):
            return self.text(value)
        return value

    def report(self, data: dict[str, Any]) -> dict[str, Any]:
        """A report's JSON dict with ids, times, the machine's name and every run-specific value fixed."""
        out: dict[str, Any] = self.value("", data)
        for key, fixed in (("id", "<id>"), ("started_at", "<time>"), ("finished_at", "<time>")):
            if key in out:
                out[key] = fixed
        for bootstrap in out.get("bootstraps") or ():
            if bootstrap.get("via") == "librdkafka" and isinstance(bootstrap.get("answered_by"), dict):
                # librdkafka says which connection carried its Metadata answer, and that races: the
                # bootstrap connection (-1, `.../bootstrap`) or the one it opened to the broker it
                # learnt of (its id). Both are the bootstrap's own broker here.
                answered = bootstrap["answered_by"]
                answered["node_id"] = _LIBRDKAFKA_PICK
                if isinstance(answered.get("name"), str):
                    answered["name"] = re.sub(r"/(bootstrap|-?\d+)$", "/" + _LIBRDKAFKA_PICK, answered["name"])
        vantage = out.get("vantage")
        if isinstance(vantage, dict) and "hostname" in vantage:
            # The machine the golden run happens to run on. The local source addresses beside it
            # stay: kprobe records the address the kernel chose, never the ephemeral port.
            vantage["hostname"] = "<hostname>"
        return out


# -- capture --------------------------------------------------------------------------------------

def _file_name(scenario: str, view: str, label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"{scenario}.{view}.{label}") + ".json"


def _probe(api: dict[str, Any], target: Target, view: str, nameserver: str | None, *, timeout: float,
           deadline: float) -> dict[str, Any]:
    options = api["ProbeOptions"](
        bootstraps=[api["parse_address"](b) for b in target.bootstraps], props=dict(target.props),
        nameservers=[api["parse_nameserver"](nameserver)] if nameserver else [], timeout=timeout,
        deadline=deadline, vantage=view,
    )
    data: dict[str, Any] = api["to_dict"](api["run_probe"](options))
    return data


def _labs(names: Sequence[str]) -> Iterator[Any]:
    """Each scenario's lab, started with the native backend and stopped before the next one starts."""
    from kprobe.lab import start_lab

    for name in names:
        started = time.monotonic()
        print(f"== {name}: starting the lab", file=sys.stderr, flush=True)
        with start_lab(name, backend="native") as lab:
            print(f"== {name}: up in {time.monotonic() - started:.0f}s", file=sys.stderr, flush=True)
            yield lab


def capture(out_dir: Path, *, timeout: float, deadline: float, only: Sequence[str] = ()) -> int:
    """Probe every scenario, view and bootstrap; one normalised JSON file each in `out_dir`."""
    import kprobe
    from kprobe.lab.scenarios import SCENARIOS

    api = _kprobe_api()
    if out_dir.exists() and any(out_dir.glob("*.json")):
        print(f"{out_dir} already holds captured reports: give an empty or new directory", file=sys.stderr)
        return 2
    out_dir.mkdir(parents=True, exist_ok=True)
    names = [n for n in SCENARIOS if not only or n in only]
    unknown = sorted(set(only) - set(SCENARIOS))
    if unknown:
        print(f"unknown scenario(s) {unknown}: choose from {list(SCENARIOS)}", file=sys.stderr)
        return 2
    where = "\n".join(f"{attr}: {module}" for attr, module in api["_modules"].items())
    # Not JSON, so `compare` leaves it out: it differs between layouts by design.
    (out_dir / "capture-info.txt").write_text(
        f"kprobe: {kprobe.__file__}\n{where}\ntimeout: {timeout}\ndeadline: {deadline}\nscenarios: {names}\n")
    print(f"kprobe from {kprobe.__file__}\n{where}", file=sys.stderr)
    written = 0
    cut = []
    for lab in _labs(names):
        norm = Normaliser(lab)
        for view, nameserver in views(lab):
            for target in targets(lab):
                started = time.monotonic()
                data = _probe(api, target, view, nameserver, timeout=timeout, deadline=deadline)
                name = _file_name(lab.scenario.name, view, target.label)
                if data.get("summary", {}).get("deadline_reached"):
                    cut.append(name)
                doc = {"scenario": lab.scenario.name, "view": view, "listener": target.listener,
                       "bootstraps": [norm.text(b) for b in target.bootstraps], "report": norm.report(data)}
                (out_dir / name).write_text(json.dumps(doc, indent=2, ensure_ascii=True) + "\n")
                written += 1
                print(f"   {name}: {data.get('summary', {}).get('status')} "
                      f"({time.monotonic() - started:.1f}s)", file=sys.stderr, flush=True)
    print(f"captured {written} reports into {out_dir}", file=sys.stderr)
    mixed = foreign_modules(api["_root"])  # lazy imports inside the probe included
    if mixed:
        print(f"ERROR: modules from another tree than {api['_root']} were used: {mixed}", file=sys.stderr)
        return 1
    if cut:
        # The deadline cut these runs short: what they report depends on the machine's speed.
        print(f"WARNING: the run deadline ({deadline}s) was reached in {cut}: raise --deadline", file=sys.stderr)
        return 1
    return 0


# -- compare --------------------------------------------------------------------------------------

def compare(dir_a: Path, dir_b: Path) -> int:
    """Print a unified diff for every report that differs or exists on one side only; 1 if any."""
    names_a = {p.name for p in dir_a.glob("*.json")}
    names_b = {p.name for p in dir_b.glob("*.json")}
    if not names_a and not names_b:
        print(f"no captured reports in {dir_a} or {dir_b}: nothing to compare", file=sys.stderr)
        return 2
    differing = []
    for name in sorted(names_a | names_b):
        a = (dir_a / name).read_text().splitlines(keepends=True) if name in names_a else []
        b = (dir_b / name).read_text().splitlines(keepends=True) if name in names_b else []
        diff = list(difflib.unified_diff(a, b, fromfile=str(dir_a / name) if a else "(missing)",
                                         tofile=str(dir_b / name) if b else "(missing)"))
        if diff:
            differing.append(name)
            sys.stdout.writelines(line if line.endswith("\n") else line + "\n" for line in diff)
    total = len(names_a | names_b)
    if differing:
        print(f"{len(differing)} of {total} reports differ: {', '.join(differing)}")
        return 1
    print(f"all {total} reports are the same")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: `capture OUT_DIR` or `compare DIR_A DIR_B`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True)
    cap = commands.add_parser("capture", help="start every lab scenario and write one normalised report per probe")
    cap.add_argument("out_dir", type=Path)
    cap.add_argument("--timeout", type=float, default=2.0, help="per-call timeout of each probe (s)")
    cap.add_argument("--deadline", type=float, default=120.0, help="each probe run's deadline (s): ample")
    cap.add_argument("--scenario", action="append", default=[], help="only this scenario (repeatable)")
    cmp = commands.add_parser("compare", help="diff two captures; exit 1 if they differ")
    cmp.add_argument("dir_a", type=Path)
    cmp.add_argument("dir_b", type=Path)
    args = parser.parse_args(argv)
    if args.command == "capture":
        return capture(args.out_dir, timeout=args.timeout, deadline=args.deadline, only=args.scenario)
    return compare(args.dir_a, args.dir_b)


if __name__ == "__main__":
    sys.exit(main())
