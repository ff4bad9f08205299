"""`kprobe serve`'s configuration: modules (how to probe) and targets (what may be probed).

As blackbox_exporter's modules: a scrape names a module, and the module holds everything that is
not the target (security settings, resolver, timeouts), so Prometheus' config carries no secret
and a URL cannot change how a cluster is authenticated. Secrets are named, never written: a
secret property's value is `{file: PATH}` or `{env: NAME}`, read at each probe (a rotated
Kubernetes secret is picked up), and an inline secret is refused when the file loads.

A module's keys are the probe options that declare one (kprobe.option_table: `serve`), read into
the values `kprobe probe` takes. Every module is checked when the file loads by building the very
`ProbeOptions` a probe would get (kprobe.options.probe_options, the CLI's own rules), so a typo
fails `kprobe serve` at start, with the key that is wrong, never a scrape at 3 a.m.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kprobe.errors import UsageError
from kprobe.hostport import format_hostport
from kprobe.models import BootstrapAddress
from kprobe.option_table import DEADLINE, DURATION, FLAG, FLOAT, LIST, RUN, TIMEOUT, Option
from kprobe.options import ProbeOptions, parse_duration, probe_options
from kprobe.records import field, record
from kprobe.redaction import is_secret
from kprobe.serve.allow import TargetPattern, allowed, parse_patterns

DEFAULT_MODULE = "default"
# The probe options a module takes, by their key in the file; `properties` (secrets and all) is read apart.
_SERVED: dict[str, Option] = {o.serve: o for o in RUN if o.serve}
_MODULE_KEYS = set(_SERVED)
# A placeholder target for checking a module at load time: never dialled.
_CHECK_TARGET = "kprobe-config-check.invalid:9092"


@record
class SecretRef:
    """Where a secret property's value lives: a file or an environment variable, read per probe."""

    key: str
    file: str | None = None
    env: str | None = None

    @property
    def source(self) -> str:
        """Where the value comes from, as the config says it: what a message names instead of the value."""
        return f"{{file: {self.file}}}" if self.file is not None else f"{{env: {self.env}}}"

    def read(self) -> str:
        """The value now; UsageError naming the file or variable (never the value) when it is gone."""
        if self.file is not None:
            try:
                return Path(self.file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise UsageError(f"{self.key}: cannot read {self.file}: {exc.strerror or exc}") from None
            except UnicodeDecodeError:  # its bytes are not echoed: the message says where, not what
                raise UsageError(f"{self.key}: {self.file} is not UTF-8 text: save the value as UTF-8") from None
        assert self.env is not None
        value = os.environ.get(self.env)
        if value is None:
            raise UsageError(f"{self.key}: environment variable {self.env} is not set")
        return value


@record(kw_only=True)
class Module:
    """How to probe: everything but the target."""

    name: str
    # The module's options as `kprobe probe` takes them, by parameter; what it leaves out takes the default.
    given: Mapping[str, Any] = field(default_factory=dict)
    properties: Mapping[str, str] = field(default_factory=dict)
    secrets: tuple[SecretRef, ...] = ()

    @property
    def timeout(self) -> float:
        """Seconds per request."""
        return parse_duration(self.given.get(TIMEOUT.param, TIMEOUT.default), TIMEOUT.flag)

    @property
    def deadline(self) -> float:
        """Seconds for a whole probe, before the scrape's own timeout cuts it."""
        return parse_duration(self.given.get(DEADLINE.param, DEADLINE.default), DEADLINE.flag)

    def options(self, targets: list[str], *, deadline: float, vantage: str | None) -> ProbeOptions:
        """The probe of these targets, within `deadline` seconds (the scrape's, when shorter).

        A value read from `{env:}` or `{file:}` is never echoed, whatever key it sits under: the CLI's
        rules quote a bad value (`bad security.protocol 'HUNTER2'`), so when they refuse the options,
        the refusal is shown only if it stands without those values; otherwise the message names the
        key and where its value comes from.
        """
        values = {ref: ref.read() for ref in self.secrets}
        try:
            return self._options(targets, deadline, vantage, values)
        except UsageError:
            if not values:
                raise
        # Find the culprit without echoing anything read: the references whose value, left out alone, is the
        # fault; failing that, the options with every reference left out, whose refusal quotes none of them.
        culprits = []
        for ref in values:
            try:
                self._options(targets, deadline, vantage, {r: v for r, v in values.items() if r is not ref})
            except UsageError:
                continue
            culprits.append(ref)
        if not culprits:
            try:
                self._options(targets, deadline, vantage, {})
            except UsageError as exc:
                raise exc from None
        named = " and ".join(f"properties.{ref.key} (from {ref.source})" for ref in culprits or values)
        value = "the value is" if len(culprits or values) == 1 else "the values are"
        raise UsageError(f"{named}: {value} refused by the rules of kprobe probe -X and not shown, since no value "
                         "read from {env:} or {file:} is ever echoed: check it (kprobe probe -X KEY=VALUE says "
                         "why)") from None

    def _options(self, targets: list[str], deadline: float, vantage: str | None,
                 values: Mapping[SecretRef, str]) -> ProbeOptions:
        deadline = min(self.deadline, deadline)
        props = [f"{k}={v}" for k, v in self.properties.items()]
        props += [f"{ref.key}={value}" for ref, value in values.items()]
        return probe_options(**{**self.given, "bootstrap": targets, "props": props, "vantage": vantage,
                                "timeout": f"{min(self.timeout, deadline):.3f}", "deadline": f"{deadline:.3f}"},
                             kcat_default=False)


@record(kw_only=True)
class ServeConfig:
    """The modules by name, and the `host:port` patterns a scrape may name as its target (kprobe.serve.allow)."""

    modules: Mapping[str, Module]
    targets: tuple[TargetPattern, ...] = ()

    def allowed(self, address: BootstrapAddress, extra: tuple[TargetPattern, ...] = ()) -> bool:
        """Whether a target may be probed: it matches a pattern of the config's `targets` or of --allow-target."""
        return allowed(address, (*self.targets, *extra))


def default_config() -> ServeConfig:
    """Without --config: one module, `default`, with the CLI's defaults (plaintext, system resolver)."""
    return ServeConfig(modules={DEFAULT_MODULE: Module(name=DEFAULT_MODULE)})


def load_config(path: str) -> ServeConfig:
    """The config file, every module checked; UsageError naming the file and the key at fault."""
    try:
        import yaml
    except ImportError:
        raise UsageError("kprobe serve --config needs PyYAML: pip install 'kprobe[serve]'") from None
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read --config {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:  # the offset, never the bytes: the file may hold anything
        raise UsageError(f"--config {path}: not UTF-8 text (a byte at offset {exc.start} is not): save it as "
                         "UTF-8") from None
    try:
        data = yaml.safe_load(text)
    except RecursionError:
        raise UsageError(f"--config {path}: nested too deep to read: write a flat mapping of modules: and "
                         "targets:") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"--config {path}: not valid YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    return parse_config(data, path)


def parse_config(data: object, path: str = "the config") -> ServeConfig:
    """A parsed config document into modules and targets, checked."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UsageError(f"--config {path}: the top level must be a mapping with modules: and targets:")
    unknown = sorted(set(data) - {"modules", "targets"})
    if unknown:
        raise UsageError(f"--config {path}: unknown key {unknown[0]!r} at the top level (use modules: and targets:)")
    targets = data.get("targets") or []
    if not isinstance(targets, list) or not all(isinstance(t, str) and t.strip() for t in targets):
        raise UsageError(f"--config {path}: targets: must be a list of host:port patterns, e.g. 'kafka-*:9092'")
    patterns = parse_patterns(targets, f"--config {path}: target pattern")
    raw = data.get("modules") or {}
    if not isinstance(raw, dict):
        raise UsageError(f"--config {path}: modules: must map module names to their settings")
    modules = {str(name): _module(str(name), spec, path) for name, spec in raw.items()}
    modules.setdefault(DEFAULT_MODULE, Module(name=DEFAULT_MODULE))
    return ServeConfig(modules=modules, targets=patterns)


def _module(name: str, spec: object, path: str) -> Module:
    where = f"--config {path}: modules.{name}"
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        raise UsageError(f"{where}: must be a mapping of settings")
    unknown = sorted(set(spec) - _MODULE_KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown setting {unknown[0]!r} (known: {', '.join(sorted(_MODULE_KEYS))})")
    properties: dict[str, str] = {}
    secrets: list[SecretRef] = []
    for key, value in _mapping(spec.get("properties"), f"{where}.properties").items():
        if isinstance(value, dict):
            secrets.append(_secret(key, value, f"{where}.properties.{key}"))
        elif is_secret(key):
            raise UsageError(f"{where}.properties.{key}: a secret's value never sits in the config: give "
                             "{file: PATH} or {env: NAME}")
        elif isinstance(value, (str, int, float, bool)):
            properties[key] = str(value).lower() if isinstance(value, bool) else str(value)
        else:
            raise UsageError(f"{where}.properties.{key}: give a string, a number, or {{file: PATH}} / {{env: NAME}}")
    given = {option.param: _read(option, spec[key], f"{where}.{key}")
             for key, option in _SERVED.items() if key in spec and key != "properties"}
    module = Module(name=name, given=given, properties=properties, secrets=tuple(secrets))
    for ref in module.secrets:  # present now, so a missing file is a start-up error, not a failing scrape
        ref.read()
    try:
        # The CLI's own rules (properties, nameservers, durations, --roundtrip's limits) on a target never dialled.
        module.options([_CHECK_TARGET], deadline=module.deadline, vantage=None)
    except UsageError as exc:
        raise UsageError(f"{where}: {exc}") from None
    return module


def _mapping(value: object, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UsageError(f"{where}: must be a mapping of librdkafka property names to values")
    return {str(k): v for k, v in value.items()}


def _secret(key: str, value: dict[str, Any], where: str) -> SecretRef:
    if set(value) == {"file"} and isinstance(value["file"], str):
        return SecretRef(key=key, file=value["file"])
    if set(value) == {"env"} and isinstance(value["env"], str):
        return SecretRef(key=key, env=value["env"])
    raise UsageError(f"{where}: give {{file: PATH}} or {{env: NAME}}")


def _read(option: Option, value: object, where: str) -> Any:
    """A module's setting as `kprobe probe` takes the option; what only the whole probe can judge is
    left to probe_options, which the module is checked with.
    """
    if option.kind == LIST:
        return _strings(value, where)
    if option.kind == DURATION:
        parse_duration(str(value), where)  # here, to name the key: the probe's message names the flag
        return str(value)
    if option.kind == FLAG:
        # The file names what the option sets (identity: false), the flag its opposite (--no-identity).
        wanted = _flag(value, where)
        return next(typed for typed in (False, True) if option.field_value(typed) == wanted)
    if option.kind == FLOAT:
        try:
            return float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise UsageError(f"{where}: give {option.noun}") from None
    return None if value is None else str(value)


def _strings(value: object, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{where}: give a list of strings")
    return tuple(value)


def _flag(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise UsageError(f"{where}: give true or false")
    return value


def target_hostports(options: ProbeOptions) -> list[str]:
    """Each bootstrap of a probe as `host:port`, as messages and the log show it."""
    return [format_hostport(a.host, a.port) for a in options.bootstraps]
