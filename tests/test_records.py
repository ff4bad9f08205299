"""Every kprobe.records class behaves as the class `@dataclass` makes of the same declaration.

Why: kprobe's value classes are not dataclasses (`import dataclasses` and the methods it
compiles would be a fifth of a probe's start), and code and tests alike rely on what a dataclass does:
its constructor's arguments and errors, equality, hashing, repr, frozen fields, `replace`. Each
record found in kprobe is compared here with a twin `@dataclass` builds from its fields and
options, on the same values and the same wrong calls.
"""

from __future__ import annotations

import dataclasses
import importlib
import pickle
import pkgutil
from typing import Any, ClassVar

import pytest

import kprobe
import kprobe.models as models
from kprobe import records
from kprobe.records import FrozenInstanceError, field, fields, record, replace

# The Spark job's modules import pyspark; their records live in plan and state.
for _module in pkgutil.walk_packages(kprobe.__path__, "kprobe."):
    if not _module.name.startswith("kprobe.aggregate.") or _module.name in ("kprobe.aggregate.plan",
                                                                            "kprobe.aggregate.state"):
        importlib.import_module(_module.name)


def _records() -> list[type]:
    import sys
    found = {obj for name, module in list(sys.modules.items()) if name.startswith("kprobe")
             for obj in vars(module).values() if isinstance(obj, type) and "__record_fields__" in vars(obj)}
    return sorted(found, key=lambda c: (c.__module__, c.__qualname__))


RECORDS = _records()
OWN_REPR = {cls for cls in RECORDS if "__repr__" in vars(cls) and cls.__repr__.__module__ != "kprobe.records"}


def _options(cls: type) -> dict[str, bool]:
    return {"frozen": cls.__setattr__ is records._frozen_setattr,  # type: ignore[comparison-overlap]
            "eq": "__eq__" in vars(cls), "slots": "__slots__" in vars(cls)}


def _twin(cls: type) -> Any:
    """What `@dataclass` alone makes of the same fields and options (defaults, factories, flags kept)."""
    namespace: dict[str, Any] = {"__annotations__": {}}
    for f in fields(cls):
        namespace["__annotations__"][f.name] = "object"
        kwargs: dict[str, Any] = {"compare": f.compare, "repr": f.repr, "kw_only": f.kw_only}
        if f.default is not records._MISSING:
            kwargs["default"] = f.default
        if f.default_factory is not records._MISSING:
            kwargs["default_factory"] = f.default_factory
        namespace[f.name] = dataclasses.field(**kwargs)
    if "__post_init__" in vars(cls):
        namespace["__post_init__"] = vars(cls)["__post_init__"]
    made = type(cls.__name__, (), namespace)
    made.__qualname__ = cls.__qualname__
    return dataclasses.dataclass(**_options(cls))(made)


def _values(cls: type, seed: int) -> dict[str, object]:
    return {f.name: (seed, f.name) if seed % 2 else f"{f.name}-{seed}" for f in fields(cls)}


def _make(kind: Any, cls: type, values: dict[str, object]) -> Any:
    positional = [v for f, v in zip(fields(cls), values.values(), strict=True) if not f.kw_only]
    keyword = {f.name: v for f, v in zip(fields(cls), values.values(), strict=True) if f.kw_only}
    return kind(*positional, **keyword)


def _error(call: Any) -> str:
    try:
        call()
    except TypeError as exc:
        return str(exc)
    return "no error"


def test_records_are_found_across_kprobe() -> None:
    assert len(RECORDS) >= 90
    # Each writes its own repr to hide a secret (tests/test_secrets.py): kept, as dataclass keeps a class's own.
    assert {cls.__name__ for cls in OWN_REPR} == {"Security", "OAuthSettings", "ClientProperties", "LoginModule",
                                                  "KeyPair"}
    assert not any(dataclasses.is_dataclass(cls) for cls in RECORDS)


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_a_record_behaves_as_its_dataclass_twin(cls: type) -> None:
    twin = _twin(cls)
    options = _options(cls)
    assert [f.name for f in fields(cls)] == [f.name for f in dataclasses.fields(twin)]
    a, b, c = (_make(cls, cls, _values(cls, s)) for s in (1, 1, 2))
    ta, tb, tc = (_make(twin, cls, _values(cls, s)) for s in (1, 1, 2))
    if cls not in OWN_REPR:
        assert repr(a) == repr(ta) and repr(c) == repr(tc)
    assert (a == b, a == c, a != c) == (ta == tb, ta == tc, ta != tc)
    if options["eq"]:
        assert (a == b, a == c) == (True, False) and a.__eq__(ta) is NotImplemented
    if options["frozen"] and options["eq"]:
        assert hash(a) == hash(ta) and hash(c) == hash(tc)
    elif options["eq"]:
        assert cls.__hash__ is None and twin.__hash__ is None  # a value that changes is no key
    if options["frozen"]:
        for target, error in ((a, FrozenInstanceError), (ta, dataclasses.FrozenInstanceError)):
            with pytest.raises(error):
                setattr(target, fields(cls)[0].name, 1)
            with pytest.raises(error):
                delattr(target, fields(cls)[0].name)
        assert issubclass(FrozenInstanceError, AttributeError)
    if options["slots"]:
        assert not hasattr(a, "__dict__") and pickle.loads(pickle.dumps(a)) == a
    assert replace(a) == a if options["eq"] else replace(a) is not a
    assert {f.name: getattr(a, f.name) for f in fields(a)} == dataclasses.asdict(ta)
    assert cls.__match_args__ == twin.__match_args__  # type: ignore[attr-defined]

    # Defaults, factories and __post_init__, from the fewest arguments the class takes.
    required = {f.name: v for f, v in zip(fields(cls), _values(cls, 3).values(), strict=True)
                if f.default is records._MISSING and f.default_factory is records._MISSING}
    least, twin_least = cls(**required), twin(**required)
    for f in fields(cls):
        mine, theirs = getattr(least, f.name), getattr(twin_least, f.name)
        assert type(mine) is type(theirs) and (f.default_factory is not records._MISSING or mine == theirs)

    # The same wrong calls, the same errors.
    if required:
        assert _error(cls) == _error(twin)
    assert (_error(lambda: cls(**required, surplus=1)) == _error(lambda: twin(**required, surplus=1)))
    too_many = list(range(len(fields(cls)) + 1))
    assert _error(lambda: cls(*too_many)) == _error(lambda: twin(*too_many))
    positional = [f.name for f in fields(cls) if not f.kw_only]
    if positional:  # the first field given twice, by position and by name
        twice = {positional[0]: 1}
        assert _error(lambda: cls(0, **twice)) == _error(lambda: twin(0, **twice)) != "no error"


def test_a_changed_field_is_unequal_and_an_unhashable_field_is_unhashable_as_before() -> None:
    vantage = models.Vantage(name="a", hostname="h", resolver_kind="system", nameservers=("127.0.0.53",))
    assert vantage == replace(vantage) and vantage != replace(vantage, name="b")
    assert hash(vantage) == hash(replace(vantage))
    with pytest.raises(TypeError):  # a list in a field: dataclass's hash raised, so does this one
        hash(replace(vantage, nameservers=["127.0.0.53"]))


def test_post_init_runs_on_construction_and_on_replace() -> None:
    finding = models.Finding(code="X", severity="error", message="m", fix="f", endpoint="a:1", node_id=1)
    assert finding.endpoints == ("a:1",) and finding.node_ids == (1,)
    moved = replace(finding, endpoint="b:2", endpoints=())
    assert moved.endpoints == ("b:2",)


def test_the_declarations_dataclass_refuses_are_refused() -> None:
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
        @record
        class _Order:
            a: int = 1
            b: int  # type: ignore[misc]

    with pytest.raises(ValueError, match="mutable default"):
        @record
        class _Shared:
            a: list[int] = []  # noqa: RUF012

    with pytest.raises(ValueError, match="both default and default_factory"):
        field(default=1, default_factory=int)

    @record
    class _Base:
        a: int

    with pytest.raises(TypeError, match="cannot inherit from a record"):
        @record
        class _Child(_Base):
            b: int

    with pytest.raises(TypeError, match="ClassVar"):
        @record
        class _Constant:
            a: ClassVar[int] = 1

    with pytest.raises(TypeError, match="cannot be set"):
        @record
        class _Settable:
            a: int

            def __setattr__(self, name: str, value: object) -> None: ...

    with pytest.raises(TypeError, match="record class or instance"):
        fields(object())


def test_a_mutable_record_holds_what_a_run_fills_in() -> None:
    @record(frozen=False)
    class _Tally:
        seen: list[str] = field(default_factory=list)
        count: int = 0

    one, two = _Tally(), _Tally()
    one.seen.append("a")
    one.count += 1
    assert two.seen == [] and one == _Tally(["a"], 1) and one != two and _Tally.__hash__ is None
