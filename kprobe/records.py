"""Value classes (frozen, or the few holders a run fills), declared as dataclasses are, built without them.

Why: a probe's run is mostly Python starting up (it should cost little more than `kcat -L` plus `nc -z`),
and kprobe's values cost it twice. `import dataclasses` loads `inspect` and with it `ast`, `dis` and
`tokenize`, and `@dataclass` writes each class's `__init__` and frozen
`__setattr__` as source and compiles them as the class is built (a few tenths of a millisecond a
class, 33 classes on a healthy probe's path, every run). `record` makes the same methods from
closures over the field names: a class costs microseconds, and no compiler runs.

What it keeps of `@dataclass(frozen=True)`, and tests/test_records.py holds every record to
the twin `@dataclass` builds from the same fields: fields from the class's own annotations, in
order; defaults, and `field(default_factory=...)`; positional or keyword-only parameters
(`kw_only=True`), with the same errors for a missing, unexpected or repeated argument;
`__post_init__`; equality between instances of one class over the fields compared, a hash of the
same values, a repr of the fields shown; assigning or deleting a field raises
`FrozenInstanceError`; `slots=True`; `fields` and `replace`. `typing.dataclass_transform` tells
mypy all of this. Left out because no kprobe class needs them, and refused rather than ignored:
a record inheriting from a record, and ClassVar or InitVar annotations.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:  # typing has it from Python 3.11; at run time it only marks the function for checkers
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_: Any) -> Any:
        """Nothing at run time: the marker is for type checkers."""
        return lambda decorated: decorated

_T = TypeVar("_T")
_MISSING: Any = object()


class FrozenInstanceError(AttributeError):
    """An attempt to change a record's field: records are values, `replace` makes a changed copy."""


class Field:
    """One field of a record, as `fields` lists it and `field(...)` declares it in a class body."""

    __slots__ = ("compare", "default", "default_factory", "kw_only", "name", "repr")

    def __init__(self, default: Any, default_factory: Any, repr: bool, compare: bool) -> None:
        self.name = ""
        self.default = default
        self.default_factory = default_factory
        self.repr = repr
        self.compare = compare
        self.kw_only = False

    def __repr__(self) -> str:
        return f"Field(name={self.name!r}, repr={self.repr}, compare={self.compare}, kw_only={self.kw_only})"


def field(*, default: Any = _MISSING, default_factory: Callable[[], Any] = _MISSING, repr: bool = True,
          compare: bool = True) -> Any:
    """A field's default made fresh for each instance (`default_factory`), or one left out of repr or equality."""
    if default is not _MISSING and default_factory is not _MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return Field(default, default_factory, repr, compare)


def fields(obj_or_class: Any) -> tuple[Field, ...]:
    """A record's fields, in the order they were declared."""
    try:
        return obj_or_class.__record_fields__
    except AttributeError:
        raise TypeError("must be called with a record class or instance") from None


def replace(obj: _T, /, **changes: Any) -> _T:
    """A copy of `obj` with `changes` applied, built through its `__init__` (defaults, `__post_init__`)."""
    for f in fields(obj):
        if f.name not in changes:
            changes[f.name] = getattr(obj, f.name)
    return obj.__class__(**changes)


@overload
def record(cls: type[_T], /) -> type[_T]: ...


@overload
def record(*, frozen: bool = True, kw_only: bool = False, repr: bool = True, eq: bool = True,
           slots: bool = False) -> Callable[[type[_T]], type[_T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field, Field))
def record(cls: type[_T] | None = None, /, *, frozen: bool = True, kw_only: bool = False, repr: bool = True,
           eq: bool = True, slots: bool = False) -> Any:
    """Make `cls` a value class, as `@dataclass(frozen=True, ...)` with the same arguments would.

    `frozen=False` is for the few holders a run fills as it goes (a manifest, a round trip's
    acknowledgements): as with dataclass, their fields can be set, and with `eq` they compare by value
    and are unhashable. A method the class body defines (a `__repr__` that hides a secret, say) is kept,
    as dataclass keeps it.
    """
    def build(cls: type[_T]) -> type[_T]:
        return _build(cls, frozen=frozen, kw_only=kw_only, repr=repr, eq=eq, slots=slots)
    return build if cls is None else build(cls)


def _build(cls: type[_T], *, frozen: bool, kw_only: bool, repr: bool, eq: bool,
           slots: bool) -> type[_T]:
    if any("__record_fields__" in vars(base) for base in cls.__mro__[1:]):
        raise TypeError(f"{cls.__qualname__}: a record cannot inherit from a record")
    found: list[Field] = []
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063 (no inspect)
        if any(word in str(annotation) for word in ("ClassVar", "InitVar")):
            raise TypeError(f"{cls.__qualname__}.{name}: records take no ClassVar or InitVar fields")
        declared = cls.__dict__.get(name, _MISSING)
        made = declared if isinstance(declared, Field) else Field(declared, _MISSING, True, True)
        made.name, made.kw_only = name, kw_only
        if isinstance(made.default, (list, dict, set)):
            raise ValueError(f"{cls.__qualname__}.{name}: a mutable default is shared; use default_factory")
        found.append(made)
    defaults_seen = False
    for f in found:  # as a def's parameters: no positional one without a default after one with
        has_default = f.default is not _MISSING or f.default_factory is not _MISSING
        if not f.kw_only and defaults_seen and not has_default:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
        defaults_seen = defaults_seen or (has_default and not f.kw_only)
    names = tuple(f.name for f in found)
    own = dict(cls.__dict__)
    methods: dict[str, Any] = {"__init__": _init(cls.__qualname__, found, post_init="__post_init__" in own)}
    if frozen:
        for name in ("__setattr__", "__delattr__"):
            if name in own:
                raise TypeError(f"{cls.__qualname__} defines {name}: a frozen record's fields cannot be set")
        methods.update(__setattr__=_frozen_setattr, __delattr__=_frozen_delattr)
    if repr:
        methods["__repr__"] = _repr(tuple(f.name for f in found if f.repr))
    if eq:
        key = _key(tuple(f.name for f in found if f.compare))
        methods["__eq__"] = _eq(key)
        # A value that can change cannot be a dict key or a set member: unhashable, as dataclass makes it.
        methods["__hash__"] = (lambda self: hash(key(self))) if frozen else None
    if slots:  # a new class, as dataclass makes one: __slots__ cannot be added to a class once built
        namespace = {k: v for k, v in own.items() if k not in names and k not in ("__dict__", "__weakref__")}
        namespace.update(__slots__=names, __getstate__=_getstate, __setstate__=_setstate)
        metaclass: Any = type(cls)
        cls = metaclass(cls.__name__, cls.__bases__, namespace)
    else:
        for f in found:  # a plain default stays the class attribute, as with dataclass; a factory leaves none
            if f.default is _MISSING:
                if f.name in own:
                    delattr(cls, f.name)
            else:
                setattr(cls, f.name, f.default)
    if own.get("__hash__", _MISSING) is None and "__eq__" not in own:
        del own["__hash__"]  # None only because the body defines __eq__: as dataclass, not a hash of its own
    for name, method in methods.items():
        if name not in own:  # a method of the class body stays (a repr that hides a secret)
            if name in ("__init__", "__repr__", "__eq__") and method is not None:  # made for this class alone
                method.__qualname__ = f"{cls.__qualname__}.{name}"
            setattr(cls, name, method)
    setattr(cls, "__record_fields__", tuple(found))  # noqa: B010 (an attribute the class does not declare)
    setattr(cls, "__match_args__", tuple(f.name for f in found if not f.kw_only))  # noqa: B010
    return cls


def _init(qualname: str, found: list[Field], *, post_init: bool) -> Callable[..., None]:
    """`__init__(self, *positional, **keywords)` checked as a generated signature checks its arguments."""
    positional = tuple(f.name for f in found if not f.kw_only)
    names = tuple(f.name for f in found)
    allowed = frozenset(names)
    defaults = {f.name: f.default for f in found if f.default is not _MISSING}
    factories = {f.name: f.default_factory for f in found if f.default_factory is not _MISSING}
    required_positional = tuple(n for n in positional if n not in defaults and n not in factories)
    required_keyword = tuple(n for n in names if n not in positional and n not in defaults and n not in factories)
    fewest, most = len(required_positional) + 1, len(positional) + 1  # self counts, as Python counts it
    takes = (f"{most} positional argument{'s' if most > 1 else ''}" if fewest == most
             else f"from {fewest} to {most} positional arguments")
    setter = object.__setattr__  # past a frozen record's own __setattr__, as dataclass's __init__ goes

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if args:
            if len(args) > len(positional):
                raise TypeError(f"{qualname}.__init__() takes {takes} but {len(args) + 1} were given")
            for name, value in zip(positional, args, strict=False):
                if name in kwargs:
                    raise TypeError(f"{qualname}.__init__() got multiple values for argument {name!r}")
                kwargs[name] = value
        if len(kwargs) != len(names) or not allowed.issuperset(kwargs):
            for name in kwargs:
                if name not in allowed:
                    raise TypeError(f"{qualname}.__init__() got an unexpected keyword argument {name!r}")
            _require(qualname, "positional", [n for n in required_positional if n not in kwargs])
            _require(qualname, "keyword-only", [n for n in required_keyword if n not in kwargs])
            for name, value in defaults.items():
                kwargs.setdefault(name, value)
            for name, factory in factories.items():
                if name not in kwargs:
                    kwargs[name] = factory()
        for name in names:
            setter(self, name, kwargs[name])
        if post_init:
            self.__post_init__()

    return __init__


def _require(qualname: str, kind: str, missing: list[str]) -> None:
    """The TypeError Python raises for missing arguments, worded as Python words it."""
    if not missing:
        return
    quoted = [repr(n) for n in missing]
    last = " and " if len(quoted) == 2 else ", and "
    listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + last + quoted[-1]
    plural = "argument" if len(missing) == 1 else "arguments"
    raise TypeError(f"{qualname}.__init__() missing {len(missing)} required {kind} {plural}: {listed}")


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _key(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The compared fields as a tuple, as dataclass compares and hashes them (a 1-tuple for one field)."""
    if not names:
        return lambda _: ()
    getter = attrgetter(*names)
    if len(names) == 1:
        return lambda obj: (getter(obj),)
    return getter


def _eq(key: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any, object], bool]:
    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return key(self) == key(other)
    return __eq__


def _repr(names: tuple[str, ...]) -> Callable[[Any], str]:
    def __repr__(self: Any) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{self.__class__.__qualname__}({shown})"
    return __repr__


def _getstate(self: Any) -> list[Any]:
    return [getattr(self, f.name) for f in self.__record_fields__]


def _setstate(self: Any, state: list[Any]) -> None:
    for f, value in zip(self.__record_fields__, state, strict=True):
        object.__setattr__(self, f.name, value)
