"""The plan written into the files' own text: the fewest lines changed, comments, order and spacing kept.

A server.properties gets its `advertised.listeners`, `listeners` and `listener.security.protocol.map`
lines edited where they are (a setting the file leaves to Kafka's default is written after the
listener lines, spelling out the default it replaces). A Compose file gets the service's variables
edited in the form its `environment:` uses (a map or a list of KEY=VALUE, quoted as the file quotes),
and a new published port appended to its `ports:`. The result is a unified diff whose paths are the
paths as given, so `patch -p0` in the same directory (and `git apply -p0`) applies it.

What is not edited is refused in one line rather than guessed: a value built from `${VARIABLES}`, a
YAML block scalar. A Strimzi resource or Bitnami chart values are edited by kprobe.fix.edit_kubernetes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kprobe.check.deployments.compose import BITNAMI_ALIASES
from kprobe.check.listeners import PROTOCOLS, Broker, Deployment
from kprobe.errors import UsageError
from kprobe.fix.model import Change, FileEdit, ListenerEdit

ADVERTISED, LISTENERS, PROTOCOL_MAP = "advertised.listeners", "listeners", "listener.security.protocol.map"


def edit_files(texts: dict[str, str], deployments: Sequence[Deployment],
               edits: Sequence[ListenerEdit]) -> list[FileEdit]:
    """Every file the edits touch, in the order given, with its new text."""
    out: list[FileEdit] = []
    for path, text in texts.items():
        mine = [e for e in edits if e.source == path or path in e.source.split(", ")]
        dep = next((d for d in deployments if d.source == path or path in d.source.split(", ")), None)
        if not mine or dep is None:
            continue
        if dep.platform == "kubernetes":
            from kprobe.fix.edit_kubernetes import edit_resource

            new, changes = edit_resource(dep, path, text, mine)
            if new != text:
                out.append(FileEdit(path=path, kind=dep.kind, old=text, new=new, changes=tuple(changes)))
            continue
        new, changes = text, []
        for broker in dep.brokers:
            if broker.source != path:
                continue
            own = [e for e in mine if e.broker == broker.name]
            if own:
                new, more = _edit_broker(dep, broker, new, own)
                changes += more
        if new != text:
            out.append(FileEdit(path=path, kind=dep.kind, old=text, new=new, changes=tuple(changes)))
    return out


def _edit_broker(dep: Deployment, broker: Broker, text: str, edits: Sequence[ListenerEdit]) -> tuple[str, list[Change]]:
    """One broker's settings rewritten: the advertised entries, and for an added listener its bind and protocol."""
    place = _Properties(text, broker) if dep.kind == "properties" else _ComposeService(text, broker)
    changes: list[Change] = []

    def change(edit: ListenerEdit, prop: str, old: str | None, new: str) -> None:
        changes.append(Change(broker=broker.name, node_id=edit.node_id, listener=edit.listener, action=edit.action,
                              setting=place.name(prop) if prop != "ports" else "ports", old=old, new=new))

    advertised = place.value(ADVERTISED)
    current = advertised if advertised is not None else _derived_advertised(broker)
    value = current
    for edit in edits:
        if edit.action == "replace":
            value = _replace_entry(value, edit.listener, edit.new)
        else:
            value = _append(value, f"{edit.listener}://{edit.new}")
    if value != current:
        place.set(ADVERTISED, value)
        for edit in edits:
            change(edit, ADVERTISED, advertised, value)
    added = [e for e in edits if e.action == "add"]
    if not added:
        return place.text, _once(changes)
    listeners = place.value(LISTENERS)
    # An image that derives KAFKA_LISTENERS from the advertised ones binds the new listener on 0.0.0.0 itself.
    derived = dep.kind == "compose" and listeners is None and broker.settings_prefix == "KAFKA_"
    if not derived:
        before = listeners if listeners is not None else _derived_listeners(broker)
        value = before
        for edit in added:
            value = _append(value, f"{edit.listener}://{edit.bind}")
        place.set(LISTENERS, value)
        for edit in added:
            change(edit, LISTENERS, listeners, value)
    mapping = place.value(PROTOCOL_MAP)
    value = mapping if mapping is not None else _default_map(broker)
    for edit in added:
        if edit.listener not in PROTOCOLS:
            value = _append(value, f"{edit.listener}:{edit.protocol}")
    if value != mapping:
        place.set(PROTOCOL_MAP, value)
        for edit in added:
            change(edit, PROTOCOL_MAP, mapping, value)
    for edit in added:
        if edit.publish is not None and isinstance(place, _ComposeService):
            place.publish(edit.publish)
            change(edit, "ports", None, f"{edit.publish}:{edit.publish}")
    return place.text, _once(changes)


def _once(changes: list[Change]) -> list[Change]:
    """One change per setting and listener (several edits of one line say it once each)."""
    return list({(c.setting, c.listener, c.new): c for c in changes}.values())


def _derived_advertised(broker: Broker) -> str:
    """What Kafka advertises with advertised.listeners unset: the listeners themselves, controllers left out."""
    return ",".join(f"{lst.name}://{lst.advertised.text}" for lst in broker.listeners
                    if lst.advertised is not None and not lst.controller)


def _derived_listeners(broker: Broker) -> str:
    """The listeners the broker binds today, as a `listeners` value."""
    return ",".join(f"{lst.name}://{lst.bind.text}" for lst in broker.listeners if lst.bind is not None)


def _default_map(broker: Broker) -> str:
    """Kafka's default protocol map, with the controller listeners it maps to PLAINTEXT when the map is unset."""
    pairs = [f"{p}:{p}" for p in PROTOCOLS] + [f"{n}:PLAINTEXT" for n in broker.controller_names if n not in PROTOCOLS]
    return ",".join(pairs)


def _replace_entry(value: str, name: str, hostport: str) -> str:
    """The entry of listener `name` pointed at `hostport`, the other entries and their spacing as they were."""
    items = value.split(",")
    for i, item in enumerate(items):
        stripped = item.strip()
        written, sep, _ = stripped.partition("://")
        if sep and written.upper() == name:
            lead = item[: len(item) - len(item.lstrip())]
            trail = item[len(item.rstrip()):]
            items[i] = f"{lead}{written}://{hostport}{trail}"
            return ",".join(items)
    raise UsageError(f"cannot find listener {name} in {value[:120]!r} to edit")


def _append(value: str, entry: str) -> str:
    """`value,entry` (just `entry` when the value is empty)."""
    return f"{value.rstrip().rstrip(',')},{entry}" if value.strip() else entry


# -- server.properties -----------------------------------------------------------------------------------------

_KEY = r"^[ \t\f]*{key}(?P<sep>[ \t\f]*[=:][ \t\f]*|[ \t\f]+)(?P<value>.*)$"


class _Properties:
    """A server.properties file's lines, edited in place: a setting's last line (Java's later keys win)."""

    def __init__(self, text: str, broker: Broker) -> None:
        self.lines = text.splitlines(keepends=True)
        self.where = broker.source

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def _find(self, key: str) -> tuple[int, int, re.Match[str]] | None:
        pattern = re.compile(_KEY.format(key=re.escape(key)))
        found = None
        i = 0
        while i < len(self.lines):
            line = self.lines[i].rstrip("\r\n")
            end = i
            while _continues(self.lines[end].rstrip("\r\n")) and end + 1 < len(self.lines):
                end += 1
            if not line.lstrip().startswith(("#", "!")):
                match = pattern.match(line)
                if match:
                    found = (i, end, match)
            i = end + 1
        return found

    def name(self, key: str) -> str:
        """The key as the file spells it: the property itself."""
        return key

    def value(self, key: str) -> str | None:
        found = self._find(key)
        if found is None:
            return None
        start, end, match = found
        parts = [match.group("value")] + [self.lines[j].rstrip("\r\n").lstrip(" \t\f")
                                          for j in range(start + 1, end + 1)]
        return "".join(p[:-1] if _continues(p) else p for p in parts)

    def set(self, key: str, value: str) -> None:
        found = self._find(key)
        if found is not None:
            start, end, match = found
            if end > start and self._set_continued(start, end, match, value):
                return
            ending = _ending(self.lines[end])
            prefix = self.lines[start][: match.start("value")]
            self.lines[start:end + 1] = [f"{prefix}{value}{ending}"]
            return
        # After the last listener line the file has, else at its end.
        anchor = max((f[1] for f in (self._find(k) for k in (LISTENERS, ADVERTISED, PROTOCOL_MAP)) if f), default=None)
        line = f"{key}={value}\n"
        if anchor is None:
            if self.lines and not self.lines[-1].endswith(("\n", "\r")):
                self.lines[-1] += "\n"
            self.lines.append(line)
        else:
            if not self.lines[anchor].endswith(("\n", "\r")):
                self.lines[anchor] += "\n"
            self.lines.insert(anchor + 1, line)


    def _set_continued(self, start: int, end: int, match: re.Match[str], value: str) -> bool:
        """A value continued over lines edited within its lines: an entry appended as one more continued line, a
        change inside one line made there. False when the change spans lines (the value is then written on one).
        """
        parts = []  # (line, what precedes the value's piece, the piece, its ending)
        for i in range(start, end + 1):
            line = self.lines[i]
            ending = _ending(line)
            body = line[: len(line) - len(ending)]
            lead = body[: match.start("value")] if i == start else body[: len(body) - len(body.lstrip(" \t\f"))]
            piece = body[len(lead):]
            if i < end:
                piece = piece[:-1]  # the continuation's backslash
            parts.append((i, lead, piece, ending))
        old = "".join(piece for _, _, piece, _ in parts)
        if value.startswith(old + ","):
            i, lead, piece, ending = parts[-1]
            indent = lead if i != start else " " * 4
            self.lines[i:i + 1] = [f"{lead}{piece},\\{ending}", f"{indent}{value[len(old) + 1:]}{ending or chr(10)}"]
            return True
        same = 0
        while same < min(len(old), len(value)) and old[same] == value[same]:
            same += 1
        tail = 0
        while tail < min(len(old), len(value)) - same and old[-1 - tail] == value[-1 - tail]:
            tail += 1
        offset = 0
        for i, lead, piece, ending in parts:
            if offset <= same and len(old) - tail <= offset + len(piece):
                edited = piece[: same - offset] + value[same: len(value) - tail] + piece[len(old) - tail - offset:]
                self.lines[i] = f"{lead}{edited}{'' if i == end else chr(92)}{ending}"
                return True
            offset += len(piece)
        return False


def _continues(line: str) -> bool:
    """A properties line continued on the next: an odd number of backslashes at its end."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _ending(line: str) -> str:
    return line[len(line.rstrip("\r\n")):]


# -- Compose ---------------------------------------------------------------------------------------------------


class _ComposeService:
    """One service of a Compose file, its `environment:` and `ports:` edited as the file writes them."""

    def __init__(self, text: str, broker: Broker) -> None:
        self.lines = text.splitlines(keepends=True)
        self.broker = broker
        self.where = f"{broker.source}: service {broker.name}"

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def _block(self) -> tuple[int, int, str]:
        """The service's lines (header excluded) and the indentation of its keys."""
        top = next((i for i, line in enumerate(self.lines) if re.match(r"^services\s*:", line)), None)
        if top is None:
            raise UsageError(f"{self.where}: no top-level services: line to edit")
        name = re.escape(self.broker.name)
        header = next((i for i in range(top + 1, len(self.lines))
                       if re.match(rf"^(\s+)[\"']?{name}[\"']?\s*:\s*(#.*)?$", self.lines[i])), None)
        if header is None:
            raise UsageError(f"{self.where}: the service's line is not found (written in flow style?)")
        indent = _indent(self.lines[header])
        end = header + 1
        child = None
        while end < len(self.lines):
            line = self.lines[end]
            if line.strip() and not line.lstrip().startswith("#"):
                if _indent(line) <= indent:
                    break
                child = child if child is not None else _indent(line)
            end += 1
        if child is None:
            raise UsageError(f"{self.where}: the service has no settings to edit")
        return header + 1, end, " " * child

    def _section(self, key: str) -> tuple[int, int, int] | None:
        """`key:` among the service's keys: its line and the end of its entries."""
        start, end, child = self._block()
        for i in range(start, end):
            if re.match(rf"^{child}{key}\s*:\s*(#.*)?$", self.lines[i].rstrip("\r\n")):
                stop = i + 1
                while stop < end and (not self.lines[stop].strip() or _indent(self.lines[stop]) > len(child)
                                      or (self.lines[stop].lstrip().startswith("-") and _indent(self.lines[stop])
                                          == len(child))):
                    stop += 1
                while stop > i + 1 and not self.lines[stop - 1].strip():
                    stop -= 1
                return i, stop, len(child)
        return None

    def _variable(self, name: str) -> tuple[int, re.Match[str]] | None:
        section = self._section("environment")
        if section is None:
            return None
        head, stop, _ = section
        pattern = re.compile(
            rf"^(?P<lead>\s*-\s*)(?P<q>[\"']?){name}=(?P<value>.*?)(?P=q)(?P<rest>\s+#.*)?$|"
            rf"^(?P<mlead>\s*[\"']?{name}[\"']?\s*:\s*)(?P<mq>[\"']?)(?P<mvalue>.*?)(?P=mq)(?P<mrest>\s+#.*)?$")
        for i in range(head + 1, stop):
            match = pattern.match(self.lines[i].rstrip("\r\n"))
            if match:
                value = match.group("value") if match.group("lead") is not None else match.group("mvalue")
                if value.startswith(("|", ">")) or "$" in value:
                    raise UsageError(f"{self.where}: {name} is a YAML block or uses ${{variables}}: edit it by hand "
                                     "or write its value on one line")
                return i, match
        return None

    def name(self, prop: str) -> str:
        """The variable that sets the property: Bitnami's legacy `KAFKA_` alias where the service uses it (its
        start script copies it over the `KAFKA_CFG_` one), else the name the image reads.
        """
        name = self.broker.setting(prop)
        if name.startswith("KAFKA_CFG_") and name.removeprefix("KAFKA_CFG_") in BITNAMI_ALIASES:
            alias = "KAFKA_" + name.removeprefix("KAFKA_CFG_")
            if self._variable(alias) is not None:
                return alias
        return name

    def value(self, prop: str) -> str | None:
        found = self._variable(self.name(prop))
        if found is None:
            return None
        match = found[1]
        return match.group("value") if match.group("lead") is not None else match.group("mvalue")

    def set(self, prop: str, value: str) -> None:
        name = self.name(prop)
        found = self._variable(name)
        if found is not None:
            i, match = found
            ending = _ending(self.lines[i])
            if match.group("lead") is not None:
                q, rest = match.group("q"), match.group("rest") or ""
                self.lines[i] = f"{match.group('lead')}{q}{name}={value}{q}{rest}{ending}"
            else:
                q, rest = match.group("mq"), match.group("mrest") or ""
                self.lines[i] = f"{match.group('mlead')}{q}{value}{q}{rest}{ending}"
            return
        section = self._section("environment")
        if section is None:
            raise UsageError(f"{self.where}: no environment: to add {name} to")
        _, stop, _ = section
        last = self.lines[stop - 1]
        lead = last[: _indent(last)]
        body = last.strip()
        if body.startswith("-"):
            quote = body[1:].lstrip()[:1] if body[1:].lstrip()[:1] in "\"'" else ""
            after = body[1: len(body) - len(body[1:].lstrip())]
            line = f"{lead}-{after}{quote}{name}={value}{quote}\n"
        else:
            line = f"{lead}{name}: {value}\n"
        if not self.lines[stop - 1].endswith(("\n", "\r")):
            self.lines[stop - 1] += "\n"
        self.lines.insert(stop, line)

    def publish(self, port: int) -> None:
        """`port:port` appended to the service's `ports:` (the list made when it has none)."""
        section = self._section("ports")
        if section is None:
            start, end, child = self._block()
            inline = next((i for i in range(start, end) if re.match(rf"^{child}ports\s*:\s*\S", self.lines[i])), None)
            if inline is not None:
                self._publish_inline(inline, port)
                return
            self.lines[start:start] = [f"{child}ports:\n", f"{child}  - \"{port}:{port}\"\n"]
            return
        head, stop, _ = section
        items = [i for i in range(head + 1, stop) if self.lines[i].lstrip().startswith("-")]
        if not items:
            raise UsageError(f"{self.where}: ports: is not a block list to append {port}:{port} to")
        last = self.lines[items[-1]]
        body = last.strip()[1:].lstrip()
        quote = body[:1] if body[:1] in "\"'" else ""
        lead = last[: len(last) - len(last.lstrip())]
        dash_gap = last.lstrip()[1: len(last.lstrip()) - len(last.lstrip()[1:].lstrip())]
        if not self.lines[stop - 1].endswith(("\n", "\r")):
            self.lines[stop - 1] += "\n"
        self.lines.insert(stop, f"{lead}-{dash_gap}{quote}{port}:{port}{quote}\n")


    def _publish_inline(self, i: int, port: int) -> None:
        """`ports: [...]` on one line: the port appended inside the brackets, quoted as the last entry is."""
        line = self.lines[i]
        found = re.match(r"^(?P<head>\s*ports\s*:\s*\[)(?P<items>[^\]#]*?)(?P<tail>\s*\]\s*(#.*)?\s*)$", line)
        if found is None:
            raise UsageError(f"{self.where}: ports: is neither a list nor a one-line [...] to add {port}:{port} to")
        items = found.group("items")
        last = items.rsplit(",", 1)[-1].strip()
        quote = last[:1] if last[:1] in "\"'" else "\""
        entry = f"{quote}{port}:{port}{quote}"
        self.lines[i] = f"{found.group('head')}{items}{', ' if items.strip() else ''}{entry}{found.group('tail')}"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))
