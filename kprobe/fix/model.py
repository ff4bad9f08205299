"""The plan of a `kprobe fix` as data: what changes per broker, the steps outside the files, what stays open."""

from __future__ import annotations

from typing import Literal

from kprobe.check.listeners import ClientNetwork, Exposure
from kprobe.models import Report
from kprobe.records import record

Action = Literal["replace", "add"]
StepKind = Literal["publish", "certificate", "listener-settings", "firewall", "bootstrap", "inter-broker", "container",
                   "service"]


@record(kw_only=True)
class Use:
    """One report read against the files: the listener its bootstrap reached, and from which network.

    `network` is the client network of `kprobe check` that the vantage stands for (the Docker host or the
    Compose network for a Compose file, `here` for server.properties), so the prediction on the patched
    files is judged for the networks the reports came from.
    """

    source: str
    report: Report
    vantage: str
    deployment: str
    listener: str
    network: ClientNetwork
    bootstrap: str


@record(kw_only=True)
class Gap:
    """One broker's endpoint that a vantage cannot use, and the address that reaches that broker there today."""

    vantage: str
    node_id: int
    endpoint: str
    listener: str
    working: str | None


@record(kw_only=True)
class ListenerEdit:
    """One broker's change: its listener's advertised address replaced, or a listener added for a network.

    `via` is the address that works today from the vantages it serves (the what-if maps the gap endpoint
    there); `bind` and `publish` are set for an added listener (the port bound on 0.0.0.0, and in a
    Compose file the port published on the Docker host), and `beside` names the listener it is added beside
    (whose per-listener settings a SASL or TLS one needs too); `exposure` is an operator's listener type for it
    (Kubernetes: how the clients of the added listener reach it).
    """

    source: str
    broker: str
    node_id: int
    listener: str
    action: Action
    old: str | None
    new: str
    protocol: str
    vantages: tuple[str, ...]
    via: str
    replaces: str | None = None
    bind: str | None = None
    publish: int | None = None
    beside: str | None = None
    exposure: Exposure | None = None


@record(kw_only=True)
class Step:
    """Something outside the files the change needs (a published port, a certificate name, a firewall)."""

    kind: StepKind
    text: str


@record(kw_only=True)
class Unresolved:
    """A gap no configuration change closes from what the reports show, and why."""

    vantage: str
    node_id: int | None
    endpoint: str | None
    why: str


@record(kw_only=True)
class Plan:
    """The whole decision: every report's use, the gaps, the edits, the steps, and what stays open."""

    uses: tuple[Use, ...]
    gaps: tuple[Gap, ...]
    edits: tuple[ListenerEdit, ...]
    steps: tuple[Step, ...]
    unresolved: tuple[Unresolved, ...]


@record(kw_only=True)
class Change:
    """One setting of one broker as the diff changes it (`old` None: the line is new)."""

    broker: str
    node_id: int
    listener: str
    action: str
    setting: str
    old: str | None
    new: str


@record(kw_only=True)
class FileEdit:
    """One file's new text, its diff and the changes in it; `secrets` are kept out of the diff's context."""

    path: str
    kind: str
    old: str
    new: str
    changes: tuple[Change, ...]
    secrets: tuple[str, ...] = ()

    @property
    def diff(self) -> str:
        """The unified diff of the file, paths as given."""
        from kprobe.fix.diff import unified

        return unified(self.path, self.old, self.new, self.secrets)


FixStatus = Literal["ok", "partial"]


@record(kw_only=True)
class Proof:
    """One vantage: its verdict before, the one predicted after the change, how that was learnt, and the
    what-if command that vantage can run itself.
    """

    vantage: str
    source: str
    network: ClientNetwork
    before: str
    after: Literal["ok", "closed", "gap", "not proven"]
    how: str
    command: str | None


@record(kw_only=True)
class FixReport:
    """One `kprobe fix`: the plan, the files' edits, and the proof per vantage."""

    configs: tuple[str, ...]
    reports: tuple[str, ...]
    plan: Plan
    files: tuple[FileEdit, ...]
    proofs: tuple[Proof, ...]
    verified: bool
    secrets: tuple[str, ...] = ()

    @property
    def patch(self) -> str:
        """Every file's diff, in the order given."""
        return "".join(f.diff for f in self.files)

    @property
    def status(self) -> FixStatus:
        """ok: every gap closed and proven (or none to close); partial: something stays open or unproven."""
        if self.plan.unresolved or any(p.after in ("gap", "not proven") for p in self.proofs):
            return "partial"
        return "ok"
