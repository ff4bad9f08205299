"""One equality, hash and repr for kprobe's frozen dataclasses, instead of one compiled per class.

Why: `@dataclass` compiles each method it generates from source when the class is built (Python
3.11 execs them one by one), and a command builds its classes on every start. For the 33 frozen
dataclasses a probe builds, `__repr__`, `__eq__` and `__hash__` were about half of that cost: some
5 to 8 ms of every `kprobe probe` and `kprobe list` (issue 33, docs/performance.md). Their
`__init__` and frozen `__setattr__` stay dataclass's.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any


class Frozen:
    """Equality, hashing and repr of a frozen dataclass, written once instead of generated per class.

    Use as `@dataclass(frozen=True, repr=False, eq=False)` on a subclass. The methods behave as
    dataclass's own: the fields with compare=True, in order, and only between instances of one
    class; a repr of the fields with repr=True; a hash of the compared fields (frozen and eq).
    """

    __slots__ = ()

    @classmethod
    def _compared(cls) -> Any:
        key = cls.__dict__.get("_kprobe_compared")
        if key is None:
            names = [f.name for f in cls.__dataclass_fields__.values() if f.compare]  # type: ignore[attr-defined]
            getter = attrgetter(*names) if names else (lambda _: ())
            key = (lambda obj: (getter(obj),)) if len(names) == 1 else getter
            cls._kprobe_compared = key  # type: ignore[attr-defined]
        return key

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        key = self._compared()
        return bool(key(self) == key(other))

    def __hash__(self) -> int:
        return hash(self._compared()(self))

    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}"
                          for f in self.__dataclass_fields__.values() if f.repr)  # type: ignore[attr-defined]
        return f"{self.__class__.__qualname__}({shown})"
