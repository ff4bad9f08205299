"""kprobe.models.frozen.Frozen's equality, hash and repr behave as the ones dataclass generates.

Why: kprobe's frozen dataclasses stopped generating `__eq__`, `__hash__` and `__repr__` per class
(issue 33: compiling them was half of what building the classes cost each run); every one of them
is compared here with a twin that `@dataclass(frozen=True)` builds from the same fields, on the
same values.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil

import pytest

import kprobe
import kprobe.models as models
from kprobe.models.frozen import Frozen

for _module in pkgutil.walk_packages(kprobe.__path__, "kprobe."):
    if not _module.name.startswith(("kprobe.aggregate", "kprobe.lab", "kprobe.serve")):
        importlib.import_module(_module.name)  # every Frozen class is defined once its module is imported
MODELS = sorted(Frozen.__subclasses__(), key=lambda c: (c.__module__, c.__qualname__))
OWN_REPR = {cls for cls in MODELS if "__repr__" in vars(cls)}  # kafka.security.Security: no password in a repr


def _twin(cls: type) -> type:
    """What `@dataclass(frozen=True, ...)` alone makes of the same fields (compare/repr flags kept)."""
    namespace: dict[str, object] = {"__annotations__": {}}
    for f in dataclasses.fields(cls):
        namespace["__annotations__"][f.name] = "object"  # type: ignore[index]
        namespace[f.name] = dataclasses.field(compare=f.compare, repr=f.repr, hash=f.hash)
    kw_only = cls.__dataclass_params__  # type: ignore[attr-defined]
    made = type(cls.__name__, (), namespace)
    made.__qualname__ = cls.__qualname__
    return dataclasses.dataclass(frozen=True, kw_only=getattr(kw_only, "kw_only", False) or _kw_only(cls))(made)


def _kw_only(cls: type) -> bool:
    return all(f.kw_only is True for f in dataclasses.fields(cls))


def _values(cls: type, seed: int) -> dict[str, object]:
    return {f.name: (seed, f.name) if seed % 2 else f"{f.name}-{seed}" for f in dataclasses.fields(cls)}


def test_every_model_uses_the_shared_methods() -> None:
    assert len(MODELS) >= 32 and all(dataclasses.is_dataclass(cls) for cls in MODELS)
    assert {cls.__name__ for cls in OWN_REPR} == {"Security"}
    for cls in MODELS:
        for name in ("__eq__", "__hash__", "__repr__"):
            assert name not in vars(cls) or (cls in OWN_REPR and name == "__repr__"), (cls.__name__, name)


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_equality_hash_and_repr_are_dataclass_s(cls: type) -> None:
    twin = _twin(cls)
    kw = _kw_only(cls)

    def make(kind: type, seed: int) -> object:
        values = _values(cls, seed)
        return kind(**values) if kw else kind(*values.values())

    a, b, c = make(cls, 1), make(cls, 1), make(cls, 2)
    ta, tb, tc = make(twin, 1), make(twin, 1), make(twin, 2)
    if cls not in OWN_REPR:
        assert repr(a) == repr(ta) and repr(c) == repr(tc)
    assert (a == b, a == c, a != c) == (ta == tb, ta == tc, ta != tc) == (True, False, True)
    assert hash(a) == hash(ta) and hash(c) == hash(tc)
    assert a.__eq__(ta) is NotImplemented and ta.__eq__(a) is NotImplemented  # never across classes
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.first = 1  # type: ignore[attr-defined]
    assert dataclasses.replace(a) == a and dataclasses.asdict(a) == dataclasses.asdict(ta)


def test_a_changed_field_is_unequal_and_an_unhashable_field_is_unhashable_as_before() -> None:
    vantage = models.Vantage(name="a", hostname="h", resolver_kind="system", nameservers=("127.0.0.53",))
    assert vantage == dataclasses.replace(vantage) and vantage != dataclasses.replace(vantage, name="b")
    assert hash(vantage) == hash(dataclasses.replace(vantage))
    with pytest.raises(TypeError):  # a list in a field: dataclass's hash raised, so does this one
        hash(dataclasses.replace(vantage, nameservers=["127.0.0.53"]))
